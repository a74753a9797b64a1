//! W1 on the variable-size digits, with the input preparation as a parameter: native
//! sizes (bucketed by shape), everything resized to a fixed size (the `interpolate`
//! op), everything zero-padded to a fixed size (the `pad` op), dynamic padding to each
//! batch's largest size, and progressive resizing. Used by the `varsize_digits`
//! example and the end-to-end test.

use crate::digits::Digit;
use crate::varsize::{bucket_batches, max_size, padded_pixels, progressive_side};
use std::time::Instant;
use torchlet::init::Rng;
use torchlet::nn::{digits_fcn, Sequential};
use torchlet::optim::Sgd;
use torchlet::{Graph, InterpMode, Result, Tensor};

/// How samples become input tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prep {
    /// Native size, one sample at a time, gradients accumulated over each shuffled
    /// group of `batch` samples before one optimizer step.
    Native,
    /// Native size; batches bucketed by shape (one tensor per batch).
    Bucketed,
    /// Like `Native`, each sample bilinearly resized to `side x side` in the graph.
    Resized(usize),
    /// Like `Native`, each sample zero-padded (centred) to `side x side` in the graph.
    Padded(usize),
    /// Shuffled batches of mixed sizes, each zero-padded to its largest member.
    DynamicPad,
    /// Like `Native`, resized to a side rising from `.0` to `.1` over the epochs;
    /// evaluated at the final side.
    Progressive(usize, usize),
}

/// One epoch's figures.
#[derive(Clone, Copy, Debug)]
pub struct Epoch {
    /// 1-based.
    pub epoch: usize,
    /// Mean training loss.
    pub loss: f32,
    /// Held-out accuracy, 0..1.
    pub accuracy: f32,
    /// Training samples per second (forward, backward, update; data preparation
    /// included).
    pub samples_per_s: f64,
    /// Input side used this epoch (progressive resizing), else 0.
    pub side: usize,
}

/// Training settings.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// Passes over the training set.
    pub epochs: usize,
    /// Largest batch.
    pub batch: usize,
    /// SGD learning rate and momentum.
    pub lr: f32,
    /// SGD momentum.
    pub momentum: f32,
    /// Seed of initialisation and shuffles.
    pub seed: u64,
}

const TAPE: usize = 32;

/// Records the input of a batch of digits as `prep` wants it (side: the current
/// progressive side).
fn batch_input<const N: usize>(
    g: &mut Graph<'_, f32, N>,
    ds: &[&Digit],
    prep: Prep,
    side: usize,
) -> Result<Tensor> {
    let (h, w) = max_size(ds);
    let b = ds.len();
    let x = g.input_with(&[b, 1, h, w], |dst| {
        for (chunk, d) in dst.chunks_exact_mut(h * w).zip(ds) {
            padded_pixels(d, h, w, chunk);
        }
    })?;
    match prep {
        Prep::Native | Prep::Bucketed | Prep::DynamicPad => Ok(x),
        Prep::Resized(s) => g.interpolate(x, [s, s], InterpMode::Bilinear { align_corners: false }),
        Prep::Progressive(..) => {
            g.interpolate(x, [side, side], InterpMode::Bilinear { align_corners: false })
        }
        Prep::Padded(s) => {
            let (ph, pw) = (s.saturating_sub(h), s.saturating_sub(w));
            g.zero_pad(x, [pw / 2, pw - pw / 2, ph / 2, ph - ph / 2])
        }
    }
}

/// Held-out accuracy, one digit at a time, prepared as in training.
pub fn evaluate<const N: usize>(
    g: &mut Graph<'_, f32, N>,
    model: &Sequential<12>,
    test: &[Digit],
    prep: Prep,
    side: usize,
) -> Result<f32> {
    let mut correct = 0;
    g.set_grad_enabled(false);
    for d in test {
        let x = batch_input(g, &[d], prep, side)?;
        let logits = model.forward(g, x)?;
        let row = g.data(logits)?;
        let best = (0..row.len())
            .max_by(|&a, &b| row[a].total_cmp(&row[b]))
            .unwrap_or(0);
        correct += (best == d.label as usize) as usize;
        g.end_step();
    }
    g.set_grad_enabled(true);
    Ok(correct as f32 / test.len().max(1) as f32)
}

/// Trains W1 with `prep` and reports each epoch.
pub fn train(
    train: &[Digit],
    test: &[Digit],
    prep: Prep,
    s: Settings,
    mut report: impl FnMut(&Epoch),
) -> Result<Vec<Epoch>> {
    let mut arena = vec![0.0f32; 2 << 20];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let mut rng = Rng::new(s.seed);
    let model = digits_fcn(&mut g, &mut rng)?;
    // Per-sample accumulation sums `batch` gradients of mean-over-one losses: the
    // learning rate is divided by the batch so the update equals a batch-mean step.
    let accumulate = !matches!(prep, Prep::Bucketed | Prep::DynamicPad);
    let lr = if accumulate { s.lr / s.batch as f32 } else { s.lr };
    let mut sgd = Sgd::new(&mut g, lr, s.momentum, 0.0)?;
    let shapes: Vec<(usize, usize)> = train.iter().map(|d| (d.h, d.w)).collect();
    let mut labels = Vec::with_capacity(s.batch);
    let mut out = Vec::new();
    for epoch in 0..s.epochs {
        let side = match prep {
            Prep::Progressive(a, b) => progressive_side(epoch, s.epochs, a, b),
            _ => 0,
        };
        let batches = if prep == Prep::Bucketed {
            bucket_batches(&shapes, s.batch, &mut rng)
        } else {
            let mut order: Vec<usize> = (0..train.len()).collect();
            rng.shuffle(&mut order);
            order.chunks(s.batch).map(|c| c.to_vec()).collect()
        };
        let (mut loss_sum, mut steps) = (0.0f64, 0usize);
        let start = Instant::now();
        for idx in &batches {
            let ds: Vec<&Digit> = idx.iter().map(|&i| &train[i]).collect();
            g.zero_grad();
            let groups: Vec<&[&Digit]> = if accumulate {
                ds.chunks(1).collect()
            } else {
                vec![&ds[..]]
            };
            for group in groups {
                labels.clear();
                labels.extend(group.iter().map(|d| d.label as usize));
                let x = batch_input(&mut g, group, prep, side)?;
                let logits = model.forward(&mut g, x)?;
                let loss = g.cross_entropy(logits, &labels)?;
                loss_sum += g.data(loss)?[0] as f64 * group.len() as f64;
                g.backward(loss)?;
                // Parameter gradients persist: the tape can go after each sample.
                g.end_step();
            }
            sgd.step(&mut g)?;
            steps += ds.len();
        }
        let secs = start.elapsed().as_secs_f64();
        let eval_side = match prep {
            Prep::Progressive(_, b) => b,
            _ => 0,
        };
        let accuracy = evaluate(&mut g, &model, test, prep, eval_side)?;
        let e = Epoch {
            epoch: epoch + 1,
            loss: (loss_sum / steps.max(1) as f64) as f32,
            accuracy,
            samples_per_s: train.len() as f64 / secs,
            side,
        };
        report(&e);
        out.push(e);
    }
    Ok(out)
}
