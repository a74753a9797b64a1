//! Makes the assets the Cortex-M4F fine-tuning firmware embeds with `include_bytes!`
//! (`firmware/assets/`), and prints what the host expects the device to measure.
//!
//! 1. Pretrains W1 on the host, on 28x28 MNIST digits only (a subset, few epochs).
//! 2. Picks real digits the pretraining never saw, cropped to their ink's bounding box
//!    plus a 1-pixel margin (native, varying sizes: `Digit::cropped(threshold, 1)`):
//!    a fine-tuning set from the training part of the file and a held-out set from its
//!    held-out part. Pixels are stored at 4 bits, arithmetic-coded with a context model
//!    (`torchlet_tests::samples_file`), and decoded back with the device's decoder to
//!    check every pixel.
//! 3. Simulates the device's fine-tuning recipe on the host (same order, same
//!    numbers) and prints held-out accuracy before and after.
//!
//! ```sh
//! cargo run --release -p torchlet-tests --example export_firmware_assets [-- MNIST_FILE]
//! cargo run --release -p torchlet-tests --example export_firmware_assets -- --samples-only
//! cargo run --release -p torchlet-tests --example export_firmware_assets -- --subset K L NAME
//! ```
//!
//! `--samples-only` rewrites only the samples file (no pretraining): the weights file
//! depends on the host's f32 kernels, which change as they get faster, so it is kept
//! as committed unless it is meant to change. `--subset K L NAME` writes only a samples
//! file of the first K fine-tuning and first L held-out digits (same order, its own
//! fitted model) to `firmware/assets/NAME`, for a program with less flash.
//!
//! Outputs (committed): `firmware/assets/w1_pretrained.tlw` (weights, `torchlet::io`) and
//! `firmware/assets/digits_cropped.bin` (samples). Formats: see `firmware/README.md`.

use std::path::PathBuf;
use torchlet::init::Rng;
use torchlet::io;
use torchlet::nn::{digits_fcn, Sequential};
use torchlet::optim::Sgd;
use torchlet::{Error, Graph};
use torchlet_tests::digits::{default_path, Digit, Digits};
use torchlet_tests::samples_file::{device_digits, samples_file, FT_FIRST, TEST_N};
use torchlet_tests::train::{accuracy, plan_bytes, TAPE};

/// Pretraining: the first `PRE_N` training digits at 28x28 (the fine-tuning digits
/// come after them).
const PRE_N: usize = FT_FIRST;
const PRE_EPOCHS: usize = 4;
const PRE_BATCH: usize = 32;
const PRE_LR: f32 = 0.05;
/// Fine-tuning recipe the firmware runs (batch 1, plain SGD); keep in step with
/// `firmware/src/bin/finetune.rs`.
pub const FT_EPOCHS: usize = 2;
pub const FT_LR: f32 = 0.005;
pub const FT_MOMENTUM: f32 = 0.9;

/// Weights in the project's format (`torchlet::io`, version 1, CRC-32 checked), with
/// W1's parameter names.
fn weights_blob<const N: usize>(g: &Graph<'_, f32, N>) -> Result<Vec<u8>, Error> {
    let mut out = vec![0u8; io::saved_len_named(g, &io::DIGITS_FCN_NAMES)?];
    let n = io::save_named(g, &io::DIGITS_FCN_NAMES, &mut out)?;
    out.truncate(n);
    Ok(out)
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

/// Command line: `[MNIST_FILE] [--samples-only] [--subset K L NAME]`.
struct Args {
    path: PathBuf,
    samples_only: bool,
    /// First K fine-tuning and first L held-out digits, to `firmware/assets/NAME`.
    subset: Option<(usize, usize, String)>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let (mut path, mut samples_only, mut subset) = (None, false, None);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--samples-only" => samples_only = true,
            "--subset" => {
                let mut next = || args.next().ok_or("--subset takes K L NAME");
                let k = next()?.parse().map_err(|_| "--subset: K is not a number")?;
                let l = next()?.parse().map_err(|_| "--subset: L is not a number")?;
                subset = Some((k, l, next()?));
            }
            _ if a.starts_with("--") => return Err(format!("unknown flag {a}")),
            _ => path = Some(PathBuf::from(a)),
        }
    }
    let path = path.unwrap_or_else(default_path);
    Ok(Args {
        path,
        samples_only,
        subset,
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let digits = Digits::parse(&std::fs::read(&args.path)?)?;
    let (train, held) = digits.split();
    let pre = &train[..PRE_N];
    let (ft, test) = device_digits(&digits);
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../firmware/assets");
    std::fs::create_dir_all(&dir)?;
    if let Some((k, l, name)) = &args.subset {
        if *k > ft.len() || *l > test.len() {
            return Err(format!("--subset: at most {} and {} digits", ft.len(), test.len()).into());
        }
        let samples = samples_file(&ft[..*k], &test[..*l])?;
        std::fs::write(dir.join(name), &samples)?;
        println!(
            "wrote {} sample bytes to {name} ({k} fine-tune + {l} held-out digits; decoded back, pixels equal)",
            samples.len()
        );
        return Ok(());
    }
    if args.samples_only {
        let samples = samples_file(&ft, &test)?;
        std::fs::write(dir.join("digits_cropped.bin"), &samples)?;
        println!(
            "wrote {} sample bytes, decoded back, pixels equal (weights file left as it is)",
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

    // 2. Write the assets (the samples file is decoded back and checked).
    std::fs::write(dir.join("w1_pretrained.tlw"), &blob)?;
    let samples = samples_file(&ft, &test)?;
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
