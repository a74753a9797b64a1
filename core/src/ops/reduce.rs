//! sum and mean over a list of dimensions, with `keepdim`. Backward spreads the output
//! gradient back over the reduced dimensions and reads no data.

use super::registry::{flag, need, Attrs, OpSpec};
use super::softmax::norm_dim;
use crate::error::{Error, Result};
use crate::graph::reads;
use crate::graph::{Graph, Op, OpKind, Tensor, NO_PARAMS};
use crate::kernels::layout as k;
use crate::scalar::Scalar;
use crate::shape::{Shape, MAX_RANK};

static SUM: OpKind = OpKind {
    name: "sum",
    reads_inputs: reads(0),
    reads_output: false,
};
static MEAN: OpKind = OpKind {
    name: "mean",
    reads_inputs: reads(0),
    reads_output: false,
};

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// `x.sum(dim=dims, keepdim)`; an empty `dims` reduces every dimension.
    pub fn sum(&mut self, x: Tensor, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        self.reduce(&SUM, x, dims, keepdim)
    }

    /// `x.mean(dim=dims, keepdim)`; an empty `dims` reduces every dimension.
    pub fn mean(&mut self, x: Tensor, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        self.reduce(&MEAN, x, dims, keepdim)
    }

    fn reduce(&mut self, kind: &'static OpKind, x: Tensor, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        let xi = self.id(x)?;
        let s = self.nodes[xi].shape();
        let rank = s.rank();
        let mut mask = 0u32;
        for &d in dims {
            let d = norm_dim(kind.name, d, rank)?;
            if mask >> d & 1 == 1 {
                return Err(Error::InvalidParam {
                    op: kind.name,
                    what: "dim appears more than once",
                    value: d as i64,
                });
            }
            mask |= 1 << d;
        }
        if dims.is_empty() {
            mask = (1 << rank) - 1;
        }
        let (mut out, mut r, mut count) = ([0; MAX_RANK], 0, 1usize);
        for k in 0..rank {
            if mask >> k & 1 == 1 {
                count *= s.dim(k);
                if keepdim {
                    out[r] = 1;
                    r += 1;
                }
            } else {
                out[r] = s.dim(k);
                r += 1;
            }
        }
        let shape = Shape::new(&out[..r])?;
        let rg = self.needs_grad(&[Some(xi)]);
        let mut params = NO_PARAMS;
        params[0] = mask as u16; // one bit per dim: rank <= MAX_RANK bits
        let op = match rg {
            true => Op::new(kind, [Some(xi), None, None], params),
            false => Op::LEAF,
        };
        let rule = if core::ptr::eq(kind, &MEAN) {
            Self::mean_rule
        } else {
            Self::sum_rule
        };
        let t = self.push(shape, op, Some(rule), rg, 0)?;
        let y = self.nodes[t.id as usize].data;
        let (d4, m4) = (k::pad4(s.dims()), mask << (4 - rank));
        let n = core::ptr::eq(kind, &MEAN).then_some(count);
        self.exec([self.nodes[xi].data], y, |[x], y| {
            k::reduce_forward(d4, m4, x, y, n)
        })?;
        Ok(t)
    }

    /// sum's backward rule, recorded by [`Graph::sum`].
    fn sum_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        g.reduce_backward(i, &SUM)
    }

    /// mean's backward rule, recorded by [`Graph::mean`].
    fn mean_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        g.reduce_backward(i, &MEAN)
    }

    fn reduce_backward(&mut self, i: usize, kind: &'static OpKind) -> Result<()> {
        let op = self.record(i, kind)?;
        let x = op.input(0);
        let s = self.nodes[x as usize].shape();
        let mask = u32::from(op.params[0]);
        let count = (0..s.rank())
            .filter(|&k| mask >> k & 1 == 1)
            .map(|k| s.dim(k))
            .product();
        let n = core::ptr::eq(kind, &MEAN).then_some(count);
        let (d4, m4) = (k::pad4(s.dims()), mask << (4 - s.rank()));
        let gy = self.grads_for(i)?;
        if let Some(gx) = self.grad_of(x) {
            self.exec([gy], gx, |[gy], gx| k::reduce_backward(d4, m4, gy, gx, n))?;
        }
        Ok(())
    }

    fn reduce_call(
        op: &'static str,
        g: &mut Graph<'_, S, N>,
        t: &[Option<Tensor>],
        a: &dyn Attrs,
    ) -> Result<Tensor> {
        let mut dims = [0i64; MAX_RANK];
        let n = a.ints("dim", &mut dims)?.unwrap_or(0);
        if n > MAX_RANK {
            return Err(Error::InvalidParam {
                op,
                what: "more dims than the maximum rank",
                value: n as i64,
            });
        }
        let keepdim = flag(a, "keepdim", false)?;
        let x = need(op, t, 0)?;
        match op {
            "mean" => g.mean(x, &dims[..n], keepdim),
            _ => g.sum(x, &dims[..n], keepdim),
        }
    }

    fn sum_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        Self::reduce_call("sum", g, t, a)
    }

    fn mean_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        Self::reduce_call("mean", g, t, a)
    }

    /// sum by name (`dim`: a list or one int; `keepdim`).
    pub(crate) const SUM_SPEC: OpSpec<S, N> = OpSpec {
        name: "sum",
        inputs: &["input"],
        params: &["dim", "keepdim"],
        call: Self::sum_call,
        in_place: None,
    };
    /// mean by name (`dim`: a list or one int; `keepdim`).
    pub(crate) const MEAN_SPEC: OpSpec<S, N> = OpSpec {
        name: "mean",
        inputs: &["input"],
        params: &["dim", "keepdim"],
        call: Self::mean_call,
        in_place: None,
    };
}
