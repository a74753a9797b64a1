//! relu6, hardswish, hardsigmoid: the piecewise activations of MobileNet-style nets.
//! relu6 keeps one bit per element for backward (where `0 < x < 6`), like `relu_`, so
//! neither its input nor its output has to live for its gradient (a frozen convolution
//! after it keeps nothing either). hardswish and hardsigmoid read the input, whose
//! kinks at -3 and 3 the output cannot locate exactly in Q16.

use super::registry::{need, opt, Attrs, OpSpec};
use crate::error::{Error, Result};
use crate::graph::{reads, touched};
use crate::graph::{Graph, Op, OpKind, Tensor, NO_PARAMS};
use crate::kernels::activation as k;
use crate::kernels::compact as c;
use crate::kernels::elementwise::map;
use crate::kernels::set::KernelSet;
use crate::scalar::Scalar;

/// relu6's records: backward reads the bit mask the record saved.
static RELU6: OpKind = OpKind {
    name: "relu6",
    reads_inputs: reads(0),
    reads_output: false,
};
static HARDSWISH: OpKind = OpKind {
    name: "hardswish",
    reads_inputs: reads(0b001),
    reads_output: false,
};
static HARDSIGMOID: OpKind = OpKind {
    name: "hardsigmoid",
    reads_inputs: reads(0b001),
    reads_output: false,
};

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// `min(max(x, 0), 6)`; NaN propagates.
    pub fn relu6(&mut self, x: Tensor) -> Result<Tensor> {
        let xi = self.id(x)?;
        let xn = self.nodes[xi];
        let rg = self.needs_grad(&[Some(xi)]);
        let (op, mask_words) = match rg {
            true => (Op::unary(&RELU6, xi), c::mask_words(xn.shape().numel())),
            false => (Op::LEAF, 0),
        };
        let out = self.push(xn.shape(), op, Some(Self::relu6_rule), rg, mask_words)?;
        let node = self.nodes[out.id as usize];
        self.exec([xn.data], node.data, |[x], y| map(x, y, k::relu6))?;
        let six = S::from_count(6);
        self.exec([xn.data], node.saved, |[x], m| {
            c::band_mask(x, m, |v| v > S::ZERO && v < six)
        })?;
        Ok(out)
    }

    /// In-place relu6: the output takes over `x`'s memory (a bit mask is saved for
    /// backward, as by [`Graph::relu6`]) and `x`'s handle is consumed. Refused, with
    /// `x` left intact, when something recorded still needs `x` or a view of it is alive.
    pub fn relu6_(&mut self, x: Tensor) -> Result<Tensor> {
        let xi = self.id(x)?;
        if xi < self.num_params() || !self.can_overwrite(xi) {
            return Err(Error::InvalidState {
                what: "relu6_: the input is a parameter, is shared by a view, or its value is needed for backward (use relu6)",
            });
        }
        let xn = self.nodes[xi];
        let rg = self.needs_grad(&[Some(xi)]);
        let op = if rg { Op::unary(&RELU6, xi) } else { Op::LEAF };
        let mask = if rg { c::mask_words(xn.shape().numel()) } else { 0 };
        let (out, saved) = self.take_over("relu6_", xi, op, Some(Self::relu6_rule), rg, mask)?;
        let work = touched(&[], xn.data);
        self.exec2([], [xn.data, saved], work, |[], xv, mv| {
            S::Kernels::relu6_masked(xv, mv)
        })?;
        Ok(out)
    }

    /// relu6's backward rule, recorded by [`Graph::relu6`]: the gradient passes where
    /// the mask bit is set.
    fn relu6_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let x = g.record(i, &RELU6)?.input(0);
        let mask = g.nodes[i].saved;
        // The output gradient, masked in place, becomes the input's when it has none yet.
        if g.pass_grad_in_place(i, x, |g, gy| {
            g.exec([mask], gy, |[m], gy| S::Kernels::relu_mask_in_place(gy, m))
        })? {
            return Ok(());
        }
        let gy = g.grads_for(i)?;
        if let Some(gx) = g.grad_of(x) {
            g.exec([gy, mask], gx, |[gy, m], gx| c::relu_masked_backward(gy, m, gx))?;
        }
        Ok(())
    }

    /// `x * relu6(x + 3) / 6`.
    pub fn hardswish(&mut self, x: Tensor) -> Result<Tensor> {
        self.unary(x, &HARDSWISH, NO_PARAMS, Self::hardswish_rule, k::hardswish)
    }

    /// hardswish's backward rule, recorded by [`Graph::hardswish`].
    fn hardswish_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let x = g.record(i, &HARDSWISH)?.input(0);
        g.unary_backward(i, x, false, k::hardswish_grad)
    }

    /// `relu6(x + 3) / 6`.
    pub fn hardsigmoid(&mut self, x: Tensor) -> Result<Tensor> {
        self.unary(x, &HARDSIGMOID, NO_PARAMS, Self::hardsigmoid_rule, k::hardsigmoid)
    }

    /// hardsigmoid's backward rule, recorded by [`Graph::hardsigmoid`].
    fn hardsigmoid_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let x = g.record(i, &HARDSIGMOID)?.input(0);
        g.unary_backward(i, x, false, k::hardsigmoid_grad)
    }

    fn relu6_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], _: &dyn Attrs) -> Result<Tensor> {
        g.relu6(need("relu6", t, 0)?)
    }

    /// relu6's in-place form by name ([`Graph::relu6_`]).
    fn relu6_in_place(
        g: &mut Graph<'_, S, N>,
        t: &[Option<Tensor>],
        _: &dyn Attrs,
    ) -> Option<Result<Tensor>> {
        Some(g.relu6_(opt(t, 0)?))
    }

    fn hardswish_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], _: &dyn Attrs) -> Result<Tensor> {
        g.hardswish(need("hardswish", t, 0)?)
    }

    fn hardsigmoid_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], _: &dyn Attrs) -> Result<Tensor> {
        g.hardsigmoid(need("hardsigmoid", t, 0)?)
    }

    /// relu6 by name.
    pub(crate) const RELU6_SPEC: OpSpec<S, N> = OpSpec {
        name: "relu6",
        inputs: &["input"],
        params: &[],
        call: Self::relu6_call,
        in_place: Some(Self::relu6_in_place),
    };
    /// hardswish by name.
    pub(crate) const HARDSWISH_SPEC: OpSpec<S, N> = OpSpec {
        name: "hardswish",
        inputs: &["input"],
        params: &[],
        call: Self::hardswish_call,
        in_place: None,
    };
    /// hardsigmoid by name.
    pub(crate) const HARDSIGMOID_SPEC: OpSpec<S, N> = OpSpec {
        name: "hardsigmoid",
        inputs: &["input"],
        params: &[],
        call: Self::hardsigmoid_call,
        in_place: None,
    };
}
