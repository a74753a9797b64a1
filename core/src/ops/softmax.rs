//! softmax and log_softmax along any dimension (negative counts from the end), both
//! numerically stable; backward reads the output only.

use super::registry::{need, Attrs, OpSpec};
use crate::error::{Error, Result};
use crate::graph::reads;
use crate::graph::{Graph, NodeId, Op, OpKind, Tensor, NO_PARAMS};
use crate::kernels::softmax as k;
use crate::scalar::Scalar;
use crate::shape::Shape;

static SOFTMAX: OpKind = OpKind {
    name: "softmax",
    reads_inputs: reads(0),
    reads_output: true,
};
static LOG_SOFTMAX: OpKind = OpKind {
    name: "log_softmax",
    reads_inputs: reads(0),
    reads_output: true,
};

/// PyTorch's `dim` (in `-rank..rank`) as an index below `rank`.
pub(crate) fn norm_dim(op: &'static str, dim: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    let d = if dim < 0 { dim + r } else { dim };
    if d < 0 || d >= r {
        return Err(Error::InvalidParam {
            op,
            what: "dim out of range for the input's rank",
            value: dim,
        });
    }
    Ok(d as usize)
}

/// `[outer, len, inner]` around dimension `d` of `s`.
pub(crate) fn split_at_dim(s: Shape, d: usize) -> (usize, usize, usize) {
    let dims = s.dims();
    (
        dims[..d].iter().product(),
        dims[d],
        dims[d + 1..].iter().product(),
    )
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// `exp(x) / sum(exp(x))` along `dim`.
    pub fn softmax(&mut self, x: Tensor, dim: i64) -> Result<Tensor> {
        self.softmax_any(x, dim, false)
    }

    /// `x - log(sum(exp(x)))` along `dim`.
    pub fn log_softmax(&mut self, x: Tensor, dim: i64) -> Result<Tensor> {
        self.softmax_any(x, dim, true)
    }

    fn softmax_any(&mut self, x: Tensor, dim: i64, log: bool) -> Result<Tensor> {
        let kind = if log { &LOG_SOFTMAX } else { &SOFTMAX };
        let xi = self.id(x)?;
        let xn = self.nodes[xi];
        let d = norm_dim(kind.name, dim, xn.shape().rank())?;
        let rg = self.needs_grad(&[Some(xi)]);
        let mut params = NO_PARAMS;
        params[0] = d as u16; // d < rank <= MAX_RANK
        let op = match rg {
            true => Op::new(kind, [Some(xi), None, None], params),
            false => Op::LEAF,
        };
        let rule = if log {
            Self::log_softmax_rule
        } else {
            Self::softmax_rule
        };
        let out = self.push(xn.shape(), op, Some(rule), rg, 0)?;
        let y = self.nodes[out.id as usize].data;
        let (o, l, i) = split_at_dim(xn.shape(), d);
        self.exec([xn.data], y, |[x], y| k::softmax_forward(o, l, i, x, y, log))?;
        Ok(out)
    }

    /// softmax's backward rule, recorded by [`Graph::softmax`].
    fn softmax_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &SOFTMAX)?;
        g.softmax_backward(i, op.input(0), op.params[0] as usize, false)
    }

    /// log_softmax's backward rule, recorded by [`Graph::log_softmax`].
    fn log_softmax_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &LOG_SOFTMAX)?;
        g.softmax_backward(i, op.input(0), op.params[0] as usize, true)
    }

    fn softmax_backward(&mut self, i: usize, x: NodeId, d: usize, log: bool) -> Result<()> {
        let gy = self.grads_for(i)?;
        let node = self.nodes[i];
        let (o, l, n) = split_at_dim(node.shape(), d);
        if let Some(gx) = self.grad_of(x) {
            self.exec([gy, node.data], gx, |[gy, y], gx| {
                k::softmax_backward(o, l, n, gy, y, gx, log)
            })?;
        }
        Ok(())
    }

    fn dim_param(op: &'static str, a: &dyn Attrs) -> Result<i64> {
        a.int("dim")?.ok_or(Error::InvalidParam {
            op,
            what: "missing parameter dim",
            value: 0,
        })
    }

    fn softmax_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        let dim = Self::dim_param("softmax", a)?;
        g.softmax(need("softmax", t, 0)?, dim)
    }

    fn log_softmax_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        let dim = Self::dim_param("log_softmax", a)?;
        g.log_softmax(need("log_softmax", t, 0)?, dim)
    }

    /// softmax by name (`dim`).
    pub(crate) const SOFTMAX_SPEC: OpSpec<S, N> = OpSpec {
        name: "softmax",
        inputs: &["input"],
        params: &["dim"],
        call: Self::softmax_call,
        in_place: None,
    };
    /// log_softmax by name (`dim`).
    pub(crate) const LOG_SOFTMAX_SPEC: OpSpec<S, N> = OpSpec {
        name: "log_softmax",
        inputs: &["input"],
        params: &["dim"],
        call: Self::log_softmax_call,
        in_place: None,
    };
}
