//! The ONNX zoo's models (tests/golden/onnx) on the host, one thread: a training step
//! (training mode, cross-entropy, backward, SGD lr 0.01) and inference (eval mode, no
//! gradients) at batch 1 and 8, 96x96 (L 96 for 1-D models), torchlet side by side with
//! PyTorch eager (`tests/golden/bench_zoo_pytorch.py`, the same constructors, run between
//! torchlet's rounds). Prints numbers and asserts nothing; the last run's table is in
//! tests/RESULTS.md ("The ONNX zoo").
//!
//! ```text
//! cargo run --release -p torchlet-tests --example zoo_bench [-- --rounds 3] [MODEL ...]
//! ```
//!
//! Each figure is the median thread CPU time (`CLOCK_THREAD_CPUTIME_ID`) of the timed
//! iterations after warm-up; the ratio is torchlet's over PyTorch's (below 1: torchlet
//! is faster).

use std::process::Command;
use torchlet::model::{encode, Model, ModelFile};
use torchlet::optim::Sgd;
use torchlet::Graph;

const MODELS: &[&str] = &[
    "mlp",
    "pool1d",
    "senet",
    "mobilenet_v3_small",
    "efficientnet_b0",
    "ghostnet",
    "shufflenet_v2",
];
const TAPE: usize = 1024;

fn thread_cpu_us() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The model file of `name`'s TorchScript export.
fn model_bytes(name: &str) -> Vec<u8> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/onnx/");
    let onnx = std::fs::read(format!("{dir}{name}.ts.onnx")).expect("the zoo is committed");
    let spec = torchlet_onnx::import(&onnx, None, &Default::default()).expect("imports");
    encode(&spec).expect("encodes")
}

/// Input dims at batch `n`: `[n, C, 96, 96]`, `[n, C, 96]` or `[n, F]` by the model's rank.
fn dims(file: &ModelFile<'_>, n: usize) -> Vec<usize> {
    let input = file.inputs().next().expect("one input");
    let rank = input.dims().len();
    let c = input.min_shape().dim(1);
    match rank {
        2 => vec![n, c],
        3 => vec![n, c, 96],
        _ => vec![n, c, 96, 96],
    }
}

/// Median CPU microseconds of a training step and of inference at batch `n`.
fn torchlet_us(bytes: &[u8], n: usize, iters: usize) -> (f64, f64) {
    let file = ModelFile::parse(bytes).expect("parses");
    let d = dims(&file, n);
    let x: Vec<f32> = (0..d.iter().product::<usize>())
        .map(|i| ((i * 7919) % 200) as f32 / 100.0 - 1.0)
        .collect();
    let targets = vec![0i64; n];
    let mut arena = vec![0.0f32; 64 << 20];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let m = Model::new(&mut g, file).expect("builds");
    let mut sgd = Sgd::new(&mut g, 0.01, 0.0, 0.0).expect("sgd");
    let mut time = |g: &mut Graph<f32, TAPE>, train: bool| {
        let mut v = Vec::new();
        for k in 0..iters + iters / 10 + 3 {
            let t0 = thread_cpu_us();
            g.set_training(train);
            g.set_grad_enabled(train);
            g.zero_grad();
            let xt = g.input(&d, &x).unwrap();
            let y = m.forward(g, &[xt]).unwrap();
            if train {
                let l = g.cross_entropy_with(y, &targets, Default::default()).unwrap();
                g.backward(l).unwrap();
                sgd.step(g).unwrap();
            }
            g.end_step();
            if k >= iters / 10 + 3 {
                v.push(thread_cpu_us() - t0);
            }
        }
        median(v)
    };
    let train = time(&mut g, true);
    let infer = time(&mut g, false);
    (train, infer)
}

/// PyTorch's (train, infer) CPU microseconds per (model, batch), from the script.
fn pytorch(models: &[String], iters: usize) -> Vec<(String, usize, f64, f64)> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/bench_zoo_pytorch.py");
    let out = Command::new("python3")
        .arg(script)
        .arg("--iters")
        .arg(iters.to_string())
        .args(models)
        .output();
    let Some(out) = out.ok().filter(|o| o.status.success()) else {
        eprintln!("bench_zoo_pytorch.py failed or python3 with torch is missing: PyTorch skipped");
        return vec![];
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| {
            let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
            (
                v["model"].as_str().unwrap_or("").to_string(),
                f("batch") as usize,
                f("train_cpu_us"),
                f("infer_cpu_us"),
            )
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rounds = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(3usize);
    let named: Vec<String> = args
        .iter()
        .filter(|a| MODELS.contains(&a.as_str()))
        .cloned()
        .collect();
    let models: Vec<String> = match named.is_empty() {
        true => MODELS.iter().map(|s| s.to_string()).collect(),
        false => named,
    };
    let iters = 20;
    // (model, batch) -> per round: torchlet train, infer; pytorch train, infer
    let mut rows: Vec<(String, usize, Vec<[f64; 4]>)> = Vec::new();
    for _ in 0..rounds {
        let torch = pytorch(&models, iters);
        for m in &models {
            let bytes = model_bytes(m);
            for n in [1, 8] {
                let (t, i) = torchlet_us(&bytes, n, iters);
                let p = torch.iter().find(|(pm, pb, ..)| pm == m && *pb == n);
                let (pt, pi) = p.map_or((f64::NAN, f64::NAN), |p| (p.2, p.3));
                match rows.iter_mut().find(|r| &r.0 == m && r.1 == n) {
                    Some(r) => r.2.push([t, i, pt, pi]),
                    None => rows.push((m.clone(), n, vec![[t, i, pt, pi]])),
                }
            }
        }
    }
    println!("| model | batch | torchlet train us | PyTorch train us | ratio | torchlet infer us | PyTorch infer us | ratio |");
    println!("|---|---|---|---|---|---|---|---|");
    for (m, n, r) in rows {
        let col = |k: usize| median(r.iter().map(|v| v[k]).collect());
        let (t, i, pt, pi) = (col(0), col(1), col(2), col(3));
        println!(
            "| {m} | {n} | {t:.0} | {pt:.0} | {:.2} | {i:.0} | {pi:.0} | {:.2} |",
            t / pt,
            i / pi
        );
    }
}
