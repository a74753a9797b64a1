//! slice: `x[..., start:end:step, ...]` along one dim (aten's `slice`, what ONNX
//! `Slice` and `Split` of activations are: GhostNet's channel halves, ShuffleNet's
//! split), a copy. Backward adds the output gradient back into the positions it came
//! from and reads no data.

use super::registry::{need, Attrs, OpSpec};
use super::softmax::{norm_dim, split_at_dim};
use crate::error::{Error, Result};
use crate::graph::reads;
use crate::graph::{Graph, Op, OpKind, Tensor, NO_PARAMS};
use crate::kernels::layout as k;
use crate::scalar::Scalar;
use crate::shape::{Shape, MAX_RANK};

/// The records: `params[0]` the dim, `params[1..3]` the normalised start and
/// `params[3..5]` the step (u32 each, low word first).
static SLICE: OpKind = OpKind {
    name: "slice",
    reads_inputs: reads(0),
    reads_output: false,
};

/// Python's rule for a slice bound: negative counts from the end, then clamped to
/// `0..=len`.
fn bound(v: i64, len: usize) -> usize {
    let len = len as i64;
    let v = if v < 0 { v.saturating_add(len) } else { v };
    v.clamp(0, len) as usize
}

fn words(v: u32) -> [u16; 2] {
    [v as u16, (v >> 16) as u16]
}

fn from_words(w: [u16; 2]) -> usize {
    (w[0] as usize) | ((w[1] as usize) << 16)
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// `x[..., start:end:step, ...]` along `dim` (negative counts from the last),
    /// Python's rules for the bounds; `step` at least 1. An empty result is refused.
    pub fn slice(&mut self, x: Tensor, dim: i64, start: i64, end: i64, step: usize) -> Result<Tensor> {
        const OP: &str = "slice";
        let xi = self.id(x)?;
        let s = self.nodes[xi].shape();
        let d = norm_dim(OP, dim, s.rank())?;
        let too_big = |v: usize| u32::try_from(v).map_err(|_| Error::Overflow { op: OP });
        let step32 = too_big(step)?;
        if step32 == 0 {
            return Err(Error::InvalidParam {
                op: OP,
                what: "step must be at least 1",
                value: 0,
            });
        }
        let len = s.dim(d);
        let (a, b) = (bound(start, len), bound(end, len));
        let count = b.saturating_sub(a).div_ceil(step);
        if count == 0 {
            return Err(Error::InvalidParam {
                op: OP,
                what: "the slice is empty; its start",
                value: start,
            });
        }
        let start32 = too_big(a)?;
        let mut dims = [0; MAX_RANK];
        dims[..s.rank()].copy_from_slice(s.dims());
        dims[d] = count;
        let shape = Shape::new(&dims[..s.rank()])?;
        let rg = self.needs_grad(&[Some(xi)]);
        let mut params = NO_PARAMS;
        params[0] = d as u16; // d < rank <= MAX_RANK
        [params[1], params[2]] = words(start32);
        [params[3], params[4]] = words(step32);
        let op = match rg {
            true => Op::new(&SLICE, [Some(xi), None, None], params),
            false => Op::LEAF,
        };
        let t = self.push(shape, op, Some(Self::slice_rule), rg, 0)?;
        let y = self.nodes[t.id as usize].data;
        let (outer, _, inner) = split_at_dim(s, d);
        self.exec([self.nodes[xi].data], y, |[x], y| {
            rows(outer, len, count, inner, a, step, |src, dst| {
                k::copy_block(x, y, src, dst, inner)
            })
        })?;
        Ok(t)
    }

    /// slice's backward rule, recorded by [`Graph::slice`].
    fn slice_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &SLICE)?;
        let d = op.params[0] as usize;
        let (start, step) = (
            from_words([op.params[1], op.params[2]]),
            from_words([op.params[3], op.params[4]]),
        );
        let x = op.input(0);
        let gy = g.grads_for(i)?;
        let (outer, len, inner) = split_at_dim(g.nodes[x as usize].shape(), d);
        let count = g.nodes[i].shape().dim(d);
        if let Some(gx) = g.grad_of(x) {
            g.exec([gy], gx, |[gy], gx| {
                rows(outer, len, count, inner, start, step, |src, dst| {
                    k::add_block(gx, gy, src, dst, inner)
                })
            })?;
        }
        Ok(())
    }

    fn slice_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        let step = a.int("step")?.unwrap_or(1);
        let step = usize::try_from(step).map_err(|_| Error::InvalidParam {
            op: "slice",
            what: "step must be at least 1",
            value: step,
        })?;
        g.slice(
            need("slice", t, 0)?,
            a.int("dim")?.unwrap_or(0),
            a.int("start")?.unwrap_or(0),
            a.int("end")?.unwrap_or(i64::MAX),
            step,
        )
    }

    /// slice by name (`dim`, `start`, `end`, `step`; defaults 0, 0, the end, 1).
    pub(crate) const SLICE_SPEC: OpSpec<S, N> = OpSpec {
        name: "slice",
        inputs: &["input"],
        params: &["dim", "start", "end", "step"],
        call: Self::slice_call,
        in_place: None,
    };
}

/// Calls `f(input offset, output offset)` for each of the `outer * count` rows of
/// `inner` elements a slice copies.
fn rows(
    outer: usize,
    len: usize,
    count: usize,
    inner: usize,
    start: usize,
    step: usize,
    mut f: impl FnMut(usize, usize),
) {
    for o in 0..outer {
        for j in 0..count {
            f((o * len + start + j * step) * inner, (o * count + j) * inner);
        }
    }
}
