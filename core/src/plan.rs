//! Memory planning for variable-size inputs: "how many bytes for a step at HxW?" and
//! "what is the largest input that fits in N bytes?", answered before any data exists.
//!
//! - A [`Planner`] holds two pieces of the user's own code: `setup` (create the
//!   parameters, optimizer state, fused mode...) and `step` (build an input of a given
//!   size and run the step). It runs them on a meta graph ([`Graph::meta`]): the same
//!   code path as a real step, with every kernel skipped, so the plan equals the real
//!   high-water mark by construction.
//! - `step` either returns the loss (a [`Tensor`]; the planner calls
//!   [`Graph::backward`] on it) or runs backward itself and returns `()` (for
//!   [`Graph::backward_with`], several losses, a loss written by hand). For the
//!   inference plan the step runs again with gradients off, where a meta graph's
//!   backward does nothing.
//! - The cost of a plan depends on the number of ops, never on the input size: a
//!   4096x4096 plan is as quick as a 28x28 one.
//! - A plan counts the step's work too ([`Plan::macs`], [`Graph::macs`] on the meta
//!   graph), so a caller can refuse a step that would run for hours before it starts.
//! - A model with nothing to train (a lone softmax) has no training plan;
//!   [`Planner::plan_inference`] plans its forward pass.
//! - The largest fitting input is found by doubling then bisection over plans, which
//!   assumes memory grows with the input size (true for convolutional networks). When
//!   nothing fits, [`NoFit`] says why.
//!
//! A planner from scratch: a one-layer model whose step seeds backward by hand.
//!
//! ```
//! use torchlet::plan::Planner;
//! use torchlet::{Conv2dParams, Graph, Result};
//!
//! let planner = Planner::new(
//!     |g: &mut Graph<'static, f32, 16>| g.param(&[4, 1, 3, 3]),
//!     |g, w, h, wd| -> Result<()> {
//!         let x = g.input(&[1, 1, h, wd], &[])?;
//!         let y = g.conv2d(x, *w, None, Conv2dParams::default())?;
//!         let n = g.shape(y)?.numel();
//!         g.backward_with(y, &vec![1.0; n])
//!     },
//! );
//! let plan = planner.plan(28, 28)?;
//! assert_eq!(plan.persistent_bytes, 2 * 36 * 4); // weight and its gradient
//! assert!(plan.step_bytes > plan.forward_bytes && plan.forward_bytes > plan.inference_bytes / 2);
//! assert_eq!(plan.records, 3); // weight, input, conv2d
//! // 26x26x4 outputs of 9 taps each, forward; the weight's gradient as many again.
//! assert_eq!((plan.inference_macs, plan.macs), (24_336, 2 * 24_336));
//! let side = planner.largest_square(8 * 1024).unwrap();
//! assert!(planner.fits(side, side, 8 * 1024) && !planner.fits(side + 1, side + 1, 8 * 1024));
//! // Parameters alone exceed a tiny budget, and the error says so.
//! let why = planner.largest_square(100).unwrap_err();
//! assert_eq!(why.to_string(), "parameters alone need 288 bytes, the budget is 100");
//! # Ok::<(), torchlet::Error>(())
//! ```

use crate::error::{Error, Result};
use crate::graph::{Graph, Tensor};
use crate::scalar::Scalar;
use core::fmt;
use core::marker::PhantomData;

/// Arena bytes of one step, all including the long-lived region, and its records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Tape records the step needs (parameters included): the least `N` of a
    /// [`Graph`] that runs it.
    pub records: usize,
    /// Parameters, their gradients and optimizer state.
    pub persistent_bytes: usize,
    /// High-water mark of the training forward pass (recording for backward).
    pub forward_bytes: usize,
    /// High-water mark of forward + backward + optimizer step: the arena a training
    /// step needs.
    pub step_bytes: usize,
    /// High-water mark of a forward pass with gradients off (inference).
    pub inference_bytes: usize,
    /// Multiply-accumulates of the training step (forward, backward and the optimizer
    /// the step runs), convolutions and linear layers exactly, other ops as a small
    /// constant per element they touch ([`Graph::macs`] of the step); saturating.
    pub macs: u64,
    /// The same count for the forward pass with gradients off.
    pub inference_macs: u64,
}

/// What a planner's step closure returns: the loss, for the planner to run backward
/// on, or `()` when the step ran backward itself.
pub trait StepOutput {
    /// Ends the step's recording (backward from the loss, if gradients are on).
    fn finish<S: Scalar, const N: usize>(self, g: &mut Graph<'_, S, N>) -> Result<()>;
}

impl StepOutput for Tensor {
    fn finish<S: Scalar, const N: usize>(self, g: &mut Graph<'_, S, N>) -> Result<()> {
        if g.grad_enabled() {
            g.backward(self)
        } else {
            Ok(())
        }
    }
}

impl StepOutput for () {
    fn finish<S: Scalar, const N: usize>(self, _: &mut Graph<'_, S, N>) -> Result<()> {
        Ok(())
    }
}

/// Why no input size fits a budget (from `largest_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoFit {
    /// Parameters, their gradients and optimizer state alone take more than the budget.
    Parameters {
        /// Their bytes.
        bytes: usize,
        /// The budget.
        budget: usize,
    },
    /// The smallest valid input's training step does not fit.
    SmallestInput {
        /// Its height and width.
        size: (usize, usize),
        /// The arena bytes of its step.
        step_bytes: usize,
        /// The budget.
        budget: usize,
    },
    /// No size tried was a valid input: the error of the last one.
    Invalid(Error),
}

impl fmt::Display for NoFit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            NoFit::Parameters { bytes, budget } => write!(
                f,
                "parameters alone need {} bytes, the budget is {}",
                Thousands(bytes),
                Thousands(budget)
            ),
            NoFit::SmallestInput {
                size: (h, w),
                step_bytes,
                budget,
            } => write!(
                f,
                "the smallest valid input, {h}x{w}, needs {} bytes, the budget is {}",
                Thousands(step_bytes),
                Thousands(budget)
            ),
            NoFit::Invalid(e) => write!(f, "no valid input size: {e}"),
        }
    }
}

impl core::error::Error for NoFit {}

/// A number printed with thousands separators (`96,936`), without allocation.
pub struct Thousands(pub usize);

impl fmt::Display for Thousands {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Written backward from the end of the buffer: digits, a comma every three.
        let mut buf = [0u8; 32];
        let (mut n, mut at, mut digits) = (self.0, buf.len(), 0);
        loop {
            if digits > 0 && digits % 3 == 0 {
                at -= 1;
                buf[at] = b',';
            }
            at -= 1;
            buf[at] = b'0' + (n % 10) as u8;
            digits += 1;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        f.pad(core::str::from_utf8(&buf[at..]).unwrap_or("?"))
    }
}

/// Plans steps of user code at any input size (see the module docs).
pub struct Planner<S, const N: usize, Setup, Step> {
    setup: Setup,
    step: Step,
    _scalar: PhantomData<S>,
}

impl<S, const N: usize, M, T, Setup, Step> Planner<S, N, Setup, Step>
where
    S: Scalar,
    T: StepOutput,
    Setup: Fn(&mut Graph<'static, S, N>) -> Result<M>,
    Step: Fn(&mut Graph<'static, S, N>, &M, usize, usize) -> Result<T>,
{
    /// `setup(g)` creates the model; `step(g, model, h, w)` records a step at `h x w`
    /// and returns its loss or, having run backward itself, `()`.
    pub fn new(setup: Setup, step: Step) -> Self {
        Planner {
            setup,
            step,
            _scalar: PhantomData,
        }
    }

    /// The plan of a step at `h x w`; errors are the ones a real step would give
    /// (for example an input smaller than a kernel, naming the op and the sizes). A
    /// model with nothing to train (no parameter requires a gradient, and the loss
    /// depends on nothing that does) is refused with [`Error::NoGradient`] saying so;
    /// [`Planner::plan_inference`] plans its inference.
    pub fn plan(&self, h: usize, w: usize) -> Result<Plan> {
        // The graph lives in this frame (not returned by a helper): on a small device
        // a graph moved out of a call can take its tape's bytes of stack twice.
        let mut g: Graph<'static, S, N> = Graph::meta(usize::MAX);
        let (model, persistent_bytes) = self.set_up(&mut g)?;
        g.forward_high_water = 0;
        let trains = g.param_spans().next().is_some();
        let nothing_to_train = |e: Error| match e {
            Error::NoGradient { .. } if !trains => Error::NoGradient {
                what: "nothing to train: no parameter requires a gradient (its inference can be planned)",
            },
            e => e,
        };
        let out = (self.step)(&mut g, &model, h, w).map_err(nothing_to_train)?;
        let recorded = g.arena().high_water_bytes();
        out.finish(&mut g).map_err(nothing_to_train)?;
        // Backward, run by the planner or by the step, notes the forward's high water.
        let forward_bytes = match g.forward_high_water {
            0 => recorded,
            f => f,
        };
        let step_bytes = g.arena().high_water_bytes();
        let (records, macs) = (g.tape_len(), g.macs());
        g.end_step();
        let inference = self.inference(&mut g, &model, (h, w), persistent_bytes)?;
        Ok(Plan {
            records: records.max(inference.records),
            forward_bytes,
            step_bytes,
            macs,
            ..inference
        })
    }

    /// The plan of the inference pass alone at `h x w` (gradients off): `records`,
    /// `persistent_bytes`, `inference_bytes` and `inference_macs`; the training fields
    /// (`forward_bytes`, `step_bytes`, `macs`) are 0, no training step having been
    /// planned. Works for a model with no parameters (a lone softmax), which
    /// [`Planner::plan`] refuses as having nothing to train.
    pub fn plan_inference(&self, h: usize, w: usize) -> Result<Plan> {
        let mut g: Graph<'static, S, N> = Graph::meta(usize::MAX);
        let (model, persistent_bytes) = self.set_up(&mut g)?;
        self.inference(&mut g, &model, (h, w), persistent_bytes)
    }

    /// Sets the model up on the fresh meta graph `g`: the model and the long-lived
    /// bytes; the high-water mark and the work count start afresh.
    fn set_up(&self, g: &mut Graph<'static, S, N>) -> Result<(M, usize)> {
        let model = (self.setup)(g)?;
        let persistent_bytes = g.arena().used_bytes();
        g.reset_high_water();
        g.reset_macs();
        Ok((model, persistent_bytes))
    }

    /// The inference pass on `g` (set up, no step recorded) at `h x w`: its plan, with
    /// `persistent` bytes measured after setup and the training fields 0.
    fn inference(
        &self,
        g: &mut Graph<'static, S, N>,
        model: &M,
        (h, w): (usize, usize),
        persistent_bytes: usize,
    ) -> Result<Plan> {
        g.set_grad_enabled(false);
        g.reset_high_water();
        g.reset_macs();
        (self.step)(g, model, h, w)?.finish(g)?;
        Ok(Plan {
            records: g.tape_len(),
            persistent_bytes,
            inference_bytes: g.arena().high_water_bytes(),
            inference_macs: g.macs(),
            ..Plan::default()
        })
    }

    /// Whether a training step at `h x w` runs in `budget` bytes.
    pub fn fits(&self, h: usize, w: usize, budget: usize) -> bool {
        self.plan(h, w).is_ok_and(|p| p.step_bytes <= budget)
    }

    /// The largest square input whose training step fits in `budget` bytes.
    pub fn largest_square(&self, budget: usize) -> core::result::Result<usize, NoFit> {
        self.largest_scaled(budget, [1, 1]).map(|(h, _)| h)
    }

    /// Why the step at `h x w`, planned as `p`, does not fit `budget`.
    fn no_fit(&self, p: Result<Plan>, size: (usize, usize), budget: usize) -> NoFit {
        match p {
            Ok(p) if p.persistent_bytes > budget => NoFit::Parameters {
                bytes: p.persistent_bytes,
                budget,
            },
            Ok(p) => NoFit::SmallestInput {
                size,
                step_bytes: p.step_bytes,
                budget,
            },
            Err(e) => NoFit::Invalid(e),
        }
    }

    /// The input size to use for an `h x w` sample in `budget` bytes: `h x w` itself
    /// when its training step fits, otherwise the largest `th x tw` with `th < h` and
    /// `tw = round(w * th / h)` (the sample's aspect ratio, at least 1) that fits, or
    /// why no valid size does. Logarithmic in `h`: the smallest valid `th` by doubling
    /// and bisection (sizes too small to be valid inputs plan to errors), then the
    /// largest fitting one by bisection.
    pub fn largest_within(
        &self,
        budget: usize,
        h: usize,
        w: usize,
    ) -> core::result::Result<(usize, usize), NoFit> {
        let full = self.plan(h, w);
        if full.is_ok_and(|p| p.step_bytes <= budget) {
            return Ok((h, w));
        }
        let size = |th: usize| {
            let tw = w.checked_mul(th)?.checked_add(h / 2)? / h;
            Some((th, tw.max(1)))
        };
        let overflow = NoFit::Invalid(Error::Overflow { op: "largest_within" });
        let fits = |th: usize| size(th).is_some_and(|(a, b)| self.fits(a, b, budget));
        // The smallest valid size below `h`; none: `h x w`'s own answer.
        let at = |th: usize| size(th).map(|(a, b)| self.plan(a, b));
        let Some((lo, p)) = smallest_valid(h.saturating_sub(1), at).ok() else {
            return Err(self.no_fit(full, (h, w), budget));
        };
        let small = size(lo).ok_or(overflow)?;
        if p.step_bytes > budget {
            return Err(self.no_fit(Ok(p), small, budget));
        }
        let (mut lo, mut hi) = (lo, h); // fits, does not fit (checked first)
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        size(lo).ok_or(overflow)
    }

    /// The largest `k * aspect[0] x k * aspect[1]` input whose training step fits in
    /// `budget` bytes (`k` at most [`MAX_SCALE`]), or why even the smallest valid one
    /// does not. Logarithmic: the smallest valid `k` by doubling and bisection, then
    /// doubling and bisection for the largest that fits.
    pub fn largest_scaled(
        &self,
        budget: usize,
        aspect: [usize; 2],
    ) -> core::result::Result<(usize, usize), NoFit> {
        let size = |k: usize| Some((k.checked_mul(aspect[0])?, k.checked_mul(aspect[1])?));
        let fits = |k: usize| size(k).is_some_and(|(h, w)| self.fits(h, w, budget));
        let at = |k: usize| size(k).map(|(h, w)| self.plan(h, w));
        let (lo, p) = smallest_valid(MAX_SCALE, at).map_err(NoFit::Invalid)?;
        if p.step_bytes > budget {
            return Err(self.no_fit(Ok(p), size(lo).unwrap_or((0, 0)), budget));
        }
        // Double until it no longer fits (or the cap), then bisect between the two.
        let (mut lo, mut hi) = (lo, lo);
        while fits(hi) {
            lo = hi;
            if hi == MAX_SCALE {
                return Ok(size(hi).unwrap_or((0, 0)));
            }
            hi = hi.saturating_mul(2).min(MAX_SCALE);
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok(size(lo).unwrap_or((0, 0)))
    }
}

/// The largest scale [`Planner::largest_scaled`] tries (a side of 16,777,216 pixels
/// times the aspect): searches stay within `2 * 24` plans each way.
pub const MAX_SCALE: usize = 1 << 24;

/// The smallest `k` in `1..=max` whose plan (`at(k)`; `None` when the size overflows)
/// is a plan rather than an error, with that plan, found by doubling then bisection
/// (a size at or above the smallest valid one is valid: larger inputs pass every
/// kernel and window check a smaller one passes); or the error of the largest size
/// tried when none is.
fn smallest_valid(
    max: usize,
    at: impl Fn(usize) -> Option<Result<Plan>>,
) -> core::result::Result<(usize, Plan), Error> {
    let plan = |k: usize| at(k).unwrap_or(Err(Error::Overflow { op: "planner" }));
    let mut bad = 0; // the largest size known to be invalid (0: none yet)
    let mut k = 1;
    if max == 0 {
        return Err(Error::InvalidParam {
            op: "planner",
            what: "no size to search below",
            value: 0,
        });
    }
    let (mut good, mut best) = loop {
        match plan(k) {
            Ok(p) => break (k, p),
            Err(e) if k >= max => return Err(e),
            Err(_) => {
                bad = k;
                k = k.saturating_mul(2).min(max);
            }
        }
    };
    while good - bad > 1 {
        let mid = bad + (good - bad) / 2;
        match plan(mid) {
            Ok(p) => (good, best) = (mid, p),
            Err(_) => bad = mid,
        }
    }
    Ok((good, best))
}
