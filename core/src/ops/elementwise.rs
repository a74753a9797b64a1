//! add, sub, mul and div of two tensors of the same shape. A tensor used on both sides gets
//! both contributions, since gradients accumulate with `+=`.

use super::registry::{need, opt, Attrs, OpSpec};
use crate::error::{Error, Result};
use crate::graph::reads;
use crate::graph::{BackwardFn, Graph, NodeId, Op, OpKind, Tensor, NO_PARAMS};
use crate::kernels::elementwise::{grad_map, zip_map};
use crate::scalar::Scalar;

/// add's records: backward reads no data.
static ADD: OpKind = OpKind {
    name: "add",
    reads_inputs: reads(0),
    reads_output: false,
};
/// mul's records: backward reads each input's data for the other's gradient.
static MUL: OpKind = OpKind {
    name: "mul",
    reads_inputs: [0b010, 0b001, 0],
    reads_output: false,
};
/// sub's records: backward reads no data.
static SUB: OpKind = OpKind {
    name: "sub",
    reads_inputs: reads(0),
    reads_output: false,
};
/// div's records: backward reads both inputs' data.
static DIV: OpKind = OpKind {
    name: "div",
    reads_inputs: reads(0b011),
    reads_output: false,
};

/// The error of two operands whose shapes differ (`same` false).
fn same_shape(kind: &OpKind, a: usize, b: usize, same: bool) -> Result<()> {
    match same {
        true => Ok(()),
        false => Err(Error::ShapeMismatch {
            op: kind.name,
            what: "operands must have the same shape (the second has {found} elements, the first {expected})",
            expected: a,
            found: b,
        }),
    }
}

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
        same_shape(
            kind,
            an.shape().numel(),
            bn.shape().numel(),
            an.shape() == bn.shape(),
        )?;
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

    /// In-place `a + b` (PyTorch's `a.add_(b)`, a residual connection's sum): the
    /// output takes over `a`'s memory and `a`'s handle is consumed. Refused, with `a`
    /// left intact, when the shapes differ, or `a` is a parameter, is shared by a
    /// view, or its value is needed for backward.
    pub fn add_(&mut self, a: Tensor, b: Tensor) -> Result<Tensor> {
        let (ai, bi) = (self.id(a)?, self.id(b)?);
        let (an, bn) = (self.nodes[ai], self.nodes[bi]);
        same_shape(
            &ADD,
            an.shape().numel(),
            bn.shape().numel(),
            an.shape() == bn.shape(),
        )?;
        if ai < self.num_params() || !self.can_overwrite(ai) {
            return Err(Error::InvalidState {
                what: "add_: the first operand is a parameter, is shared by a view, or its value is needed for backward (use add)",
            });
        }
        let rg = self.needs_grad(&[Some(ai), Some(bi)]);
        let op = match rg {
            true => Op::new(&ADD, [Some(ai), Some(bi), None], NO_PARAMS),
            false => Op::LEAF,
        };
        let (out, _) = self.take_over("add_", ai, op, Some(Self::add_rule), rg, 0)?;
        match ai == bi {
            true => self.exec([], an.data, |[], a| a.iter_mut().for_each(|v| *v = *v + *v))?,
            false => self.exec([bn.data], an.data, |[b], a| {
                a.iter_mut().zip(b).for_each(|(v, &w)| *v += w)
            })?,
        }
        Ok(out)
    }

    /// add's backward rule, recorded by [`Graph::add`] and [`Graph::add_`].
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

    /// `a - b`.
    pub fn sub(&mut self, a: Tensor, b: Tensor) -> Result<Tensor> {
        self.binary(&SUB, a, b, Self::sub_rule, |x, y| x - y)
    }

    /// sub's backward rule, recorded by [`Graph::sub`].
    fn sub_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &SUB)?;
        let gy = g.grads_for(i)?;
        for (x, sign) in [(op.input(0), S::ONE), (op.input(1), -S::ONE)] {
            if let Some(gx) = g.grad_of(x) {
                g.exec([gy, gy], gx, |[gy, s], gx| grad_map(gy, s, gx, |g, _| sign * g))?;
            }
        }
        Ok(())
    }

    /// `a / b`, element by element (division by zero as the scalar type does it:
    /// infinities in f32, saturation in Q16).
    pub fn div(&mut self, a: Tensor, b: Tensor) -> Result<Tensor> {
        self.binary(&DIV, a, b, Self::div_rule, |x, y| x.div(y))
    }

    /// div's backward rule, recorded by [`Graph::div`]: `ga += gy / b`,
    /// `gb -= gy * a / b^2`.
    fn div_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &DIV)?;
        let (a, b) = (op.input(0), op.input(1));
        let gy = g.grads_for(i)?;
        let (ad, bd) = (g.nodes[a as usize].data, g.nodes[b as usize].data);
        if let Some(ga) = g.grad_of(a) {
            g.exec([gy, bd], ga, |[gy, b], ga| grad_map(gy, b, ga, |g, b| g.div(b)))?;
        }
        if let Some(gb) = g.grad_of(b) {
            g.exec([gy, ad, bd], gb, |[gy, a, b], gb| {
                for (((d, &g), &a), &b) in gb.iter_mut().zip(gy).zip(a).zip(b) {
                    *d += -(g * a.div(b)).div(b);
                }
            })?;
        }
        Ok(())
    }

    fn sub_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], _: &dyn Attrs) -> Result<Tensor> {
        g.sub(need("sub", t, 0)?, need("sub", t, 1)?)
    }

    fn div_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], _: &dyn Attrs) -> Result<Tensor> {
        g.div(need("div", t, 0)?, need("div", t, 1)?)
    }

    /// sub by name.
    pub(crate) const SUB_SPEC: OpSpec<S, N> = OpSpec {
        name: "sub",
        inputs: &["input", "other"],
        params: &[],
        call: Self::sub_call,
        in_place: None,
    };
    /// div by name.
    pub(crate) const DIV_SPEC: OpSpec<S, N> = OpSpec {
        name: "div",
        inputs: &["input", "other"],
        params: &[],
        call: Self::div_call,
        in_place: None,
    };

    fn add_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], _: &dyn Attrs) -> Result<Tensor> {
        g.add(need("add", t, 0)?, need("add", t, 1)?)
    }

    /// add's in-place form by name ([`Graph::add_`], on input 0).
    fn add_in_place(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], _: &dyn Attrs) -> Option<Result<Tensor>> {
        Some(g.add_(opt(t, 0)?, opt(t, 1)?))
    }

    fn mul_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], _: &dyn Attrs) -> Result<Tensor> {
        g.mul(need("mul", t, 0)?, need("mul", t, 1)?)
    }

    /// add by name.
    pub(crate) const ADD_SPEC: OpSpec<S, N> = OpSpec {
        name: "add",
        inputs: &["input", "other"],
        params: &[],
        call: Self::add_call,
        in_place: Some(Self::add_in_place),
    };
    /// mul by name.
    pub(crate) const MUL_SPEC: OpSpec<S, N> = OpSpec {
        name: "mul",
        inputs: &["input", "other"],
        params: &[],
        call: Self::mul_call,
        in_place: None,
    };
}
