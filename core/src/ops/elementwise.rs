//! add and mul of two tensors of the same shape. A tensor used on both sides gets
//! both contributions, since gradients accumulate with `+=`.

use crate::error::{Error, Result};
use crate::graph::{BackwardFn, Graph, NodeId, Op, Tensor, RULE_MISMATCH};
use crate::kernels::elementwise::{grad_map, zip_map};
use crate::scalar::Scalar;

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    fn binary(
        &mut self,
        name: &'static str,
        a: Tensor,
        b: Tensor,
        op: impl FnOnce(NodeId, NodeId) -> Op,
        rule: BackwardFn<S, N>,
        f: impl Fn(S, S) -> S,
    ) -> Result<Tensor> {
        let (ai, bi) = (self.id(a)?, self.id(b)?);
        let (an, bn) = (self.nodes[ai], self.nodes[bi]);
        if an.shape != bn.shape {
            return Err(Error::ShapeMismatch {
                op: name,
                what: "operands must have the same shape; element counts",
                expected: an.shape.numel(),
                found: bn.shape.numel(),
            });
        }
        let rg = self.needs_grad(&[Some(ai), Some(bi)]);
        let op = if rg {
            op(ai as NodeId, bi as NodeId)
        } else {
            Op::Leaf
        };
        let out = self.push(an.shape, op, Some(rule), rg, 0)?;
        let y = self.nodes[out.id as usize].data;
        self.exec([an.data, bn.data], y, |[a, b], y| zip_map(a, b, y, f))?;
        Ok(out)
    }

    /// `a + b`.
    pub fn add(&mut self, a: Tensor, b: Tensor) -> Result<Tensor> {
        self.binary("add", a, b, |a, b| Op::Add { a, b }, Self::add_rule, |x, y| x + y)
    }

    /// add's backward rule, recorded by [`Graph::add`].
    fn add_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let Op::Add { a, b } = g.nodes[i].op else {
            return Err(RULE_MISMATCH);
        };
        g.add_backward(i, a, b)
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
        self.binary("mul", a, b, |a, b| Op::Mul { a, b }, Self::mul_rule, |x, y| x * y)
    }

    /// mul's backward rule, recorded by [`Graph::mul`].
    fn mul_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let Op::Mul { a, b } = g.nodes[i].op else {
            return Err(RULE_MISMATCH);
        };
        g.mul_backward(i, a, b)
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
}
