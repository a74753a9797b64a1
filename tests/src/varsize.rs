//! Host helpers for variable-size training: W1 plans through the core [`Planner`],
//! bucketing into owned batches, dynamic padding, resizing to a fixed size, and a
//! progressive-resizing schedule.

use crate::digits::Digit;
use torchlet::data::{coarse_shape, sort_by_shape, Buckets};
use torchlet::init::Rng;
use torchlet::nn::{digits_fcn, Sequential};
use torchlet::optim::Sgd;
use torchlet::plan::{Plan, Planner};
use torchlet::{Error, Graph, Result, Tensor};

/// Tape capacity for W1 steps (with room for a resize op).
pub const TAPE: usize = 32;

/// Plans a W1 training step at `batch x 1 x h x w`: fused SGD (no gradient buffers)
/// or gradient buffers plus SGD without momentum.
pub fn w1_plan(fused: bool, batch: usize, h: usize, w: usize) -> Result<Plan> {
    w1_planner(fused, batch).plan(h, w)
}

type Setup = fn(&mut Graph<'static, f32, TAPE>) -> Result<Sequential<12>>;

/// A planner for W1 at a fixed batch.
#[allow(clippy::type_complexity)]
pub fn w1_planner(
    fused: bool,
    batch: usize,
) -> Planner<
    f32,
    TAPE,
    Setup,
    impl Fn(&mut Graph<'static, f32, TAPE>, &Sequential<12>, usize, usize) -> Result<Tensor>,
> {
    let setup: Setup = if fused {
        |g| {
            g.set_fused_sgd(0.01)?;
            digits_fcn(g, &mut Rng::new(0))
        }
    } else {
        |g| {
            let m = digits_fcn(g, &mut Rng::new(0))?;
            Sgd::new(g, 0.01, 0.0, 0.0)?;
            Ok(m)
        }
    };
    Planner::new(
        setup,
        move |g: &mut Graph<'static, f32, TAPE>, m: &Sequential<12>, h, w| {
            let x = g.input(&[batch, 1, h, w], &[])?;
            let logits = m.forward(g, x)?;
            g.cross_entropy(logits, &[])
        },
    )
}

/// Shuffles, buckets by shape rounded up to `bin` (`[1, 1]`: exact shapes) and returns
/// batches (each a list of indices whose coarse shapes agree, at most `max_batch`), in
/// shuffled batch order, so that consecutive steps come from different buckets.
pub fn bucket_batches(
    shapes: &[(usize, usize)],
    max_batch: usize,
    bin: [usize; 2],
    rng: &mut Rng,
) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..shapes.len()).collect();
    rng.shuffle(&mut order);
    let key = |i: usize| coarse_shape(shapes[i], bin);
    sort_by_shape(&mut order, key);
    let mut batches: Vec<Vec<usize>> = Buckets::new(&order, max_batch, key)
        .map(|(_, b)| b.to_vec())
        .collect();
    rng.shuffle(&mut batches);
    batches
}

/// What bucketing made of a data set: how full the batches are, how much padding to
/// each batch's largest member costs, and how close to single-class the batches are.
#[derive(Clone, Copy, Debug)]
pub struct BucketStats {
    /// Number of batches.
    pub batches: usize,
    /// Mean samples per batch.
    pub mean_batch: f64,
    /// Padded pixels over real pixels (1.0: no padding).
    pub padding: f64,
    /// Mean over batches of the share of the batch's most common label.
    pub majority_share: f64,
}

/// [`BucketStats`] of `batches` over `(h, w, label)` samples.
pub fn bucket_stats(samples: &[(usize, usize, u8)], batches: &[Vec<usize>]) -> BucketStats {
    let (mut real, mut padded, mut majority) = (0usize, 0usize, 0.0f64);
    for b in batches {
        let (h, w) = b
            .iter()
            .fold((1, 1), |(h, w), &i| (h.max(samples[i].0), w.max(samples[i].1)));
        let mut counts = [0usize; 256];
        for &i in b {
            real += samples[i].0 * samples[i].1;
            counts[samples[i].2 as usize] += 1;
        }
        padded += h * w * b.len();
        majority += *counts.iter().max().unwrap_or(&0) as f64 / b.len().max(1) as f64;
    }
    let n = batches.len().max(1) as f64;
    BucketStats {
        batches: batches.len(),
        mean_batch: batches.iter().map(Vec::len).sum::<usize>() as f64 / n,
        padding: padded as f64 / real.max(1) as f64,
        majority_share: majority / n,
    }
}

/// Pixels of `d` scaled to 0..1, placed top-left in an `h x w` zero canvas (dynamic
/// padding to the batch's largest size, or padding to 28x28).
pub fn padded_pixels(d: &Digit, h: usize, w: usize, dst: &mut [f32]) {
    dst.fill(0.0);
    let (oy, ox) = ((h - d.h.min(h)) / 2, (w - d.w.min(w)) / 2);
    for y in 0..d.h.min(h) {
        for x in 0..d.w.min(w) {
            dst[(y + oy) * w + x + ox] = d.pixels[y * d.w + x] as f32 / 255.0;
        }
    }
}

/// The largest height and width among some digits.
pub fn max_size(ds: &[&Digit]) -> (usize, usize) {
    ds.iter().fold((1, 1), |(h, w), d| (h.max(d.h), w.max(d.w)))
}

/// Progressive resizing: the input side for `epoch` (0-based) of `epochs`, rising
/// linearly from `start` to `end`.
pub fn progressive_side(epoch: usize, epochs: usize, start: usize, end: usize) -> usize {
    if epochs <= 1 {
        return end;
    }
    start + (end - start) * epoch / (epochs - 1)
}

/// Converts an engine error for `?` in host code.
pub fn err(e: Error) -> Box<dyn std::error::Error> {
    Box::new(e)
}
