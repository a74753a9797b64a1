//! Non-finite values (NaN, infinities) stop at the door: inputs refuse them unless
//! the caller opts out, and optimizers refuse gradients and updates that are not
//! finite before they write anything (see `optim.rs`).

use super::{Graph, NodeId};
use crate::arena::Span;
use crate::error::{Error, Result};
use crate::scalar::Scalar;

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Whether [`Graph::input`] and its variants refuse data that is NaN or infinite
    /// ([`Error::NonFinite`], on by default), or let it propagate as PyTorch does
    /// (off). Optimizers and fused SGD refuse non-finite gradients and updates either
    /// way, so such values never reach a parameter.
    pub fn set_check_finite(&mut self, on: bool) {
        self.check_finite = on;
    }

    /// The error for an input's data if it holds a value that is not finite and the
    /// check is on.
    pub(super) fn check_input(&self, op: &'static str, data: Span) -> Option<Error> {
        if !self.check_finite {
            return None;
        }
        first_non_finite(self.arena.get(data)).map(|index| Error::NonFinite {
            op,
            what: "data is not finite",
            param: None,
            index,
        })
    }
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Fused SGD writes parameters during the walk: a loss (node `id`, where backward
    /// starts) or seed that is not finite is refused before anything is written.
    pub(super) fn check_fused_start(&self, id: usize, seed: Option<&[S]>) -> Result<()> {
        let bad = |what, index| Error::NonFinite {
            op: "fused SGD",
            what,
            param: None,
            index,
        };
        if let Some(e) = first_non_finite(self.arena.get(self.nodes[id].data)) {
            return Err(bad("loss is not finite", e));
        }
        match seed.and_then(first_non_finite) {
            Some(e) => Err(bad("backward seed is not finite", e)),
            None => Ok(()),
        }
    }

    /// Refuses fused SGD's direct update of parameters `params` (weight, optional
    /// bias) from output gradient `gy` and input `x` unless it is surely finite: every
    /// new value is `p - lr * (a sum of at most terms products of a gradient and an
    /// input value)`, so it stays finite, rounding included, while `|lr| * max|gy| *
    /// max(|x|, |p|, 1) * terms + max|p|` is below `f32::MAX / 2` (a bound that also
    /// covers the input gradient `x` gets). Types without non-finite values pass.
    pub(super) fn check_direct(
        &self,
        x: usize,
        params: [Option<NodeId>; 2],
        lr: f32,
        gy: Span,
    ) -> Result<()> {
        // A meta graph or a dry run has no values to check.
        let real = S::NON_FINITE && !self.arena.is_meta();
        let Some(w) = params[0].map(|w| w as usize).filter(|_| real) else {
            return Ok(());
        };
        let gys = self.arena.get(gy);
        if let Some(index) = first_non_finite(gys) {
            return Err(Error::NonFinite {
                op: "fused SGD",
                what: "the output gradient of the op it feeds is not finite",
                param: Some(w),
                index,
            });
        }
        let amax = |v: &[S]| v.iter().fold(0f32, |m, &a| m.max(a.to_f32().abs()));
        let pmax = params.into_iter().flatten().fold(0f32, |m, p| {
            m.max(amax(self.arena.get(self.nodes[p as usize].data)))
        });
        let (wn, big) = (self.nodes[w], amax(self.arena.get(self.nodes[x].data)).max(pmax));
        let terms = (gy.len / wn.shape().dim(0).max(1)).max(wn.data.len) as f32;
        let bound = lr.abs() * amax(gys) * big.max(1.0) * terms + pmax;
        if bound < f32::MAX / 2.0 {
            return Ok(());
        }
        Err(Error::NonFinite {
            op: "fused SGD",
            what: "update may overflow (|lr| * max|grad| * max(|input|, |param|, 1) * terms reaches f32::MAX / 2)",
            param: Some(w),
            index: 0,
        })
    }
}

/// The index of the first value of `v` that is NaN or infinite. One pass that only
/// compares (the all-finite case has no early exit, so it vectorises); the position
/// is searched only when something was found. Nothing at all for types without
/// non-finite values ([`Scalar::NON_FINITE`]).
pub(crate) fn first_non_finite<S: Scalar>(v: &[S]) -> Option<usize> {
    if !S::NON_FINITE || v.iter().fold(true, |ok, x| ok & x.is_finite()) {
        return None;
    }
    v.iter().position(|x| !x.is_finite())
}
