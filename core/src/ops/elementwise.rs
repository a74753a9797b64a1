//! add, sub, mul and div of two tensors whose shapes broadcast (NumPy/PyTorch rules:
//! dims aligned from the right, each pair equal or one of them 1), forward and
//! backward: the gradient of a broadcast operand is summed over the dims it was
//! broadcast in. A tensor used on both sides gets both contributions, since
//! gradients accumulate with `+=`.

use super::registry::{need, opt, Attrs, OpSpec};
use crate::arena::Span;
use crate::error::{Error, Result};
use crate::graph::reads;
use crate::graph::{BackwardFn, Graph, NodeId, Op, OpKind, Tensor, NO_PARAMS};
use crate::kernels::broadcast::{div_grad_b, grad, zip, Broadcast};
use crate::scalar::Scalar;
use crate::shape::Shape;

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

/// The shape two operands broadcast to, or the error naming the first pair of dims
/// (from the right) that differ with neither 1.
fn broadcast_shape(op: &'static str, a: Shape, b: Shape) -> Result<Shape> {
    if let Some(s) = a.broadcast(&b) {
        return Ok(s);
    }
    let pair = (0..a.rank().max(b.rank()))
        .map(|i| (a.dim_from_end(i), b.dim_from_end(i)))
        .find(|&(p, q)| p != q && p != 1 && q != 1);
    match pair {
        Some((p, q)) => Err(Error::ShapeMismatch {
            op,
            what: "operands do not broadcast: a dim is {expected} in the first and {found} in the second",
            expected: p,
            found: q,
        }),
        None => Err(Error::Overflow { op }),
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
        let (out, walk, [a, b, y]) = self.binary_out(kind, a, b, rule)?;
        self.exec([a, b], y, |[a, b], y| zip(&walk, a, b, y, f))?;
        Ok(out)
    }

    /// The output of a binary op, recorded, with the walk and the operands' and
    /// output's spans: the part of the four ops that does not depend on the formula,
    /// kept out of line (one copy in a program).
    #[inline(never)]
    fn binary_out(
        &mut self,
        kind: &'static OpKind,
        a: Tensor,
        b: Tensor,
        rule: BackwardFn<S, N>,
    ) -> Result<(Tensor, Broadcast, [Span; 3])> {
        let (ai, bi) = (self.id(a)?, self.id(b)?);
        let (an, bn) = (self.nodes[ai], self.nodes[bi]);
        let shape = broadcast_shape(kind.name, an.shape(), bn.shape())?;
        let rg = self.needs_grad(&[Some(ai), Some(bi)]);
        let op = match rg {
            true => Op::new(kind, [Some(ai), Some(bi), None], NO_PARAMS),
            false => Op::LEAF,
        };
        let out = self.push(shape, op, Some(rule), rg, 0)?;
        let y = self.nodes[out.id as usize].data;
        let walk = Broadcast::new(&shape, &an.shape(), &bn.shape());
        Ok((out, walk, [an.data, bn.data, y]))
    }

    /// `gx += h(gy, other)` for input `x` of record `i`, summed over the dims `x` was
    /// broadcast in (`other` is read at the same output positions).
    fn binary_grad(&mut self, i: usize, x: NodeId, other: NodeId, h: impl Fn(S, S) -> S) -> Result<()> {
        let gy = self.grads_for(i)?;
        let Some(gx) = self.grad_of(x) else {
            return Ok(());
        };
        let (out, xn, on) = (self.nodes[i], self.nodes[x as usize], self.nodes[other as usize]);
        let walk = Broadcast::new(&out.shape(), &xn.shape(), &on.shape());
        self.exec([gy, on.data], gx, |[gy, o], gx| grad(&walk, gy, o, gx, h))
    }

    /// `gx += sign * gy` summed over the dims `x` was broadcast in (add and sub).
    fn pass_grad(&mut self, i: usize, x: NodeId, sign: S) -> Result<()> {
        let gy = self.grads_for(i)?;
        let Some(gx) = self.grad_of(x) else {
            return Ok(());
        };
        let (out, xn) = (self.nodes[i], self.nodes[x as usize]);
        let walk = Broadcast::new(&out.shape(), &xn.shape(), &out.shape());
        self.exec([gy, gy], gx, |[gy, s], gx| {
            grad(&walk, gy, s, gx, |g, _| sign * g)
        })
    }

    /// `a + b`.
    pub fn add(&mut self, a: Tensor, b: Tensor) -> Result<Tensor> {
        self.binary(&ADD, a, b, Self::add_rule, |x, y| x + y)
    }

    /// In-place `a + b` (PyTorch's `a.add_(b)`, a residual connection's sum): the
    /// output takes over `a`'s memory and `a`'s handle is consumed; `b` may broadcast
    /// to `a`'s shape. Refused, with `a` left intact, when `b` does not broadcast to
    /// `a`, or `a` is a parameter, is shared by a view, or its value is needed for
    /// backward.
    pub fn add_(&mut self, a: Tensor, b: Tensor) -> Result<Tensor> {
        let (ai, bi) = (self.id(a)?, self.id(b)?);
        let (an, bn) = (self.nodes[ai], self.nodes[bi]);
        let shape = broadcast_shape("add_", an.shape(), bn.shape())?;
        if shape != an.shape() {
            return Err(Error::ShapeMismatch {
                op: "add_",
                what: "the second operand must broadcast to the first, whose {expected} elements the output keeps (it has {found})",
                expected: an.shape().numel(),
                found: shape.numel(),
            });
        }
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
        let walk = Broadcast::new(&shape, &shape, &bn.shape());
        match ai == bi {
            true => self.exec([], an.data, |[], a| a.iter_mut().for_each(|v| *v = *v + *v))?,
            false => self.exec([bn.data], an.data, |[b], a| {
                // Row by row `a += b`, with `a` as its own first operand.
                walk.rows(&mut |o, _, ib, len, _, sb| {
                    let Some(a) = a.get_mut(o..o + len) else {
                        return;
                    };
                    match sb {
                        1 => a
                            .iter_mut()
                            .zip(b.get(ib..).unwrap_or(&[]))
                            .for_each(|(v, &w)| *v += w),
                        _ => {
                            let w = b.get(ib).copied().unwrap_or(S::ZERO);
                            a.iter_mut().for_each(|v| *v += w)
                        }
                    }
                })
            })?,
        }
        Ok(out)
    }

    /// add's backward rule, recorded by [`Graph::add`] and [`Graph::add_`].
    fn add_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &ADD)?;
        g.pass_grad(i, op.input(0), S::ONE)?;
        g.pass_grad(i, op.input(1), S::ONE)
    }

    /// `a * b`, element by element.
    pub fn mul(&mut self, a: Tensor, b: Tensor) -> Result<Tensor> {
        self.binary(&MUL, a, b, Self::mul_rule, |x, y| x * y)
    }

    /// mul's backward rule, recorded by [`Graph::mul`].
    fn mul_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &MUL)?;
        let (a, b) = (op.input(0), op.input(1));
        g.binary_grad(i, a, b, |g, o| g * o)?;
        g.binary_grad(i, b, a, |g, o| g * o)
    }

    /// `a - b`.
    pub fn sub(&mut self, a: Tensor, b: Tensor) -> Result<Tensor> {
        self.binary(&SUB, a, b, Self::sub_rule, |x, y| x - y)
    }

    /// sub's backward rule, recorded by [`Graph::sub`].
    fn sub_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &SUB)?;
        g.pass_grad(i, op.input(0), S::ONE)?;
        g.pass_grad(i, op.input(1), -S::ONE)
    }

    /// `a / b`, element by element (division by zero as the scalar type does it:
    /// infinities in f32, saturation in Q16).
    pub fn div(&mut self, a: Tensor, b: Tensor) -> Result<Tensor> {
        self.binary(&DIV, a, b, Self::div_rule, |x, y| x.div(y))
    }

    /// div's backward rule, recorded by [`Graph::div`]: `ga += gy / b`,
    /// `gb -= gy * a / b^2` (the output, `a / b`, is not kept: `gb -= gy * (a / b) / b`
    /// with `a / b` recomputed).
    fn div_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &DIV)?;
        let (a, b) = (op.input(0), op.input(1));
        g.binary_grad(i, a, b, |g, b| g.div(b))?;
        let gy = g.grads_for(i)?;
        let Some(gb) = g.grad_of(b) else {
            return Ok(());
        };
        let (out, an, bn) = (g.nodes[i], g.nodes[a as usize], g.nodes[b as usize]);
        let walk = Broadcast::new(&out.shape(), &an.shape(), &bn.shape());
        g.exec([gy, an.data, bn.data], gb, |[gy, av, bv], gb| {
            div_grad_b(&walk, gy, av, bv, gb)
        })
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
