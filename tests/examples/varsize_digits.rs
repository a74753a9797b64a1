//! Variable-size inputs end to end: the shape trace and the memory plan of W1 at a few
//! sizes (and the largest input that fits some budgets), then W1 trained on the
//! variable-size digits (each MNIST digit cropped to its ink plus a 1-pixel margin) at
//! native size against two baselines in the same run, everything resized to 28x28 and
//! everything padded to 28x28, plus dynamic padding and progressive resizing.
//!
//! `cargo run --release -p torchlet-tests --example varsize_digits [-- EPOCHS BATCH TRAIN_COUNT EXTRA_EPOCHS]`
//!
//! The first three runs see the same samples in the same order and accumulate
//! per-sample gradients over each group of BATCH before one SGD step (the same math as
//! a batch mean), so they differ only in the input size.

use std::time::Instant;
use torchlet::init::Rng;
use torchlet::nn::digits_fcn;
use torchlet::{Graph, TraceEvent};
use torchlet_tests::digits::{Digit, Digits};
use torchlet_tests::varsize::{w1_plan, w1_planner, TAPE};
use torchlet_tests::varsize_train::{train, Prep, Settings};

fn shape_trace(h: usize, w: usize) -> Result<(), torchlet::Error> {
    println!("shape trace of a W1 training forward at 1x1x{h}x{w} (meta graph, no data):");
    println!(
        "  {:>3} {:<20} {:<16} {:<16} {:>8} {:>10}",
        "#", "op", "input", "output", "bytes", "arena"
    );
    let mut print = |e: &TraceEvent| {
        let input = e.inputs[0].map_or(String::from("-"), |s| format!("{:?}", s.dims()));
        println!(
            "  {:>3} {:<20} {:<16} {:<16} {:>8} {:>10}",
            e.index,
            e.op,
            input,
            format!("{:?}", e.output.dims()),
            e.bytes,
            e.arena_used
        );
    };
    let mut g: Graph<f32, TAPE> = Graph::meta(usize::MAX);
    g.set_fused_sgd(0.01)?;
    let model = digits_fcn(&mut g, &mut Rng::new(0))?;
    g.set_trace(Some(&mut print));
    let x = g.input(&[1, 1, h, w], &[])?;
    let logits = model.forward(&mut g, x)?;
    g.cross_entropy(logits, &[])?;
    Ok(())
}

fn plans() -> Result<(), torchlet::Error> {
    println!("\nmemory plans of one W1 training step, batch 1 (bytes, parameters included):");
    println!(
        "  {:>11} {:>12} {:>12} {:>12} {:>12} {:>10}",
        "size", "fused step", "fused fwd", "SGD step", "inference", "plan time"
    );
    for (h, w) in [(12, 20), (20, 14), (28, 28), (64, 64), (224, 224), (4096, 4096)] {
        let t = Instant::now();
        let fused = w1_plan(true, 1, h, w)?;
        let us = t.elapsed().as_secs_f64() * 1e6;
        let sgd = w1_plan(false, 1, h, w)?;
        println!(
            "  {:>11} {:>12} {:>12} {:>12} {:>12} {:>8.0}us",
            format!("{h}x{w}"),
            fused.step_bytes,
            fused.forward_bytes,
            sgd.step_bytes,
            fused.inference_bytes,
            us
        );
    }
    let p = w1_planner(true, 1);
    for budget in [32 * 1024, 64 * 1024, 256 * 1024] {
        println!(
            "  largest input for a fused W1 step in {:>3} KiB: {:?} square, {:?} at aspect 3:4",
            budget / 1024,
            p.largest_square(budget),
            p.largest_scaled(budget, [3, 4])
        );
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let epochs = args.first().map_or(Ok(6), |s| s.parse())?;
    let batch = args.get(1).map_or(Ok(32), |s| s.parse())?;
    let count: usize = args.get(2).map_or(Ok(8000), |s| s.parse())?;
    shape_trace(12, 20)?;
    plans()?;

    let digits = Digits::load()?;
    let (train_set, test_set) = digits.split();
    let crop = |ds: &[Digit]| ds.iter().map(|d| d.cropped(1, 1)).collect::<Vec<_>>();
    let train_v = crop(&train_set[..count.min(train_set.len())]);
    let test_v = crop(test_set);
    let mean_px = train_v.iter().map(|d| d.h * d.w).sum::<usize>() as f64 / train_v.len() as f64;
    println!(
        "\nvariable-size digits: {} training, {} held out, {:.0} pixels on average (28x28 = 784)",
        train_v.len(),
        test_v.len(),
        mean_px
    );
    let s = Settings {
        epochs,
        batch,
        lr: 0.05,
        momentum: 0.9,
        seed: 1,
    };
    println!(
        "W1, SGD lr {} momentum {}, batch <= {batch}, {epochs} epochs, seed {}",
        s.lr, s.momentum, s.seed
    );
    let extra_epochs = args.get(3).map_or(Ok(epochs), |s| s.parse())?;
    let runs = [
        ("native size", Prep::Native, epochs),
        ("resized to 28x28", Prep::Resized(28), epochs),
        ("padded to 28x28", Prep::Padded(28), epochs),
        ("bucketed by shape", Prep::Bucketed, extra_epochs),
        ("dynamic padding", Prep::DynamicPad, extra_epochs),
        ("progressive 14->28", Prep::Progressive(14, 28), extra_epochs),
    ];
    let mut summary = Vec::new();
    for (name, prep, epochs) in runs {
        let s = Settings { epochs, ..s };
        println!("-- {name}");
        let eps = train(&train_v, &test_v, prep, s, |e| {
            let side = if e.side > 0 {
                format!("  side {}", e.side)
            } else {
                String::new()
            };
            println!(
                "  epoch {:2}  loss {:.4}  held-out {:.2}%  {:.0} samples/s{side}",
                e.epoch,
                e.loss,
                e.accuracy * 100.0,
                e.samples_per_s
            );
        })?;
        let last = eps.last().copied();
        let mean_sps = eps.iter().map(|e| e.samples_per_s).sum::<f64>() / eps.len().max(1) as f64;
        summary.push((name, last.map_or(0.0, |e| e.accuracy), mean_sps));
    }
    println!("\nsummary (final held-out accuracy, mean training samples/s):");
    for (name, acc, sps) in &summary {
        println!("  {name:<20} {:6.2}%  {sps:8.0} samples/s", acc * 100.0);
    }
    Ok(())
}
