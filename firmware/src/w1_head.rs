//! W1 fine-tuned on a Cortex-M0 in 16 KiB of RAM, in Q16.16 fixed point: the frozen
//! convolutions run from flash with int8 weights quantized per output channel
//! ([`QConv2dWeights`], `NoGrad::conv2d_q8`), only the classifier head (linear
//! 32->10, weight and bias) is trained, with fused SGD so it keeps no gradient buffers.
//!
//! - The frozen part records nothing (its inputs and weights need no gradient), and
//!   every activation is freed as soon as the next op has read it, so it holds about
//!   two feature maps at a time; only the head is on the tape for backward.
//! - Int8 frozen weights: a quarter of the flash of Q16 ones (5,832 bytes instead of
//!   23,328) and one small exact kernel instead of the Q16 convolution family, which
//!   is what lets the program fit the micro:bit's flash.
//! - A sample is used at its native size when the meta plan of its training step fits
//!   the arena, and otherwise resized (bilinear, in the graph) to the largest size of
//!   the same aspect that fits ([`input_size`], the planner's answer). Every distinct
//!   sample size is planned once, before the real graph exists ([`SizeTable`]), so the
//!   planner's meta graph and the real one are never on the stack together.
//! - This file uses nothing but `torchlet`: the host exporter compiles the same file
//!   (`tests/examples/export_m0_assets.rs`) to simulate the device's run bit for bit.

use crate::assets::Sample;
use torchlet::fixed::QConv2dWeights;
use torchlet::plan::Planner;
use torchlet::{Conv2dParams, Error, Graph, InterpMode, Pool2dParams, Tensor, Q16};

/// Tape records: 2 head parameters, the input, the resize and 12 op records of one
/// step (freed records keep their slot until the step ends).
pub const TAPE_M0: usize = 18;

/// Dims `[out, in, kh, kw]` of W1's frozen convolutions conv1, conv2, conv3 (3x3,
/// padding 1): what the exporter quantizes and the device checks its statics against.
pub const CONV_DIMS: [[usize; 4]; 3] = [[8, 1, 3, 3], [16, 8, 3, 3], [32, 16, 3, 3]];

/// Where the pretrained values are: the frozen convolutions are used in place, the
/// head's values are copied into the arena (they change).
pub struct Frozen<'a> {
    /// conv1, conv2, conv3 (3x3, padding 1): int8 weights, scales and Q16 biases.
    pub conv: [QConv2dWeights<'a>; 3],
    /// The head's initial weight `[10, 32]` and bias `[10]`.
    pub head: [&'a [Q16]; 2],
}

impl Frozen<'_> {
    /// Flash bytes of the frozen convolutions (int8 weights, scales, biases).
    pub fn conv_bytes(&self) -> usize {
        self.conv
            .iter()
            .map(|c| {
                let bias = c.bias().map_or(0, core::mem::size_of_val);
                c.weights().len() + core::mem::size_of_val(c.scales()) + bias
            })
            .sum()
    }
}

/// The model's handles: the frozen convolutions and the trainable head.
pub struct HeadModel<'a> {
    conv: &'a [QConv2dWeights<'a>; 3],
    w: Tensor,
    b: Tensor,
}

fn copy_into<const N: usize>(g: &mut Graph<'_, Q16, N>, t: Tensor, src: &[Q16]) -> Result<(), Error> {
    if g.is_meta() {
        return Ok(());
    }
    let dst = g.param_data_mut(t)?;
    if dst.len() != src.len() {
        return Err(Error::ShapeMismatch {
            op: "head weights",
            what: "values given vs parameter elements",
            expected: dst.len(),
            found: src.len(),
        });
    }
    dst.copy_from_slice(src);
    Ok(())
}

impl<'a> HeadModel<'a> {
    /// Creates the head (copying its pretrained values) and switches the graph to
    /// fused SGD with learning rate `lr`; the frozen convolutions stay where they are.
    pub fn new<const N: usize>(g: &mut Graph<'_, Q16, N>, f: &'a Frozen<'a>, lr: f32) -> Result<Self, Error> {
        g.set_fused_sgd(lr)?;
        let w = g.param(&[10, 32])?;
        let b = g.param(&[10])?;
        copy_into(g, w, f.head[0])?;
        copy_into(g, b, f.head[1])?;
        Ok(HeadModel { conv: &f.conv, w, b })
    }

    /// Logits `[1, 10]` of one `native` (h, w) sample used at `target` size; `fill`
    /// writes the native pixels. One copy for every caller (never inlined, `fill` a
    /// trait object): the planner, training and evaluation share it, which keeps the
    /// M0 program's flash down.
    #[inline(never)]
    fn logits<const N: usize>(
        &self,
        g: &mut Graph<'_, Q16, N>,
        native: (usize, usize),
        target: (usize, usize),
        fill: &dyn Fn(&mut [Q16]),
    ) -> Result<Tensor, Error> {
        // The frozen part through `no_grad`: it records no gradient path either way
        // (nothing in it requires one), and this way no backward code of its ops is
        // linked: only the head's linear and cross-entropy rules are.
        let mut y = g.input_with(&[1, 1, native.0, native.1], |d| fill(d))?;
        if target != native {
            let mode = InterpMode::Bilinear { align_corners: false };
            let r = g.no_grad().interpolate(y, [target.0, target.1], mode)?;
            g.free(y)?;
            y = r;
        }
        for (l, conv) in self.conv.iter().enumerate() {
            let c = g.no_grad().conv2d_q8(y, conv, Conv2dParams::padded(1))?;
            g.free(y)?;
            let r = g.no_grad().relu_(c)?;
            y = if l < 2 {
                let m = g.no_grad().max_pool2d(r, Pool2dParams::square(2))?;
                g.free(r)?;
                m
            } else {
                r
            };
        }
        let pooled = g.no_grad().adaptive_avg_pool2d(y, [1, 1])?;
        g.free(y)?;
        let flat = g.no_grad().flatten(pooled, 1)?;
        g.linear(flat, self.w, Some(self.b))
    }

    /// The loss of one sample (what the planner plans: the step before backward).
    pub fn loss<const N: usize>(
        &self,
        g: &mut Graph<'_, Q16, N>,
        native: (usize, usize),
        target: (usize, usize),
        label: usize,
        fill: &dyn Fn(&mut [Q16]),
    ) -> Result<Tensor, Error> {
        let logits = self.logits(g, native, target, fill)?;
        g.cross_entropy(logits, &[label])
    }

    /// One training step (forward, loss, backward with the fused SGD update of the
    /// head); returns the loss. The step's memory is released, also on error.
    pub fn train_step<const N: usize>(
        &self,
        g: &mut Graph<'_, Q16, N>,
        native: (usize, usize),
        target: (usize, usize),
        label: usize,
        fill: &dyn Fn(&mut [Q16]),
    ) -> Result<Q16, Error> {
        let r = (|| {
            let loss = self.loss(g, native, target, label, fill)?;
            let l = g.data(loss)?.first().copied().unwrap_or(Q16(0));
            g.backward(loss)?;
            Ok(l)
        })();
        g.end_step();
        r
    }

    /// The predicted class of one sample (gradients off).
    pub fn predict<const N: usize>(
        &self,
        g: &mut Graph<'_, Q16, N>,
        native: (usize, usize),
        target: (usize, usize),
        fill: &dyn Fn(&mut [Q16]),
    ) -> Result<usize, Error> {
        g.set_grad_enabled(false);
        let r = (|| {
            let logits = self.logits(g, native, target, fill)?;
            let row = g.data(logits)?;
            Ok((0..row.len()).max_by_key(|&k| row[k].raw()).unwrap_or(0))
        })();
        g.end_step();
        g.set_grad_enabled(true);
        r
    }

    /// The head's current weight and bias values (for a fingerprint).
    pub fn head<'g, const N: usize>(&self, g: &'g Graph<'_, Q16, N>) -> Result<[&'g [Q16]; 2], Error> {
        Ok([g.data(self.w)?, g.data(self.b)?])
    }
}

/// The size at which to use an `h x w` sample in an arena of `budget` bytes: the
/// native size when the meta plan of its training step fits, else the largest size
/// of the same aspect that does ([`Planner::largest_within`]); `None` when nothing
/// valid fits.
pub fn input_size<const N: usize>(
    f: &'static Frozen<'static>,
    lr: f32,
    (h, w): (usize, usize),
    budget: usize,
) -> Option<(usize, usize)> {
    planner::<N>(f, lr, (h, w)).largest_within(budget, h, w).ok()
}

/// The arena bytes of a training step on an `native` sample used at `target` size.
pub fn step_bytes<const N: usize>(
    f: &'static Frozen<'static>,
    lr: f32,
    native: (usize, usize),
    target: (usize, usize),
) -> Result<usize, Error> {
    Ok(planner::<N>(f, lr, native).plan(target.0, target.1)?.step_bytes)
}

#[allow(clippy::type_complexity)]
fn planner<const N: usize>(
    f: &'static Frozen<'static>,
    lr: f32,
    native: (usize, usize),
) -> Planner<
    Q16,
    N,
    impl Fn(&mut Graph<'static, Q16, N>) -> Result<HeadModel<'static>, Error>,
    impl Fn(&mut Graph<'static, Q16, N>, &HeadModel<'static>, usize, usize) -> Result<Tensor, Error>,
> {
    Planner::new(
        move |g: &mut Graph<'static, Q16, N>| HeadModel::new(g, f, lr),
        move |g: &mut Graph<'static, Q16, N>, m: &HeadModel<'_>, th, tw| {
            m.loss(g, native, (th, tw), 0, &|_| {})
        },
    )
}

/// Distinct sample sizes a [`SizeTable`] holds.
pub const MAX_SIZES: usize = 32;

/// The planner's answer for one native size.
#[derive(Clone, Copy, Debug, Default)]
pub struct SizePlan {
    /// Native height and width.
    pub native: (u8, u8),
    /// The size to use (the native one when it fits), or `None` when nothing fits.
    pub target: Option<(u8, u8)>,
    /// Arena bytes of a training step at `target` (the meta plan).
    pub step_bytes: u32,
}

/// The plans of every distinct sample size, made once at boot (a small table instead
/// of a meta graph on the stack next to the real graph at every step).
pub struct SizeTable {
    plans: [SizePlan; MAX_SIZES],
    len: usize,
}

impl SizeTable {
    /// Plans every distinct size of `samples` for an arena of `budget` bytes; `log`
    /// sees each new plan.
    pub fn build<'s>(
        f: &'static Frozen<'static>,
        lr: f32,
        samples: impl Iterator<Item = Sample<'s>>,
        budget: usize,
        mut log: impl FnMut(&SizePlan),
    ) -> Result<Self, Error> {
        let mut t = SizeTable {
            plans: [SizePlan::default(); MAX_SIZES],
            len: 0,
        };
        for s in samples {
            let native = (s.h as u8, s.w as u8);
            if t.get(native).is_some() {
                continue;
            }
            let target = input_size::<TAPE_M0>(f, lr, (s.h, s.w), budget);
            let step_bytes = match target {
                Some(tg) => step_bytes::<TAPE_M0>(f, lr, (s.h, s.w), tg)? as u32,
                None => 0,
            };
            let plan = SizePlan {
                native,
                target: target.map(|(h, w)| (h as u8, w as u8)),
                step_bytes,
            };
            let slot = t.plans.get_mut(t.len).ok_or(Error::InvalidParam {
                op: "size table",
                what: "more distinct sample sizes than the table holds",
                value: MAX_SIZES as i64,
            })?;
            *slot = plan;
            t.len += 1;
            log(&plan);
        }
        Ok(t)
    }

    /// The plan of a native size, if it was planned.
    pub fn get(&self, native: (u8, u8)) -> Option<&SizePlan> {
        self.plans[..self.len].iter().find(|p| p.native == native)
    }

    /// Distinct sizes planned.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no size was planned.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The size to use for `s`, and its planned step bytes; `None` to skip it.
    fn lookup(&self, s: &Sample<'_>) -> Option<((usize, usize), usize)> {
        let p = self.get((s.h as u8, s.w as u8))?;
        let (h, w) = p.target?;
        Some(((h as usize, w as usize), p.step_bytes as usize))
    }
}

/// What one pass over samples measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct PassStats {
    /// Samples seen.
    pub n: usize,
    /// Correct predictions (evaluation passes).
    pub correct: usize,
    /// Samples used at a smaller size than their native one.
    pub resized: usize,
    /// Samples skipped because no valid size fits the arena.
    pub skipped: usize,
    /// Sum of the training losses (Q16 raw values).
    pub loss_sum: i64,
    /// Training steps whose real arena high-water mark differed from their plan.
    pub plan_mismatch: usize,
    /// The largest real high-water mark of a training step, in bytes.
    pub high_water: usize,
    /// Steps in which a Q16 operation saturated.
    pub saturated: usize,
}

/// One training step, for the caller's log.
pub struct StepLog {
    /// Size used.
    pub target: (usize, usize),
    /// The step's loss.
    pub loss: Q16,
    /// Planned arena bytes.
    pub planned: usize,
    /// The real high-water mark.
    pub high_water: usize,
}

/// Trains the head on every sample once, in order; `log` sees every step and every
/// skipped sample (`None`).
pub fn train_epoch<'s, const N: usize>(
    m: &HeadModel<'_>,
    g: &mut Graph<'_, Q16, N>,
    sizes: &SizeTable,
    samples: impl Iterator<Item = Sample<'s>>,
    mut log: impl FnMut(usize, &Sample<'s>, Option<&StepLog>),
) -> Result<PassStats, Error> {
    let mut st = PassStats::default();
    for (i, s) in samples.enumerate() {
        st.n += 1;
        let Some((target, planned)) = sizes.lookup(&s) else {
            st.skipped += 1;
            log(i, &s, None);
            continue;
        };
        let native = (s.h, s.w);
        st.resized += (target != native) as usize;
        g.reset_high_water();
        torchlet::fixed::take_saturated();
        let loss = m.train_step(g, native, target, s.label as usize, &|d| s.fill_q16(d))?;
        st.saturated += torchlet::fixed::take_saturated() as usize;
        let high = g.arena().high_water_bytes();
        st.loss_sum += loss.raw() as i64;
        st.plan_mismatch += (high != planned) as usize;
        st.high_water = st.high_water.max(high);
        let step = StepLog {
            target,
            loss,
            planned,
            high_water: high,
        };
        log(i, &s, Some(&step));
    }
    Ok(st)
}

/// Held-out accuracy: each sample at the size a training step on it uses.
pub fn evaluate<'s, const N: usize>(
    m: &HeadModel<'_>,
    g: &mut Graph<'_, Q16, N>,
    sizes: &SizeTable,
    samples: impl Iterator<Item = Sample<'s>>,
) -> Result<PassStats, Error> {
    let mut st = PassStats::default();
    for s in samples {
        st.n += 1;
        let Some((target, _)) = sizes.lookup(&s) else {
            st.skipped += 1;
            continue;
        };
        st.resized += (target != (s.h, s.w)) as usize;
        st.correct += (m.predict(g, (s.h, s.w), target, &|d| s.fill_q16(d))? == s.label as usize) as usize;
    }
    Ok(st)
}
