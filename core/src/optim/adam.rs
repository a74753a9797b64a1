//! Adam, with an `eps` every scalar type can represent and loss scaling.

#[cfg(doc)]
use super::Sgd;
use super::{check_lr_decay, check_state, count_update, hyper, non_finite, param_elems, StepReport};
use crate::arena::Span;
use crate::error::{Error, Result};
use crate::graph::{first_non_finite, Graph};
use crate::scalar::Scalar;

/// Adam (`torch.optim.Adam`, L2 weight decay, no AMSGrad).
#[derive(Clone, Copy, Debug)]
pub struct Adam {
    /// Learning rate.
    pub lr: f32,
    /// Decay rates of the first and second moments.
    pub betas: (f32, f32),
    /// Added to the denominator (PyTorch's 1e-8 by default). A step uses at least the
    /// scalar type's [`Scalar::RESOLUTION`] (`2^-16` in Q16.16, where 1e-8 would round
    /// to 0 and an update divide by zero).
    pub eps: f32,
    /// L2 penalty added to the gradient.
    pub weight_decay: f32,
    state: Span,
    elems: usize,
    t: u32,
    /// The loss scale the gradients carry (see [`Adam::with_grad_scale`]).
    grad_scale: f32,
}

impl Adam {
    /// Creates the optimizer and its two moment buffers.
    pub fn new<S: Scalar, const N: usize>(g: &mut Graph<'_, S, N>, lr: f32) -> Result<Self> {
        check_lr_decay("Adam::new", lr, 0.0)?;
        let elems = param_elems(g);
        let both = elems.checked_mul(2).ok_or(Error::Overflow { op: "Adam::new" })?;
        Ok(Adam {
            lr,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            state: g.alloc_state("adam", both)?,
            elems,
            t: 0,
            grad_scale: 1.0,
        })
    }

    /// Refuses hyperparameters out of their domain (as `torch.optim.Adam`, NaN too):
    /// a learning rate or weight decay below 0, betas outside `[0, 1)`, an `eps` that
    /// is not positive; the fields are public, so every step checks them.
    fn check(&self, op: &'static str) -> Result<()> {
        check_lr_decay(op, self.lr, self.weight_decay)?;
        let (b1, b2) = self.betas;
        hyper(op, "beta 1 must be in [0, 1)", b1, (0.0..1.0).contains(&b1))?;
        hyper(op, "beta 2 must be in [0, 1)", b2, (0.0..1.0).contains(&b2))?;
        let e = self.eps;
        hyper(op, "eps must be finite and above 0", e, e.is_finite() && e > 0.0)
    }

    /// Loss scaling, as [`Sgd::with_grad_scale`]: the caller seeded `backward` with
    /// `scale` instead of 1. Adam's update `m / (sqrt(v) + eps)` does not change when
    /// the gradients are scaled if `eps` is scaled too, so the gradients are used as
    /// they are and `eps` (and the weight decay) are multiplied by `scale`: the moments
    /// keep the scaled gradients' bits in fixed point. Set it before the first step
    /// and keep it (the moments hold scaled values).
    pub fn with_grad_scale(mut self, scale: f32) -> Self {
        self.grad_scale = scale;
        self
    }

    /// One Adam update with bias correction. Refused with [`Error::NonFinite`]
    /// (naming the parameter and element) when a gradient, moment or new parameter
    /// value would not be finite; nothing is written then (parameters, moments and the
    /// step count stay as they were).
    pub fn step<S: Scalar, const N: usize>(&mut self, g: &mut Graph<'_, S, N>) -> Result<StepReport> {
        check_state("Adam::step", self.elems, param_elems(g))?;
        self.check("Adam::step")?;
        count_update(g);
        if g.is_meta() {
            return Ok(StepReport::default());
        }
        let t = self.t.saturating_add(1);
        let (b1, b2) = self.betas;
        let c1 = 1.0 - libm::powf(b1, t as f32);
        let c2 = 1.0 - libm::powf(b2, t as f32);
        let eps = self.eps.max(S::RESOLUTION) * self.grad_scale;
        let k = AdamConsts {
            step: S::from_f32(self.lr / c1),
            inv_c2: S::from_f32(1.0 / c2),
            b: (S::from_f32(b1), S::from_f32(b2)),
            ob: (S::from_f32(1.0 - b1), S::from_f32(1.0 - b2)),
            eps: S::from_f32(eps),
            wd: S::from_f32(self.weight_decay * self.grad_scale),
            decay: self.weight_decay != 0.0,
        };
        let params = g.param_span_list();
        let buf = g.arena_mut().whole_mut();
        let (m0, v0) = (self.state.off, self.state.off + self.elems);
        if S::NON_FINITE {
            let (mut m, mut v) = (m0, v0);
            for &(j, d, gr) in &params {
                if gr.len != d.len {
                    (m, v) = (m + d.len, v + d.len);
                    continue; // fused SGD mode: no gradient buffer
                }
                if let Some(e) = first_non_finite(&buf[gr.off..gr.off + gr.len]) {
                    return Err(non_finite("Adam::step", "gradient is not finite", j, e));
                }
                for e in 0..d.len {
                    let (mv, vv, p) = k.update(buf[d.off + e], buf[gr.off + e], buf[m], buf[v]);
                    if !(mv.is_finite() && vv.is_finite() && p.is_finite()) {
                        return Err(non_finite("Adam::step", "update is not finite", j, e));
                    }
                    m += 1;
                    v += 1;
                }
            }
        }
        self.t = t;
        let (mut m, mut v) = (m0, v0);
        for (_, d, gr) in params {
            if gr.len != d.len {
                (m, v) = (m + d.len, v + d.len);
                continue;
            }
            for e in 0..d.len {
                let (mv, vv, p) = k.update(buf[d.off + e], buf[gr.off + e], buf[m], buf[v]);
                buf[m] = mv;
                buf[v] = vv;
                buf[d.off + e] = p;
                m += 1;
                v += 1;
            }
        }
        Ok(StepReport::taken())
    }
}

/// The constants of one Adam step, in the scalar type.
struct AdamConsts<S> {
    step: S,
    inv_c2: S,
    b: (S, S),
    ob: (S, S),
    eps: S,
    wd: S,
    decay: bool,
}

impl<S: Scalar> AdamConsts<S> {
    /// The new first and second moments and parameter value of one element.
    #[inline(always)]
    fn update(&self, p: S, mut gv: S, m: S, v: S) -> (S, S, S) {
        if self.decay {
            gv += self.wd * p;
        }
        let mv = self.b.0 * m + self.ob.0 * gv;
        let vv = self.b.1 * v + self.ob.1 * gv * gv;
        (
            mv,
            vv,
            p - self.step * mv.div((vv * self.inv_c2).sqrt() + self.eps),
        )
    }
}
