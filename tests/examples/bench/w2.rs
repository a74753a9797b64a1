//! W2 "mobile-fcn" cases of the benchmark: `torchlet::nn::mobile_fcn` in training mode
//! (BatchNorm on batch statistics, dropout 0.1) for the steps, eval mode for inference.
//! `tests/golden/bench_pytorch.py` times the same network (tests/golden/make_w2.py's
//! definition) under the same case names.

use super::kernels::ConvData;
use super::{median_us, Timing};
use std::hint::black_box;
use torchlet::bench::{ConvGeom, KernelSet, F32};
use torchlet::init::Rng;
use torchlet::nn::{mobile_fcn, Block};
use torchlet::optim::Sgd;
use torchlet::{Error, Graph};

/// Tape records of a W2 step.
const TAPE: usize = 256;

/// One W2 case: name, batch, height, width, timed training iterations.
pub const CASES: [(&str, usize, usize, usize, usize); 3] = [
    ("w2-b1-28x28", 1, 28, 28, 300),
    ("w2-b32-28x28", 32, 28, 28, 30),
    ("w2-b1-20x14", 1, 20, 14, 300),
];

/// Bytes of one W2 training step (SGD with momentum) at this batch and size: one step
/// on a meta graph.
pub fn plan_bytes(batch: usize, h: usize, w: usize) -> Result<usize, Error> {
    let mut g: Graph<f32, TAPE> = Graph::meta(usize::MAX);
    let model = mobile_fcn(&mut g, &mut Rng::new(0))?;
    let mut sgd = Sgd::new(&mut g, 0.01, 0.9, 0.0)?;
    let x = g.input(&[batch, 1, h, w], &[])?;
    let logits = model.forward(&mut g, x)?;
    let loss = g.cross_entropy(logits, &[])?;
    g.backward(loss)?;
    sgd.step(&mut g)?;
    Ok(g.arena().high_water_bytes())
}

/// Median microseconds per training step (training mode) and per inference (eval
/// mode, gradients off) for one W2 case.
pub fn torchlet_case(batch: usize, h: usize, w: usize, iters: usize) -> (Timing, Timing) {
    let bytes = plan_bytes(batch, h, w).expect("plan");
    let mut arena = vec![0.0f32; bytes.div_ceil(4)];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let mut rng = Rng::new(0);
    let model = mobile_fcn(&mut g, &mut rng).expect("model");
    let mut sgd = Sgd::new(&mut g, 0.01, 0.9, 0.0).expect("sgd");
    let input: Vec<f32> = (0..batch * h * w)
        .map(|i| ((i * 7919) % 256) as f32 / 255.0)
        .collect();
    let labels: Vec<usize> = (0..batch).map(|i| i % 10).collect();
    g.set_training(true);
    let train = median_us(iters, || {
        g.zero_grad();
        let x = g.input(&[batch, 1, h, w], &input).expect("input");
        let logits = model.forward(&mut g, x).expect("forward");
        let loss = g.cross_entropy(logits, &labels).expect("loss");
        g.backward(loss).expect("backward");
        sgd.step(&mut g).expect("step");
        g.end_step();
    });
    g.set_training(false);
    g.set_grad_enabled(false);
    let infer = median_us(iters.max(300), || {
        let x = g.input(&[batch, 1, h, w], &input).expect("input");
        black_box(model.forward(&mut g, x).expect("forward"));
        g.end_step();
    });
    (train, infer)
}

/// W2's convolutions at batch `n` and a 28x28 input, in execution order: (name,
/// geometry). Pointwise ones are 1x1; depthwise ones have one group per channel.
pub fn convs(n: usize) -> Vec<(String, ConvGeom)> {
    let geom = |c_in: usize, c_out: usize, k: usize, stride: usize, hw: usize, groups: usize| {
        let o = (hw + 2 * (k / 2) - k) / stride + 1;
        ConvGeom {
            n,
            c_in,
            h: hw,
            w: hw,
            c_out,
            kh: k,
            kw: k,
            oh: o,
            ow: o,
            stride: [stride; 2],
            pad: [k / 2; 2],
            dil: [1, 1],
            groups,
        }
    };
    let mut v = vec![("stem 1->8 s2 28x28".to_string(), geom(1, 8, 3, 2, 28, 1))];
    // (cin, cout, stride, expand, input size) of the five blocks.
    let blocks = [
        (8, 8, 1, 1, 14),
        (8, 16, 2, 4, 14),
        (16, 16, 1, 4, 7),
        (16, 32, 2, 4, 7),
        (32, 32, 1, 4, 4),
    ];
    for (i, &(cin, cout, s, e, hw)) in blocks.iter().enumerate() {
        let mid = cin * e;
        if e != 1 {
            v.push((
                format!("b{i} pw {cin}->{mid} {hw}x{hw}"),
                geom(cin, mid, 1, 1, hw, 1),
            ));
        }
        v.push((
            format!("b{i} dw {mid}ch s{s} {hw}x{hw}"),
            geom(mid, mid, 3, s, hw, mid),
        ));
        let o = (hw - 1) / s + 1;
        v.push((
            format!("b{i} pw {mid}->{cout} {o}x{o}"),
            geom(mid, cout, 1, 1, o, 1),
        ));
    }
    v
}

/// Thread-CPU microseconds of each pass of each W2 convolution with the `f32` kernels at
/// batch `n` (`--w2-convs`), and their sum: how much of a W2 step the convolutions take.
/// The stem's backward-input is timed but left out of the sum: a step never runs it
/// (the image needs no gradient).
pub fn conv_profile(n: usize, quick: bool) {
    type Kernel = fn(&ConvGeom, &[f32], &[f32], &mut [f32]);
    let fwd: Kernel = |g, x, w, y| F32::conv2d_forward(g, x, w, None, y);
    let passes: [(&str, Kernel); 3] = [
        ("forward", fwd),
        ("backward-input", F32::conv2d_backward_input),
        ("backward-weight", F32::conv2d_backward_weight),
    ];
    println!("\nW2 convolutions at batch {n}, 28x28: median microseconds of thread CPU time (GFLOP/s)");
    println!(
        "{:<24} {:>16} {:>16} {:>16}",
        "conv", "forward", "backward-input", "backward-weight"
    );
    let mut total = [0.0f64; 3];
    for (i, (name, g)) in convs(n).into_iter().enumerate() {
        let ConvData { flops, x, wt, gy } = ConvData::new(&g);
        let iters = if quick {
            20
        } else {
            (20_000_000.0 / flops).clamp(20.0, 2000.0) as usize
        };
        let mut line = format!("{name:<24}");
        for (k, (pass, kernel)) in passes.iter().enumerate() {
            let (a, b, mut out) = match *pass {
                "forward" => (&x, &wt, vec![0.0f32; gy.len()]),
                "backward-input" => (&gy, &wt, vec![0.0f32; x.len()]),
                _ => (&gy, &x, vec![0.0f32; wt.len()]),
            };
            let us = median_us(iters, || {
                kernel(&g, black_box(a), black_box(b), black_box(&mut out))
            })
            .cpu;
            let in_step = !(i == 0 && *pass == "backward-input");
            total[k] += if in_step { us } else { 0.0 };
            let mark = if in_step { ' ' } else { '*' };
            line.push_str(&format!(" {us:>8.1}{mark}({:>5.1})", flops / us / 1e3));
        }
        println!("{line}");
    }
    println!(
        "{:<24} {:>16.1} {:>16.1} {:>16.1}   all passes {:.1}\n(* not in a step, not summed: the stem's input needs no gradient)",
        "sum",
        total[0],
        total[1],
        total[2],
        total.iter().sum::<f64>()
    );
}
