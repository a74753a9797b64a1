//! Memory planning for variable-size inputs: "how many bytes for a step at HxW?" and
//! "what is the largest input that fits in N bytes?", answered before any data exists.
//!
//! - A [`Planner`] holds two pieces of the user's own code: `setup` (create the
//!   parameters, optimizer state, fused mode...) and `step` (build an input of a given
//!   size, run the forward pass, return the loss). It runs them on a meta graph
//!   ([`Graph::meta`]): the same code path as a real step, with every kernel skipped,
//!   so the plan equals the real high-water mark by construction.
//! - The cost of a plan depends on the number of ops, never on the input size: a
//!   4096x4096 plan is as quick as a 28x28 one.
//! - The largest fitting input is found by doubling then bisection over plans, which
//!   assumes memory grows with the input size (true for convolutional networks).

use crate::error::Result;
use crate::graph::{Graph, Tensor};
use crate::scalar::Scalar;
use core::marker::PhantomData;

/// Arena bytes of one step, all including the long-lived region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Parameters, their gradients and optimizer state.
    pub persistent_bytes: usize,
    /// High-water mark of the training forward pass (recording for backward).
    pub forward_bytes: usize,
    /// High-water mark of forward + backward + optimizer step: the arena a training
    /// step needs.
    pub step_bytes: usize,
    /// High-water mark of a forward pass with gradients off (inference).
    pub inference_bytes: usize,
    /// Tape records of a training step (parameters, inputs and op outputs): the
    /// smallest `N` of a [`Graph`] that runs it.
    pub records: usize,
}

/// Plans steps of user code at any input size (see the module docs).
pub struct Planner<S, const N: usize, Setup, Step> {
    setup: Setup,
    step: Step,
    _scalar: PhantomData<S>,
}

impl<S, const N: usize, M, Setup, Step> Planner<S, N, Setup, Step>
where
    S: Scalar,
    Setup: Fn(&mut Graph<'static, S, N>) -> Result<M>,
    Step: Fn(&mut Graph<'static, S, N>, &M, usize, usize) -> Result<Tensor>,
{
    /// `setup(g)` creates the model; `step(g, model, h, w)` records a forward pass
    /// at `h x w` and returns the loss (a one-element tensor).
    pub fn new(setup: Setup, step: Step) -> Self {
        Planner {
            setup,
            step,
            _scalar: PhantomData,
        }
    }

    /// The plan of a step at `h x w`; errors are the ones a real step would give
    /// (for example an input smaller than a kernel, naming the op and the sizes).
    pub fn plan(&self, h: usize, w: usize) -> Result<Plan> {
        let mut g: Graph<'static, S, N> = Graph::meta(usize::MAX);
        let model = (self.setup)(&mut g)?;
        let persistent_bytes = g.arena().used_bytes();
        g.reset_high_water();
        let loss = (self.step)(&mut g, &model, h, w)?;
        let forward_bytes = g.arena().high_water_bytes();
        g.backward(loss)?;
        let step_bytes = g.arena().high_water_bytes();
        let records = g.tape_len();
        g.end_step();
        g.set_grad_enabled(false);
        g.reset_high_water();
        (self.step)(&mut g, &model, h, w)?;
        let inference_bytes = g.arena().high_water_bytes();
        Ok(Plan {
            persistent_bytes,
            forward_bytes,
            step_bytes,
            inference_bytes,
            records,
        })
    }

    /// Whether a training step at `h x w` runs in `budget` bytes.
    pub fn fits(&self, h: usize, w: usize, budget: usize) -> bool {
        self.plan(h, w).is_ok_and(|p| p.step_bytes <= budget)
    }

    /// The largest square input whose training step fits in `budget` bytes.
    pub fn largest_square(&self, budget: usize) -> Option<usize> {
        self.largest_scaled(budget, [1, 1]).map(|(h, _)| h)
    }

    /// The input size to use for an `h x w` sample in `budget` bytes: `h x w` itself
    /// when its training step fits, otherwise the largest `th x tw` with `th < h` and
    /// `tw = round(w * th / h)` (the sample's aspect ratio, at least 1) that fits, or
    /// `None` when no valid size does. Bisection over `th`, after a scan up from 1 past
    /// the sizes too small to be valid inputs (their plans are errors).
    pub fn largest_within(&self, budget: usize, h: usize, w: usize) -> Option<(usize, usize)> {
        if self.fits(h, w, budget) {
            return Some((h, w));
        }
        let size = |th: usize| {
            let tw = w.checked_mul(th)?.checked_add(h / 2)? / h;
            Some((th, tw.max(1)))
        };
        let fits = |th: usize| size(th).is_some_and(|(a, b)| self.fits(a, b, budget));
        // The smallest valid size: below it plans are errors; at or above it they are
        // plans, and the first one that does not fit ends the search.
        let mut lo = 1;
        loop {
            if lo >= h {
                return None;
            }
            let (a, b) = size(lo)?;
            match self.plan(a, b) {
                Ok(p) if p.step_bytes <= budget => break,
                Ok(_) => return None,
                Err(_) => lo += 1,
            }
        }
        let mut hi = h; // does not fit (checked first)
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        size(lo)
    }

    /// The largest `k * aspect[0] x k * aspect[1]` input whose training step fits in
    /// `budget` bytes, or `None` when even the smallest valid one does not.
    pub fn largest_scaled(&self, budget: usize, aspect: [usize; 2]) -> Option<(usize, usize)> {
        let size = |k: usize| Some((k.checked_mul(aspect[0])?, k.checked_mul(aspect[1])?));
        let fits = |k: usize| size(k).is_some_and(|(h, w)| self.fits(h, w, budget));
        // Find a fitting scale: below the smallest valid input, plans are errors.
        let mut k = 1usize;
        let lo = loop {
            let (h, w) = size(k)?;
            match self.plan(h, w) {
                Ok(p) if p.step_bytes <= budget => break k,
                Ok(_) => return None,
                Err(_) => k = k.checked_mul(2)?,
            }
        };
        // Double until it no longer fits, then bisect between the two.
        let (mut lo, mut hi) = (lo, lo);
        while fits(hi) {
            lo = hi;
            hi = hi.checked_mul(2)?;
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        size(lo)
    }
}
