//! dropout: `torch.nn.functional.dropout`. In training with `p > 0`, each element is
//! zeroed with probability `p` and the rest scaled by `1 / (1 - p)`; otherwise the
//! input itself is returned (no record, no memory).
//!
//! The mask is a pure function of a per-call seed and the element's index
//! (`kernels/norm.rs`): the record keeps the seed, not the mask, and backward
//! regenerates it (no saved memory). Seeds come from the graph's dropout generator,
//! set with [`Graph::manual_seed`], so a run is reproducible.

use super::batch_norm::non_negative_real;
use super::registry::{flag, need, real, Attrs, OpSpec};
use crate::error::{Error, Result};
use crate::graph::reads;
use crate::graph::{f32_words, words_f32, Graph, NodeId, Op, OpKind, Tensor, NO_PARAMS};
use crate::kernels::norm as k;
use crate::scalar::Scalar;

const OP: &str = "dropout";

/// dropout's records: `params[0..2]` the mask seed, `params[2..4]` `p` (f32 bits).
static DROPOUT: OpKind = OpKind {
    name: OP,
    reads_inputs: reads(0),
    reads_output: false,
};

/// `p * 2^32` (elements hashing below it are dropped) and the scale of the kept ones.
fn mask_params<S: Scalar>(p: f32) -> (u64, S) {
    let below = (f64::from(p) * 4_294_967_296.0) as u64;
    let scale = if p < 1.0 {
        S::from_f32(1.0 / (1.0 - p))
    } else {
        S::ZERO
    };
    (below, scale)
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Seeds dropout's generator (PyTorch's `torch.manual_seed`): the same seed and the
    /// same sequence of calls give the same masks. A new graph starts from seed 0.
    pub fn manual_seed(&mut self, seed: u32) {
        self.dropout_state = seed;
    }

    /// `F.dropout(x, p, training)`: see the module docs. `p` must be in `[0, 1]`;
    /// `p = 1` zeroes everything. In eval (`training` false) or at `p = 0` the
    /// result is `x` itself.
    pub fn dropout(&mut self, x: Tensor, p: f32, training: bool) -> Result<Tensor> {
        let xi = self.id(x)?;
        non_negative_real(OP, "p must be a probability in [0, 1]", p)?;
        if p > 1.0 {
            return Err(Error::float(OP, "p must be a probability in [0, 1]", p));
        }
        if !training || p == 0.0 {
            return Ok(x);
        }
        let seed = k::next_seed(self.dropout_state);
        let xn = self.nodes[xi];
        let rg = self.needs_grad(&[Some(xi)]);
        let mut params = NO_PARAMS;
        [params[0], params[1]] = [seed as u16, (seed >> 16) as u16];
        [params[2], params[3]] = f32_words(p);
        let op = match rg {
            true => Op::new(&DROPOUT, [Some(xi), None, None], params),
            false => Op::LEAF,
        };
        let out = self.push(xn.shape(), op, Some(Self::dropout_rule), rg, 0)?;
        self.dropout_state = seed;
        let (below, scale) = mask_params::<S>(p);
        let y = self.nodes[out.id as usize].data;
        self.exec([xn.data], y, |[x], y| k::dropout(seed, below, scale, x, y, false))?;
        Ok(out)
    }

    /// dropout's backward rule, recorded by [`Graph::dropout`]: the output gradient
    /// masked and scaled, in place when the input has no gradient yet.
    fn dropout_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &DROPOUT)?;
        let seed = u32::from(op.params[0]) | u32::from(op.params[1]) << 16;
        let (below, scale) = mask_params::<S>(words_f32([op.params[2], op.params[3]]));
        let x = op.input(0);
        if g.pass_grad_in_place(i, x, |g, gy| {
            g.exec([], gy, |[], gy| k::dropout_in_place(seed, below, scale, gy))
        })? {
            return Ok(());
        }
        g.dropout_backward(i, x, seed, below, scale)
    }

    fn dropout_backward(&mut self, i: usize, x: NodeId, seed: u32, below: u64, scale: S) -> Result<()> {
        let gy = self.grads_for(i)?;
        if let Some(gx) = self.grad_of(x) {
            self.exec([gy], gx, |[gy], gx| k::dropout(seed, below, scale, gy, gx, true))?;
        }
        Ok(())
    }

    fn dropout_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        let p = real(a, "p", 0.5)? as f32;
        let training = flag(a, "training", true)?;
        g.dropout(need(OP, t, 0)?, p, training)
    }

    /// dropout by name (`p`, default 0.5; `training`, default true as in
    /// `F.dropout`).
    pub(crate) const DROPOUT_SPEC: OpSpec<S, N> = OpSpec {
        name: OP,
        inputs: &["input"],
        params: &["p", "training"],
        call: Self::dropout_call,
        in_place: None,
    };
}
