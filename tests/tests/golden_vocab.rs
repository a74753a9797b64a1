//! The op vocabulary of issue 16 against PyTorch: `golden/ops_vocab.json` (made by
//! `golden/make_golden_vocab.py`) through the conformance door, in f32 (values and
//! error kinds), in Q16.16 (within its resolution) and against central differences;
//! (add, sub, mul and div with broadcasting; the piecewise activations also exactly at
//! their breakpoints); plus NaN propagation and planner = real high-water for a network using the new ops.
//! Ops of the fixture the engine does not have yet (batch_norm, group_norm, conv1d,
//! conv_transpose2d, ...) are listed in `LATER` and skipped.

use torchlet::init::Rng;
use torchlet::nn::Conv2d;
use torchlet::{Conv2dParams, Graph, LossParams, Pool2dParams, Reduction, Result, Tensor};
use torchlet_tests::conformance::{objective, run_case, run_f32, Case, Cases, JsonTensor};

/// The ops this branch answers; every one must have golden cases.
const DONE: &[&str] = &[
    "relu6",
    "hardswish",
    "hardsigmoid",
    "sub",
    "div",
    "softmax",
    "log_softmax",
    "nll_loss",
    "cross_entropy",
    "cat",
    "permute",
    "mean",
    "sum",
    "adaptive_max_pool2d",
    "batch_norm",
    "group_norm",
    "conv1d",
    "conv_transpose2d",
    "add",
    "mul",
    "silu",
    "leaky_relu",
    "slice",
    "channel_shuffle",
    "unsqueeze",
    "squeeze",
];
/// Ops of the fixture left to a later change.
const LATER: &[&str] = &[];

fn load() -> Vec<Case> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/ops_vocab.json");
    let text = std::fs::read_to_string(path).expect("golden/ops_vocab.json is committed");
    let cases: Cases = serde_json::from_str(&text).expect("golden/ops_vocab.json parses");
    for c in &cases.cases {
        assert!(
            DONE.contains(&c.op.as_str()) || LATER.contains(&c.op.as_str()),
            "{}: op {} in neither list",
            c.id,
            c.op
        );
    }
    cases.cases
}

fn done(c: &Case) -> bool {
    DONE.contains(&c.op.as_str())
}

fn close(what: &str, got: &JsonTensor, want: &JsonTensor, abs: f64, rel: f64) -> Option<String> {
    if got.shape != want.shape || got.data.len() != want.data.len() {
        return Some(format!("{what}: shape {:?} != {:?}", got.shape, want.shape));
    }
    got.data
        .iter()
        .zip(&want.data)
        .enumerate()
        .find(|(_, (&g, &w))| (g - w).abs() > abs + rel * w.abs() || g.is_nan() != w.is_nan())
        .map(|(i, (g, w))| format!("{what}[{i}]: {g} != {w}"))
}

/// Runs every case of the done ops in `dtype` with tolerance `abs + rel * |want|`.
fn check_all(dtype: Option<&str>, abs: f64, rel: f64) {
    let mut failures = Vec::new();
    let mut ops = std::collections::BTreeSet::new();
    for case in load() {
        let mut c = case.clone();
        if let Some(d) = dtype {
            c.dtype = Some(d.into());
        }
        if !done(&case) {
            continue;
        }
        let r = run_case(&c);
        ops.insert(case.op.clone());
        match (&case.expected_error, &case.expected, &r.outcome, &r.error) {
            (Some(kind), _, _, Some(e)) if &e.kind == kind => {}
            (Some(kind), _, _, _) => {
                failures.push(format!("{}: expected {kind}, got {:?}", case.id, r.error))
            }
            (None, Some(want), Some(got), _) => {
                failures.extend(close(
                    &format!("{} output", case.id),
                    &got.output,
                    &want.output,
                    abs,
                    rel,
                ));
                for (name, w) in &want.buffers {
                    match got.buffers.get(name) {
                        Some(g) => {
                            failures.extend(close(&format!("{} buffer {name}", case.id), g, w, abs, rel))
                        }
                        None => failures.push(format!("{}: no buffer {name}", case.id)),
                    }
                }
                for (name, w) in &want.grads {
                    match got.grads.get(name) {
                        Some(g) => {
                            failures.extend(close(&format!("{} grad {name}", case.id), g, w, abs, rel))
                        }
                        None => failures.push(format!("{}: no gradient for {name}", case.id)),
                    }
                }
            }
            (None, _, _, e) => failures.push(format!("{}: error {e:?}", case.id)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    for op in DONE {
        assert!(ops.contains(*op), "no golden case for {op}");
    }
}

#[test]
fn new_ops_match_pytorch_in_f32() {
    check_all(None, 1e-5, 1e-4);
}

/// Q16.16 is within a few LSB per accumulated term (as in `fixed_conformance.rs`).
#[test]
fn new_ops_run_in_q16_close_to_pytorch() {
    check_all(Some("q16.16"), 2e-3, 1e-3);
}

#[test]
fn new_ops_gradients_match_central_differences() {
    let mut failures = Vec::new();
    let mut checked = std::collections::BTreeSet::new();
    for case in load()
        .into_iter()
        .filter(|c| done(c) && c.expected_error.is_none())
        // On a breakpoint a central difference averages the two sides: those cases
        // check PyTorch's one-sided convention against its own values only.
        .filter(|c| !c.id.ends_with("-at-kinks"))
    {
        let analytic = run_f32(&case).unwrap();
        // Inputs are multiples of 1/8 away from the kinks: a step of 1e-3 stays on one side.
        let eps = 1e-3;
        for (name, grad) in &analytic.grads {
            for i in 0..case.inputs[name].data.len() {
                let mut plus = case.clone();
                plus.inputs.get_mut(name).unwrap().data[i] += eps;
                let mut minus = case.clone();
                minus.inputs.get_mut(name).unwrap().data[i] -= eps;
                let numeric = (objective(&plus).unwrap() - objective(&minus).unwrap()) / (2.0 * eps);
                let a = grad.data[i];
                if (numeric - a).abs() > 1e-2 + 1e-2 * a.abs() {
                    failures.push(format!(
                        "{} d/d{name}[{i}]: analytic {a}, numeric {numeric}",
                        case.id
                    ));
                }
            }
        }
        checked.insert(case.op.clone());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    for op in DONE {
        assert!(checked.contains(*op), "no gradient check for {op}");
    }
}

#[test]
fn nan_propagates_through_relu_leaky_relu_relu6_and_max_pool() {
    let nan = f32::NAN;
    let mut arena = vec![0.0f32; 4096];
    let mut g: Graph<f32, 32> = Graph::new(&mut arena);
    g.set_check_finite(false); // PyTorch's propagation: inputs may hold NaN
    let x = g.input_with_grad(&[4], &[nan, -1.0, 2.0, 0.0]).unwrap();
    for (name, y) in [
        ("relu", g.relu(x).unwrap()),
        ("leaky_relu", g.leaky_relu(x, 0.1).unwrap()),
        ("relu6", g.relu6(x).unwrap()),
        ("hardswish", g.hardswish(x).unwrap()),
        ("hardsigmoid", g.hardsigmoid(x).unwrap()),
    ] {
        assert!(g.data(y).unwrap()[0].is_nan(), "{name}(NaN)");
        assert!(!g.data(y).unwrap()[1].is_nan(), "{name}(-1)");
    }
    let y = g.relu(x).unwrap();
    assert_eq!(&g.data(y).unwrap()[1..], &[0.0, 2.0, 0.0]);
    // In place, with the mask kept for backward: NaN stays and passes its gradient
    // (PyTorch's `y <= 0 ? 0 : g`).
    let x2 = g.input_with_grad(&[4], &[nan, -1.0, 2.0, 0.0]).unwrap();
    let h = g.mul(x2, x2).unwrap();
    let r = g.relu_(h).unwrap();
    let d = g.data(r).unwrap();
    assert!(d[0].is_nan());
    assert_eq!(&d[1..], &[1.0, 4.0, 0.0]);
    g.backward_with(r, &[1.0; 4]).unwrap();
    let gx = g.grad(x2).unwrap().unwrap();
    assert!(gx[0].is_nan());
    assert_eq!(&gx[1..], &[-2.0, 4.0, 0.0]);
    // Max pooling, the 2x2 fast path and the general one: a NaN in a window wins.
    for (k, s) in [(2, 2), (3, 1)] {
        let mut data = vec![1.0f32; 16];
        data[0] = nan;
        let x = g.input(&[1, 1, 4, 4], &data).unwrap();
        let mut p = Pool2dParams::square(k);
        p.stride = [s, s];
        let y = g.max_pool2d(x, p).unwrap();
        let d = g.data(y).unwrap();
        assert!(d[0].is_nan(), "max_pool2d k{k}: {d:?}");
        assert!(!d[d.len() - 1].is_nan(), "max_pool2d k{k}: {d:?}");
    }
}

/// A small segmentation-style network using every new op: conv, hardswish / relu6
/// branches joined by cat, hardsigmoid, sub, mul, div by a broadcast tensor, a
/// squeeze-and-excitation scale and SiLU, permute there and back, a
/// per-pixel cross-entropy with ignored (255) pixels, and a classification head of
/// adaptive max pool, mean, log_softmax / softmax, sum and nll_loss.
fn small_net<const N: usize>(
    g: &mut Graph<'_, f32, N>,
    h: usize,
    w: usize,
    data: Option<&[f32]>,
) -> Result<Tensor> {
    let mut rng = Rng::new(5);
    let c1 = Conv2d::new(g, 1, 4, 3, Conv2dParams::padded(1), true, &mut rng)?;
    let c2 = Conv2d::new(g, 8, 3, 1, Conv2dParams::padded(0), true, &mut rng)?;
    let real = data.is_some();
    let x = g.input(&[1, 1, h, w], data.unwrap_or(&[]))?;
    let y = c1.forward(g, x)?;
    let a = g.hardswish(y)?;
    let b = g.relu6(y)?;
    let c = g.cat(a, b, 1)?;
    let d = g.hardsigmoid(c)?;
    let e = g.sub(c, d)?;
    let f = g.mul(e, d)?;
    let twos = [2.0; 8];
    let twos = g.input(&[1, 8, 1, 1], if real { &twos } else { &[] })?;
    let f = g.div(f, twos)?;
    // Squeeze-and-excitation: a per-channel scale broadcast over H and W, then SiLU.
    let se = g.adaptive_avg_pool2d(f, [1, 1])?;
    let se = g.sigmoid(se)?;
    let f = g.mul(f, se)?;
    let f = g.silu(f)?;
    let p = g.permute(f, &[0, 2, 3, 1])?;
    let p = g.permute(p, &[0, 3, 1, 2])?;
    let logits = c2.forward(g, p)?;
    let targets: Vec<i64> = (0..h * w)
        .map(|i| if i % 5 == 0 { 255 } else { (i % 3) as i64 })
        .collect();
    let ce = LossParams {
        ignore_index: 255,
        reduction: Reduction::Mean,
    };
    let seg = g.cross_entropy_with(logits, if real { &targets } else { &[] }, ce)?;
    let m = g.adaptive_max_pool2d(c, [2, 2])?;
    let s = g.mean(m, &[2, 3], false)?;
    let ls = g.log_softmax(s, -1)?;
    let sm = g.softmax(s, 1)?;
    let ent = g.mul(ls, sm)?;
    let ent = g.sum(ent, &[], false)?;
    let nll = g.nll_loss(ls, if real { &[3] } else { &[] }, LossParams::default())?;
    let l = g.add(seg, ent)?;
    g.add(l, nll)
}

#[test]
fn new_ops_plan_equals_real_high_water() {
    let mut rng = Rng::new(9);
    for _ in 0..40 {
        let h = 1 + rng.below(30);
        let w = 1 + rng.below(30);
        let mut meta: Graph<f32, 64> = Graph::meta(1 << 24);
        let loss = small_net(&mut meta, h, w, None).unwrap();
        let fwd = meta.arena().high_water_bytes();
        meta.backward(loss).unwrap();
        let step = meta.arena().high_water_bytes();
        let mut arena = vec![0.0f32; step / 4];
        let mut g: Graph<f32, 64> = Graph::new(&mut arena);
        let img: Vec<f32> = (0..h * w).map(|_| rng.uniform(-4.0, 4.0)).collect();
        let loss = small_net(&mut g, h, w, Some(&img)).unwrap();
        assert_eq!(g.arena().high_water_bytes(), fwd, "{h}x{w}");
        g.backward(loss).unwrap();
        assert_eq!(g.arena().high_water_bytes(), step, "{h}x{w}");
        assert!(g.data(loss).unwrap()[0].is_finite(), "{h}x{w}");
    }
}

#[test]
fn per_pixel_cross_entropy_refuses_bad_targets_and_stays_usable() {
    let mut arena = vec![0.0f32; 4096];
    let mut g: Graph<f32, 16> = Graph::new(&mut arena);
    let x = g.input_with_grad(&[1, 3, 2, 2], &[0.5; 12]).unwrap();
    let tape = g.tape_len();
    let p = LossParams {
        ignore_index: 255,
        reduction: Reduction::Sum,
    };
    let e = g.cross_entropy_with(x, &[0, 1, 3, 2], p).unwrap_err();
    assert!(
        matches!(e, torchlet::Error::InvalidParam { value: 3, .. }),
        "{e:?}"
    );
    let e = g.cross_entropy_with(x, &[0, 1, 2], p).unwrap_err();
    assert!(
        matches!(
            e,
            torchlet::Error::ShapeMismatch {
                expected: 4,
                found: 3,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(g.tape_len(), tape, "nothing recorded");
    // All ignored: sum is 0; mean is NaN as in PyTorch.
    let l = g.cross_entropy_with(x, &[255; 4], p).unwrap();
    assert_eq!(g.data(l).unwrap()[0], 0.0);
    let l = g
        .cross_entropy_with(
            x,
            &[255; 4],
            LossParams {
                reduction: Reduction::Mean,
                ..p
            },
        )
        .unwrap();
    assert!(g.data(l).unwrap()[0].is_nan());
    // Uniform logits: each counted pixel costs ln 3.
    let l = g.cross_entropy_with(x, &[0, 255, 2, 1], p).unwrap();
    assert!((g.data(l).unwrap()[0] - 3.0 * 3f32.ln()).abs() < 1e-5);
}

#[test]
fn sequential_layers_for_the_new_activations() {
    use torchlet::nn::{Layer, Sequential};
    let mut arena = vec![0.0f32; 4096];
    let mut g: Graph<f32, 16> = Graph::new(&mut arena);
    let mut s: Sequential<4> = Sequential::default();
    use torchlet::nn::{OpLayer, ParamValue};
    for l in [
        Layer::op("relu6").unwrap(),
        Layer::op("hardswish").unwrap(),
        Layer::Op(
            OpLayer::new("log_softmax")
                .unwrap()
                .with(&[("dim", ParamValue::Int(-1))])
                .unwrap(),
        ),
        Layer::Op(
            OpLayer::new("softmax")
                .unwrap()
                .with(&[("dim", ParamValue::Int(1))])
                .unwrap(),
        ),
    ] {
        s.push(l).unwrap();
    }
    let x = g.input(&[1, 3], &[-4.0, 1.0, 7.0]).unwrap();
    let y = s.forward(&mut g, x).unwrap();
    // relu6 -> [0, 1, 6]; hardswish -> [0, 2/3, 6]; softmax(log_softmax(v)) = softmax(v).
    let v = [0.0f32, 2.0 / 3.0, 6.0];
    let z: f32 = v.iter().map(|a| a.exp()).sum();
    for (got, a) in g.data(y).unwrap().iter().zip(v) {
        assert!((got - a.exp() / z).abs() < 1e-6, "{got}");
    }
    let names: Vec<_> = s.layers().iter().map(|l| l.name()).collect();
    assert_eq!(names, ["relu6", "hardswish", "log_softmax", "softmax"]);
}
