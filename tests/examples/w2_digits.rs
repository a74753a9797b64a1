//! Trains W2 ("mobile-fcn", `torchlet::nn::mobile_fcn`: depthwise-separable inverted
//! residual blocks with BatchNorm and ReLU6) from scratch on the real MNIST digits
//! (8,000 training, 2,000 held out) and prints held-out accuracy per epoch, in f32 or
//! in Q16.16 fixed point.
//!
//! `cargo run --release -p torchlet-tests --example w2_digits [-- EPOCHS f32|q16]`
//!
//! The recipe is tests/golden/make_w2.py's (PyTorch: 98.20% after 8 epochs): SGD with
//! momentum 0.9 at batch 32, lr 0.05 decayed per epoch along a half cosine, BatchNorm in
//! training mode for the steps and in eval mode for the held-out digits.

use std::time::Instant;
use torchlet::init::Rng;
use torchlet::nn::{mobile_fcn, Block, MobileFcn};
use torchlet::optim::Sgd;
use torchlet::schedule::{Decay, Schedule};
use torchlet::{Error, Graph, Scalar, Q16};
use torchlet_tests::digits::{Digit, Digits};

/// Tape records of a W2 step (a meta step's `tape_len()` is below it).
const TAPE: usize = 256;
const LR: f32 = 0.05;
const MOMENTUM: f32 = 0.9;
const BATCH: usize = 32;
const SEED: u64 = 1;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let epochs: usize = args.first().map_or(Ok(4), |s| s.parse())?;
    match args.get(1).map_or("f32", String::as_str) {
        "q16" => run::<Q16>(epochs)?,
        _ => run::<f32>(epochs)?,
    };
    Ok(())
}

/// Trains for `epochs` and returns the held-out accuracy after each.
pub fn run<S: Scalar>(epochs: usize) -> Result<Vec<f32>, Box<dyn std::error::Error>> {
    let digits = Digits::load()?;
    let (train, test) = digits.split();
    let (h, w) = (train[0].h, train[0].w);
    let bytes = plan_bytes::<S>(BATCH, h, w)?;
    println!(
        "W2 mobile-fcn ({}): arena plan {bytes} bytes per step at batch {BATCH}",
        S::NAME
    );
    let mut arena = vec![S::ZERO; bytes.div_ceil(4)];
    let mut g: Graph<S, TAPE> = Graph::new(&mut arena);
    let mut rng = Rng::new(SEED);
    let model = mobile_fcn(&mut g, &mut rng)?;
    let mut sgd = Sgd::new(&mut g, LR, MOMENTUM, 0.0)?;
    let schedule = Schedule::new(
        LR,
        Decay::Cosine {
            total: epochs.max(1),
            min: 0.0,
        },
    )?;
    let mut order: Vec<usize> = (0..train.len()).collect();
    let mut labels = vec![0usize; BATCH];
    let mut accuracies = Vec::new();
    for epoch in 1..=epochs {
        rng.shuffle(&mut order);
        sgd.lr = schedule.lr_at(epoch - 1);
        let (mut loss_sum, mut steps, start) = (0.0f64, 0usize, Instant::now());
        g.set_training(true);
        for idx in order.chunks(BATCH) {
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
            loss_sum += g.data(loss)?[0].to_f32() as f64;
            g.backward(loss)?;
            sgd.step(&mut g)?;
            g.end_step();
            steps += 1;
        }
        let ms_per_step = start.elapsed().as_secs_f64() * 1e3 / steps as f64;
        let acc = accuracy(&mut g, &model, test)?;
        println!(
            "epoch {epoch:2}  loss {:.4}  held-out accuracy {:.2}%  {ms_per_step:.2} ms/step",
            loss_sum / steps as f64,
            acc * 100.0
        );
        accuracies.push(acc);
    }
    Ok(accuracies)
}

/// A digit's pixels scaled to 0..1.
fn pixels<S: Scalar>(dst: &mut [S], d: &Digit) {
    for (v, &p) in dst.iter_mut().zip(&d.pixels) {
        *v = S::from_f32(p as f32 * (1.0 / 255.0));
    }
}

/// Bytes of a training step (forward, backward, SGD with momentum) at this batch and
/// size, parameters, buffers and optimizer state included: one step on a meta graph.
fn plan_bytes<S: Scalar>(batch: usize, h: usize, w: usize) -> Result<usize, Error> {
    let mut g: Graph<S, TAPE> = Graph::meta(usize::MAX);
    let model = mobile_fcn(&mut g, &mut Rng::new(0))?;
    let mut sgd = Sgd::new(&mut g, 0.01, MOMENTUM, 0.0)?;
    let x = g.input(&[batch, 1, h, w], &[])?;
    let logits = model.forward(&mut g, x)?;
    let loss = g.cross_entropy(logits, &[])?;
    g.backward(loss)?;
    sgd.step(&mut g)?;
    Ok(g.arena().high_water_bytes())
}

/// Held-out accuracy in eval mode (running statistics, no dropout), 100 digits a batch.
fn accuracy<S: Scalar>(g: &mut Graph<'_, S, TAPE>, model: &MobileFcn, test: &[Digit]) -> Result<f32, Error> {
    let (mut correct, (h, w)) = (0usize, (test[0].h, test[0].w));
    g.set_grad_enabled(false);
    g.set_training(false);
    for chunk in test.chunks(BATCH) {
        let x = g.input_with(&[chunk.len(), 1, h, w], |dst| {
            for (d, digit) in dst.chunks_exact_mut(h * w).zip(chunk) {
                pixels(d, digit);
            }
        })?;
        let logits = model.forward(g, x)?;
        let labels: Vec<u32> = chunk.iter().map(|d| d.label as u32).collect();
        correct += g.count_correct(logits, &labels)?;
        g.end_step();
    }
    g.set_grad_enabled(true);
    g.set_training(true);
    Ok(correct as f32 / test.len().max(1) as f32)
}
