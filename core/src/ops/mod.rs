//! Ops: one file per family, each a set of `Graph` methods holding the op's
//! validation, shape rule, forward call and backward rule side by side.
//!
//! Every op follows the same steps: look up the inputs (stale handles are refused),
//! validate sizes with checked arithmetic, record the output (tape room and arena
//! space are checked before anything is written), then run the kernel unless the
//! graph only plans.

pub mod activation;
pub mod conv;
pub mod elementwise;
pub mod interpolate;
pub mod linear;
pub mod loss;
pub mod pad;
pub mod pool;
pub mod qconv;
pub mod reshape;

use crate::arena::Span;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::scalar::Scalar;

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Runs `f` on `R` read views and one write view, unless the graph only plans.
    pub(crate) fn exec<const R: usize>(
        &mut self,
        reads: [Span; R],
        write: Span,
        f: impl FnOnce([&[S]; R], &mut [S]),
    ) -> Result<()> {
        if self.arena.is_meta() {
            return Ok(());
        }
        let (r, w) = self.arena.views(reads, write)?;
        f(r, w);
        Ok(())
    }

    /// The gradient span of node `i`, which backward allocated before replaying.
    pub(crate) fn out_grad(&self, i: usize) -> Result<Span> {
        self.nodes[i].grad.ok_or(Error::InvalidState {
            what: "output gradient missing during backward (engine bug)",
        })
    }
}

/// The output length of a sliding window, as PyTorch computes it for conv and pool:
/// `floor_or_ceil((len + 2*pad - dil*(k-1) - 1) / stride) + 1`, with the ceil-mode rule
/// that the last window must start inside the input or the left padding.
pub(crate) fn window_out(
    op: &'static str,
    len: usize,
    k: usize,
    stride: usize,
    pad: usize,
    dil: usize,
    ceil_mode: bool,
) -> Result<usize> {
    let ovf = Error::Overflow { op };
    if k == 0 {
        return Err(Error::InvalidParam {
            op,
            what: "kernel size must be at least 1",
            value: 0,
        });
    }
    if stride == 0 {
        return Err(Error::InvalidParam {
            op,
            what: "stride must be at least 1",
            value: 0,
        });
    }
    if dil == 0 {
        return Err(Error::InvalidParam {
            op,
            what: "dilation must be at least 1",
            value: 0,
        });
    }
    let eff = dil.checked_mul(k - 1).and_then(|v| v.checked_add(1)).ok_or(ovf)?;
    let padded = pad.checked_mul(2).and_then(|p| p.checked_add(len)).ok_or(ovf)?;
    if eff > padded {
        return Err(Error::ShapeMismatch {
            op,
            what: "input (padded) smaller than the kernel",
            expected: eff,
            found: padded,
        });
    }
    let span = padded - eff;
    let mut out = if ceil_mode {
        span.div_ceil(stride) + 1
    } else {
        span / stride + 1
    };
    if ceil_mode && (out - 1) * stride >= len + pad {
        out -= 1;
    }
    Ok(out)
}

/// Checks that a shape has the given rank.
pub(crate) fn expect_rank(op: &'static str, what: &'static str, rank: usize, want: usize) -> Result<()> {
    if rank == want {
        Ok(())
    } else {
        Err(Error::ShapeMismatch {
            op,
            what,
            expected: want,
            found: rank,
        })
    }
}
