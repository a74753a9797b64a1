//! relu6, hardswish, hardsigmoid: the piecewise activations of MobileNet-style nets.
//! relu6's backward reads its output (like relu); hardswish and hardsigmoid read the
//! input, whose kinks at -3 and 3 the output cannot locate exactly in Q16.

use super::registry::{need, Attrs, OpSpec};
use crate::error::Result;
use crate::graph::{Graph, OpKind, Tensor, NO_PARAMS};
use crate::kernels::activation as k;
use crate::scalar::Scalar;

static RELU6: OpKind = OpKind {
    name: "relu6",
    reads_inputs: 0,
    reads_output: true,
};
static HARDSWISH: OpKind = OpKind {
    name: "hardswish",
    reads_inputs: 0b001,
    reads_output: false,
};
static HARDSIGMOID: OpKind = OpKind {
    name: "hardsigmoid",
    reads_inputs: 0b001,
    reads_output: false,
};

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// `min(max(x, 0), 6)`; NaN propagates.
    pub fn relu6(&mut self, x: Tensor) -> Result<Tensor> {
        self.unary(x, &RELU6, NO_PARAMS, Self::relu6_rule, k::relu6)
    }

    /// relu6's backward rule, recorded by [`Graph::relu6`].
    fn relu6_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let x = g.record(i, &RELU6)?.input(0);
        g.unary_backward(i, x, true, k::relu6_grad)
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
    };
    /// hardswish by name.
    pub(crate) const HARDSWISH_SPEC: OpSpec<S, N> = OpSpec {
        name: "hardswish",
        inputs: &["input"],
        params: &[],
        call: Self::hardswish_call,
    };
    /// hardsigmoid by name.
    pub(crate) const HARDSIGMOID_SPEC: OpSpec<S, N> = OpSpec {
        name: "hardsigmoid",
        inputs: &["input"],
        params: &[],
        call: Self::hardsigmoid_call,
    };
}
