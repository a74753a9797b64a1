//! Learning-rate schedules, as `torch.optim.lr_scheduler` computes them.
//!
//! A [`Schedule`] maps a step count `t` (epochs or optimizer steps, whichever the
//! training loop counts) to a learning rate; the loop writes it into the optimizer
//! (`sgd.lr = schedule.lr_at(t)`). It holds no state, so resuming at any `t` gives the
//! same rate, and it is checked once, when built: every rate it can return is finite
//! and non-negative.
//!
//! - [`Decay::Constant`] gives `base`.
//! - [`Decay::Step`] gives `base * gamma^(t / every)` (`StepLR`).
//! - [`Decay::Cosine`] gives `min + (base - min) * (1 + cos(pi * t / total)) / 2`, and `min`
//!   from `total` on (`CosineAnnealingLR` with `T_max = total`, `eta_min = min`).
//! - A linear warm-up over the first `warmup` counts multiplies the decayed rate by
//!   `(t + 1) / (warmup + 1)`, then by 1 (`LinearLR` with `start_factor = 1 / (warmup +
//!   1)`, chained before the decay as `SequentialLR` does, with the decay counted from 0
//!   at the start of training).

use crate::error::{Error, Result};

/// How the rate falls after the warm-up.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Decay {
    /// The base rate throughout.
    Constant,
    /// The rate times `gamma` every `every` counts.
    Step {
        /// Counts between two decays (at least 1).
        every: usize,
        /// The factor applied each time (`0 < gamma <= 1`).
        gamma: f32,
    },
    /// A half cosine from the base rate down to `min` over `total` counts.
    Cosine {
        /// Counts the decay takes (at least 1).
        total: usize,
        /// The rate it ends at (`0 <= min <= base`).
        min: f32,
    },
}

/// A learning rate as a function of the step or epoch count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Schedule {
    base: f32,
    warmup: usize,
    decay: Decay,
}

const OP: &str = "schedule";

impl Schedule {
    /// A schedule starting from `base`, with no warm-up. Refused: a base that is not a
    /// positive finite number, a step or cosine length of 0, a `gamma` outside `(0, 1]`,
    /// a cosine `min` outside `[0, base]`.
    pub fn new(base: f32, decay: Decay) -> Result<Self> {
        let bad = |what, value| Err(Error::InvalidParam { op: OP, what, value });
        if !(base.is_finite() && base > 0.0) {
            return bad("base learning rate must be positive and finite", base as i64);
        }
        match decay {
            Decay::Constant => {}
            Decay::Step { every, gamma } => {
                if every == 0 {
                    return bad("step decay: `every` must be at least 1", 0);
                }
                if !(gamma > 0.0 && gamma <= 1.0) {
                    return bad("step decay: gamma must be in (0, 1]", gamma as i64);
                }
            }
            Decay::Cosine { total, min } => {
                if total == 0 {
                    return bad("cosine decay: `total` must be at least 1", 0);
                }
                if !(min >= 0.0 && min <= base) {
                    return bad("cosine decay: min must be in [0, base]", min as i64);
                }
            }
        }
        Ok(Schedule {
            base,
            warmup: 0,
            decay,
        })
    }

    /// The same schedule after a linear warm-up over the first `counts` counts.
    pub fn with_warmup(mut self, counts: usize) -> Self {
        self.warmup = counts;
        self
    }

    /// The rate at count `t` (0-based: the first epoch or step is `t = 0`).
    pub fn lr_at(&self, t: usize) -> f32 {
        let decayed = match self.decay {
            Decay::Constant => self.base as f64,
            Decay::Step { every, gamma } => {
                let k = (t / every).min(i32::MAX as usize) as i32;
                self.base as f64 * libm::pow(gamma as f64, k as f64)
            }
            Decay::Cosine { total, min } => {
                let frac = t.min(total) as f64 / total as f64;
                let (b, m) = (self.base as f64, min as f64);
                m + (b - m) * 0.5 * (1.0 + libm::cos(core::f64::consts::PI * frac))
            }
        };
        let warm = if t < self.warmup {
            (t + 1) as f64 / (self.warmup + 1) as f64
        } else {
            1.0
        };
        (decayed * warm) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_matches_pytorch_formula() {
        // torch: CosineAnnealingLR(opt, T_max=10) stepped once per epoch from lr 0.05.
        let s = Schedule::new(0.05, Decay::Cosine { total: 10, min: 0.0 }).unwrap();
        assert_eq!(s.lr_at(0), 0.05);
        assert!((s.lr_at(5) - 0.025).abs() < 1e-9);
        assert!((s.lr_at(9) - 0.05 * 0.5 * (1.0 + (0.9 * std::f64::consts::PI).cos()) as f32).abs() < 1e-9);
        assert_eq!(s.lr_at(10), 0.0);
        assert_eq!(s.lr_at(1000), 0.0);
    }

    #[test]
    fn cosine_is_bit_equal_to_the_std_formula() {
        // The formula the training examples used before (f64, std's cos): the same f32
        // rate for every epoch of every run length up to 100, so results do not move.
        for total in 1..=100usize {
            let s = Schedule::new(0.05, Decay::Cosine { total, min: 0.0 }).unwrap();
            for t in 0..total {
                let x = t as f64 / total as f64;
                let old = (0.05f32 as f64 * 0.5 * (1.0 + (std::f64::consts::PI * x).cos())) as f32;
                assert_eq!(s.lr_at(t).to_bits(), old.to_bits(), "total {total}, t {t}");
            }
        }
    }

    #[test]
    fn step_and_warmup() {
        let s = Schedule::new(0.1, Decay::Step { every: 3, gamma: 0.5 }).unwrap();
        let got: Vec<f32> = (0..7).map(|t| s.lr_at(t)).collect();
        assert_eq!(got, [0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025]);
        let w = Schedule::new(0.1, Decay::Constant).unwrap().with_warmup(3);
        let got: Vec<f32> = (0..5).map(|t| w.lr_at(t)).collect();
        assert_eq!(got, [0.025, 0.05, 0.075, 0.1, 0.1]);
        // Huge counts neither overflow nor go negative.
        assert!(s.lr_at(usize::MAX) >= 0.0);
    }

    #[test]
    fn bad_parameters_are_errors() {
        assert!(Schedule::new(f32::NAN, Decay::Constant).is_err());
        assert!(Schedule::new(0.0, Decay::Constant).is_err());
        assert!(Schedule::new(0.1, Decay::Step { every: 0, gamma: 0.5 }).is_err());
        assert!(Schedule::new(0.1, Decay::Step { every: 1, gamma: 1.5 }).is_err());
        assert!(Schedule::new(0.1, Decay::Cosine { total: 0, min: 0.0 }).is_err());
        assert!(Schedule::new(0.1, Decay::Cosine { total: 5, min: 0.2 }).is_err());
    }
}
