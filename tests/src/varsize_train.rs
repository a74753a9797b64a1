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
use torchlet::schedule::{Decay, Schedule};
use torchlet::{Graph, InterpMode, Result, Tensor};

/// How samples become input tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prep {
    /// Native size, one sample at a time, gradients accumulated over each shuffled
    /// group of `batch` samples before one optimizer step.
    Native,
    /// Native size; batches bucketed by shape rounded up to `bin` (`[bin_h, bin_w]`;
    /// `[1, 1]`: exact shapes), each batch one tensor padded to its largest member,
    /// batches in shuffled order across buckets, gradients of `mix` bucket batches of
    /// at most `batch / mix` accumulated per optimizer step.
    Bucketed {
        /// Shape bins.
        bin: [usize; 2],
        /// Bucket batches per step.
        mix: usize,
    },
    /// Like `Native`, each sample bilinearly resized to `side x side` in the graph.
    Resized(usize),
    /// Like `Native`, each sample zero-padded (centred) to `side x side` in the graph.
    Padded(usize),
    /// Shuffled batches of mixed sizes, each zero-padded to its largest member.
    DynamicPad,
    /// Like `Native`, resized to a side rising from `.0` to `.1` over the epochs;
    /// evaluated at the epoch's side (the last epoch's is `.1`).
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
    /// Training samples per wall-clock second (forward, backward, update; data
    /// preparation included).
    pub samples_per_s: f64,
    /// Training samples per second of [`Settings::cpu_clock`] time (NaN without one):
    /// steadier than wall time on a shared machine.
    pub samples_per_cpu_s: f64,
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
    /// Seconds of CPU time used by this thread, if the caller has such a clock.
    pub cpu_clock: Option<fn() -> f64>,
    /// Decay the learning rate per epoch along a half cosine (PyTorch's
    /// `CosineAnnealingLR(T_max = epochs)` stepped once per epoch), else keep it.
    pub cosine: bool,
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
        Prep::Native | Prep::Bucketed { .. } | Prep::DynamicPad => Ok(x),
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

/// Held-out accuracy, prepared as in training: one digit at a time, except dynamic
/// padding, which is evaluated in batches of `batch` in file order padded to their
/// largest member (what it was trained on; one digit alone would see no padding).
pub fn evaluate<const N: usize>(
    g: &mut Graph<'_, f32, N>,
    model: &Sequential<12>,
    test: &[Digit],
    prep: Prep,
    side: usize,
    batch: usize,
) -> Result<f32> {
    let group = if prep == Prep::DynamicPad { batch.max(1) } else { 1 };
    let mut correct = 0;
    g.set_grad_enabled(false);
    for ds in test.chunks(group) {
        let ds: Vec<&Digit> = ds.iter().collect();
        let x = batch_input(g, &ds, prep, side)?;
        let logits = model.forward(g, x)?;
        let labels: Vec<u32> = ds.iter().map(|d| d.label as u32).collect();
        correct += g.count_correct(logits, &labels)?;
        g.end_step();
    }
    g.set_grad_enabled(true);
    Ok(correct as f32 / test.len().max(1) as f32)
}

/// One epoch's optimizer steps, each a list of groups of sample indices; a group is
/// one input tensor. Per-sample preparations: shuffled steps of `batch` single-sample
/// groups (gradient accumulation). Dynamic padding: shuffled steps of one group of
/// `batch`. Bucketing: bucket batches of at most `batch / mix` (in shuffled order
/// across buckets), `mix` of them per step.
pub fn epoch_steps(
    prep: Prep,
    batch: usize,
    shapes: &[(usize, usize)],
    rng: &mut Rng,
) -> Vec<Vec<Vec<usize>>> {
    if let Prep::Bucketed { bin, mix } = prep {
        let mix = mix.clamp(1, batch.max(1));
        let batches = bucket_batches(shapes, batch / mix, bin, rng);
        return batches.chunks(mix).map(|c| c.to_vec()).collect();
    }
    let mut order: Vec<usize> = (0..shapes.len()).collect();
    rng.shuffle(&mut order);
    let group = if prep == Prep::DynamicPad { batch } else { 1 };
    order
        .chunks(batch.max(1))
        .map(|step| step.chunks(group.max(1)).map(<[usize]>::to_vec).collect())
        .collect()
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
    // Every group's mean loss is weighted by its share of the step's nominal batch, so
    // each step's gradient is the mean over `batch` samples however they are grouped
    // (one tensor, several bucket batches, or one sample at a time).
    let mut sgd = Sgd::new(&mut g, s.lr, s.momentum, 0.0)?;
    let total = s.epochs.max(1);
    let cosine = s
        .cosine
        .then(|| Schedule::new(s.lr, Decay::Cosine { total, min: 0.0 }))
        .transpose()?;
    let shapes: Vec<(usize, usize)> = train.iter().map(|d| (d.h, d.w)).collect();
    let mut labels = Vec::with_capacity(s.batch);
    let mut out = Vec::new();
    for epoch in 0..s.epochs {
        let side = match prep {
            Prep::Progressive(a, b) => progressive_side(epoch, s.epochs, a, b),
            _ => 0,
        };
        if let Some(schedule) = cosine {
            sgd.lr = schedule.lr_at(epoch);
        }
        let steps = epoch_steps(prep, s.batch, &shapes, &mut rng);
        let (mut loss_sum, mut seen) = (0.0f64, 0usize);
        let start = Instant::now();
        let cpu_start = s.cpu_clock.map_or(f64::NAN, |c| c());
        for step in &steps {
            g.zero_grad();
            for idx in step {
                let group: Vec<&Digit> = idx.iter().map(|&i| &train[i]).collect();
                labels.clear();
                labels.extend(group.iter().map(|d| d.label as usize));
                let x = batch_input(&mut g, &group, prep, side)?;
                let logits = model.forward(&mut g, x)?;
                let loss = g.cross_entropy(logits, &labels)?;
                loss_sum += g.data(loss)?[0] as f64 * group.len() as f64;
                g.backward_with(loss, &[group.len() as f32 / s.batch as f32])?;
                // Parameter gradients persist: the tape can go after each group.
                g.end_step();
                seen += group.len();
            }
            sgd.step(&mut g)?;
        }
        let secs = start.elapsed().as_secs_f64();
        let cpu_secs = s.cpu_clock.map_or(f64::NAN, |c| c()) - cpu_start;
        let accuracy = evaluate(&mut g, &model, test, prep, side, s.batch)?;
        let e = Epoch {
            epoch: epoch + 1,
            loss: (loss_sum / seen.max(1) as f64) as f32,
            accuracy,
            samples_per_s: train.len() as f64 / secs,
            samples_per_cpu_s: train.len() as f64 / cpu_secs,
            side,
        };
        report(&e);
        out.push(e);
    }
    Ok(out)
}
