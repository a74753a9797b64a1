//! linear: `y = x w^T + b`, `torch.nn.functional.linear` on `[B, I]` inputs.

use super::expect_rank;
use super::registry::{need, opt, Attrs, OpSpec};
use crate::error::{Error, Result};
use crate::graph::{product, Graph, NodeId, Op, OpKind, Tensor, NO_PARAMS};
use crate::kernels::linear as k;
use crate::kernels::KernelSet;
use crate::scalar::Scalar;
use crate::shape::Shape;

const OP: &str = "linear";

/// linear's records: backward reads the input's data (for the weight gradient).
pub(crate) static LINEAR: OpKind = OpKind {
    name: OP,
    reads_inputs: [0b010, 0, 0],
    reads_output: false,
};

fn sizes(x: Shape, w: Shape, b: Option<Shape>) -> Result<(usize, usize, usize)> {
    expect_rank(
        OP,
        "input has {found} dimensions, expected {expected} (batch, features)",
        x.rank(),
        2,
    )?;
    expect_rank(
        OP,
        "weight has {found} dimensions, expected {expected} (out, in)",
        w.rank(),
        2,
    )?;
    let (batch, inp, out) = (x.dim(0), x.dim(1), w.dim(0));
    if w.dim(1) != inp {
        return Err(Error::ShapeMismatch {
            op: OP,
            what: "input has {found} features, the weight expects {expected}",
            expected: w.dim(1),
            found: inp,
        });
    }
    if let Some(b) = b {
        if b.rank() != 1 || b.dim(0) != out {
            return Err(Error::ShapeMismatch {
                op: OP,
                what: "bias has {found} values, the layer has {expected} output features",
                expected: out,
                found: b.numel(),
            });
        }
    }
    Ok((batch, inp, out))
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// `x: [B, I]`, `w: [O, I]`, optional `b: [O]`; output `[B, O]`.
    pub fn linear(&mut self, x: Tensor, w: Tensor, b: Option<Tensor>) -> Result<Tensor> {
        let (xi, wi) = (self.id(x)?, self.id(w)?);
        let bi = b.map(|b| self.id(b)).transpose()?;
        let (xn, wn) = (self.nodes[xi], self.nodes[wi]);
        let bn = bi.map(|i| self.nodes[i]);
        let (batch, inp, out_f) = sizes(xn.shape(), wn.shape(), bn.map(|b| b.shape()))?;
        let rg = self.needs_grad(&[Some(xi), Some(wi), bi]);
        let op = match rg {
            true => Op::new(&LINEAR, [Some(xi), Some(wi), bi], NO_PARAMS),
            false => Op::LEAF,
        };
        let out = self.push(Shape::new(&[batch, out_f])?, op, Some(Self::linear_rule), rg, 0)?;
        let y = self.nodes[out.id as usize].data;
        let bspan = bn.map(|b| b.data);
        self.exec_n(
            [xn.data, wn.data, bspan.unwrap_or_default()],
            y,
            product(&[batch, inp, out_f]),
            |[x, w, b], y| S::Kernels::linear_forward(batch, inp, out_f, x, w, bspan.map(|_| b), y),
        )?;
        Ok(out)
    }

    /// linear's backward rule, recorded by [`Graph::linear`].
    fn linear_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        g.record(i, &LINEAR)?;
        // Fused SGD may let the weight kernels add into the parameters directly.
        g.with_direct_params(i, Self::linear_general)
    }

    /// linear's backward into the gradients its record's inputs have.
    fn linear_general(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &LINEAR)?;
        g.linear_backward(i, op.input(0), op.input(1), op.opt_input(2))
    }

    fn linear_backward(&mut self, i: usize, x: NodeId, w: NodeId, b: Option<NodeId>) -> Result<()> {
        let gy = self.grads_for(i)?;
        let (xn, wn) = (self.nodes[x as usize], self.nodes[w as usize]);
        let (batch, inp, out) = sizes(xn.shape(), wn.shape(), None)?;
        let macs = product(&[batch, inp, out]);
        if let Some(gx) = self.grad_of(x) {
            self.exec_n([gy, wn.data], gx, macs, |[gy, w], gx| {
                S::Kernels::linear_backward_input(batch, inp, out, gy, w, gx)
            })?;
        }
        if let Some(gw) = self.grad_of(w) {
            self.exec_n([gy, xn.data], gw, macs, |[gy, x], gw| {
                S::Kernels::linear_backward_weight(batch, inp, out, gy, x, gw)
            })?;
        }
        if let Some(gb) = b.and_then(|b| self.grad_of(b)) {
            self.exec([gy], gb, |[gy], gb| k::linear_backward_bias(batch, out, gy, gb))?;
        }
        Ok(())
    }

    /// linear called by name.
    fn linear_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], _: &dyn Attrs) -> Result<Tensor> {
        g.linear(need(OP, t, 0)?, need(OP, t, 1)?, opt(t, 2))
    }

    /// linear by name.
    pub(crate) const LINEAR_SPEC: OpSpec<S, N> = OpSpec {
        name: OP,
        inputs: &["input", "weight", "bias"],
        params: &[],
        call: Self::linear_call,
        in_place: None,
    };
}
