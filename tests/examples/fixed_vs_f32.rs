//! Trains W1 on the real MNIST digits twice in one run, in `f32` and in Q16.16 fixed
//! point ([`torchlet::Q16`]), with the same recipe, initialisation and shuffles, and
//! prints both held-out accuracies and their difference.
//!
//! `cargo run --release -p torchlet-tests --example fixed_vs_f32 [-- EPOCHS BATCH TRAIN_N LOSS_SCALE LR]`
//!
//! It stands alone: the whole training loop is below (`train_w1_in`), written with
//! torchlet's public API; copied into a new crate, only the data loader
//! (`torchlet_tests::digits`) needs replacing by your own. The tests train with this
//! same code (`torchlet_tests::train` includes this file).

use std::time::Instant;
use torchlet::init::Rng;
use torchlet::nn::{digits_fcn, Sequential};
use torchlet::optim::Sgd;
use torchlet::{fixed, Error, Graph, Scalar, Q16};
use torchlet_tests::digits::{Digit, Digits};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let epochs = args.first().map_or(Ok(RECIPE.epochs), |s| s.parse())?;
    let batch = args.get(1).map_or(Ok(RECIPE.batch), |s| s.parse())?;
    let digits = Digits::load()?;
    let (train, test) = digits.split();
    let scale = args.get(3).map_or(Ok(FIXED_LOSS_SCALE), |s| s.parse())?;
    let n = args
        .get(2)
        .map_or(Ok(train.len()), |s| s.parse())?
        .min(train.len());
    let train = &train[..n];
    let recipe = Recipe {
        epochs,
        batch,
        lr: args.get(4).map_or(Ok(RECIPE.lr), |s| s.parse())?,
        ..RECIPE
    };
    println!(
        "W1 on {} training / {} held-out MNIST digits, {recipe:?}, q16.16 loss scale {scale}",
        train.len(),
        test.len()
    );
    let show = |name: &str| {
        let name = name.to_string();
        move |r: &EpochReport| {
            println!(
                "{name:6} epoch {:2}  loss {:.4}  held-out accuracy {:.2}%  {:.0} us/step  saturated steps {}",
                r.epoch,
                r.loss,
                r.accuracy * 100.0,
                r.us_per_step,
                r.saturated_steps
            )
        }
    };
    let (f, _) = train_w1_in::<f32>(train, test, recipe, 1.0, show("f32"))?;
    let (q, _) = train_w1_in::<Q16>(train, test, recipe, scale, show("q16.16"))?;
    let (fa, qa) = (
        f.last().map_or(0.0, |r| r.accuracy),
        q.last().map_or(0.0, |r| r.accuracy),
    );
    println!(
        "final held-out accuracy: f32 {:.2}%  q16.16 {:.2}%  difference {:+.2} points",
        fa * 100.0,
        qa * 100.0,
        (qa - fa) * 100.0
    );
    Ok(())
}

/// Loss scale for Q16.16 training: W1's activation gradients after the global average
/// pool are about `1 / (32 * 49)` of the loss gradient, a few LSB of Q16.16; scaling the
/// loss by 2^8 keeps about 8 more bits through the convolutions' backward passes.
pub const FIXED_LOSS_SCALE: f32 = 256.0;

/// Tape capacity for W1: 8 parameters, 1 input, 12 op records.
pub const TAPE: usize = 32;

/// A training recipe.
#[derive(Clone, Copy, Debug)]
pub struct Recipe {
    /// Passes over the training set.
    pub epochs: usize,
    /// Samples per step.
    pub batch: usize,
    /// SGD learning rate.
    pub lr: f32,
    /// SGD momentum.
    pub momentum: f32,
    /// Seed of the initialisation and the shuffles.
    pub seed: u64,
    /// Decay the learning rate per epoch along a half cosine to 0, as PyTorch's
    /// `CosineAnnealingLR(T_max = epochs)` stepped once per epoch.
    pub cosine: bool,
}

impl Recipe {
    /// The learning rate of epoch `epoch` (1-based).
    pub fn lr_at(&self, epoch: usize) -> f32 {
        if !self.cosine {
            return self.lr;
        }
        let t = (epoch - 1) as f64 / self.epochs.max(1) as f64;
        (self.lr as f64 * 0.5 * (1.0 + (std::f64::consts::PI * t).cos())) as f32
    }
}

/// The README's recipe for W1 on the digits: SGD with momentum 0.9, batch 32.
pub const RECIPE: Recipe = Recipe {
    epochs: 10,
    batch: 32,
    lr: 0.05,
    momentum: 0.9,
    seed: 1,
    cosine: true,
};

/// What an epoch measured.
#[derive(Clone, Copy, Debug)]
pub struct EpochReport {
    /// 1-based.
    pub epoch: usize,
    /// Mean training loss.
    pub loss: f32,
    /// Held-out accuracy, 0..1.
    pub accuracy: f32,
    /// Mean wall-clock microseconds per training step.
    pub us_per_step: f64,
    /// Steps in which fixed-point arithmetic saturated (always 0 for `f32`).
    pub saturated_steps: usize,
}

/// Bytes a W1 training step (forward, backward, SGD with momentum) needs at this batch
/// and size in scalar type `S`, parameters and optimizer state included: one step on a
/// meta graph (no data, no kernels run).
pub fn plan_bytes_in<S: Scalar>(batch: usize, h: usize, w: usize) -> Result<usize, Error> {
    let mut g: Graph<S, TAPE> = Graph::meta(usize::MAX);
    let mut rng = Rng::new(0);
    let model = digits_fcn(&mut g, &mut rng)?;
    let mut sgd = Sgd::new(&mut g, 0.01, 0.9, 0.0)?;
    let x = g.input(&[batch, 1, h, w], &[])?;
    let logits = model.forward(&mut g, x)?;
    let loss = g.cross_entropy(logits, &[])?;
    g.backward(loss)?;
    sgd.step(&mut g)?;
    Ok(g.arena().high_water_bytes())
}

/// Copies digits of one size into the input tensor, pixels scaled to 0..1 (converted
/// to `S` by its rounding rule).
fn fill<S: Scalar>(dst: &mut [S], batch: &[&Digit]) {
    for (chunk, d) in dst.chunks_exact_mut(d0(batch).0 * d0(batch).1).zip(batch) {
        for (v, &p) in chunk.iter_mut().zip(&d.pixels) {
            *v = S::from_f32(p as f32 * (1.0 / 255.0));
        }
    }
}

fn d0(batch: &[&Digit]) -> (usize, usize) {
    batch.first().map_or((0, 0), |d| (d.h, d.w))
}

/// Held-out accuracy of a model, evaluated one digit at a time (sizes may differ).
pub fn accuracy<S: Scalar, const N: usize>(
    g: &mut Graph<'_, S, N>,
    model: &Sequential<12>,
    test: &[Digit],
) -> Result<f32, Error> {
    let mut correct = 0usize;
    g.set_grad_enabled(false);
    for d in test {
        let x = g.input_with(&[1, 1, d.h, d.w], |dst| fill(dst, &[d]))?;
        let logits = model.forward(g, x)?;
        let row = g.data(logits)?;
        let best = (0..row.len())
            .max_by(|&a, &b| row[a].to_f32().total_cmp(&row[b].to_f32()))
            .unwrap_or(0);
        correct += (best == d.label as usize) as usize;
        g.end_step();
    }
    g.set_grad_enabled(true);
    Ok(correct as f32 / test.len().max(1) as f32)
}

/// Trains W1 on `train` (all one size per batch) in scalar type `S` (`f32` or
/// [`torchlet::Q16`]) and reports each epoch on `test`: the same recipe,
/// initialisation and shuffles for every type, so two types can be compared in one run.
/// `loss_scale` seeds `backward` (and [`Sgd::with_grad_scale`] divides it out again):
/// 1 for `f32`, [`FIXED_LOSS_SCALE`] for fixed point.
pub fn train_w1_in<S: Scalar>(
    train: &[Digit],
    test: &[Digit],
    r: Recipe,
    loss_scale: f32,
    mut report: impl FnMut(&EpochReport),
) -> Result<(Vec<EpochReport>, usize), Error> {
    let (h, w) = (train[0].h, train[0].w);
    let bytes = plan_bytes_in::<S>(r.batch, h, w)?.max(plan_bytes_in::<S>(1, h, w)?);
    let mut arena = vec![S::ZERO; bytes / core::mem::size_of::<S>()];
    let mut g: Graph<S, TAPE> = Graph::new(&mut arena);
    let mut rng = Rng::new(r.seed);
    let model = digits_fcn(&mut g, &mut rng)?;
    let mut sgd = Sgd::new(&mut g, r.lr, r.momentum, 0.0)?.with_grad_scale(loss_scale);
    let seed = [S::from_f32(loss_scale)];
    let mut order: Vec<usize> = (0..train.len()).collect();
    let mut labels = vec![0usize; r.batch];
    let mut reports = Vec::new();
    for epoch in 1..=r.epochs {
        rng.shuffle(&mut order);
        sgd.lr = r.lr_at(epoch);
        let (mut loss_sum, mut steps, mut saturated_steps) = (0.0f64, 0usize, 0usize);
        fixed::take_saturated();
        let start = Instant::now();
        for idx in order.chunks(r.batch) {
            let batch: Vec<&Digit> = idx.iter().map(|&i| &train[i]).collect();
            for (l, d) in labels.iter_mut().zip(&batch) {
                *l = d.label as usize;
            }
            g.zero_grad();
            let x = g.input_with(&[batch.len(), 1, h, w], |dst| fill(dst, &batch))?;
            let logits = model.forward(&mut g, x)?;
            let loss = g.cross_entropy(logits, &labels[..batch.len()])?;
            loss_sum += g.data(loss)?[0].to_f32() as f64;
            if loss_scale == 1.0 {
                g.backward(loss)?;
            } else {
                g.backward_with(loss, &seed)?;
            }
            sgd.step(&mut g)?;
            g.end_step();
            steps += 1;
            saturated_steps += fixed::take_saturated() as usize;
        }
        let us_per_step = start.elapsed().as_secs_f64() * 1e6 / steps as f64;
        let accuracy = accuracy(&mut g, &model, test)?;
        let rep = EpochReport {
            epoch,
            loss: (loss_sum / steps as f64) as f32,
            accuracy,
            us_per_step,
            saturated_steps,
        };
        report(&rep);
        reports.push(rep);
    }
    Ok((reports, g.arena().high_water_bytes()))
}
