//! The README's main command: trains W1 (`torchlet::nn::digits_fcn`) on the real MNIST
//! digits (8,000 training, 2,000 held out) on the host and prints per-epoch progress,
//! held-out accuracy, the arena's high-water mark and the time per step.
//!
//! `cargo run --release -p torchlet-tests --example train_digits [-- EPOCHS BATCH]`
//!
//! It stands alone: the whole training step is below, written with torchlet's public
//! API. Copied into a new crate (dependencies `torchlet` and `std`), only the data
//! loader, `torchlet_tests::digits`, needs replacing by your own.

use std::time::Instant;
use torchlet::init::Rng;
use torchlet::nn::{digits_fcn, Sequential};
use torchlet::optim::Sgd;
use torchlet::schedule::{Decay, Schedule};
use torchlet::{Error, Graph};
use torchlet_tests::digits::{Digit, Digits};

/// Tape records: W1's 8 parameters, 1 input and 12 op records fit in 32 (a meta
/// step's `tape_len()` tells the exact number).
const TAPE: usize = 32;
/// SGD with momentum 0.9 at batch 32, the learning rate decayed per epoch along a half
/// cosine to 0 (PyTorch's `CosineAnnealingLR(T_max = epochs)` stepped once per epoch).
const LR: f32 = 0.05;
const MOMENTUM: f32 = 0.9;
/// Seed of the initialisation and the shuffles.
const SEED: u64 = 1;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let epochs: usize = args.first().map_or(Ok(10), |s| s.parse())?;
    let batch: usize = args.get(1).map_or(Ok(32), |s| s.parse())?;
    let digits = Digits::load()?;
    let (train, test) = digits.split();
    println!(
        "W1 digits-fcn on {} training / {} held-out MNIST digits, Recipe {{ epochs: {epochs}, \
         batch: {batch}, lr: {LR}, momentum: {MOMENTUM}, seed: {SEED}, cosine: true }}",
        train.len(),
        test.len()
    );
    let (h, w) = (train[0].h, train[0].w);
    // The arena a step needs, planned on a meta graph (no data, no kernels run); the
    // last batch of an epoch may be smaller, batch 1 is the evaluation.
    let (step, single) = (plan_bytes(batch, h, w)?, plan_bytes(1, h, w)?);
    println!("arena plan: {step} bytes per step at batch {batch}, {single} bytes at batch 1 (28x28)");
    let mut arena = vec![0.0f32; step.max(single) / 4];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let mut rng = Rng::new(SEED);
    let model = digits_fcn(&mut g, &mut rng)?;
    let mut sgd = Sgd::new(&mut g, LR, MOMENTUM, 0.0)?;
    let schedule = Schedule::new(
        LR,
        Decay::Cosine {
            total: epochs.max(1),
            min: 0.0,
        },
    )?;
    let mut order: Vec<usize> = (0..train.len()).collect();
    let mut labels = vec![0usize; batch];
    for epoch in 1..=epochs {
        rng.shuffle(&mut order);
        sgd.lr = schedule.lr_at(epoch - 1);
        let (mut loss_sum, mut steps, start) = (0.0f64, 0usize, Instant::now());
        for idx in order.chunks(batch) {
            // One training step: inputs, forward, loss, backward, optimizer, end.
            for (l, &i) in labels.iter_mut().zip(idx) {
                *l = train[i].label as usize;
            }
            g.zero_grad();
            let x = g.input_with(&[idx.len(), 1, h, w], |dst| {
                for (chunk, &i) in dst.chunks_exact_mut(h * w).zip(idx) {
                    pixels(chunk, &train[i]);
                }
            })?;
            let logits = model.forward(&mut g, x)?;
            let loss = g.cross_entropy(logits, &labels[..idx.len()])?;
            loss_sum += g.data(loss)?[0] as f64;
            g.backward(loss)?;
            sgd.step(&mut g)?;
            g.end_step();
            steps += 1;
        }
        let us_per_step = start.elapsed().as_secs_f64() * 1e6 / steps as f64;
        println!(
            "epoch {epoch:2}  loss {:.4}  held-out accuracy {:.2}%  {us_per_step:.0} us/step",
            (loss_sum / steps as f64) as f32,
            accuracy(&mut g, &model, test)? * 100.0,
        );
    }
    println!("arena high-water mark: {} bytes", g.arena().high_water_bytes());
    Ok(())
}

/// A digit's pixels scaled to 0..1.
fn pixels(dst: &mut [f32], d: &Digit) {
    for (v, &p) in dst.iter_mut().zip(&d.pixels) {
        *v = p as f32 * (1.0 / 255.0);
    }
}

/// Bytes a training step (forward, backward, SGD with momentum) needs at this batch
/// and size, parameters and optimizer state included: one step on a meta graph.
fn plan_bytes(batch: usize, h: usize, w: usize) -> Result<usize, Error> {
    let mut g: Graph<f32, TAPE> = Graph::meta(usize::MAX);
    let model = digits_fcn(&mut g, &mut Rng::new(0))?;
    let mut sgd = Sgd::new(&mut g, 0.01, MOMENTUM, 0.0)?;
    let x = g.input(&[batch, 1, h, w], &[])?;
    let logits = model.forward(&mut g, x)?;
    let loss = g.cross_entropy(logits, &[])?;
    g.backward(loss)?;
    sgd.step(&mut g)?;
    Ok(g.arena().high_water_bytes())
}

/// Held-out accuracy, one digit at a time with gradients off.
fn accuracy(g: &mut Graph<'_, f32, TAPE>, model: &Sequential<12>, test: &[Digit]) -> Result<f32, Error> {
    let mut correct = 0usize;
    g.set_grad_enabled(false);
    for d in test {
        let x = g.input_with(&[1, 1, d.h, d.w], |dst| pixels(dst, d))?;
        let logits = model.forward(g, x)?;
        correct += g.count_correct(logits, &[d.label as u32])?;
        g.end_step();
    }
    g.set_grad_enabled(true);
    Ok(correct as f32 / test.len().max(1) as f32)
}
