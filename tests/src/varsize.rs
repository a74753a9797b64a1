//! Host helpers for variable-size training: W1 plans through the core [`Planner`],
//! bucketing into owned batches, dynamic padding, resizing to a fixed size, and a
//! progressive-resizing schedule.

use crate::digits::Digit;
use torchlet::data::{sort_by_shape, Buckets};
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

/// Shuffles, buckets by shape and returns batches (each a list of indices of one
/// shape, at most `max_batch`), in shuffled batch order.
pub fn bucket_batches(shapes: &[(usize, usize)], max_batch: usize, rng: &mut Rng) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..shapes.len()).collect();
    rng.shuffle(&mut order);
    sort_by_shape(&mut order, |i| shapes[i]);
    let mut batches: Vec<Vec<usize>> = Buckets::new(&order, max_batch, |i| shapes[i])
        .map(|(_, b)| b.to_vec())
        .collect();
    rng.shuffle(&mut batches);
    batches
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
