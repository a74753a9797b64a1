//! channel_shuffle: ShuffleNet's mixing of channel groups (`torch.channel_shuffle`,
//! which exporters write as Reshape to `[N, g, C/g, H, W]`, Transpose, Reshape back).
//! Output channel `j * g + i` is input channel `i * (C/g) + j`; a copy, whose backward
//! is the inverse copy and reads no data.

use super::registry::{need, uint, Attrs, OpSpec};
use crate::error::{Error, Result};
use crate::graph::reads;
use crate::graph::{Graph, Op, OpKind, Tensor, NO_PARAMS};
use crate::kernels::layout as k;
use crate::scalar::Scalar;

/// The records: `params[0..2]` the groups (u32, low word first).
static CHANNEL_SHUFFLE: OpKind = OpKind {
    name: "channel_shuffle",
    reads_inputs: reads(0),
    reads_output: false,
};

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// `torch.channel_shuffle(x, groups)` of an `[N, C, ...]` tensor, `groups` dividing C.
    pub fn channel_shuffle(&mut self, x: Tensor, groups: usize) -> Result<Tensor> {
        const OP: &str = "channel_shuffle";
        let xi = self.id(x)?;
        let s = self.nodes[xi].shape();
        if s.rank() < 2 {
            return Err(Error::ShapeMismatch {
                op: OP,
                what: "the input must have channels (rank at least {expected}, got {found})",
                expected: 2,
                found: s.rank(),
            });
        }
        let c = s.dim(1);
        let g32 = u32::try_from(groups).map_err(|_| Error::Overflow { op: OP })?;
        if groups == 0 || !c.is_multiple_of(groups) {
            return Err(Error::InvalidParam {
                op: OP,
                what: "groups must divide the channels",
                value: groups as i64,
            });
        }
        let rg = self.needs_grad(&[Some(xi)]);
        let mut params = NO_PARAMS;
        [params[0], params[1]] = [g32 as u16, (g32 >> 16) as u16];
        let op = match rg {
            true => Op::new(&CHANNEL_SHUFFLE, [Some(xi), None, None], params),
            false => Op::LEAF,
        };
        let t = self.push(s, op, Some(Self::channel_shuffle_rule), rg, 0)?;
        let y = self.nodes[t.id as usize].data;
        let (n, inner) = (s.dim(0), s.dims()[2..].iter().product::<usize>());
        self.exec([self.nodes[xi].data], y, |[x], y| {
            pairs(n, c, groups, inner, |src, dst| {
                k::copy_block(x, y, src, dst, inner)
            })
        })?;
        Ok(t)
    }

    /// channel_shuffle's backward rule, recorded by [`Graph::channel_shuffle`].
    fn channel_shuffle_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &CHANNEL_SHUFFLE)?;
        let groups = (op.params[0] as usize) | ((op.params[1] as usize) << 16);
        let x = op.input(0);
        let gy = g.grads_for(i)?;
        let s = g.nodes[i].shape();
        let (n, c, inner) = (s.dim(0), s.dim(1), s.dims()[2..].iter().product::<usize>());
        if let Some(gx) = g.grad_of(x) {
            g.exec([gy], gx, |[gy], gx| {
                pairs(n, c, groups, inner, |src, dst| {
                    k::add_block(gx, gy, src, dst, inner)
                })
            })?;
        }
        Ok(())
    }

    fn channel_shuffle_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        let groups = uint(a, "channel_shuffle", "groups", 1)?;
        g.channel_shuffle(need("channel_shuffle", t, 0)?, groups)
    }

    /// channel_shuffle by name (`groups`).
    pub(crate) const CHANNEL_SHUFFLE_SPEC: OpSpec<S, N> = OpSpec {
        name: "channel_shuffle",
        inputs: &["input"],
        params: &["groups"],
        call: Self::channel_shuffle_call,
        in_place: None,
    };
}

/// Calls `f(input offset, output offset)` for every channel of every sample: input
/// channel `i * (c / g) + j` goes to output channel `j * g + i`.
fn pairs(n: usize, c: usize, g: usize, inner: usize, mut f: impl FnMut(usize, usize)) {
    let per = c / g.max(1);
    for b in 0..n {
        for i in 0..g {
            for j in 0..per {
                f((b * c + i * per + j) * inner, (b * c + j * g + i) * inner);
            }
        }
    }
}
