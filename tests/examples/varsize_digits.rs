//! Variable-size inputs end to end: the shape trace and the memory plan of W1 at a few
//! sizes (and the largest input that fits some budgets), then W1 trained on the
//! variable-size digits (each MNIST digit cropped to its ink plus a 1-pixel margin) at
//! native size against two baselines in the same run, everything resized to 28x28 and
//! everything padded to 28x28, then bucketed by shape, dynamic padding and progressive
//! resizing, with a progress line per epoch.
//!
//! `cargo run --release -p torchlet-tests --example varsize_digits [-- EPOCHS BATCH
//! TRAIN_COUNT EXTRA_EPOCHS RUNS SEED [cosine]]`, by default `6 32 8000 6 all 1`:
//! EXTRA_EPOCHS for the last four runs, RUNS `all` or comma-separated name prefixes
//! (`native,bucketed`); a seventh argument `cosine` decays the learning rate per epoch
//! (constant otherwise).
//!
//! The first three runs see the same samples in the same order and accumulate
//! per-sample gradients over each group of BATCH before one SGD step (the same math as
//! a batch mean), so they differ only in the input size. Every run weighs each input
//! tensor's mean loss by its share of BATCH, so a step's gradient is the mean over
//! BATCH samples however they were grouped.

use std::time::Instant;
use torchlet::init::Rng;
use torchlet::nn::digits_fcn;
use torchlet::{Graph, TraceEvent};
use torchlet_tests::digits::{Digit, Digits};
use torchlet_tests::varsize::{bucket_batches, bucket_stats, w1_plan, w1_planner, TAPE};
use torchlet_tests::varsize_train::{train, Epoch, Prep, Settings};

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

/// Seconds of CPU time this thread has used (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Prints how bucketing groups the training set (one epoch's batches).
fn bucket_report(train: &[Digit], max_batch: usize, bin: [usize; 2]) {
    let shapes: Vec<_> = train.iter().map(|d| (d.h, d.w)).collect();
    let samples: Vec<_> = train.iter().map(|d| (d.h, d.w, d.label)).collect();
    let st = bucket_stats(
        &samples,
        &bucket_batches(&shapes, max_batch, bin, &mut Rng::new(7)),
    );
    println!(
        "  {} bucket batches of <= {max_batch}, {:.1} samples each, padding x{:.3}, \
         most common label {:.0}% of a batch",
        st.batches,
        st.mean_batch,
        st.padding,
        st.majority_share * 100.0
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let epochs = args.first().map_or(Ok(6), |s| s.parse())?;
    let batch = args.get(1).map_or(Ok(32), |s| s.parse())?;
    let count: usize = args.get(2).map_or(Ok(8000), |s| s.parse())?;
    let extra_epochs = args.get(3).map_or(Ok(epochs), |s| s.parse())?;
    let only = args.get(4).map_or("all", String::as_str);
    let seed = args.get(5).map_or(Ok(1), |s| s.parse())?;
    let cosine = args.get(6).is_some_and(|s| s == "cosine");
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
        seed,
        cpu_clock: Some(thread_cpu_seconds),
        cosine,
    };
    println!(
        "W1, SGD lr {}{} momentum {}, {batch} samples per step, {epochs} epochs, seed {}",
        s.lr,
        if cosine { " (cosine decay per epoch)" } else { "" },
        s.momentum,
        s.seed
    );
    let exact = [1, 1];
    let runs = [
        ("native size", Prep::Native, epochs),
        ("resized to 28x28", Prep::Resized(28), epochs),
        ("padded to 28x28", Prep::Padded(28), epochs),
        ("bucketed", Prep::Bucketed { bin: exact, mix: 1 }, extra_epochs),
        (
            "bucketed, 4 per step",
            Prep::Bucketed { bin: exact, mix: 4 },
            extra_epochs,
        ),
        ("dynamic padding", Prep::DynamicPad, extra_epochs),
        ("progressive 14->28", Prep::Progressive(14, 28), extra_epochs),
    ];
    let mut summary = Vec::new();
    for (name, prep, epochs) in runs {
        if only != "all" && !only.split(',').any(|o| name.starts_with(o)) {
            continue;
        }
        let s = Settings { epochs, ..s };
        println!("-- {name}");
        if let Prep::Bucketed { bin, mix } = prep {
            bucket_report(&train_v, batch / mix, bin);
        }
        let eps = train(&train_v, &test_v, prep, s, |e| {
            let side = if e.side > 0 {
                format!("  side {}", e.side)
            } else {
                String::new()
            };
            println!(
                "  epoch {:2}  loss {:.4}  held-out {:.2}%  {:.0} samples/s ({:.0} per CPU second){side}",
                e.epoch,
                e.loss,
                e.accuracy * 100.0,
                e.samples_per_s,
                e.samples_per_cpu_s
            );
        })?;
        let mean = |f: fn(&Epoch) -> f64| eps.iter().map(f).sum::<f64>() / eps.len().max(1) as f64;
        let acc = eps.last().map_or(0.0, |e| e.accuracy);
        summary.push((
            name,
            acc,
            mean(|e| e.samples_per_s),
            mean(|e| e.samples_per_cpu_s),
        ));
    }
    println!("\nsummary (final held-out accuracy, mean training samples per second and per CPU second):");
    for (name, acc, sps, cpu) in &summary {
        println!(
            "  {name:<22} {:6.2}%  {sps:8.0} /s  {cpu:8.0} /CPU s",
            acc * 100.0
        );
    }
    Ok(())
}
