//! Optimizers with PyTorch's update rules; their state lives in the arena's
//! long-lived region, created once after the parameters.
//!
//! Both walk the graph's parameters in creation order; the state holds one slot per
//! parameter element in that order. They do not clear gradients: call
//! [`Graph::zero_grad`] before the next accumulation, as with `optimizer.zero_grad()`.
//!
//! A step writes nothing unless every gradient and every value it would write is
//! finite ([`Error::NonFinite`] names the parameter otherwise), and reports Q16
//! saturation in its [`StepReport`].

use crate::arena::Span;
use crate::error::{Error, Result};
use crate::graph::{first_non_finite, Graph};
use crate::scalar::Scalar;

mod adam;
pub use adam::Adam;

/// What backward calls with a parameter whose gradient on this tape is final.
pub(crate) type HookFn<S, const N: usize> = for<'g> fn(&mut Graph<'g, S, N>, usize) -> Result<()>;

/// An optimizer that updates parameters during backward instead of after it: the walk
/// calls `finished` with each parameter once its gradient is complete, and rules
/// whose parameter gradients are linear in the output gradient (conv2d, linear) may
/// add `-lr * grad` straight into the parameters ([`ParamHook::direct`]). With a hook,
/// parameters have no gradient buffer. Set by [`Graph::set_fused_sgd`].
#[derive(Clone, Copy)]
pub(crate) struct ParamHook<S: Scalar, const N: usize> {
    /// Plain SGD's learning rate.
    pub lr: f32,
    /// Applies and releases a finished parameter gradient.
    pub finished: HookFn<S, N>,
    /// Runs a conv2d/linear rule with its parameters updated directly
    /// ([`Graph::with_direct_params`]); a function pointer, so that only programs that
    /// set such a hook link that code.
    pub direct_update: Option<DirectFn<S, N>>,
}

/// A rule runner that may update the record's parameters directly (see
/// [`ParamHook::direct_update`]).
pub(crate) type DirectFn<S, const N: usize> =
    for<'g> fn(&mut Graph<'g, S, N>, usize, crate::graph::BackwardFn<S, N>) -> Result<()>;

impl<S: Scalar, const N: usize> ParamHook<S, N> {
    /// The learning rate with which a rule may update a parameter directly, if it may.
    pub fn direct(&self) -> Option<f32> {
        Some(self.lr).filter(|&lr| lr != 0.0 && lr.is_finite())
    }
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Fused SGD mode: from now on parameters get no gradient buffer, and every
    /// backward applies `p -= lr * grad` itself, each parameter as soon as its gradient
    /// is complete (plain SGD: no momentum, no weight decay). It saves the memory of
    /// all parameter gradients; gradients cannot be read or accumulated across
    /// backward calls. Must first be called before any parameter is created; called
    /// again later, it only changes the learning rate (a schedule).
    ///
    /// No value that is not finite is ever written into a parameter: a learning rate
    /// that is not finite is refused here, and backward refuses ([`Error::NonFinite`])
    /// a loss or seed that is not finite before it changes anything, and each
    /// parameter's update before it is written (for conv2d and linear, whose update
    /// goes straight into the parameters, when the bound `|lr| * max|output grad| *
    /// max(|input|, |parameter|, 1) * terms + max|parameter|` reaches `f32::MAX / 2`;
    /// terms are the products summed per element). Parameters are updated one at a
    /// time during the walk, so a refusal of a later parameter leaves the ones updated
    /// before it in that backward with their new, finite values; the first parameter
    /// the walk reaches (in a network ending in conv2d or linear, that layer's) is
    /// refused with nothing written.
    pub fn set_fused_sgd(&mut self, lr: f32) -> Result<()> {
        if !lr.is_finite() {
            return Err(Error::NonFinite {
                op: "set_fused_sgd",
                what: "learning rate is not finite",
                param: None,
                index: 0,
            });
        }
        let created = self.num_params() > 0;
        if let (Some(h), true) = (self.param_hook.as_mut(), created) {
            h.lr = lr;
            return Ok(());
        }
        if created {
            return Err(Error::InvalidState {
                what: "set_fused_sgd must be called before parameters are created",
            });
        }
        self.param_hook = Some(ParamHook {
            lr,
            finished: Self::apply_sgd,
            direct_update: Some(Self::direct_update),
        });
        Ok(())
    }

    /// Fused SGD's hook: `p -= lr * g` for parameter `j` (if it has a gradient), then
    /// frees `g`. Refused, with `p` unchanged, if a gradient or new value is not finite.
    fn apply_sgd(g: &mut Graph<'_, S, N>, j: usize) -> Result<()> {
        let (Some(gs), Some(h)) = (g.nodes[j].grad(), g.param_hook) else {
            return Ok(());
        };
        let lr = S::from_f32(h.lr);
        if S::NON_FINITE && !g.is_meta() {
            let (ps, grs) = (g.arena.get(g.nodes[j].data), g.arena.get(gs));
            let bad = |what, index| Error::NonFinite {
                op: "fused SGD",
                what,
                param: Some(j),
                index,
            };
            let ok = |(&p, &gr): (&S, &S)| (p - lr * gr).is_finite();
            // One branch-free pass (a non-finite gradient makes the update non-finite);
            // where and why are searched only when it fails.
            let sum = |a: S, (&p, &gr): (&S, &S)| a + zero_if_finite(p - lr * gr);
            if !ps.iter().zip(grs).fold(S::ZERO, sum).is_finite() {
                if let Some(e) = first_non_finite(grs) {
                    return Err(bad("gradient is not finite", e));
                }
                let e = ps.iter().zip(grs).position(|pg| !ok(pg)).unwrap_or(0);
                return Err(bad("update is not finite", e));
            }
        }
        g.exec([gs], g.nodes[j].data, |[gr], p| {
            for (p, &gr) in p.iter_mut().zip(gr) {
                *p = *p - lr * gr;
            }
        })?;
        g.nodes[j].set_grad(None);
        g.reclaim(gs);
        Ok(())
    }
}

/// What a successful optimizer step reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepReport {
    /// Whether fixed-point arithmetic saturated (clamped to its range) since the
    /// previous step: in this step's forward, backward or update. The step reads and
    /// clears the flag ([`crate::fixed::take_saturated`]); always `false` for `f32`.
    pub saturated: bool,
}

impl StepReport {
    fn taken() -> Self {
        StepReport {
            saturated: crate::fixed::take_saturated(),
        }
    }
}

/// `x - x`: exactly 0 for a finite `x`, NaN for NaN and infinities; summed over a
/// slice, a finiteness test with no branch and two FPU operations per value.
#[inline(always)]
#[allow(clippy::eq_op)] // x - x is the point: it is not 0 for NaN and infinities
fn zero_if_finite<S: Scalar>(x: S) -> S {
    x - x
}

/// The refusal of an optimizer step: `what` of parameter `j` at element `index`.
fn non_finite(op: &'static str, what: &'static str, j: usize, index: usize) -> Error {
    Error::NonFinite {
        op,
        what,
        param: Some(j),
        index,
    }
}

fn param_elems<S: Scalar, const N: usize>(g: &Graph<'_, S, N>) -> usize {
    g.param_spans().map(|(_, d, _)| d.len).sum()
}

/// Refuses `v` unless `ok` (a hyperparameter out of its domain, NaN included).
pub(crate) fn hyper(op: &'static str, what: &'static str, v: f32, ok: bool) -> Result<()> {
    match ok && !v.is_nan() {
        true => Ok(()),
        false => Err(Error::float(op, what, v)),
    }
}

/// A learning rate and a weight decay must be finite and at least 0, as PyTorch's
/// optimizers require (and NaN is refused too).
pub(crate) fn check_lr_decay(op: &'static str, lr: f32, weight_decay: f32) -> Result<()> {
    hyper(
        op,
        "learning rate must be finite and at least 0",
        lr,
        lr.is_finite() && lr >= 0.0,
    )?;
    let wd = weight_decay;
    hyper(
        op,
        "weight decay must be finite and at least 0",
        wd,
        wd.is_finite() && wd >= 0.0,
    )
}

/// SGD's hyperparameters: [`check_lr_decay`], and a momentum in `[0, 1)`.
fn check_sgd(op: &'static str, lr: f32, momentum: f32, weight_decay: f32) -> Result<()> {
    check_lr_decay(op, lr, weight_decay)?;
    let m = momentum;
    hyper(op, "momentum must be in [0, 1)", m, (0.0..1.0).contains(&m))
}

/// Counts an update's work ([`Graph::macs`]): the elements of every parameter that has
/// a gradient buffer (fused SGD counts its updates during backward), in a meta graph too.
fn count_update<S: Scalar, const N: usize>(g: &mut Graph<'_, S, N>) {
    let n = g
        .param_spans()
        .filter(|(_, d, gr)| gr.len == d.len)
        .fold(0u64, |acc, (_, d, _)| acc.saturating_add(d.len as u64));
    g.count(n);
}

fn check_state(op: &'static str, expected: usize, found: usize) -> Result<()> {
    if expected == found {
        Ok(())
    } else {
        Err(Error::ShapeMismatch {
            op,
            what: "the parameters have {found} elements, the optimizer was made for {expected} (parameters added after it?)",
            expected,
            found,
        })
    }
}

/// Stochastic gradient descent with momentum and weight decay (`torch.optim.SGD`, no
/// dampening, no Nesterov).
#[derive(Clone, Copy, Debug)]
pub struct Sgd {
    /// Learning rate.
    pub lr: f32,
    /// Momentum factor (0 keeps no state).
    pub momentum: f32,
    /// L2 penalty added to the gradient.
    pub weight_decay: f32,
    velocity: Option<Span>,
    elems: usize,
    /// Seed of the stochastic rounding of fixed-point types ([`Scalar::DITHER`]).
    dither: u64,
    /// `1 / loss scale`: gradients are multiplied by it before the update.
    inv_grad_scale: f32,
}

/// The fixed seed of [`Sgd`]'s stochastic rounding: runs are reproducible.
const DITHER_SEED: u64 = 0x5EED_D17E;

impl Sgd {
    /// Creates the optimizer for every parameter of `g` (allocating the momentum
    /// buffers when `momentum != 0`).
    pub fn new<S: Scalar, const N: usize>(
        g: &mut Graph<'_, S, N>,
        lr: f32,
        momentum: f32,
        weight_decay: f32,
    ) -> Result<Self> {
        check_sgd("Sgd::new", lr, momentum, weight_decay)?;
        let elems = param_elems(g);
        let velocity = if momentum != 0.0 {
            Some(g.alloc_state("sgd", elems)?)
        } else {
            None
        };
        Ok(Sgd {
            lr,
            momentum,
            weight_decay,
            velocity,
            elems,
            dither: DITHER_SEED,
            inv_grad_scale: 1.0,
        })
    }

    /// Loss scaling: the caller seeded `backward` with `scale` instead of 1 (so small
    /// activation gradients keep their bits in fixed point), and the optimizer divides
    /// the gradients by `scale` again before the update (rounded stochastically for
    /// fixed-point types, so the division loses nothing in expectation). Use a power
    /// of two, so that `1 / scale` is exact in fixed point.
    pub fn with_grad_scale(mut self, scale: f32) -> Self {
        self.inv_grad_scale = 1.0 / scale;
        self
    }

    /// `p -= lr * v`, `v = momentum * v + (grad + weight_decay * p)`.
    ///
    /// Refused with [`Error::NonFinite`] (naming the parameter and element) when a
    /// gradient, momentum value or new parameter value would not be finite; nothing is
    /// written then, parameters and momentum stay bit for bit as they were.
    pub fn step<S: Scalar, const N: usize>(&mut self, g: &mut Graph<'_, S, N>) -> Result<StepReport> {
        check_state("Sgd::step", self.elems, param_elems(g))?;
        check_sgd("Sgd::step", self.lr, self.momentum, self.weight_decay)?;
        count_update(g);
        if g.is_meta() {
            return Ok(StepReport::default());
        }
        let (lr, mom, wd) = (
            S::from_f32(self.lr),
            S::from_f32(self.momentum),
            S::from_f32(self.weight_decay),
        );
        let decay = self.weight_decay != 0.0;
        let unscale = self.inv_grad_scale != 1.0;
        let inv_scale = S::from_f32(self.inv_grad_scale);
        let params = g.param_span_list();
        let buf = g.arena_mut().whole_mut();
        if S::NON_FINITE {
            self.check(buf, &params)?;
        }
        // Fixed point rounds the momentum decay and the update stochastically (see
        // `Scalar::mul_dithered`); f32 draws nothing.
        let mut rng = crate::init::Rng::new(self.dither);
        self.dither = rng.next_u64();
        let mut k = self.velocity.map_or(0, |v| v.off);
        for (_, d, gr) in params {
            if gr.len != d.len {
                continue; // fused SGD mode: no gradient buffer
            }
            // Without random bits (f32) and gradient scaling, the same arithmetic on three
            // disjoint slices: no bounds check per element, and the loop vectorises.
            if !S::DITHER && !unscale {
                let vel = self.velocity.map(|_| k);
                if let Some((ps, gs, vs)) = disjoint(buf, d.off, gr.off, vel, d.len) {
                    let decayed = |p: S, gv: S| if decay { gv + wd * p } else { gv };
                    match vs {
                        Some(vs) => {
                            for ((p, &gv), v) in ps.iter_mut().zip(gs).zip(vs.iter_mut()) {
                                *v = mom * *v + decayed(*p, gv);
                                *p = *p - lr * *v;
                            }
                        }
                        None => {
                            for (p, &gv) in ps.iter_mut().zip(gs) {
                                *p = *p - lr * decayed(*p, gv);
                            }
                        }
                    }
                    k += if vel.is_some() { d.len } else { 0 };
                    continue;
                }
            }
            for j in 0..d.len {
                let p = buf[d.off + j];
                let r = if S::DITHER { rng.next_u64() } else { 0 };
                let mut dp = buf[gr.off + j];
                if unscale {
                    dp = dp.mul_dithered(inv_scale, (r >> 16) as u32);
                }
                if decay {
                    dp += wd * p;
                }
                if self.velocity.is_some() {
                    let v = mom.mul_dithered(buf[k], r as u32) + dp;
                    buf[k] = v;
                    dp = v;
                    k += 1;
                }
                buf[d.off + j] = p - lr.mul_dithered(dp, (r >> 32) as u32);
            }
        }
        Ok(StepReport::taken())
    }

    /// Whether every new parameter value of the step is finite (a non-finite gradient
    /// or momentum value makes it not so): one branch-free pass over each parameter's
    /// slices summing `x - x` (0 for a finite `x`, NaN otherwise), the common case,
    /// before [`Sgd::check`] searches where.
    fn all_finite<S: Scalar>(&self, buf: &[S], params: &[(usize, Span, Span)]) -> bool {
        let (lr, mom, wd) = (
            S::from_f32(self.lr),
            S::from_f32(self.momentum),
            S::from_f32(self.weight_decay),
        );
        let (unscale, decay) = (self.inv_grad_scale != 1.0, self.weight_decay != 0.0);
        let inv_scale = S::from_f32(self.inv_grad_scale);
        let pre = |p: S, gv: S| {
            let dp = if unscale { gv * inv_scale } else { gv };
            if decay {
                dp + wd * p
            } else {
                dp
            }
        };
        let mut k = self.velocity.map_or(0, |v| v.off);
        let mut all = true;
        for &(_, d, gr) in params {
            if gr.len != d.len {
                continue;
            }
            let (Some(ps), Some(gs)) = (buf.get(d.off..d.off + d.len), buf.get(gr.off..gr.off + d.len))
            else {
                return false;
            };
            all &= match self.velocity {
                Some(_) => {
                    let Some(vs) = buf.get(k..k + d.len) else {
                        return false;
                    };
                    k += d.len;
                    let z = ps.iter().zip(gs).zip(vs);
                    z.fold(S::ZERO, |a, ((&p, &gv), &v)| {
                        a + zero_if_finite(p - lr * (mom * v + pre(p, gv)))
                    })
                }
                None => ps
                    .iter()
                    .zip(gs)
                    .fold(S::ZERO, |a, (&p, &gv)| a + zero_if_finite(p - lr * pre(p, gv))),
            }
            .is_finite();
        }
        all
    }

    /// Err if the step would write a value that is not finite. The same arithmetic as
    /// the update (for types with such values, which do not dither), without writing.
    fn check<S: Scalar>(&self, buf: &[S], params: &[(usize, Span, Span)]) -> Result<()> {
        if self.all_finite(buf, params) {
            return Ok(());
        }
        let (lr, mom, wd) = (
            S::from_f32(self.lr),
            S::from_f32(self.momentum),
            S::from_f32(self.weight_decay),
        );
        let inv_scale = S::from_f32(self.inv_grad_scale);
        let mut k = self.velocity.map_or(0, |v| v.off);
        for &(j, d, gr) in params {
            if gr.len != d.len {
                continue;
            }
            if let Some(e) = first_non_finite(&buf[gr.off..gr.off + gr.len]) {
                return Err(non_finite("Sgd::step", "gradient is not finite", j, e));
            }
            for e in 0..d.len {
                let p = buf[d.off + e];
                let mut dp = buf[gr.off + e];
                if self.inv_grad_scale != 1.0 {
                    dp = dp * inv_scale;
                }
                if self.weight_decay != 0.0 {
                    dp += wd * p;
                }
                if self.velocity.is_some() {
                    dp = mom * buf[k] + dp;
                    k += 1;
                }
                if !(dp.is_finite() && (p - lr * dp).is_finite()) {
                    return Err(non_finite("Sgd::step", "update is not finite", j, e));
                }
            }
        }
        Ok(())
    }
}

/// The parameter, gradient and (optional) velocity slices `[off, off + len)` of `buf`,
/// or `None` if any two overlap or one runs past the end.
#[allow(clippy::type_complexity)]
fn disjoint<S>(
    buf: &mut [S],
    p: usize,
    g: usize,
    v: Option<usize>,
    len: usize,
) -> Option<(&mut [S], &[S], Option<&mut [S]>)> {
    let mut order = [(p, 0usize), (g, 1), (v.unwrap_or(usize::MAX), 2)];
    order.sort_unstable();
    let mut slots: [Option<&mut [S]>; 3] = [None, None, None];
    let (mut rest, mut at) = (buf, 0usize);
    for (off, id) in order {
        if off == usize::MAX {
            break;
        }
        let skip = off.checked_sub(at)?;
        if rest.len() < skip.checked_add(len)? {
            return None;
        }
        let (_, r) = rest.split_at_mut(skip);
        let (piece, r) = r.split_at_mut(len);
        slots[id] = Some(piece);
        rest = r;
        at = off + len;
    }
    let [ps, gs, vs] = slots;
    Some((ps?, gs?, vs))
}
