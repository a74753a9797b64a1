//! Benchmark harness (prints numbers, asserts nothing): W1 "digits-fcn" and W2
//! "mobile-fcn" (bench/w2.rs) training steps and inference in torchlet, optionally side
//! by side with PyTorch eager, plus per-kernel
//! figures for W1's three convolutions and MobileNet-like depthwise 3x3 and pointwise
//! ones (bench/kernels.rs) against the measured peak (bench/peak.rs).
//!
//! ```text
//! cargo run --release -p torchlet-tests --example bench [-- --pytorch] [--rounds N] [--quick] [--case b1-28x28] [--layers] [--kernels] [--w2-convs]
//! cargo run --release -p torchlet-tests --example bench -- [--pytorch] --write-results tests/RESULTS.md
//! RUSTFLAGS="-C target-cpu=native" cargo run --release -p torchlet-tests --example bench
//! ```
//!
//! - `--write-results FILE` replaces the block between `<!-- bench:begin -->` and
//!   `<!-- bench:end -->` in FILE with this run's tables, headed by the date, the git
//!   commit, the machine, its load average and the command (for people: CI only runs
//!   `--quick` and never rewrites a committed file).
//! - Every figure is given as wall time and as the thread's CPU time (which leaves out
//!   time slices lost to other processes: on a busy machine compare CPU times).
//! - W2 steps run in training mode (BatchNorm on batch statistics, dropout 0.1) and W2
//!   inference in eval mode (running statistics), in torchlet and in PyTorch alike.
//! - A training step is zero_grad + forward + cross-entropy + backward + SGD (lr 0.01,
//!   momentum 0.9) + end_step; inference is one forward pass with gradients off. Each
//!   figure is the median of many timed iterations after warm-up.
//! - `--pytorch` runs `tests/golden/bench_pytorch.py` (one thread) between torchlet
//!   rounds, so both see the same machine load; the table shows the median over rounds.
//!   PyTorch runs each case in NCHW and in channels_last and the faster layout counts.
//! - Kernel figures: GFLOP/s counts 2 FLOP per multiply-accumulate of the dense
//!   convolution (padding taps included, as PyTorch's profilers count). The peak is
//!   measured by a loop of independent multiply-adds of the widest instructions the
//!   kernels dispatch to (AVX-512F, AVX2 + FMA, or this build's SIMD), and the
//!   nominal peak is the clock from /proc/cpuinfo times the FLOP per cycle of two FMA
//!   pipes (32 for 256-bit, 64 for 512-bit vectors, 32 for 512-bit on AMD Zen 4) when
//!   the CPU has AVX2 and FMA.

use std::fmt::Write as _;
use std::hint::black_box;
use std::process::Command;
use std::time::Instant;
use torchlet::init::Rng;
use torchlet::nn::digits_fcn;
use torchlet::optim::Sgd;
use torchlet::Graph;
use torchlet_tests::train::{plan_bytes, TAPE};

#[path = "bench/kernels.rs"]
mod kernels;
#[path = "bench/peak.rs"]
mod peak;
#[path = "bench/tiles.rs"]
mod tiles;
#[path = "bench/w2.rs"]
mod w2;

/// One case: name, batch, height, width, timed training iterations.
type Case = (&'static str, usize, usize, usize, usize);

/// One network's cases and how to time one of them: (train, infer) at batch, h, w, iters.
struct Net {
    title: &'static str,
    cases: &'static [Case],
    run: fn(usize, usize, usize, usize) -> (Timing, Timing),
}

/// The networks benchmarked, in table order.
const NETS: [Net; 2] = [
    Net {
        title: "W1 digits-fcn",
        cases: &CASES,
        run: torchlet_case,
    },
    Net {
        title: "W2 mobile-fcn (training mode: BatchNorm batch statistics, dropout 0.1)",
        cases: &w2::CASES,
        run: w2::torchlet_case,
    },
];

/// One W1 case: name, batch, height, width, timed training iterations.
const CASES: [Case; 3] = [
    ("b1-28x28", 1, 28, 28, 400),
    ("b32-28x28", 32, 28, 28, 40),
    ("b1-12x20", 1, 12, 20, 400),
];

/// Where the tables go: printed, and kept for `--write-results`.
#[derive(Default)]
struct Out(String);

impl Out {
    fn line(&mut self, s: impl AsRef<str>) {
        println!("{}", s.as_ref());
        self.0.push_str(s.as_ref());
        self.0.push('\n');
    }
}

const BEGIN: &str = "<!-- bench:begin -->";
const END: &str = "<!-- bench:end -->";

/// `text` with the block between the markers replaced by `block`, or why not.
fn replace_block(text: &str, block: &str) -> Result<String, String> {
    let (b, e) = (text.matches(BEGIN).count(), text.matches(END).count());
    let (Some(i), Some(j)) = (text.find(BEGIN), text.find(END)) else {
        return Err(format!(
            "needs one `{BEGIN}` and one `{END}` line (found {b} and {e})"
        ));
    };
    if b != 1 || e != 1 || j < i {
        return Err(format!(
            "needs one `{BEGIN}` before one `{END}` (found {b} and {e})"
        ));
    }
    Ok(format!("{}{BEGIN}\n{block}{}", &text[..i], &text[j..]))
}

/// First line of a command's output, or "?".
fn first_line(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_else(|| "?".to_string())
}

/// The 1-minute load average.
fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split(' ').next().unwrap_or("?").to_string()
}

/// The results block: when, what, where, how, then the tables as printed.
fn results_block(args: &[String], model: &str, load_start: &str, tables: &str) -> String {
    // "?" when git fails or prints nothing (a clean tree).
    let dirty = first_line("git", &["status", "--porcelain", "--untracked-files=no"]) != "?";
    let commit = format!(
        "{}{}",
        first_line("git", &["rev-parse", "--short", "HEAD"]),
        if dirty { " with uncommitted changes" } else { "" }
    );
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Measured {} at commit {commit} with {}, on {model} ({cores} cores), load average \
         {load_start} at the start and {} at the end, by\n`cargo run --release -p \
         torchlet-tests --example bench -- {}`:\n\n```text",
        first_line("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        first_line("rustc", &["--version"]),
        load_average(),
        args.join(" ")
    );
    s.push_str(tables);
    s.push_str("```\n");
    s
}

/// Microseconds of CPU time this thread has used (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu_us() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 * 1e-3
}

/// A wall-clock and a thread-CPU-time median, in microseconds.
#[derive(Clone, Copy, Debug)]
struct Timing {
    wall: f64,
    cpu: f64,
}

/// Median wall and CPU time of `f` over `iters` timed calls after warm-up. CPU time
/// leaves out time slices lost to other processes on a loaded machine.
fn median_us(iters: usize, mut f: impl FnMut()) -> Timing {
    for _ in 0..(iters / 10).max(5) {
        f();
    }
    let (mut wall, mut cpu) = (Vec::with_capacity(iters), Vec::with_capacity(iters));
    for _ in 0..iters {
        let c = thread_cpu_us();
        let t = Instant::now();
        f();
        wall.push(t.elapsed().as_secs_f64() * 1e6);
        cpu.push(thread_cpu_us() - c);
    }
    Timing {
        wall: median(&mut wall),
        cpu: median(&mut cpu),
    }
}

/// Median microseconds per training step and per inference for one W1 case.
fn torchlet_case(batch: usize, h: usize, w: usize, iters: usize) -> (Timing, Timing) {
    let bytes = plan_bytes(batch, h, w).expect("plan");
    let mut arena = vec![0.0f32; bytes / 4];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let mut rng = Rng::new(0);
    let model = digits_fcn(&mut g, &mut rng).expect("model");
    let mut sgd = Sgd::new(&mut g, 0.01, 0.9, 0.0).expect("sgd");
    let input: Vec<f32> = (0..batch * h * w)
        .map(|i| ((i * 7919) % 256) as f32 / 255.0)
        .collect();
    let labels: Vec<usize> = (0..batch).map(|i| i % 10).collect();
    let train = median_us(iters, || {
        g.zero_grad();
        let x = g.input(&[batch, 1, h, w], &input).expect("input");
        let logits = model.forward(&mut g, x).expect("forward");
        let loss = g.cross_entropy(logits, &labels).expect("loss");
        g.backward(loss).expect("backward");
        sgd.step(&mut g).expect("step");
        g.end_step();
    });
    g.set_grad_enabled(false);
    let infer = median_us(iters.max(400), || {
        let x = g.input(&[batch, 1, h, w], &input).expect("input");
        black_box(model.forward(&mut g, x).expect("forward"));
        g.end_step();
    });
    (train, infer)
}

/// Median microseconds of each layer's forward, the loss, backward and the SGD step
/// of one W1 training step (`--layers`): where the time goes.
fn layer_profile(batch: usize, h: usize, w: usize, iters: usize) {
    // Layer by layer keeps every activation (no freeing, no in-place ReLU as
    // `Sequential::forward` does), so it needs several times the planned arena.
    let bytes = 6 * plan_bytes(batch, h, w).expect("plan");
    let mut arena = vec![0.0f32; bytes / 4];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let mut rng = Rng::new(0);
    let model = digits_fcn(&mut g, &mut rng).expect("model");
    let mut sgd = Sgd::new(&mut g, 0.01, 0.9, 0.0).expect("sgd");
    let input: Vec<f32> = (0..batch * h * w)
        .map(|i| ((i * 7919) % 256) as f32 / 255.0)
        .collect();
    let labels: Vec<usize> = (0..batch).map(|i| i % 10).collect();
    let layers = model.layers();
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); layers.len() + 3];
    for it in 0..iters + 5 {
        g.zero_grad();
        let mut x = g.input(&[batch, 1, h, w], &input).expect("input");
        let mut lap = thread_cpu_us();
        let mut record = |k: usize, lap: &mut f64| {
            if it >= 5 {
                times[k].push(thread_cpu_us() - *lap);
            }
            *lap = thread_cpu_us();
        };
        for (k, layer) in layers.iter().enumerate() {
            x = layer.forward(&mut g, x).expect("layer");
            record(k, &mut lap);
        }
        let loss = g.cross_entropy(x, &labels).expect("loss");
        record(layers.len(), &mut lap);
        g.backward(loss).expect("backward");
        record(layers.len() + 1, &mut lap);
        sgd.step(&mut g).expect("step");
        g.end_step();
        record(layers.len() + 2, &mut lap);
    }
    println!("\nW1 step at batch {batch}, {h}x{w}: median microseconds of thread CPU time per part");
    for (k, t) in times.iter_mut().enumerate() {
        let name = match k {
            _ if k < layers.len() => format!("forward {:?}", layers[k]),
            _ if k == layers.len() => "cross-entropy".to_string(),
            _ if k == layers.len() + 1 => "backward (all layers)".to_string(),
            _ => "SGD step + end_step".to_string(),
        };
        let name: String = name.chars().take(60).collect();
        println!("{:>10.1}  {name}", median(t));
    }
}

/// Runs the PyTorch script once and returns (case, train, infer, layouts) per line. The
/// script times each case in NCHW and in channels_last and reports the faster layout's
/// figures (training and inference picked separately); `layouts` names them. `only`
/// limits it to one case.
fn pytorch_round(only: Option<&str>) -> Result<Vec<(String, Timing, Timing, String)>, String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/bench_pytorch.py");
    let mut cmd = Command::new("python3");
    cmd.args([script, "--momentum", "0.9"]);
    if let Some(case) = only {
        cmd.args(["--case", case]);
    }
    let out = cmd.output().map_err(|e| format!("cannot run python3: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "bench_pytorch.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).map_err(|e| format!("{e}: {l}"))?;
            let f = |k: &str| v[k].as_f64().ok_or(format!("no {k} in {l}"));
            let train = Timing {
                wall: f("train_us")?,
                cpu: f("train_cpu_us")?,
            };
            let infer = Timing {
                wall: f("infer_us")?,
                cpu: f("infer_cpu_us")?,
            };
            let layouts = format!(
                "train {}, infer {}",
                v["train_layout"].as_str().unwrap_or("?"),
                v["infer_layout"].as_str().unwrap_or("?")
            );
            let case = v["case"].as_str().unwrap_or("?").to_string();
            Ok((case, train, infer, layouts))
        })
        .collect()
}

/// Prints one table of medians over rounds, of wall or of CPU time.
fn print_table(
    out: &mut Out,
    title: &str,
    cases: &[Case],
    ours: &[Vec<(Timing, Timing)>],
    theirs: &[Vec<(Timing, Timing)>],
    pick: fn(&Timing) -> f64,
) {
    out.line(format!("\n{title}"));
    out.line(format!(
        "{:<12} {:>12} {:>12} {:>8} {:>12} {:>12} {:>8}",
        "case", "train", "torch train", "ratio", "infer", "torch infer", "ratio"
    ));
    let med = |v: &[(Timing, Timing)], k: usize| {
        let mut xs: Vec<f64> = v.iter().map(|r| pick(if k == 0 { &r.0 } else { &r.1 })).collect();
        median(&mut xs)
    };
    for (i, c) in cases.iter().enumerate() {
        if ours[i].is_empty() {
            continue;
        }
        let (t, inf) = (med(&ours[i], 0), med(&ours[i], 1));
        if theirs[i].is_empty() {
            out.line(format!(
                "{:<12} {t:>12.1} {:>12} {:>8} {inf:>12.1} {:>12} {:>8}",
                c.0, "-", "-", "-", "-"
            ));
        } else {
            let (pt, pi) = (med(&theirs[i], 0), med(&theirs[i], 1));
            out.line(format!(
                "{:<12} {t:>12.1} {pt:>12.1} {:>8.2} {inf:>12.1} {pi:>12.1} {:>8.2}",
                c.0,
                t / pt,
                inf / pi
            ));
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let with_torch = args.iter().any(|a| a == "--pytorch");
    let quick = args.iter().any(|a| a == "--quick");
    let only = args
        .iter()
        .position(|a| a == "--case")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let rounds: usize = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(if with_torch { 3 } else { 1 });
    let results_file = args
        .iter()
        .position(|a| a == "--write-results")
        .map(|i| args.get(i + 1).cloned().unwrap_or_default());
    if let Some(path) = &results_file {
        // Check the file before spending minutes on the run; only full runs are written.
        let partial = ["--quick", "--case", "--layers", "--kernels", "--w2-convs"];
        if let Some(p) = args.iter().find(|a| partial.contains(&a.as_str())) {
            eprintln!("--write-results: a results file gets full runs only, not {p}");
            std::process::exit(2);
        }
        let checked = std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|t| replace_block(&t, ""));
        if let Err(e) = checked {
            eprintln!("--write-results {path:?}: {e}");
            std::process::exit(2);
        }
    }
    let load_start = load_average();
    if args.iter().any(|a| a == "--w2-convs") {
        w2::conv_profile(1, quick);
        w2::conv_profile(32, quick);
        return;
    }
    if args.iter().any(|a| a == "--layers") {
        for &(_, b, h, w, iters) in &CASES {
            layer_profile(b, h, w, iters / 4);
        }
        return;
    }
    let (model, ghz, wide) = peak::cpu_info();
    let simd = if cfg!(target_feature = "avx2") {
        "AVX2"
    } else if cfg!(target_feature = "avx") {
        "AVX"
    } else {
        "SSE2 (default)"
    };
    #[cfg(target_arch = "x86_64")]
    let dispatch = torchlet::bench::avx2_available();
    #[cfg(not(target_arch = "x86_64"))]
    let dispatch = false;
    #[cfg(target_arch = "x86_64")]
    let dispatch512 = torchlet::bench::avx512_available();
    #[cfg(not(target_arch = "x86_64"))]
    let dispatch512 = false;
    let kernels = match (dispatch, dispatch512) {
        (true, true) => "AVX2+FMA, AVX-512F where it pays (chosen at run time)",
        (true, false) => "AVX2+FMA (chosen at run time)",
        _ => "this build's SIMD",
    };
    let mut out = Out::default();
    out.line(format!(
        "machine: {model}, {ghz:.3} GHz, 1 thread; build SIMD: {simd}; conv kernels: {kernels}"
    ));
    let (peak, isa) = peak::measured_peak_gflops();
    let nominal = if wide {
        peak::nominal_peak(ghz, peak, dispatch512)
    } else {
        String::new()
    };
    out.line(format!(
        "peak: measured {peak:.1} GFLOP/s (independent multiply-adds of the widest instructions the kernels use, {isa}){nominal}"
    ));

    // ours[net][case] and theirs[net][case]: one (train, infer) per round.
    let empty = |n: &Net| vec![Vec::new(); n.cases.len()];
    let mut ours: Vec<Vec<Vec<(Timing, Timing)>>> = NETS.iter().map(empty).collect();
    let mut theirs: Vec<Vec<Vec<(Timing, Timing)>>> = NETS.iter().map(empty).collect();
    let kernels_only = args.iter().any(|a| a == "--kernels");
    for round in 0..if kernels_only { 0 } else { rounds } {
        for (n, net) in NETS.iter().enumerate() {
            for (i, &(name, b, h, w, iters)) in net.cases.iter().enumerate() {
                if only.as_deref().is_some_and(|o| o != name) {
                    continue;
                }
                let iters = if quick { iters / 10 } else { iters };
                let r = (net.run)(b, h, w, iters);
                eprintln!("round {round} torchlet {name}: train {:?}, infer {:?}", r.0, r.1);
                ours[n][i].push(r);
            }
        }
        if with_torch {
            match pytorch_round(only.as_deref()) {
                Ok(rows) => {
                    for (case, t, inf, layouts) in rows {
                        eprintln!(
                            "round {round} pytorch {case}: train {t:?}, infer {inf:?} (faster layout: {layouts})"
                        );
                        for (n, net) in NETS.iter().enumerate() {
                            if let Some(i) = net.cases.iter().position(|c| c.0 == case) {
                                theirs[n][i].push((t, inf));
                            }
                        }
                    }
                }
                Err(e) => eprintln!("pytorch skipped: {e}"),
            }
        }
    }

    for (n, net) in NETS.iter().enumerate() {
        if ours[n].iter().all(Vec::is_empty) {
            continue;
        }
        let title = format!("{}, median of {rounds} round(s), microseconds", net.title);
        let (o, t) = (&ours[n], &theirs[n]);
        print_table(&mut out, &format!("{title} of wall time"), net.cases, o, t, |t| {
            t.wall
        });
        print_table(
            &mut out,
            &format!("{title} of thread CPU time"),
            net.cases,
            o,
            t,
            |t| t.cpu,
        );
    }
    out.line("(ratio = torchlet / PyTorch; below 1 means torchlet is faster)");
    if only.is_none() {
        kernels::kernel_table(&mut out, peak, quick);
    }
    if let Some(path) = results_file {
        let block = results_block(&args, &model, &load_start, &out.0);
        let written = std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|t| replace_block(&t, &block))
            .and_then(|t| std::fs::write(&path, t).map_err(|e| e.to_string()));
        match written {
            Ok(()) => println!("\nwrote the results block of {path}"),
            Err(e) => {
                eprintln!("--write-results {path:?}: {e}");
                std::process::exit(2);
            }
        }
    }
}
