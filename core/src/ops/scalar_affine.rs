//! Scalar scale and shift, `x * scale + shift` with constant scalars: `mul_scalar`
//! (`x * other`), `add_scalar` (`x + other`) and `affine_scalar` (both), what
//! `x * 0.5` or `x + 1` on a tensor is in PyTorch (and what an ONNX `Mul` or `Add` by
//! a constant becomes). One record kind; backward reads nothing (`gx += scale * gy`,
//! in place when it can).

use super::registry::{need, real, Attrs, OpSpec};
use crate::error::{Error, Result};
use crate::graph::reads;
use crate::graph::{f32_words, words_f32, Graph, NodeId, Op, OpKind, Tensor, NO_PARAMS};
use crate::kernels::elementwise::{grad_map, map};
use crate::scalar::Scalar;

const OP: &str = "affine_scalar";

/// The records: `params[0..2]` the scale (f32 bits).
static AFFINE_SCALAR: OpKind = OpKind {
    name: OP,
    reads_inputs: reads(0),
    reads_output: false,
};

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// `x * scale + shift` element-wise (both finite).
    pub fn affine_scalar(&mut self, x: Tensor, scale: f32, shift: f32) -> Result<Tensor> {
        let xi = self.id(x)?;
        if !scale.is_finite() {
            return Err(Error::float(OP, "scale must be finite", scale));
        }
        if !shift.is_finite() {
            return Err(Error::float(OP, "shift must be finite", shift));
        }
        let xn = self.nodes[xi];
        let rg = self.needs_grad(&[Some(xi)]);
        let mut params = NO_PARAMS;
        [params[0], params[1]] = f32_words(scale);
        let op = match rg {
            true => Op::new(&AFFINE_SCALAR, [Some(xi), None, None], params),
            false => Op::LEAF,
        };
        let out = self.push(xn.shape(), op, Some(Self::affine_scalar_rule), rg, 0)?;
        let (a, b) = (S::from_f32(scale), S::from_f32(shift));
        let y = self.nodes[out.id as usize].data;
        self.exec([xn.data], y, |[x], y| map(x, y, |v| v * a + b))?;
        Ok(out)
    }

    /// `x * other` (PyTorch's `x * 0.5`).
    pub fn mul_scalar(&mut self, x: Tensor, other: f32) -> Result<Tensor> {
        self.affine_scalar(x, other, 0.0)
    }

    /// `x + other` (PyTorch's `x + 1`).
    pub fn add_scalar(&mut self, x: Tensor, other: f32) -> Result<Tensor> {
        self.affine_scalar(x, 1.0, other)
    }

    /// The backward rule of [`Graph::affine_scalar`].
    fn affine_scalar_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &AFFINE_SCALAR)?;
        let a = S::from_f32(words_f32([op.params[0], op.params[1]]));
        let x = op.input(0);
        if g.pass_grad_in_place(i, x, |g, gy| {
            g.exec([], gy, |[], gy| gy.iter_mut().for_each(|v| *v = *v * a))
        })? {
            return Ok(());
        }
        g.affine_scalar_backward(i, x, a)
    }

    fn affine_scalar_backward(&mut self, i: usize, x: NodeId, a: S) -> Result<()> {
        let gy = self.grads_for(i)?;
        if let Some(gx) = self.grad_of(x) {
            self.exec([gy], gx, |[gy], gx| grad_map(gy, gy, gx, |g, _| g * a))?;
        }
        Ok(())
    }

    fn affine_scalar_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        let (scale, shift) = (real(a, "scale", 1.0)?, real(a, "shift", 0.0)?);
        g.affine_scalar(need(OP, t, 0)?, scale as f32, shift as f32)
    }

    fn other(op: &'static str, a: &dyn Attrs) -> Result<f32> {
        let v = a.float("other")?.ok_or(Error::InvalidParam {
            op,
            what: "missing parameter other",
            value: 0,
        })?;
        Ok(v as f32)
    }

    fn mul_scalar_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        let other = Self::other("mul_scalar", a)?;
        g.mul_scalar(need("mul_scalar", t, 0)?, other)
    }

    fn add_scalar_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        let other = Self::other("add_scalar", a)?;
        g.add_scalar(need("add_scalar", t, 0)?, other)
    }

    /// affine_scalar by name (`scale`, default 1; `shift`, default 0).
    pub(crate) const AFFINE_SCALAR_SPEC: OpSpec<S, N> = OpSpec {
        name: OP,
        inputs: &["input"],
        params: &["scale", "shift"],
        call: Self::affine_scalar_call,
        in_place: None,
    };
    /// mul_scalar by name (`other`).
    pub(crate) const MUL_SCALAR_SPEC: OpSpec<S, N> = OpSpec {
        name: "mul_scalar",
        inputs: &["input"],
        params: &["other"],
        call: Self::mul_scalar_call,
        in_place: None,
    };
    /// add_scalar by name (`other`).
    pub(crate) const ADD_SCALAR_SPEC: OpSpec<S, N> = OpSpec {
        name: "add_scalar",
        inputs: &["input"],
        params: &["other"],
        call: Self::add_scalar_call,
        in_place: None,
    };
}
