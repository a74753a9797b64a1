//! The MNIST digits read as sequences by a 1-D convolutional network: each digit is
//! cropped to its ink (plus a 1-pixel margin), each of its rows is one time step of 28
//! features (the row, centred in 28 columns), so sequences have 8 to 24 steps. Batches
//! of digits sorted by length are padded at the end with empty rows; three `conv1d`
//! layers, a mean over time and a linear head classify them.
//!
//! `cargo run --release -p torchlet-tests --example sequence_digits [-- EPOCHS]`

use std::time::Instant;
use torchlet::init::Rng;
use torchlet::nn::{Conv1d, Linear};
use torchlet::optim::Sgd;
use torchlet::{Conv1dParams, Error, Graph, Tensor};
use torchlet_tests::digits::{Digit, Digits};

const TAPE: usize = 64;
const BATCH: usize = 16;
const FEATURES: usize = 28;
const LR: f32 = 0.05;
const MOMENTUM: f32 = 0.9;
const SEED: u64 = 5;

/// conv1d(28->32, k3) ReLU, conv1d(32->64, k3, stride 2) ReLU, conv1d(64->64, k3) ReLU,
/// mean over time, linear(64->10).
pub struct SeqNet {
    c1: Conv1d,
    c2: Conv1d,
    c3: Conv1d,
    fc: Linear,
}

impl SeqNet {
    fn new(g: &mut Graph<'_, f32, TAPE>, rng: &mut Rng) -> Result<Self, Error> {
        let p = |stride| Conv1dParams {
            stride,
            padding: 1,
            ..Conv1dParams::default()
        };
        Ok(SeqNet {
            c1: Conv1d::new(g, FEATURES, 32, 3, p(1), true, rng)?,
            c2: Conv1d::new(g, 32, 64, 3, p(2), true, rng)?,
            c3: Conv1d::new(g, 64, 64, 3, p(1), true, rng)?,
            fc: Linear::new(g, 64, 10, true, rng)?,
        })
    }

    fn forward(&self, g: &mut Graph<'_, f32, TAPE>, x: Tensor) -> Result<Tensor, Error> {
        let mut y = x;
        for c in [&self.c1, &self.c2, &self.c3] {
            let z = c.forward(g, y)?;
            y = g.relu(z)?;
        }
        let m = g.mean(y, &[2], false)?;
        self.fc.forward(g, m)
    }
}

/// A batch `[n, 28, L]` (L the longest digit's rows) from cropped digits.
fn batch(ds: &[&Digit]) -> (usize, Vec<f32>) {
    let l = ds.iter().map(|d| d.h).max().unwrap_or(1);
    let mut x = vec![0.0; ds.len() * FEATURES * l];
    for (k, d) in ds.iter().enumerate() {
        let off = (FEATURES - d.w.min(FEATURES)) / 2;
        for t in 0..d.h {
            for c in 0..d.w.min(FEATURES) {
                x[(k * FEATURES + off + c) * l + t] = d.pixels[t * d.w + c] as f32 / 255.0;
            }
        }
    }
    (l, x)
}

/// Trains for `epochs` and returns the held-out accuracy after each.
pub fn run(epochs: usize) -> Result<Vec<f32>, Box<dyn std::error::Error>> {
    let digits = Digits::load()?;
    let (train, test) = digits.split();
    let crop = |ds: &[Digit]| ds.iter().map(|d| d.cropped(1, 1)).collect::<Vec<_>>();
    let (train, test) = (crop(train), crop(test));
    let mut meta: Graph<f32, TAPE> = Graph::meta(usize::MAX);
    let net = SeqNet::new(&mut meta, &mut Rng::new(0))?;
    Sgd::new(&mut meta, LR, MOMENTUM, 0.0)?;
    let x = meta.input(&[BATCH, FEATURES, 28], &[])?;
    let y = net.forward(&mut meta, x)?;
    let l = meta.cross_entropy(y, &[0; BATCH])?;
    meta.backward(l)?;
    let bytes = meta.arena().high_water_bytes();
    println!("conv1d digit sequences: arena plan {bytes} bytes per step at batch {BATCH}, 28 steps");
    let mut arena = vec![0.0f32; bytes.div_ceil(4)];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let mut rng = Rng::new(SEED);
    let net = SeqNet::new(&mut g, &mut rng)?;
    let mut sgd = Sgd::new(&mut g, LR, MOMENTUM, 0.0)?;
    // Batches of similar lengths: sorted by length, cut, and the batches shuffled.
    let mut by_len: Vec<usize> = (0..train.len()).collect();
    by_len.sort_by_key(|&i| train[i].h);
    let mut batches: Vec<Vec<usize>> = by_len.chunks(BATCH).map(|c| c.to_vec()).collect();
    let mut accuracies = Vec::new();
    for epoch in 1..=epochs {
        rng.shuffle(&mut batches);
        let (mut loss_sum, start) = (0.0f64, Instant::now());
        for idx in &batches {
            let ds: Vec<&Digit> = idx.iter().map(|&i| &train[i]).collect();
            let (l, x) = batch(&ds);
            let labels: Vec<usize> = ds.iter().map(|d| d.label as usize).collect();
            g.zero_grad();
            let xt = g.input(&[ds.len(), FEATURES, l], &x)?;
            let logits = net.forward(&mut g, xt)?;
            let loss = g.cross_entropy(logits, &labels)?;
            loss_sum += g.data(loss)?[0] as f64;
            g.backward(loss)?;
            sgd.step(&mut g)?;
            g.end_step();
        }
        let ms = start.elapsed().as_secs_f64() * 1e3 / batches.len() as f64;
        // Held out one digit at a time, at its own length.
        let mut correct = 0;
        g.set_grad_enabled(false);
        for d in &test {
            let (l, x) = batch(&[d]);
            let xt = g.input(&[1, FEATURES, l], &x)?;
            let logits = net.forward(&mut g, xt)?;
            correct += g.count_correct(logits, &[d.label as u32])?;
            g.end_step();
        }
        g.set_grad_enabled(true);
        let acc = correct as f32 / test.len() as f32;
        println!(
            "epoch {epoch:2}  loss {:.4}  held-out accuracy {:.2}%  {ms:.2} ms/step",
            loss_sum / batches.len() as f64,
            100.0 * acc
        );
        accuracies.push(acc);
    }
    Ok(accuracies)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let epochs: usize = std::env::args().nth(1).map_or(Ok(3), |s| s.parse())?;
    run(epochs)?;
    Ok(())
}
