//! batch_norm: `torch.nn.functional.batch_norm` on any input of rank >= 2 with the
//! channels at dim 1.
//!
//! - Training (`training: true`): each channel is normalised by its batch mean and
//!   biased variance, and the running statistics, when given, are updated in place
//!   with PyTorch's momentum rule and the *unbiased* variance. One value per channel
//!   is refused, as in PyTorch.
//! - Eval: the running statistics normalise and are not touched. With gradients on,
//!   the affine parameters still train ("frozen statistics", for fine-tuning at batch 1).
//! - The record's inputs are `[input, weight, bias]`; running statistics get no
//!   gradient and backward never reads them. What the record saves follows what its
//!   gradients need: each channel's mean and inverse standard deviation (`2 * C`
//!   values) with batch statistics or a trained weight; with fixed statistics and a
//!   frozen weight, only the scale `w / sqrt(var + eps)` (`C` values, flagged by
//!   `params[1]`); nothing without gradients and fixed statistics. With fixed
//!   statistics, a trained weight and [`Graph::set_compact_saves`], the normalised
//!   input in 16 bits after the `2 * C` statistics, instead of keeping the input.

mod backward;

use super::registry::{flag, need, opt, real, Attrs, OpSpec};
use crate::arena::Span;
use crate::error::{Error, Result};
use crate::graph::{touched, Graph, Op, OpKind, Tensor, NO_PARAMS};
use crate::kernels::half_saves as half;
use crate::kernels::norm::{self as k, NormGeom};
use crate::kernels::set::KernelSet;
use crate::scalar::Scalar;
use crate::shape::Shape;

const OP: &str = "batch_norm";

/// batch_norm's records with batch statistics (`params[0]` is 1): backward reads the
/// saved statistics, the weight, and the input for the input's and the weight's
/// gradients.
static BATCH_NORM: OpKind = OpKind {
    name: OP,
    reads_inputs: [0b011, 0b001, 0],
    reads_output: false,
};
/// batch_norm's records with fixed statistics (eval, or frozen statistics while the
/// affine parameters train): the input's data only for the weight's gradient, so a
/// layer that trains only its bias keeps nothing of its input.
static BATCH_NORM_FIXED: OpKind = OpKind {
    name: OP,
    reads_inputs: [0b010, 0b001, 0],
    reads_output: false,
};
/// batch_norm's records with fixed statistics and compact saves (`params[2]` is 1):
/// the weight's gradient reads the record's 16-bit normalised values, never the input.
static BATCH_NORM_COMPACT: OpKind = OpKind {
    name: OP,
    reads_inputs: [0, 0b001, 0],
    reads_output: false,
};

/// `F.batch_norm`'s keyword parameters (PyTorch's defaults: eval, 0.1, 1e-5).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchNormParams {
    /// Batch statistics (and running-statistics update) rather than running ones.
    pub training: bool,
    /// Weight of the new batch value in the running statistics' update.
    pub momentum: f32,
    /// Added to the variance before its square root.
    pub eps: f32,
}

impl Default for BatchNormParams {
    fn default() -> Self {
        BatchNormParams {
            training: false,
            momentum: 0.1,
            eps: 1e-5,
        }
    }
}

impl BatchNormParams {
    /// The parameters of a by-name call (`training`, `momentum`, `eps`).
    pub(crate) fn from_attrs(a: &dyn Attrs) -> Result<Self> {
        Ok(BatchNormParams {
            training: flag(a, "training", false)?,
            momentum: real(a, "momentum", 0.1)? as f32,
            eps: real(a, "eps", 1e-5)? as f32,
        })
    }
}

/// `[n, c, inner]` of a normalisation's input (rank 2 to 4, channels at dim 1).
pub(crate) fn norm_geom(op: &'static str, s: Shape) -> Result<NormGeom> {
    if s.rank() < 2 {
        return Err(Error::ShapeMismatch {
            op,
            what: "input has {found} dimensions, expected at least {expected} (batch, channels, ...)",
            expected: 2,
            found: s.rank(),
        });
    }
    Ok(NormGeom {
        n: s.dim(0),
        c: s.dim(1),
        inner: s.dims()[2..].iter().product(),
    })
}

/// Checks that a per-channel tensor (weight, bias, running statistic) has `c` values.
pub(crate) fn per_channel(op: &'static str, what: &'static str, s: Shape, c: usize) -> Result<()> {
    if s.rank() == 1 && s.dim(0) == c {
        return Ok(());
    }
    Err(Error::ShapeMismatch {
        op,
        what,
        expected: c,
        found: s.numel(),
    })
}

/// A real parameter that must be finite and at least 0 (eps, momentum, p).
pub(crate) fn non_negative_real(op: &'static str, what: &'static str, v: f32) -> Result<()> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(Error::float(op, what, v))
    }
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// `F.batch_norm(x, running_mean, running_var, weight, bias, training, momentum,
    /// eps)`: see the module docs. The running statistics are usually buffers
    /// ([`Graph::buffer`]); any writable tensor of `C` values works.
    pub fn batch_norm(
        &mut self,
        x: Tensor,
        weight: Option<Tensor>,
        bias: Option<Tensor>,
        running_mean: Option<Tensor>,
        running_var: Option<Tensor>,
        p: BatchNormParams,
    ) -> Result<Tensor> {
        self.batch_norm_with([Some(x), weight, bias, running_mean, running_var], p, false)
    }

    /// [`Graph::batch_norm`] in place, for fixed statistics: the output takes over
    /// `x`'s memory and `x`'s handle is consumed (later use is refused). Refused, with
    /// `x` left intact, in training mode, when the weight's gradient is wanted without
    /// [`Graph::set_compact_saves`] (it reads `x`), or when something recorded still
    /// needs `x` or a view of it is alive.
    pub fn batch_norm_(
        &mut self,
        x: Tensor,
        weight: Option<Tensor>,
        bias: Option<Tensor>,
        running_mean: Option<Tensor>,
        running_var: Option<Tensor>,
        p: BatchNormParams,
    ) -> Result<Tensor> {
        self.batch_norm_with([Some(x), weight, bias, running_mean, running_var], p, true)
    }

    fn batch_norm_with(
        &mut self,
        t: [Option<Tensor>; 5],
        p: BatchNormParams,
        in_place: bool,
    ) -> Result<Tensor> {
        let [x, weight, bias, running_mean, running_var] = t;
        let xi = self.id(x.ok_or(Error::InvalidParam {
            op: OP,
            what: "missing input tensor; input number",
            value: 0,
        })?)?;
        let [wi, bi, mi, vi] = [weight, bias, running_mean, running_var].map(|t| t.map(|t| self.id(t)));
        let (wi, bi, mi, vi) = (wi.transpose()?, bi.transpose()?, mi.transpose()?, vi.transpose()?);
        let xs = self.nodes[xi].shape();
        let g = norm_geom(OP, xs)?;
        for (i, what) in [
            (wi, "weight has {found} values, the input has {expected} channels"),
            (bi, "bias has {found} values, the input has {expected} channels"),
            (
                mi,
                "running_mean has {found} values, the input has {expected} channels",
            ),
            (
                vi,
                "running_var has {found} values, the input has {expected} channels",
            ),
        ] {
            if let Some(i) = i {
                per_channel(OP, what, self.nodes[i].shape(), g.c)?;
            }
        }
        non_negative_real(OP, "eps must be finite and at least 0", p.eps)?;
        if !p.momentum.is_finite() {
            return Err(Error::float(OP, "momentum must be finite", p.momentum));
        }
        let running = match (mi, vi) {
            (Some(m), Some(v)) => Some((self.nodes[m].data, self.nodes[v].data)),
            (None, None) => None,
            _ => {
                return Err(Error::InvalidParam {
                    op: OP,
                    what: "running_mean and running_var go together; given only one, number",
                    value: mi.map_or(1, |_| 0),
                })
            }
        };
        if p.training && g.per_channel() < 2 {
            return Err(Error::ShapeMismatch {
                op: OP,
                what: "training needs more than one value per channel: expected at least {expected}, found {found}",
                expected: 2,
                found: g.per_channel(),
            });
        }
        if !p.training && running.is_none() {
            return Err(Error::InvalidParam {
                op: OP,
                what: "eval mode needs running_mean and running_var; given tensors",
                value: 0,
            });
        }
        if let (true, Some((m, v))) = (p.training, running) {
            if self.arena.is_external(m) || self.arena.is_external(v) {
                return Err(Error::InvalidParam {
                    op: OP,
                    what: "training updates the running statistics, which are read-only (external); buffer",
                    value: mi.unwrap_or(0) as i64,
                });
            }
        }
        let rg = self.needs_grad(&[Some(xi), wi, bi]);
        let weight_trains = wi.is_some_and(|w| self.nodes[w].requires_grad());
        // Fixed statistics and a frozen weight: backward needs only the scale.
        let folded = !p.training && !weight_trains;
        // Fixed statistics, a trained weight, and 16-bit saves allowed: the normalised
        // input is kept after the statistics, and the input itself is not read again.
        let compact = !p.training && weight_trains && self.compact_saves;
        let stats_len = g.c.checked_mul(2).ok_or(Error::Overflow { op: OP })?;
        let saved_len = match (p.training || weight_trains, rg) {
            (true, _) if compact => stats_len
                .checked_add(half::half_words(xs.numel()))
                .ok_or(Error::Overflow { op: OP })?,
            (true, _) => stats_len,
            (false, true) => g.c,
            (false, false) => 0,
        };
        let mut params = NO_PARAMS;
        params[0] = p.training as u16;
        params[1] = folded as u16;
        params[2] = compact as u16;
        let op = match rg {
            true if p.training => Op::new(&BATCH_NORM, [Some(xi), wi, bi], params),
            true if compact => Op::new(&BATCH_NORM_COMPACT, [Some(xi), wi, bi], params),
            true => Op::new(&BATCH_NORM_FIXED, [Some(xi), wi, bi], params),
            false => Op::LEAF,
        };
        let out = match in_place {
            // Without a record (no gradient wanted) nothing reads the input again.
            true => self.batch_norm_take_over(xi, rg && weight_trains && !compact, p, op, rg, saved_len)?,
            false => self.push(xs, op, Some(Self::batch_norm_rule), rg, saved_len)?,
        };
        let node = self.nodes[out.id as usize];
        let (saved, xd) = (node.saved, self.nodes[xi].data);
        let eps = S::from_f32(p.eps);
        let c = g.c;
        match (p.training, running) {
            (true, run) => {
                let mom = S::from_f32(p.momentum);
                self.count(touched(&[xd], saved));
                match (self.arena.is_meta(), run) {
                    (true, _) => {}
                    (false, Some((_, rv))) => {
                        let ([xv], st, rv) = self.arena.views2([xd], saved, rv)?;
                        S::Kernels::channel_stats(g, xv, st, rv, mom);
                    }
                    (false, None) => {
                        let ([xv], st) = self.arena.views([xd], saved)?;
                        S::Kernels::channel_stats(g, xv, st, &mut [], mom);
                    }
                }
                if let Some((m, _)) = run {
                    self.exec([saved], m, |[s], m| k::momentum_update(m, &s[..c], mom))?;
                }
                self.exec([], saved, |[], s| {
                    s[c..].iter_mut().for_each(|v| *v = k::inv_std(*v, eps))
                })?;
            }
            (false, run) => {
                let (m, v) = run.unwrap_or_default();
                let w = wi.map_or(Span::EMPTY, |i| self.nodes[i].data);
                if folded {
                    self.exec([v, w], saved, |[v, w], s| k::fixed_scales(v, w, eps, s))?;
                    let b = bi.map_or(Span::EMPTY, |i| self.nodes[i].data);
                    match in_place {
                        true => self.exec([m, v, w, b], node.data, |[m, v, w, b], y| {
                            k::normalize_fixed(g, None, m, v, eps, w, b, y)
                        })?,
                        false => self.exec([xd, m, v, w, b], node.data, |[x, m, v, w, b], y| {
                            k::normalize_fixed(g, Some(x), m, v, eps, w, b, y)
                        })?,
                    }
                    return Ok(out);
                }
                self.exec([m, v], saved, |[m, v], s| {
                    s[..c].copy_from_slice(m);
                    for (r, &v) in s[c..2 * c].iter_mut().zip(v) {
                        *r = k::inv_std(v, eps);
                    }
                })?;
                if compact {
                    self.exec([xd], saved, |[x], s| {
                        let (stats, packed) = s.split_at_mut(2 * c);
                        half::pack_normalized(g, x, stats, packed)
                    })?;
                }
            }
        }
        let span = |i: Option<usize>| i.map_or(Span::EMPTY, |i| self.nodes[i].data);
        let (w, b) = (span(wi), span(bi));
        match in_place {
            true => self.exec([saved, w, b], node.data, |[s, w, b], y| {
                k::normalize_in_place(g, s, c, w, b, y)
            })?,
            false => self.exec([xd, saved, w, b], node.data, |[x, s, w, b], y| {
                k::normalize(g, x, s, c, |_, ch| ch, w, b, y)
            })?,
        }
        Ok(out)
    }

    /// The record of an in-place batch_norm: its output is `x`'s span, `x` is
    /// consumed; refused (nothing changed) when [`Graph::batch_norm_`] says so
    /// (`reads_input`: the weight's gradient would read `x`).
    fn batch_norm_take_over(
        &mut self,
        xi: usize,
        reads_input: bool,
        p: BatchNormParams,
        op: Op,
        rg: bool,
        saved_len: usize,
    ) -> Result<Tensor> {
        if p.training || reads_input || xi < self.num_params() || !self.can_overwrite(xi) {
            return Err(Error::InvalidState {
                what: "batch_norm_: needs fixed statistics, a frozen weight (or compact saves), and an input nothing else needs (use batch_norm)",
            });
        }
        let (out, _) = self.take_over("batch_norm_", xi, op, Some(Self::batch_norm_rule), rg, saved_len)?;
        Ok(out)
    }

    fn batch_norm_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        let p = BatchNormParams::from_attrs(a)?;
        g.batch_norm(need(OP, t, 0)?, opt(t, 1), opt(t, 2), opt(t, 3), opt(t, 4), p)
    }

    /// The in-place form by name ([`Graph::batch_norm_`]): only with fixed statistics
    /// and a frozen scale (or compact saves, or no gradients wanted), `None` otherwise.
    fn batch_norm_in_place(
        g: &mut Graph<'_, S, N>,
        t: &[Option<Tensor>],
        a: &dyn Attrs,
    ) -> Option<Result<Tensor>> {
        let p = match BatchNormParams::from_attrs(a) {
            Ok(p) => p,
            Err(e) => return Some(Err(e)),
        };
        if !g.batch_norm_in_place_applies(opt(t, 1), p) {
            return None;
        }
        Some(g.batch_norm_(opt(t, 0)?, opt(t, 1), opt(t, 2), opt(t, 3), opt(t, 4), p))
    }

    /// Whether [`Graph::batch_norm_`] takes a layer with this `weight` in this mode:
    /// fixed statistics, and no gradient wanted for the weight (it would read the
    /// input) or compact saves. The input must also be free to overwrite.
    pub(crate) fn batch_norm_in_place_applies(&self, weight: Option<Tensor>, p: BatchNormParams) -> bool {
        let weight_trains =
            self.grad_enabled() && weight.is_some_and(|w| self.requires_grad(w).unwrap_or(true));
        !p.training && (!weight_trains || self.compact_saves)
    }

    /// batch_norm by name (`training`, `momentum`, `eps`); gradients for input, weight
    /// and bias.
    pub(crate) const BATCH_NORM_SPEC: OpSpec<S, N> = OpSpec {
        name: OP,
        inputs: &["input", "weight", "bias", "running_mean", "running_var"],
        params: &["training", "momentum", "eps"],
        call: Self::batch_norm_call,
        in_place: Some(Self::batch_norm_in_place),
    };
}
