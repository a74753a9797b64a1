//! Host converter between PyTorch `safetensors` files and torchlet's on-device weights
//! format (`torchlet::io`), and an exporter of W1 trained by torchlet.
//!
//! ```text
//! weights to-device IN.safetensors OUT.tlw [--names a,b,...]
//! weights to-safetensors IN.tlw OUT.safetensors [--names a,b,...]
//! weights export-w1 OUT.safetensors [OUT.tlw] [--epochs E]
//! weights info IN.tlw
//! ```
//!
//! Without `--names` the model is W1 (`c1.weight, c1.bias, ..., fc.bias`, checked
//! against `digits_fcn`'s shapes). `export-w1` trains W1 on the 8,000 training digits
//! (seed 1, batch 32, SGD lr 0.05 momentum 0.9) and writes its weights.

use std::collections::BTreeMap;
use std::process::exit;
use torchlet::init::Rng;
use torchlet::io::{self, Weights, DIGITS_FCN_NAMES};
use torchlet::nn::digits_fcn;
use torchlet::optim::Sgd;
use torchlet::Graph;
use torchlet_tests::digits::{Digit, Digits};
use torchlet_tests::safetensors;

type Res<T> = Result<T, String>;

fn read(path: &str) -> Res<Vec<u8>> {
    std::fs::read(path).map_err(|e| format!("cannot read {path}: {e}"))
}

fn write(path: &str, bytes: &[u8]) -> Res<()> {
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {path}: {e}"))?;
    println!("wrote {path} ({} bytes)", bytes.len());
    Ok(())
}

/// Splits off `--flag VALUE` from the arguments.
fn take_flag(args: &mut Vec<String>, flag: &str) -> Res<Option<String>> {
    match args.iter().position(|a| a == flag) {
        None => Ok(None),
        Some(i) if i + 1 < args.len() => {
            let v = args.remove(i + 1);
            args.remove(i);
            Ok(Some(v))
        }
        Some(_) => Err(format!("{flag} needs a value")),
    }
}

fn run(mut args: Vec<String>) -> Res<()> {
    let names = take_flag(&mut args, "--names")?;
    let names: Option<Vec<&str>> = names.as_deref().map(|n| n.split(',').collect());
    let epochs: usize = take_flag(&mut args, "--epochs")?
        .map_or(Ok(1), |e| e.parse())
        .map_err(|e| format!("--epochs: {e}"))?;
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    match a.as_slice() {
        ["to-device", input, output] => {
            write(output, &safetensors::to_device(&read(input)?, names.as_deref())?)
        }
        ["to-safetensors", input, output] => write(
            output,
            &safetensors::to_safetensors(&read(input)?, names.as_deref())?,
        ),
        ["export-w1", st, rest @ ..] if rest.len() <= 1 => export_w1(st, rest.first().copied(), epochs),
        ["info", input] => info(&read(input)?),
        _ => Err(
            "usage: weights to-device IN.safetensors OUT.tlw [--names a,b,...]\n       \
                  weights to-safetensors IN.tlw OUT.safetensors [--names a,b,...]\n       \
                  weights export-w1 OUT.safetensors [OUT.tlw] [--epochs E]\n       \
                  weights info IN.tlw"
                .into(),
        ),
    }
}

fn info(bytes: &[u8]) -> Res<()> {
    let w = Weights::parse(bytes).map_err(|e| e.to_string())?;
    let scalar = w.scalar_name().map_err(|e| e.to_string())?;
    println!(
        "torchlet weights v{}, {} bytes, scalar {scalar}, {} parameters",
        io::VERSION,
        bytes.len(),
        w.len()
    );
    for r in w.records() {
        println!("  {:2} {:12} {:?}", r.index, r.name, r.shape.dims());
    }
    Ok(())
}

fn fill(dst: &mut [f32], batch: &[&Digit]) {
    for (chunk, d) in dst.chunks_exact_mut(d_len(batch)).zip(batch) {
        for (v, &p) in chunk.iter_mut().zip(&d.pixels) {
            *v = p as f32 / 255.0;
        }
    }
}

fn d_len(batch: &[&Digit]) -> usize {
    batch.first().map_or(1, |d| d.h * d.w)
}

fn export_w1(st_path: &str, tlw_path: Option<&str>, epochs: usize) -> Res<()> {
    let e = |e: torchlet::Error| e.to_string();
    let digits = Digits::load().map_err(|e| e.to_string())?;
    let (train, test) = digits.split();
    let plan = torchlet_tests::train::plan_bytes(32, 28, 28).map_err(e)?;
    let mut arena = vec![0.0f32; plan / 4 + 1024];
    let mut g: Graph<f32, 32> = Graph::new(&mut arena);
    let mut rng = Rng::new(1);
    let model = digits_fcn(&mut g, &mut rng).map_err(e)?;
    let mut sgd = Sgd::new(&mut g, 0.05, 0.9, 0.0).map_err(e)?;
    let mut order: Vec<usize> = (0..train.len()).collect();
    for epoch in 1..=epochs {
        rng.shuffle(&mut order);
        for idx in order.chunks(32) {
            let batch: Vec<&Digit> = idx.iter().map(|&i| &train[i]).collect();
            let labels: Vec<usize> = batch.iter().map(|d| d.label as usize).collect();
            let (h, w) = (batch[0].h, batch[0].w);
            g.zero_grad();
            let x = g
                .input_with(&[batch.len(), 1, h, w], |dst| fill(dst, &batch))
                .map_err(e)?;
            let logits = model.forward(&mut g, x).map_err(|e| e.to_string())?;
            let loss = g.cross_entropy(logits, &labels).map_err(e)?;
            g.backward(loss).map_err(e)?;
            sgd.step(&mut g).map_err(e)?;
            g.end_step();
        }
        let acc = torchlet_tests::train::accuracy(&mut g, &model, test).map_err(e)?;
        println!("epoch {epoch}: held-out accuracy {:.2}%", acc * 100.0);
    }
    let tensors = safetensors::export(&g, &DIGITS_FCN_NAMES)?;
    write(st_path, &safetensors::write(&tensors, &BTreeMap::new())?)?;
    if let Some(p) = tlw_path {
        let mut out = vec![0u8; io::saved_len_named(&g, &DIGITS_FCN_NAMES).map_err(e)?];
        io::save_named(&g, &DIGITS_FCN_NAMES, &mut out).map_err(e)?;
        write(p, &out)?;
    }
    Ok(())
}

fn main() {
    if let Err(msg) = run(std::env::args().skip(1).collect()) {
        eprintln!("weights: {msg}");
        exit(2);
    }
}
