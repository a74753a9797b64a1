//! add and mul of two tensors of the same shape. A tensor used on both sides gets
//! both contributions, since gradients accumulate with `+=`.

use super::registry::{need, Attrs, OpSpec};
use crate::error::{Error, Result};
use crate::graph::{BackwardFn, Graph, NodeId, Op, OpKind, Tensor, NO_PARAMS};
use crate::kernels::elementwise::{grad_map, zip_map};
use crate::scalar::Scalar;

/// add's records: backward reads no data.
static ADD: OpKind = OpKind {
    name: "add",
    reads_inputs: 0,
    reads_output: false,
};
/// mul's records: backward reads both inputs' data.
static MUL: OpKind = OpKind {
    name: "mul",
    reads_inputs: 0b011,
    reads_output: false,
};

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    fn binary(
        &mut self,
        kind: &'static OpKind,
        a: Tensor,
        b: Tensor,
        rule: BackwardFn<S, N>,
        f: impl Fn(S, S) -> S,
    ) -> Result<Tensor> {
        let (ai, bi) = (self.id(a)?, self.id(b)?);
        let (an, bn) = (self.nodes[ai], self.nodes[bi]);
        if an.shape() != bn.shape() {
            return Err(Error::ShapeMismatch {
                op: kind.name,
                what: "operands must have the same shape; element counts",
                expected: an.shape().numel(),
                found: bn.shape().numel(),
            });
        }
        let rg = self.needs_grad(&[Some(ai), Some(bi)]);
        let op = match rg {
            true => Op::new(kind, [Some(ai), Some(bi), None], NO_PARAMS),
            false => Op::LEAF,
        };
        let out = self.push(an.shape(), op, Some(rule), rg, 0)?;
        let y = self.nodes[out.id as usize].data;
        self.exec([an.data, bn.data], y, |[a, b], y| zip_map(a, b, y, f))?;
        Ok(out)
    }

    /// `a + b`.
    pub fn add(&mut self, a: Tensor, b: Tensor) -> Result<Tensor> {
        self.binary(&ADD, a, b, Self::add_rule, |x, y| x + y)
    }

    /// add's backward rule, recorded by [`Graph::add`].
    fn add_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &ADD)?;
        g.add_backward(i, op.input(0), op.input(1))
    }

    fn add_backward(&mut self, i: usize, a: NodeId, b: NodeId) -> Result<()> {
        let gy = self.grads_for(i)?;
        for x in [a, b] {
            if let Some(gx) = self.grad_of(x) {
                self.exec([gy, gy], gx, |[gy, s], gx| grad_map(gy, s, gx, |g, _| g))?;
            }
        }
        Ok(())
    }

    /// `a * b`, element by element.
    pub fn mul(&mut self, a: Tensor, b: Tensor) -> Result<Tensor> {
        self.binary(&MUL, a, b, Self::mul_rule, |x, y| x * y)
    }

    /// mul's backward rule, recorded by [`Graph::mul`].
    fn mul_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &MUL)?;
        g.mul_backward(i, op.input(0), op.input(1))
    }

    fn mul_backward(&mut self, i: usize, a: NodeId, b: NodeId) -> Result<()> {
        let gy = self.grads_for(i)?;
        let (ad, bd) = (self.nodes[a as usize].data, self.nodes[b as usize].data);
        for (x, other) in [(a, bd), (b, ad)] {
            if let Some(gx) = self.grad_of(x) {
                self.exec([gy, other], gx, |[gy, o], gx| grad_map(gy, o, gx, |g, o| g * o))?;
            }
        }
        Ok(())
    }

    fn add_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], _: &dyn Attrs) -> Result<Tensor> {
        g.add(need("add", t, 0)?, need("add", t, 1)?)
    }

    fn mul_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], _: &dyn Attrs) -> Result<Tensor> {
        g.mul(need("mul", t, 0)?, need("mul", t, 1)?)
    }

    /// add by name.
    pub(crate) const ADD_SPEC: OpSpec<S, N> = OpSpec {
        name: "add",
        inputs: &["input", "other"],
        call: Self::add_call,
    };
    /// mul by name.
    pub(crate) const MUL_SPEC: OpSpec<S, N> = OpSpec {
        name: "mul",
        inputs: &["input", "other"],
        call: Self::mul_call,
    };
}
