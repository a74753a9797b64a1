//! cat (two inputs, any dim) and permute: copies into a new layout. Backward reads no
//! data, only the shapes and the parameters in the record.

use super::registry::{need, Attrs, OpSpec};
use super::softmax::{norm_dim, split_at_dim};
use crate::error::{Error, Result};
use crate::graph::reads;
use crate::graph::{Graph, Op, OpKind, Tensor, NO_PARAMS};
use crate::kernels::layout as k;
use crate::scalar::Scalar;
use crate::shape::{Shape, MAX_RANK};

static CAT: OpKind = OpKind {
    name: "cat",
    reads_inputs: reads(0),
    reads_output: false,
};
static PERMUTE: OpKind = OpKind {
    name: "permute",
    reads_inputs: reads(0),
    reads_output: false,
};

/// `perm` padded to rank 4 (leading identity).
fn perm4(perm: &[usize]) -> [usize; 4] {
    let off = 4 - perm.len();
    let mut p = [0, 1, 2, 3];
    for (d, &v) in p[off..].iter_mut().zip(perm) {
        *d = v + off;
    }
    p
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// `torch.cat([a, b], dim)`: same rank, same sizes except along `dim`.
    pub fn cat(&mut self, a: Tensor, b: Tensor, dim: i64) -> Result<Tensor> {
        const OP: &str = "cat";
        let (ai, bi) = (self.id(a)?, self.id(b)?);
        let (sa, sb) = (self.nodes[ai].shape(), self.nodes[bi].shape());
        if sa.rank() != sb.rank() {
            return Err(Error::ShapeMismatch {
                op: OP,
                what: "inputs must have the same rank",
                expected: sa.rank(),
                found: sb.rank(),
            });
        }
        let d = norm_dim(OP, dim, sa.rank())?;
        let mut dims = [0; MAX_RANK];
        for (k, o) in dims[..sa.rank()].iter_mut().enumerate() {
            if k != d && sa.dim(k) != sb.dim(k) {
                return Err(Error::ShapeMismatch {
                    op: OP,
                    what: "sizes must match except along dim",
                    expected: sa.dim(k),
                    found: sb.dim(k),
                });
            }
            *o = sa.dim(k);
        }
        dims[d] = sa
            .dim(d)
            .checked_add(sb.dim(d))
            .ok_or(Error::Overflow { op: OP })?;
        let shape = Shape::new(&dims[..sa.rank()])?;
        let rg = self.needs_grad(&[Some(ai), Some(bi)]);
        let mut params = NO_PARAMS;
        params[0] = d as u16; // d < rank <= MAX_RANK
        let op = match rg {
            true => Op::new(&CAT, [Some(ai), Some(bi), None], params),
            false => Op::LEAF,
        };
        let out = self.push(shape, op, Some(Self::cat_rule), rg, 0)?;
        let y = self.nodes[out.id as usize].data;
        let (o, la, i) = split_at_dim(sa, d);
        let lb = sb.dim(d);
        let (da, db) = (self.nodes[ai].data, self.nodes[bi].data);
        self.exec([da, db], y, |[a, b], y| k::cat_forward(o, la, lb, i, a, b, y))?;
        Ok(out)
    }

    /// cat's backward rule, recorded by [`Graph::cat`].
    fn cat_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &CAT)?;
        let d = op.params[0] as usize;
        let gy = g.grads_for(i)?;
        let (_, l, inner) = split_at_dim(g.nodes[i].shape(), d);
        let la = g.nodes[op.input(0) as usize].shape().dim(d);
        for (x, start, len) in [(op.input(0), 0, la), (op.input(1), la, l - la)] {
            if let Some(gx) = g.grad_of(x) {
                g.exec([gy], gx, |[gy], gx| {
                    k::cat_backward(l * inner, start * inner, len * inner, gy, gx)
                })?;
            }
        }
        Ok(())
    }

    /// `x.permute(dims)`: output dimension `k` is input dimension `dims[k]`.
    pub fn permute(&mut self, x: Tensor, dims: &[usize]) -> Result<Tensor> {
        const OP: &str = "permute";
        let xi = self.id(x)?;
        let s = self.nodes[xi].shape();
        if dims.len() != s.rank() {
            return Err(Error::ShapeMismatch {
                op: OP,
                what: "dims must list every dimension; length vs rank",
                expected: s.rank(),
                found: dims.len(),
            });
        }
        let mut seen = [false; MAX_RANK];
        let mut out = [0; MAX_RANK];
        for (k, &p) in dims.iter().enumerate() {
            if p >= s.rank() || seen[p] {
                return Err(Error::InvalidParam {
                    op: OP,
                    what: "dims must be a permutation of the input's dimensions",
                    value: p as i64,
                });
            }
            seen[p] = true;
            out[k] = s.dim(p);
        }
        let shape = Shape::new(&out[..s.rank()])?;
        let rg = self.needs_grad(&[Some(xi)]);
        let mut params = NO_PARAMS;
        for (w, &p) in params.iter_mut().zip(dims) {
            *w = p as u16; // a dim index < rank <= MAX_RANK
        }
        let op = match rg {
            true => Op::new(&PERMUTE, [Some(xi), None, None], params),
            false => Op::LEAF,
        };
        let t = self.push(shape, op, Some(Self::permute_rule), rg, 0)?;
        let y = self.nodes[t.id as usize].data;
        let (d4, p4) = (k::pad4(s.dims()), perm4(dims));
        self.exec([self.nodes[xi].data], y, |[x], y| {
            k::permute_forward(d4, p4, x, y)
        })?;
        Ok(t)
    }

    /// permute's backward rule, recorded by [`Graph::permute`].
    fn permute_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &PERMUTE)?;
        let x = op.input(0);
        let s = g.nodes[x as usize].shape();
        let mut perm = [0; MAX_RANK];
        for (d, &w) in perm.iter_mut().zip(&op.params) {
            *d = w as usize;
        }
        let (d4, p4) = (k::pad4(s.dims()), perm4(&perm[..s.rank()]));
        let gy = g.grads_for(i)?;
        if let Some(gx) = g.grad_of(x) {
            g.exec([gy], gx, |[gy], gx| k::permute_backward(d4, p4, gy, gx))?;
        }
        Ok(())
    }

    fn cat_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        let dim = a.int("dim")?.unwrap_or(0);
        g.cat(need("cat", t, 0)?, need("cat", t, 1)?, dim)
    }

    fn permute_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        const OP: &str = "permute";
        let x = need(OP, t, 0)?;
        let rank = g.shape(x)?.rank();
        let mut raw = [0i64; MAX_RANK];
        let n = a.ints("dims", &mut raw)?.ok_or(Error::InvalidParam {
            op: OP,
            what: "missing parameter dims",
            value: 0,
        })?;
        if n > MAX_RANK {
            return Err(Error::ShapeMismatch {
                op: OP,
                what: "dims must list every dimension; length vs rank",
                expected: rank,
                found: n,
            });
        }
        let mut dims = [0usize; MAX_RANK];
        for (d, &v) in dims.iter_mut().zip(&raw[..n]) {
            *d = norm_dim(OP, v, rank)?;
        }
        g.permute(x, &dims[..n])
    }

    /// cat by name (`dim`, default 0; the two tensors are `input` and `other`).
    pub(crate) const CAT_SPEC: OpSpec<S, N> = OpSpec {
        name: "cat",
        inputs: &["input", "other"],
        params: &["dim"],
        call: Self::cat_call,
        in_place: None,
    };
    /// permute by name (`dims`, negative counting from the end).
    pub(crate) const PERMUTE_SPEC: OpSpec<S, N> = OpSpec {
        name: "permute",
        inputs: &["input"],
        params: &["dims"],
        call: Self::permute_call,
        in_place: None,
    };
}
