//! Makes the assets the Cortex-M4F fine-tuning firmware embeds with `include_bytes!`
//! (`firmware/assets/`), and prints what the host expects the device to measure.
//!
//! 1. Pretrains W1 on the host, on 28x28 MNIST digits only (a subset, few epochs).
//! 2. Picks real digits the pretraining never saw, cropped to their ink's bounding box
//!    plus a 1-pixel margin (native, varying sizes: `Digit::cropped(threshold, 1)`):
//!    a fine-tuning set from the training part of the file and a held-out set from its
//!    held-out part. Pixels are stored at 4 bits (two per byte) to keep flash small.
//! 3. Simulates the device's fine-tuning recipe on the host (same order, same
//!    numbers) and prints held-out accuracy before and after.
//!
//! ```sh
//! cargo run --release -p torchlet-tests --example export_firmware_assets [-- MNIST_FILE]
//! cargo run --release -p torchlet-tests --example export_firmware_assets -- --samples-only
//! ```
//!
//! `--samples-only` rewrites only the samples file (no pretraining): the weights file
//! depends on the host's f32 kernels, which change as they get faster, so it is kept
//! as committed unless it is meant to change.
//!
//! Outputs (committed): `firmware/assets/w1_pretrained.tlw` (weights, `torchlet::io`) and
//! `firmware/assets/digits_cropped.bin` (samples). Formats: see `firmware/README.md`.

use std::path::PathBuf;
use torchlet::init::Rng;
use torchlet::io::{self, crc32};
use torchlet::nn::{digits_fcn, Sequential};
use torchlet::optim::Sgd;
use torchlet::{Error, Graph};
use torchlet_tests::digits::{default_path, Digit, Digits};
use torchlet_tests::train::{accuracy, plan_bytes, TAPE};

/// Pretraining: the first `PRE_N` training digits at 28x28.
const PRE_N: usize = 6000;
const PRE_EPOCHS: usize = 4;
const PRE_BATCH: usize = 32;
const PRE_LR: f32 = 0.05;
/// Samples for the device: fine-tuning digits (never seen in pretraining) and held out.
const FT_N: usize = 160;
const TEST_N: usize = 100;
/// Fine-tuning recipe the firmware runs (batch 1, plain SGD); keep in step with
/// `firmware/src/bin/finetune.rs`.
pub const FT_EPOCHS: usize = 2;
pub const FT_LR: f32 = 0.005;
pub const FT_MOMENTUM: f32 = 0.9;
/// Ink threshold and margin of the crop.
const THRESHOLD: u8 = 64;
const MARGIN: usize = 1;

/// Weights in the project's format (`torchlet::io`, version 1, CRC-32 checked), with
/// W1's parameter names.
fn weights_blob<const N: usize>(g: &Graph<'_, f32, N>) -> Result<Vec<u8>, Error> {
    let mut out = vec![0u8; io::saved_len_named(g, &io::DIGITS_FCN_NAMES)?];
    let n = io::save_named(g, &io::DIGITS_FCN_NAMES, &mut out)?;
    out.truncate(n);
    Ok(out)
}

/// A cropped digit with pixels quantised to 4 bits (stored as `nibble * 17`, so that
/// `/ 255` gives exactly the device's `nibble / 15`).
fn device_digit(d: &Digit) -> Digit {
    let mut c = d.cropped(THRESHOLD, MARGIN);
    for p in &mut c.pixels {
        *p = (*p >> 4) * 17;
    }
    c
}

/// Samples blob (read by `firmware/src/assets.rs`, which documents it): magic `TLDC`,
/// u16 version 2, u16 fine-tuning count, u16 held-out count, u16 0; per digit label,
/// h, w (one byte each), a u16 byte count and the 4-bit pixel codes (a level 1..=14 is
/// one pixel; 0 or 15 then `r` is `r + 1` pixels of level 0 or 15), high nibble first;
/// u32 LE CRC-32 of everything before it.
fn samples_blob(ft: &[Digit], test: &[Digit]) -> Vec<u8> {
    let mut out = b"TLDC".to_vec();
    for v in [2u16, ft.len() as u16, test.len() as u16, 0] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for d in ft.iter().chain(test) {
        let codes = pixel_codes(&d.pixels);
        out.extend_from_slice(&[d.label, d.h as u8, d.w as u8]);
        out.extend_from_slice(&(codes.len() as u16).to_le_bytes());
        out.extend_from_slice(&codes);
    }
    let crc = crc32(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The 4-bit codes of a digit's pixels (stored as `nibble * 17`), packed two to a byte.
fn pixel_codes(pixels: &[u8]) -> Vec<u8> {
    let mut nibbles = Vec::new();
    let mut i = 0;
    while i < pixels.len() {
        let v = pixels[i] / 17;
        if v != 0 && v != 15 {
            nibbles.push(v);
            i += 1;
            continue;
        }
        let run = pixels[i..].iter().take(16).take_while(|&&p| p / 17 == v).count();
        nibbles.extend_from_slice(&[v, (run - 1) as u8]);
        i += run;
    }
    nibbles
        .chunks(2)
        .map(|c| c[0] << 4 | c.get(1).copied().unwrap_or(0))
        .collect()
}

fn step<const N: usize>(
    g: &mut Graph<'_, f32, N>,
    model: &Sequential<12>,
    sgd: &mut Sgd,
    batch: &[&Digit],
) -> Result<f32, Error> {
    let (h, w) = (batch[0].h, batch[0].w);
    let labels: Vec<usize> = batch.iter().map(|d| d.label as usize).collect();
    g.zero_grad();
    let x = g.input_with(&[batch.len(), 1, h, w], |dst| {
        for (chunk, d) in dst.chunks_exact_mut(h * w).zip(batch) {
            for (v, &p) in chunk.iter_mut().zip(&d.pixels) {
                *v = p as f32 * (1.0 / 255.0);
            }
        }
    })?;
    let logits = model.forward(g, x)?;
    let loss = g.cross_entropy(logits, &labels)?;
    let l = g.data(loss)?[0];
    g.backward(loss)?;
    sgd.step(g)?;
    g.end_step();
    Ok(l)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let samples_only = args.iter().any(|a| a == "--samples-only");
    let path = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .map_or_else(default_path, PathBuf::from);
    let digits = Digits::parse(&std::fs::read(&path)?)?;
    let (train, held) = digits.split();
    let pre = &train[..PRE_N];
    let ft: Vec<Digit> = train[PRE_N..PRE_N + FT_N].iter().map(device_digit).collect();
    let test: Vec<Digit> = held[..TEST_N].iter().map(device_digit).collect();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../firmware/assets");
    if samples_only {
        let samples = samples_blob(&ft, &test);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("digits_cropped.bin"), &samples)?;
        println!(
            "wrote {} sample bytes (weights file left as it is)",
            samples.len()
        );
        return Ok(());
    }

    // 1. Pretrain at 28x28.
    let bytes = plan_bytes(PRE_BATCH, 28, 28)?.max(plan_bytes(1, 28, 28)?);
    let mut arena = vec![0.0f32; bytes.max(1 << 20) / 4];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let mut rng = Rng::new(1);
    let model = digits_fcn(&mut g, &mut rng)?;
    let mut sgd = Sgd::new(&mut g, PRE_LR, 0.9, 0.0)?;
    let mut order: Vec<usize> = (0..pre.len()).collect();
    for epoch in 1..=PRE_EPOCHS {
        rng.shuffle(&mut order);
        let mut sum = 0.0;
        for idx in order.chunks(PRE_BATCH) {
            let batch: Vec<&Digit> = idx.iter().map(|&i| &pre[i]).collect();
            sum += step(&mut g, &model, &mut sgd, &batch)?;
        }
        println!(
            "pretrain epoch {epoch}: mean loss {:.4}",
            sum / order.chunks(PRE_BATCH).len() as f32
        );
    }
    let full_acc = accuracy(&mut g, &model, &held[..TEST_N])?;
    let before = accuracy(&mut g, &model, &test)?;
    let blob = weights_blob(&g)?;

    // 2. Write the assets.
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("w1_pretrained.tlw"), &blob)?;
    let samples = samples_blob(&ft, &test);
    std::fs::write(dir.join("digits_cropped.bin"), &samples)?;
    let px: usize = ft.iter().chain(&test).map(|d| d.h * d.w).sum();
    println!(
        "wrote {} weight bytes, {} sample bytes ({} fine-tune + {} held-out digits, {:.0} pixels on average, max {}x{})",
        blob.len(),
        samples.len(),
        ft.len(),
        test.len(),
        px as f32 / (ft.len() + test.len()) as f32,
        ft.iter().chain(&test).map(|d| d.h).max().unwrap_or(0),
        ft.iter().chain(&test).map(|d| d.w).max().unwrap_or(0),
    );

    // 3. What the device should see: the same recipe, batch 1, in file order.
    let mut g2_arena = vec![0.0f32; 1 << 18];
    let mut g2: Graph<f32, TAPE> = Graph::new(&mut g2_arena);
    let model2 = digits_fcn(&mut g2, &mut Rng::new(0))?;
    for i in 0..g.num_params() {
        let (a, b) = (g.param_handle(i).unwrap(), g2.param_handle(i).unwrap());
        g2.param_data_mut(b)?.copy_from_slice(g.data(a)?);
    }
    let mut sgd2 = Sgd::new(&mut g2, FT_LR, FT_MOMENTUM, 0.0)?;
    for epoch in 1..=FT_EPOCHS {
        let mut sum = 0.0;
        for d in &ft {
            sum += step(&mut g2, &model2, &mut sgd2, &[d])?;
        }
        let acc = accuracy(&mut g2, &model2, &test)?;
        println!(
            "host fine-tune epoch {epoch}: mean loss {:.4}, held-out cropped accuracy {:.1}%",
            sum / ft.len() as f32,
            acc * 100.0
        );
    }
    println!(
        "held-out accuracy: 28x28 {:.1}%, cropped before fine-tuning {:.1}%",
        full_acc * 100.0,
        before * 100.0
    );
    Ok(())
}
