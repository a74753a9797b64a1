//! W2 "mobile-fcn" cases of the benchmark: `torchlet::nn::mobile_fcn` in training mode
//! (BatchNorm on batch statistics, dropout 0.1) for the steps, eval mode for inference.
//! `tests/golden/bench_pytorch.py` times the same network (tests/golden/make_w2.py's
//! definition) under the same case names.

use super::{median_us, Timing};
use std::hint::black_box;
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
