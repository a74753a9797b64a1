//! Segmentation of the real MNIST digits with a U-Net-like fully convolutional network
//! (convolutions, max pooling, `conv_transpose2d` upsampling, `cat` skips, a 1x1
//! convolution to 11 classes) trained with a per-pixel cross-entropy that ignores
//! padding: every pixel is background (class 0) or ink of the digit's class (1 + label);
//! digits keep their native cropped sizes, and each batch is padded to its largest
//! digit (rounded up to a multiple of 8), the padding labelled 255 and ignored.
//!
//! `cargo run --release -p torchlet-tests --example segment_digits [-- EPOCHS]`
//!
//! Prints per epoch the loss, and on the held-out digits the mean IoU over the 11
//! classes, the pixel accuracy and the foreground pixel accuracy (ink pixels given
//! their digit's class).

use std::time::Instant;
use torchlet::init::Rng;
use torchlet::nn::{Conv2d, ConvTranspose2d};
use torchlet::ops::nll::LossParams;
use torchlet::optim::Adam;
use torchlet::{Conv2dParams, ConvTranspose2dParams, Error, Graph, Pool2dParams, Tensor};
use torchlet_tests::digits::{Digit, Digits};

const TAPE: usize = 64;
const BATCH: usize = 16;
const CLASSES: usize = 11;
/// Pixels at or above this are ink.
const INK: u8 = 128;
const IGNORE: i64 = 255;
const SEED: u64 = 3;
const LR: f32 = 3e-3;

/// The U-Net: three levels down (the deepest sees the whole digit), three up, skips
/// joined by `cat`.
pub struct UNet {
    e1: Conv2d,
    e2: Conv2d,
    e3: Conv2d,
    e4: Conv2d,
    u3: ConvTranspose2d,
    d3: Conv2d,
    u2: ConvTranspose2d,
    d2: Conv2d,
    u1: ConvTranspose2d,
    d1: Conv2d,
    out: Conv2d,
}

impl UNet {
    fn new(g: &mut Graph<'_, f32, TAPE>, rng: &mut Rng) -> Result<Self, Error> {
        let same = Conv2dParams::padded(1);
        let up = ConvTranspose2dParams {
            stride: [2, 2],
            ..ConvTranspose2dParams::default()
        };
        Ok(UNet {
            e1: Conv2d::new(g, 1, 8, 3, same, true, rng)?,
            e2: Conv2d::new(g, 8, 16, 3, same, true, rng)?,
            e3: Conv2d::new(g, 16, 32, 3, same, true, rng)?,
            e4: Conv2d::new(g, 32, 64, 3, same, true, rng)?,
            u3: ConvTranspose2d::new(g, 64, 32, [2, 2], up, true, rng)?,
            d3: Conv2d::new(g, 64, 32, 3, same, true, rng)?,
            u2: ConvTranspose2d::new(g, 32, 16, [2, 2], up, true, rng)?,
            d2: Conv2d::new(g, 32, 16, 3, same, true, rng)?,
            u1: ConvTranspose2d::new(g, 16, 8, [2, 2], up, true, rng)?,
            d1: Conv2d::new(g, 16, 16, 3, same, true, rng)?,
            out: Conv2d::new(g, 16, CLASSES, 1, Conv2dParams::default(), true, rng)?,
        })
    }

    /// Per-pixel logits `[N, 11, H, W]` for `[N, 1, H, W]` (H, W multiples of 8).
    fn forward(&self, g: &mut Graph<'_, f32, TAPE>, x: Tensor) -> Result<Tensor, Error> {
        let pool = Pool2dParams::square(2);
        let c = self.e1.forward(g, x)?;
        let e1 = g.relu(c)?;
        let p = g.max_pool2d(e1, pool)?;
        let c = self.e2.forward(g, p)?;
        let e2 = g.relu(c)?;
        let p = g.max_pool2d(e2, pool)?;
        let c = self.e3.forward(g, p)?;
        let e3 = g.relu(c)?;
        let p = g.max_pool2d(e3, pool)?;
        let c = self.e4.forward(g, p)?;
        let e4 = g.relu(c)?;
        let u = self.u3.forward(g, e4)?;
        let j = g.cat(e3, u, 1)?;
        let c = self.d3.forward(g, j)?;
        let d3 = g.relu(c)?;
        let u = self.u2.forward(g, d3)?;
        let j = g.cat(e2, u, 1)?;
        let c = self.d2.forward(g, j)?;
        let d2 = g.relu(c)?;
        let u = self.u1.forward(g, d2)?;
        let j = g.cat(e1, u, 1)?;
        let c = self.d1.forward(g, j)?;
        let d1 = g.relu(c)?;
        self.out.forward(g, d1)
    }
}

/// A batch: pixels `[n, 1, h, w]` and per-pixel targets, padding labelled 255.
fn batch(ds: &[&Digit]) -> (usize, usize, Vec<f32>, Vec<i64>) {
    let round = |v: usize| v.div_ceil(8) * 8;
    let h = round(ds.iter().map(|d| d.h).max().unwrap_or(4));
    let w = round(ds.iter().map(|d| d.w).max().unwrap_or(4));
    let (mut x, mut t) = (vec![0.0; ds.len() * h * w], vec![IGNORE; ds.len() * h * w]);
    for (k, d) in ds.iter().enumerate() {
        for y in 0..d.h {
            for c in 0..d.w {
                let (p, at) = (d.pixels[y * d.w + c], k * h * w + y * w + c);
                x[at] = p as f32 / 255.0;
                t[at] = if p >= INK { 1 + d.label as i64 } else { 0 };
            }
        }
    }
    (h, w, x, t)
}

/// Held-out scores.
#[derive(Clone, Copy, Debug)]
pub struct Scores {
    /// Mean intersection over union over the classes present.
    pub mean_iou: f64,
    /// Share of counted pixels classified right.
    pub pixel_accuracy: f64,
    /// Share of ink pixels given their digit's class.
    pub foreground_accuracy: f64,
}

/// Trains for `epochs` and returns the held-out scores after each.
pub fn run(epochs: usize) -> Result<Vec<Scores>, Box<dyn std::error::Error>> {
    let digits = Digits::load()?;
    let (train, test) = digits.split();
    let crop = |ds: &[Digit]| ds.iter().map(|d| d.cropped(1, 1)).collect::<Vec<_>>();
    let (train, test) = (crop(train), crop(test));
    // The arena for the largest batch shape (every digit fits 28x28).
    let mut meta: Graph<f32, TAPE> = Graph::meta(usize::MAX);
    let net = UNet::new(&mut meta, &mut Rng::new(0))?;
    Adam::new(&mut meta, LR)?;
    let x = meta.input(&[BATCH, 1, 32, 32], &[])?;
    let y = net.forward(&mut meta, x)?;
    let l = meta.cross_entropy_with(y, &vec![0; BATCH * 32 * 32], LossParams::default())?;
    meta.backward(l)?;
    let bytes = meta.arena().high_water_bytes();
    println!("U-Net digits segmentation: arena plan {bytes} bytes per step at batch {BATCH}, 32x32");
    let mut arena = vec![0.0f32; bytes.div_ceil(4)];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let mut rng = Rng::new(SEED);
    let net = UNet::new(&mut g, &mut rng)?;
    let mut adam = Adam::new(&mut g, LR)?;
    let loss_params = LossParams {
        ignore_index: IGNORE,
        ..LossParams::default()
    };
    let mut order: Vec<usize> = (0..train.len()).collect();
    let mut scores = Vec::new();
    for epoch in 1..=epochs {
        rng.shuffle(&mut order);
        let (mut loss_sum, mut steps, start) = (0.0f64, 0usize, Instant::now());
        for idx in order.chunks(BATCH) {
            let ds: Vec<&Digit> = idx.iter().map(|&i| &train[i]).collect();
            let (h, w, x, t) = batch(&ds);
            g.zero_grad();
            let xt = g.input(&[ds.len(), 1, h, w], &x)?;
            let logits = net.forward(&mut g, xt)?;
            let loss = g.cross_entropy_with(logits, &t, loss_params)?;
            loss_sum += g.data(loss)?[0] as f64;
            g.backward(loss)?;
            adam.step(&mut g)?;
            g.end_step();
            steps += 1;
        }
        let ms = start.elapsed().as_secs_f64() * 1e3 / steps as f64;
        let s = evaluate(&mut g, &net, &test)?;
        println!(
            "epoch {epoch:2}  loss {:.4}  held-out mean IoU {:.3}  pixel accuracy {:.2}%  \
             foreground accuracy {:.2}%  {ms:.1} ms/step",
            loss_sum / steps as f64,
            s.mean_iou,
            100.0 * s.pixel_accuracy,
            100.0 * s.foreground_accuracy
        );
        scores.push(s);
    }
    Ok(scores)
}

fn evaluate(g: &mut Graph<'_, f32, TAPE>, net: &UNet, test: &[Digit]) -> Result<Scores, Error> {
    let (mut inter, mut union) = ([0u64; CLASSES], [0u64; CLASSES]);
    let (mut right, mut counted, mut fg_right, mut fg) = (0u64, 0u64, 0u64, 0u64);
    g.set_grad_enabled(false);
    for chunk in test.chunks(BATCH) {
        let ds: Vec<&Digit> = chunk.iter().collect();
        let (h, w, x, t) = batch(&ds);
        let xt = g.input(&[ds.len(), 1, h, w], &x)?;
        let logits = net.forward(g, xt)?;
        let v = g.data(logits)?;
        for (k, row) in t.chunks(h * w).enumerate() {
            for (p, &truth) in row.iter().enumerate() {
                if truth == IGNORE {
                    continue;
                }
                let score = |c: usize| v[(k * CLASSES + c) * h * w + p];
                let pred = (0..CLASSES)
                    .max_by(|&a, &b| score(a).total_cmp(&score(b)))
                    .unwrap_or(0);
                let truth = truth as usize;
                counted += 1;
                right += (pred == truth) as u64;
                if truth != 0 {
                    fg += 1;
                    fg_right += (pred == truth) as u64;
                }
                if pred == truth {
                    inter[truth] += 1;
                    union[truth] += 1;
                } else {
                    union[truth] += 1;
                    union[pred] += 1;
                }
            }
        }
        g.end_step();
    }
    g.set_grad_enabled(true);
    let present: Vec<f64> = (0..CLASSES)
        .filter(|&c| union[c] > 0)
        .map(|c| inter[c] as f64 / union[c] as f64)
        .collect();
    Ok(Scores {
        mean_iou: present.iter().sum::<f64>() / present.len().max(1) as f64,
        pixel_accuracy: right as f64 / counted.max(1) as f64,
        foreground_accuracy: fg_right as f64 / fg.max(1) as f64,
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let epochs: usize = std::env::args().nth(1).map_or(Ok(3), |s| s.parse())?;
    run(epochs)?;
    Ok(())
}
