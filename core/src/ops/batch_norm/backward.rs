//! batch_norm's backward: the rule the forward records and the three forms of its
//! gradients (batch statistics; fixed statistics with a trained weight, from the input
//! or from the 16-bit normalised values the record kept; a folded frozen scale).

use super::{norm_geom, BATCH_NORM, BATCH_NORM_COMPACT, BATCH_NORM_FIXED, OP};
use crate::arena::Span;
use crate::error::{Error, Result};
use crate::graph::{touched, Graph, NodeId};
use crate::kernels::half_saves as half;
use crate::kernels::norm::{self as k, NormGeom};
use crate::kernels::set::KernelSet;
use crate::scalar::Scalar;

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// batch_norm's backward rule, recorded by [`Graph::batch_norm`].
    pub(super) fn batch_norm_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g
            .record(i, &BATCH_NORM)
            .or_else(|_| g.record(i, &BATCH_NORM_FIXED))
            .or_else(|_| g.record(i, &BATCH_NORM_COMPACT))?;
        let (x, w, b) = (op.input(0), op.opt_input(1), op.opt_input(2));
        match op.params[1] == 1 {
            true => g.batch_norm_folded_backward(i, x, w, b),
            false => g.batch_norm_backward(i, x, w, b, op.params[0] == 1, op.params[2] == 1),
        }
    }

    fn batch_norm_backward(
        &mut self,
        i: usize,
        x: NodeId,
        w: Option<NodeId>,
        b: Option<NodeId>,
        batch: bool,
        compact: bool,
    ) -> Result<()> {
        let (xn, saved) = (self.nodes[x as usize], self.nodes[i].saved);
        let g = norm_geom(OP, xn.shape())?;
        let c = g.c;
        let wd = w.map_or(Span::EMPTY, |w| self.nodes[w as usize].data);
        if batch {
            if self.batch_norm_batch_in_place(i, g, [xn.data, saved, wd], x, [w, b])? {
                return Ok(());
            }
            let gy = self.grads_for(i)?;
            return self.batch_norm_batch_backward(g, [xn.data, gy, saved, wd], x, w, b);
        }
        // Fixed statistics: the parameters' gradients first, from the output's before
        // it may be scaled in place; the input's gradient is allocated only when it
        // cannot be the output's.
        self.ensure_param_grads([w, b])?;
        let gy = self.out_grad(i)?;
        match w.and_then(|w| self.grad_of(w)) {
            Some(gw) if compact => self.exec([gy, saved], gw, |[gy, s], gw| {
                half::packed_weight_grads(g, &s[2 * c..], gy, gw)
            })?,
            Some(gw) => self.exec([xn.data, gy, saved], gw, |[x, gy, s], gw| {
                k::affine_grads(g, x, gy, s, c, |_, ch| ch, gw, &mut [])
            })?,
            None => {}
        }
        if let Some(gb) = b.and_then(|b| self.grad_of(b)) {
            self.exec([gy], gb, |[gy], gb| k::bias_grads(g, gy, gb))?;
        }
        // With fixed statistics the input's gradient is the output's scaled per
        // channel: scaled in place, it becomes the input's when it has none yet.
        let scale = |g2: &mut Self, gy: Span| {
            g2.exec([saved, wd], gy, |[s, w], gy| {
                k::scale_channels_in_place(g, s, w, gy)
            })
        };
        if self.pass_grad_in_place(i, x, scale)? {
            return Ok(());
        }
        let gy = self.grads_for(i)?;
        if let Some(gx) = self.grad_of(x) {
            self.exec([gy, saved, wd], gx, |[gy, s, w], gx| {
                k::fixed_backward_input(g, gy, s, w, gx)
            })?;
        }
        Ok(())
    }

    /// Backward with batch statistics: the weight's and the input's gradients from one
    /// pass of sums (`reads`: input, output gradient, saved statistics, weight).
    fn batch_norm_batch_backward(
        &mut self,
        g: NormGeom,
        reads: [Span; 4],
        x: NodeId,
        w: Option<NodeId>,
        b: Option<NodeId>,
    ) -> Result<()> {
        let gw = w.and_then(|w| self.grad_of(w)).unwrap_or(Span::EMPTY);
        if let Some(gb) = b.and_then(|b| self.grad_of(b)) {
            self.exec([reads[1]], gb, |[gy], gb| S::Kernels::norm_bias_grads(g, gy, gb))?;
        }
        if let Some(gx) = self.grad_of(x) {
            self.count(touched(&reads, gx).saturating_add(gw.len as u64));
        }
        match self.grad_of(x) {
            Some(gx) if !self.arena.is_meta() => {
                let (r, gw, gx) = self.arena.views2(reads, gw, gx)?;
                S::Kernels::batch_norm_backward_batch(g, r[0], r[1], r[2], r[3], gw, gx);
            }
            Some(_) => {}
            None if gw.len > 0 => {
                let [xd, gy, saved, _] = reads;
                self.exec([xd, gy, saved], gw, |[x, gy, s], gw| {
                    k::affine_grads(g, x, gy, s, g.c, |_, ch| ch, gw, &mut [])
                })?;
            }
            None => {}
        }
        Ok(())
    }

    /// Backward with batch statistics when the input has no gradient yet: the output
    /// gradient becomes the input's, computed over it, with the bias's and the weight's
    /// gradients from the same sums (`reads`: input, saved statistics, weight). No
    /// buffer is allocated or cleared. `Ok(false)`: the general path must run.
    fn batch_norm_batch_in_place(
        &mut self,
        i: usize,
        g: NormGeom,
        reads: [Span; 3],
        x: NodeId,
        params: [Option<NodeId>; 2],
    ) -> Result<bool> {
        let [xd, saved, wd] = reads;
        self.ensure_param_grads(params)?;
        let run = |g2: &mut Self, gy: Span| -> Result<()> {
            g2.count(touched(&[xd, wd, saved], gy));
            if !g2.arena.is_meta() {
                let ([xv, wv], sv, gv) = g2.arena.views2([xd, wd], saved, gy)?;
                S::Kernels::batch_norm_backward_batch_in_place(g, xv, wv, sv, gv);
            }
            // `saved` now holds the sums of the bias's and the weight's gradients.
            let c = g.c;
            let [gw, gb] = params.map(|p| p.and_then(|p| g2.grad_of(p)));
            if let Some(gb) = gb {
                g2.exec([saved], gb, |[s], gb| add_to(gb, &s[..c]))?;
            }
            if let Some(gw) = gw {
                g2.exec([saved], gw, |[s], gw| add_to(gw, &s[c..2 * c]))?;
            }
            Ok(())
        };
        self.pass_grad_in_place(i, x, run)
    }

    /// Backward of a record with fixed statistics and a frozen weight: the saved
    /// values are the per-channel scales.
    fn batch_norm_folded_backward(
        &mut self,
        i: usize,
        x: NodeId,
        w: Option<NodeId>,
        b: Option<NodeId>,
    ) -> Result<()> {
        if w.and_then(|w| self.grad_of(w)).is_some() {
            return Err(Error::InvalidState {
                what: "batch_norm: the weight was frozen when the op was recorded, so its gradient cannot be computed",
            });
        }
        let (xs, saved) = (self.nodes[x as usize].shape(), self.nodes[i].saved);
        let g = norm_geom(OP, xs)?;
        // The bias's gradient first, from the output's before it may be scaled in place;
        // the input's gradient is allocated only when it cannot be the output's (the
        // weight is frozen here).
        self.ensure_param_grads([None, b])?;
        if let Some(gb) = b.and_then(|b| self.grad_of(b)) {
            let gy = self.out_grad(i)?;
            self.exec([gy], gb, |[gy], gb| k::bias_grads(g, gy, gb))?;
        }
        let scale =
            |g2: &mut Self, gy: Span| g2.exec([saved], gy, |[s], gy| k::scale_grad_in_place(g, s, gy));
        if self.pass_grad_in_place(i, x, scale)? {
            return Ok(());
        }
        let gy = self.grads_for(i)?;
        if let Some(gx) = self.grad_of(x) {
            self.exec([gy, saved], gx, |[gy, s], gx| k::add_scaled_grad(g, s, gy, gx))?;
        }
        Ok(())
    }

    /// Gradients for the weight and the bias that train (and have none yet), before
    /// the output's gradient is read for theirs and perhaps handed down in place.
    fn ensure_param_grads(&mut self, params: [Option<NodeId>; 2]) -> Result<()> {
        for p in params.into_iter().flatten() {
            self.ensure_grad(p as usize)?;
        }
        Ok(())
    }
}

/// `d += s`, value by value.
fn add_to<S: Scalar>(d: &mut [S], s: &[S]) {
    d.iter_mut().zip(s).for_each(|(d, &s)| *d += s);
}
