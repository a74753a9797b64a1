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
//!
//! The training loop (`train`, with `batch_input`, `evaluate` and `epoch_steps`) is
//! written out below with torchlet's public API; the end-to-end test runs this same
//! code (`torchlet_tests::varsize_train` includes this file). The data loader and the
//! data preparation helpers (bucketing, padding a digit's pixels, the progressive
//! side) are `torchlet_tests`'.

use std::time::Instant;
use torchlet::init::Rng;
use torchlet::nn::{digits_fcn, Sequential};
use torchlet::optim::Sgd;
use torchlet::{Error, Graph, InterpMode, Tensor, TraceEvent};
use torchlet_tests::digits::{Digit, Digits};
use torchlet_tests::varsize::{
    bucket_batches, bucket_stats, max_size, padded_pixels, progressive_side, w1_plan, w1_planner, TAPE,
};

fn shape_trace(h: usize, w: usize) -> Result<(), Error> {
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

fn plans() -> Result<(), Error> {
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

/// Records the input of a batch of digits as `prep` wants it (side: the current
/// progressive side).
fn batch_input<const N: usize>(
    g: &mut Graph<'_, f32, N>,
    ds: &[&Digit],
    prep: Prep,
    side: usize,
) -> Result<Tensor, Error> {
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
) -> Result<f32, Error> {
    let group = if prep == Prep::DynamicPad { batch.max(1) } else { 1 };
    let mut correct = 0;
    g.set_grad_enabled(false);
    for ds in test.chunks(group) {
        let ds: Vec<&Digit> = ds.iter().collect();
        let x = batch_input(g, &ds, prep, side)?;
        let logits = model.forward(g, x)?;
        let rows = g.data(logits)?;
        for (row, d) in rows.chunks_exact(rows.len() / ds.len()).zip(&ds) {
            let best = (0..row.len())
                .max_by(|&a, &b| row[a].total_cmp(&row[b]))
                .unwrap_or(0);
            correct += (best == d.label as usize) as usize;
        }
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
) -> Result<Vec<Epoch>, Error> {
    let mut arena = vec![0.0f32; 2 << 20];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let mut rng = Rng::new(s.seed);
    let model = digits_fcn(&mut g, &mut rng)?;
    // Every group's mean loss is weighted by its share of the step's nominal batch, so
    // each step's gradient is the mean over `batch` samples however they are grouped
    // (one tensor, several bucket batches, or one sample at a time).
    let mut sgd = Sgd::new(&mut g, s.lr, s.momentum, 0.0)?;
    let shapes: Vec<(usize, usize)> = train.iter().map(|d| (d.h, d.w)).collect();
    let mut labels = Vec::with_capacity(s.batch);
    let mut out = Vec::new();
    for epoch in 0..s.epochs {
        let side = match prep {
            Prep::Progressive(a, b) => progressive_side(epoch, s.epochs, a, b),
            _ => 0,
        };
        if s.cosine {
            let t = epoch as f64 / s.epochs.max(1) as f64;
            sgd.lr = (s.lr as f64 * 0.5 * (1.0 + (std::f64::consts::PI * t).cos())) as f32;
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
