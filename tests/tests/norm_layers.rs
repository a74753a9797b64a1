//! BatchNorm2d, GroupNorm, Dropout and scalar scale/shift beyond the golden values:
//! train/eval mode, running statistics (PyTorch's update, save -> load, untouched by
//! optimizers, frozen), dropout's seeded mask, bad input leaving the graph usable,
//! gradients against central differences, Q16 against f32, and planner = real
//! high-water for a network using all of them in training and eval.

use torchlet::init::Rng;
use torchlet::nn::{BatchNorm2d, BatchNormOptions, Conv2d, Dropout, GroupNorm, Layer, Linear, Sequential};
use torchlet::optim::{Adam, Sgd};
use torchlet::{io, BatchNormParams, Conv2dParams, Error, Graph, Result, Tensor, Q16};
use torchlet_tests::conformance::{objective, run_case, run_f32, run_scalar, Case, JsonTensor};

fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| rng.uniform(-2.0, 2.0)).collect()
}

/// Mean and unbiased variance of channel `c` of `[n, ch, inner]` data.
fn channel(x: &[f32], n: usize, ch: usize, inner: usize, c: usize) -> (f64, f64) {
    let v: Vec<f64> = (0..n)
        .flat_map(|b| x[(b * ch + c) * inner..][..inner].iter().map(|&v| v as f64))
        .collect();
    let m = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / (v.len() - 1) as f64;
    (m, var)
}

#[test]
fn batch_norm2d_trains_on_batch_statistics_and_evals_on_running_ones() {
    let mut arena = vec![0.0f32; 1 << 14];
    let mut g: Graph<f32, 32> = Graph::new(&mut arena);
    let bn = BatchNorm2d::new(&mut g, 3).unwrap();
    assert_eq!(g.num_params(), 4, "weight, bias, running_mean, running_var");
    let (rm, rv) = (bn.running_mean.unwrap(), bn.running_var.unwrap());
    assert_eq!(g.data(bn.weight.unwrap()).unwrap(), &[1.0; 3]);
    assert_eq!(g.data(rv).unwrap(), &[1.0; 3]);
    assert!(g.is_training(), "a new graph trains");
    let x_data = values(2 * 3 * 4 * 5, 1);
    let x = g.input(&[2, 3, 4, 5], &x_data).unwrap();
    let y = bn.forward(&mut g, x).unwrap();
    let yd = g.data(y).unwrap().to_vec();
    for c in 0..3 {
        let (m, var) = channel(&x_data, 2, 3, 20, c);
        let (ym, yv) = channel(&yd, 2, 3, 20, c);
        assert!(
            ym.abs() < 1e-5 && (yv * 39.0 / 40.0 - 1.0).abs() < 1e-3,
            "{ym} {yv}"
        );
        let (got_m, got_v) = (g.data(rm).unwrap()[c] as f64, g.data(rv).unwrap()[c] as f64);
        assert!(
            (got_m - 0.1 * m).abs() < 1e-6,
            "running_mean {got_m} vs {}",
            0.1 * m
        );
        assert!((got_v - (0.9 + 0.1 * var)).abs() < 1e-6, "running_var (unbiased)");
    }
    g.end_step();
    g.set_training(false);
    let x = g.input(&[2, 3, 4, 5], &x_data).unwrap();
    let before = g.data(rm).unwrap().to_vec();
    let y = bn.forward(&mut g, x).unwrap();
    for (k, &v) in g.data(y).unwrap().iter().enumerate() {
        let c = k / 20 % 3;
        let (m, var) = (g.data(rm).unwrap()[c], g.data(rv).unwrap()[c]);
        let want = (x_data[k] - m) / (var + 1e-5).sqrt();
        assert!((v - want).abs() < 1e-5, "eval uses the running statistics");
    }
    assert_eq!(g.data(rm).unwrap(), &before[..], "eval does not update them");
}

/// `forward_consuming` gives `forward`'s values; without gradients (and in eval mode)
/// the output takes over the input's memory, so the arena's high-water is one plane
/// set lower; in training mode it is `forward` and a `free`.
#[test]
fn batch_norm2d_forward_consuming_writes_over_its_input_where_it_can() {
    let x_data = values(2 * 3 * 4 * 5, 7);
    // (training mode, gradients on): whether the output may take over the input.
    for (training, grads, in_place) in [(false, false, true), (false, true, false), (true, false, false)] {
        let run = |consuming: bool| {
            let mut arena = vec![0.0f32; 1 << 14];
            let mut g: Graph<f32, 32> = Graph::new(&mut arena);
            let bn = BatchNorm2d::new(&mut g, 3).unwrap();
            g.param_data_mut(bn.running_mean.unwrap())
                .unwrap()
                .copy_from_slice(&[0.5, -0.25, 1.0]);
            g.param_data_mut(bn.running_var.unwrap())
                .unwrap()
                .copy_from_slice(&[2.0, 0.5, 1.5]);
            g.set_training(training);
            g.set_grad_enabled(grads);
            let before = g.arena().high_water_bytes();
            let x = g.input(&[2, 3, 4, 5], &x_data).unwrap();
            let y = match consuming {
                true => bn.forward_consuming(&mut g, x).unwrap(),
                false => bn.forward(&mut g, x).unwrap(),
            };
            assert_eq!(consuming, g.data(x).is_err(), "consumed input refused afterwards");
            (g.data(y).unwrap().to_vec(), g.arena().high_water_bytes() - before)
        };
        let ((want, separate), (got, consumed)) = (run(false), run(true));
        assert_eq!(got, want, "training {training}, gradients {grads}");
        let plane_set = 2 * 3 * 4 * 5 * 4;
        match in_place {
            true => assert_eq!(consumed + plane_set, separate, "in place: no second output"),
            false => assert_eq!(consumed, separate, "training {training}, gradients {grads}"),
        }
    }
}

#[test]
fn running_statistics_survive_save_and_load() {
    let mut arena = vec![0.0f32; 1 << 14];
    let mut g: Graph<f32, 32> = Graph::new(&mut arena);
    let bn = BatchNorm2d::new(&mut g, 2).unwrap();
    let x = g.input(&[3, 2, 2, 2], &values(24, 2)).unwrap();
    bn.forward(&mut g, x).unwrap();
    g.end_step();
    let (rm, rv) = (bn.running_mean.unwrap(), bn.running_var.unwrap());
    let want = [g.data(rm).unwrap().to_vec(), g.data(rv).unwrap().to_vec()];
    assert_ne!(want[0], [0.0; 2]);
    let mut bytes = vec![0u8; io::saved_len(&g).unwrap()];
    io::save(&g, &mut bytes).unwrap();

    let mut arena2 = vec![0.0f32; 1 << 14];
    let mut h: Graph<f32, 32> = Graph::new(&mut arena2);
    let bn2 = BatchNorm2d::new(&mut h, 2).unwrap();
    io::load(&mut h, &bytes).unwrap();
    assert_eq!(h.data(bn2.running_mean.unwrap()).unwrap(), &want[0][..]);
    assert_eq!(h.data(bn2.running_var.unwrap()).unwrap(), &want[1][..]);
}

#[test]
fn optimizers_never_touch_running_statistics() {
    for adam in [false, true] {
        let mut arena = vec![0.0f32; 1 << 15];
        let mut g: Graph<f32, 32> = Graph::new(&mut arena);
        let bn = BatchNorm2d::new(&mut g, 2).unwrap();
        let mut sgd = Sgd::new(&mut g, 0.5, 0.9, 0.1).unwrap();
        let mut adam_opt = Adam::new(&mut g, 0.5).unwrap();
        let x = g.input(&[2, 2, 3, 3], &values(36, 3)).unwrap();
        let y = bn.forward(&mut g, x).unwrap();
        let t = g.input(&[2, 2, 3, 3], &values(36, 4)).unwrap();
        let loss = g.mse_loss(y, t).unwrap();
        g.backward(loss).unwrap();
        let (rm, rv) = (bn.running_mean.unwrap(), bn.running_var.unwrap());
        let before = [g.data(rm).unwrap().to_vec(), g.data(rv).unwrap().to_vec()];
        let w = g.data(bn.weight.unwrap()).unwrap().to_vec();
        match adam {
            true => adam_opt.step(&mut g).unwrap(),
            false => sgd.step(&mut g).unwrap(),
        };
        assert_eq!(g.data(rm).unwrap(), &before[0][..], "adam {adam}");
        assert_eq!(g.data(rv).unwrap(), &before[1][..], "adam {adam}");
        assert_ne!(
            g.data(bn.weight.unwrap()).unwrap(),
            &w[..],
            "the weight did train"
        );
    }
}

#[test]
fn frozen_statistics_train_the_affine_parameters_at_batch_1() {
    let mut arena = vec![0.0f32; 1 << 14];
    let mut g: Graph<f32, 32> = Graph::new(&mut arena);
    let bn = BatchNorm2d::new(&mut g, 3).unwrap();
    // One value per channel: batch statistics are refused, as in PyTorch ...
    let x = g.input(&[1, 3, 1, 1], &[0.5, -1.0, 2.0]).unwrap();
    let tape = g.tape_len();
    let e = bn.forward(&mut g, x).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ShapeMismatch {
                expected: 2,
                found: 1,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(g.tape_len(), tape, "nothing recorded");
    // ... frozen statistics normalise by the running ones and leave them alone.
    let bn = bn.frozen(true);
    let y = bn.forward(&mut g, x).unwrap();
    let t = g.input(&[1, 3, 1, 1], &[0.0; 3]).unwrap();
    let loss = g.mse_loss(y, t).unwrap();
    g.backward(loss).unwrap();
    assert_eq!(g.data(bn.running_mean.unwrap()).unwrap(), &[0.0; 3]);
    assert_eq!(g.data(bn.running_var.unwrap()).unwrap(), &[1.0; 3]);
    let gw = g.grad(bn.weight.unwrap()).unwrap().unwrap();
    assert!(gw.iter().all(|&v| v > 0.0), "{gw:?}");
    assert!(g
        .grad(bn.bias.unwrap())
        .unwrap()
        .unwrap()
        .iter()
        .all(|&v| v != 0.0));
}

#[test]
fn bad_batch_and_group_norm_input_is_refused_and_the_graph_stays_usable() {
    let mut arena = vec![0.0f32; 1 << 14];
    let mut g: Graph<f32, 32> = Graph::new(&mut arena);
    let bn = BatchNorm2d::new(&mut g, 3).unwrap();
    let x = g.input(&[2, 4, 2, 2], &values(32, 5)).unwrap();
    let tape = g.tape_len();
    let e = bn.forward(&mut g, x).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ShapeMismatch {
                expected: 4,
                found: 3,
                ..
            }
        ),
        "{e:?}"
    );
    let x3 = g.input(&[2, 3], &values(6, 5)).unwrap();
    assert!(bn.forward(&mut g, x3).is_err(), "BatchNorm2d wants 4-D input");
    let e = g
        .batch_norm(x3, None, None, bn.running_mean, None, BatchNormParams::default())
        .unwrap_err();
    assert!(matches!(e, Error::InvalidParam { .. }), "{e:?}");
    let e = g
        .batch_norm(x3, None, None, None, None, BatchNormParams::default())
        .unwrap_err();
    assert!(
        matches!(e, Error::InvalidParam { .. }),
        "eval needs running stats: {e:?}"
    );
    let p = BatchNormParams {
        eps: -1.0,
        ..BatchNormParams::default()
    };
    assert!(g
        .batch_norm(x3, None, None, bn.running_mean, bn.running_var, p)
        .is_err());
    assert!(GroupNorm::new(&mut g, 3, 4).is_err());
    assert!(g.group_norm(x, 3, None, None, 1e-5).is_err());
    assert!(g.group_norm(x, 0, None, None, 1e-5).is_err());
    assert_eq!(g.tape_len(), tape + 1, "only the second input was recorded");
    // Still usable: the right input runs.
    let ok = g.input(&[2, 3, 2, 2], &values(24, 6)).unwrap();
    assert!(bn.forward(&mut g, ok).is_ok());
}

#[test]
fn group_norm_trains_at_batch_1() {
    let mut arena = vec![0.0f32; 1 << 14];
    let mut g: Graph<f32, 32> = Graph::new(&mut arena);
    let gn = GroupNorm::new(&mut g, 2, 4).unwrap();
    let x = g.input_with_grad(&[1, 4, 3, 3], &values(36, 7)).unwrap();
    let y = gn.forward(&mut g, x).unwrap();
    let yd = g.data(y).unwrap().to_vec();
    for grp in 0..2 {
        let s = &yd[grp * 18..][..18];
        let m: f32 = s.iter().sum::<f32>() / 18.0;
        let v: f32 = s.iter().map(|a| (a - m) * (a - m)).sum::<f32>() / 18.0;
        assert!(m.abs() < 1e-5 && (v - 1.0).abs() < 1e-3, "{m} {v}");
    }
    let t = g.input(&[1, 4, 3, 3], &values(36, 8)).unwrap();
    let loss = g.mse_loss(y, t).unwrap();
    g.backward(loss).unwrap();
    assert!(g
        .grad(gn.weight.unwrap())
        .unwrap()
        .unwrap()
        .iter()
        .all(|&v| v != 0.0));
    assert!(g.grad(x).unwrap().unwrap().iter().any(|&v| v != 0.0));
}

fn dropout_run(seed: u32, p: f32, n: usize) -> (Vec<f32>, Vec<f32>) {
    let mut arena = vec![0.0f32; 1 << 16];
    let mut g: Graph<f32, 16> = Graph::new(&mut arena);
    g.manual_seed(seed);
    let x = g.input_with_grad(&[n], &vec![1.0; n]).unwrap();
    let y = g.dropout(x, p, true).unwrap();
    let yd = g.data(y).unwrap().to_vec();
    let seed_grad: Vec<f32> = (0..n).map(|i| i as f32).collect();
    g.backward_with(y, &seed_grad).unwrap();
    (yd, g.grad(x).unwrap().unwrap().to_vec())
}

#[test]
fn dropout_masks_are_seeded_reproducible_and_reused_by_backward() {
    let n = 4000;
    let (y, gx) = dropout_run(7, 0.25, n);
    let kept = y.iter().filter(|&&v| v != 0.0).count();
    assert!((2850..3150).contains(&kept), "kept {kept} of {n} at p = 0.25");
    assert!(y.iter().all(|&v| v == 0.0 || (v - 4.0 / 3.0).abs() < 1e-6));
    for i in 0..n {
        assert_eq!(gx[i], y[i] * i as f32, "backward regenerates the forward mask");
    }
    assert_eq!(dropout_run(7, 0.25, n).0, y, "same seed, same mask");
    assert_ne!(dropout_run(8, 0.25, n).0, y, "another seed, another mask");
    // Two calls in one graph draw different masks.
    let mut arena = vec![0.0f32; 1 << 15];
    let mut g: Graph<f32, 16> = Graph::new(&mut arena);
    let x = g.input(&[256], &[1.0; 256]).unwrap();
    let (a, b) = (g.dropout(x, 0.5, true).unwrap(), g.dropout(x, 0.5, true).unwrap());
    assert_ne!(g.data(a).unwrap(), g.data(b).unwrap());
    // Identity in eval and at p = 0; zeros at p = 1; p outside [0, 1] refused.
    assert_eq!(g.dropout(x, 0.5, false).unwrap(), x);
    assert_eq!(g.dropout(x, 0.0, true).unwrap(), x);
    let z = g.dropout(x, 1.0, true).unwrap();
    assert!(g.data(z).unwrap().iter().all(|&v| v == 0.0));
    let tape = g.tape_len();
    for p in [-0.1, 1.5, f32::NAN] {
        assert!(
            matches!(g.dropout(x, p, true), Err(Error::InvalidFloat { .. })),
            "{p}"
        );
    }
    assert!(Dropout::new(1.5).is_err());
    assert_eq!(g.tape_len(), tape);
}

#[test]
fn dropout_layer_follows_the_graph_mode_and_sequential_keeps_its_input_in_eval() {
    let mut arena = vec![0.0f32; 1 << 14];
    let mut g: Graph<f32, 32> = Graph::new(&mut arena);
    let mut s: Sequential<4> = Sequential::new();
    s.push(Layer::Relu).unwrap();
    s.push(Layer::Dropout(Dropout::new(0.5).unwrap())).unwrap();
    s.push(Layer::Relu).unwrap();
    assert_eq!(s.layers()[1].name(), "dropout");
    let x = g.input(&[1, 64], &[1.0; 64]).unwrap();
    let y = s.forward(&mut g, x).unwrap();
    assert!(g.data(y).unwrap().contains(&0.0));
    g.end_step();
    g.set_training(false);
    let x = g.input(&[1, 64], &[1.0; 64]).unwrap();
    let y = s.forward(&mut g, x).unwrap();
    assert_eq!(g.data(y).unwrap(), &[1.0; 64]);
}

#[test]
fn scalar_scale_and_shift() {
    let mut arena = vec![0.0f32; 4096];
    let mut g: Graph<f32, 16> = Graph::new(&mut arena);
    let x = g.input_with_grad(&[3], &[1.0, -2.0, 0.5]).unwrap();
    let a = g.mul_scalar(x, 3.0).unwrap();
    let b = g.add_scalar(a, 1.0).unwrap();
    let c = g.affine_scalar(b, -0.5, 2.0).unwrap();
    assert_eq!(g.data(c).unwrap(), &[0.0, 4.5, 0.75]);
    assert_eq!(g.op_name(c).unwrap(), "affine_scalar");
    g.backward_with(c, &[1.0, 2.0, 4.0]).unwrap();
    assert_eq!(g.grad(x).unwrap().unwrap(), &[-1.5, -3.0, -6.0]);
    assert!(g.affine_scalar(x, f32::INFINITY, 0.0).is_err());
}

fn tensor(shape: &[usize], seed: u64) -> JsonTensor {
    let n = shape.iter().product();
    // Multiples of 1/8: exact in Q16 too.
    let data = values(n, seed)
        .iter()
        .map(|v| (v * 8.0).round() as f64 / 8.0)
        .collect();
    JsonTensor {
        shape: shape.to_vec(),
        data,
    }
}

fn by_name(op: &str, params: serde_json::Value, shape: &[usize]) -> Case {
    serde_json::from_value(serde_json::json!({
        "id": op, "op": op, "params": params,
        "inputs": { "input": tensor(shape, 11) },
        "grad_output": tensor(shape, 12),
    }))
    .unwrap()
}

/// dropout and the scalar ops through the conformance door: central differences in
/// f32, and Q16 within its resolution of f32 (the mask does not depend on the type).
#[test]
fn dropout_and_scalar_ops_by_name_match_central_differences_and_q16() {
    let cases = [
        by_name(
            "dropout",
            serde_json::json!({"p": 0.3, "training": true}),
            &[2, 3, 4],
        ),
        by_name(
            "dropout",
            serde_json::json!({"p": 0.3, "training": false}),
            &[2, 3],
        ),
        by_name("mul_scalar", serde_json::json!({"other": 0.75}), &[5]),
        by_name("add_scalar", serde_json::json!({"other": -1.25}), &[5]),
        by_name(
            "affine_scalar",
            serde_json::json!({"scale": 1.5, "shift": 0.25}),
            &[2, 2],
        ),
    ];
    for case in &cases {
        let f = run_f32(case).unwrap();
        let gx = &f.grads["input"];
        for i in 0..gx.data.len() {
            let (mut plus, mut minus) = (case.clone(), case.clone());
            plus.inputs.get_mut("input").unwrap().data[i] += 1e-3;
            minus.inputs.get_mut("input").unwrap().data[i] -= 1e-3;
            let numeric = (objective(&plus).unwrap() - objective(&minus).unwrap()) / 2e-3;
            assert!((numeric - gx.data[i]).abs() < 1e-2, "{} [{i}]", case.id);
        }
        let q = run_scalar::<Q16>(case).unwrap();
        for (a, b) in q.output.data.iter().zip(&f.output.data) {
            assert!((a - b).abs() < 1e-4, "{}: q16 {a} f32 {b}", case.id);
        }
        for (a, b) in q.grads["input"].data.iter().zip(&gx.data) {
            assert!((a - b).abs() < 1e-4, "{}: q16 grad {a} f32 {b}", case.id);
        }
    }
    let mut bad = cases[0].clone();
    bad.params.insert("p".into(), serde_json::json!(2.0));
    assert_eq!(run_case(&bad).error.unwrap().kind, "InvalidFloat");
}

/// Q16 batch norm on a large channel (thousands of values) stays close to f32: the
/// statistics are divided in the accumulator, not saturated on the way.
#[test]
fn q16_batch_norm_on_large_sets_is_close_to_f32() {
    let case: Case = serde_json::from_value(serde_json::json!({
        "id": "bn-large", "op": "batch_norm",
        "params": {"training": true, "momentum": 0.1, "eps": 1e-5},
        "inputs": {
            "input": tensor(&[8, 2, 32, 32], 21),
            "weight": tensor(&[2], 22), "bias": tensor(&[2], 23),
            "running_mean": tensor(&[2], 24), "running_var": {"shape": [2], "data": [1.0, 2.0]},
        },
        "grad_output": tensor(&[8, 2, 32, 32], 25),
    }))
    .unwrap();
    let mut case = case;
    // Around 6: a channel's sum (about 49,000) is beyond Q16's range.
    for v in &mut case.inputs.get_mut("input").unwrap().data {
        *v += 6.0;
    }
    let f = run_f32(&case).unwrap();
    let q = run_scalar::<Q16>(&case).unwrap();
    let worst = |a: &JsonTensor, b: &JsonTensor| {
        a.data
            .iter()
            .zip(&b.data)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max)
    };
    assert!(
        worst(&q.output, &f.output) < 2e-3,
        "{}",
        worst(&q.output, &f.output)
    );
    for name in ["input", "weight", "bias"] {
        let w = worst(&q.grads[name], &f.grads[name]);
        let scale = f.grads[name].data.iter().fold(1.0f64, |a, v| a.max(v.abs()));
        assert!(w < 2e-3 * scale, "{name}: {w}");
    }
    for name in ["running_mean", "running_var"] {
        assert!(worst(&q.buffers[name], &f.buffers[name]) < 1e-3, "{name}");
    }
}

/// A small network using every op of this family: conv, batch_norm, relu,
/// group_norm, dropout, scalar scale/shift, pooling and a linear head.
struct Net {
    conv: Conv2d,
    bn: BatchNorm2d,
    gn: GroupNorm,
    drop: Dropout,
    head: Linear,
}

impl Net {
    fn new<const N: usize>(g: &mut Graph<'_, f32, N>) -> Result<Net> {
        let mut rng = Rng::new(3);
        let opts = BatchNormOptions {
            momentum: 0.2,
            ..BatchNormOptions::default()
        };
        Ok(Net {
            conv: Conv2d::new(g, 1, 4, 3, Conv2dParams::padded(1), false, &mut rng)?,
            bn: BatchNorm2d::with_options(g, 4, opts)?,
            gn: GroupNorm::new(g, 2, 4)?,
            drop: Dropout::new(0.25)?,
            head: Linear::new(g, 4, 3, true, &mut rng)?,
        })
    }

    fn loss<const N: usize>(&self, g: &mut Graph<'_, f32, N>, x: Tensor) -> Result<Tensor> {
        let y = self.conv.forward(g, x)?;
        let y = self.bn.forward(g, y)?;
        let y = g.relu(y)?;
        let y = self.gn.forward(g, y)?;
        let y = self.drop.forward(g, y)?;
        let y = g.affine_scalar(y, 0.5, 0.125)?;
        let y = g.adaptive_avg_pool2d(y, [1, 1])?;
        let y = g.flatten(y, 1)?;
        let y = self.head.forward(g, y)?;
        let n = g.shape(x)?.dim(0);
        let targets: Vec<usize> = (0..n).map(|i| i % 3).collect();
        g.cross_entropy(y, if g.is_meta() { &[] } else { &targets })
    }
}

#[test]
fn planner_equals_real_high_water_for_the_norm_ops_in_train_and_eval() {
    let mut rng = Rng::new(17);
    for k in 0..30 {
        let (n, h, w) = (2 + k % 3, 2 + rng.below(20), 2 + rng.below(20));
        let training = k % 2 == 0;
        let mut meta: Graph<f32, 64> = Graph::meta(1 << 26);
        meta.set_training(training);
        let net = Net::new(&mut meta).unwrap();
        let x = meta.input(&[n, 1, h, w], &[]).unwrap();
        let loss = net.loss(&mut meta, x).unwrap();
        let fwd = meta.arena().high_water_bytes();
        meta.backward(loss).unwrap();
        let step = meta.arena().high_water_bytes();

        let mut arena = vec![0.0f32; step / 4];
        let mut g: Graph<f32, 64> = Graph::new(&mut arena);
        g.set_training(training);
        let net = Net::new(&mut g).unwrap();
        let x = g.input(&[n, 1, h, w], &values(n * h * w, k as u64)).unwrap();
        let loss = net.loss(&mut g, x).unwrap();
        assert_eq!(
            g.arena().high_water_bytes(),
            fwd,
            "{n}x{h}x{w} training {training}"
        );
        g.backward(loss).unwrap();
        assert_eq!(
            g.arena().high_water_bytes(),
            step,
            "{n}x{h}x{w} training {training}"
        );
        assert!(g.data(loss).unwrap()[0].is_finite());
        assert!(g.grad(net.bn.weight.unwrap()).unwrap().unwrap()[0].is_finite());
        // One word less is refused with an error, not a crash.
        let mut small = vec![0.0f32; step / 4 - 1];
        let mut g: Graph<f32, 64> = Graph::new(&mut small);
        g.set_training(training);
        let r = Net::new(&mut g).and_then(|net| {
            let x = g.input(&[n, 1, h, w], &values(n * h * w, k as u64))?;
            let loss = net.loss(&mut g, x)?;
            g.backward(loss)
        });
        assert!(matches!(r, Err(Error::ArenaExhausted { .. })), "{r:?}");
    }
}

/// The summary counts BatchNorm's and GroupNorm's weight and bias, not the running
/// statistics (buffers), as torchinfo does.
#[test]
fn summary_counts_affine_parameters_not_buffers() {
    let mut arena = vec![0.0f32; 1 << 14];
    let mut g: Graph<f32, 32> = Graph::new(&mut arena);
    let mut s: Sequential<4> = Sequential::new();
    s.push(Layer::BatchNorm2d(BatchNorm2d::new(&mut g, 4).unwrap()))
        .unwrap();
    s.push(Layer::GroupNorm(GroupNorm::new(&mut g, 2, 4).unwrap()))
        .unwrap();
    let opts = BatchNormOptions {
        affine: false,
        ..BatchNormOptions::default()
    };
    s.push(Layer::BatchNorm2d(
        BatchNorm2d::with_options(&mut g, 4, opts).unwrap(),
    ))
    .unwrap();
    assert_eq!(s.num_param_elements(&g).unwrap(), 16);
    assert_eq!(
        g.num_param_elements(),
        32,
        "the graph's count includes the buffers"
    );
}

/// Fused SGD (the update applied during backward) gives BatchNorm's and GroupNorm's
/// affine parameters the update plain SGD gives, and leaves the running statistics alone.
#[test]
fn fused_sgd_updates_norm_parameters_as_sgd_does() {
    let run = |fused: bool| -> Vec<Vec<f32>> {
        let mut arena = vec![0.0f32; 1 << 15];
        let mut g: Graph<f32, 32> = Graph::new(&mut arena);
        if fused {
            g.set_fused_sgd(0.1).unwrap();
        }
        let bn = BatchNorm2d::new(&mut g, 2).unwrap();
        let gn = GroupNorm::new(&mut g, 1, 2).unwrap();
        let mut sgd = Sgd::new(&mut g, 0.1, 0.0, 0.0).unwrap();
        for step in 0..3 {
            let x = g.input(&[2, 2, 3, 3], &values(36, 30 + step)).unwrap();
            let y = bn.forward(&mut g, x).unwrap();
            let y = gn.forward(&mut g, y).unwrap();
            let t = g.input(&[2, 2, 3, 3], &values(36, 40 + step)).unwrap();
            let loss = g.mse_loss(y, t).unwrap();
            g.zero_grad();
            g.backward(loss).unwrap();
            if !fused {
                sgd.step(&mut g).unwrap();
            }
            g.end_step();
        }
        (0..g.num_params())
            .map(|i| g.data(g.param_handle(i).unwrap()).unwrap().to_vec())
            .collect()
    };
    let (plain, fused) = (run(false), run(true));
    assert_ne!(plain[0], vec![1.0; 2], "the weight trained");
    for (a, b) in plain.iter().zip(&fused) {
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-6, "{a:?} vs {b:?}");
        }
    }
}

/// Fixed statistics: with a frozen weight the record keeps only each channel's scale
/// (`C` values, not the mean and inverse std), without gradients nothing, and the
/// gradients are those of the record that keeps both.
#[test]
fn fixed_statistics_keep_only_what_their_gradients_read() {
    let mut arena = vec![0.0f32; 1 << 12];
    let mut g: Graph<f32, 64> = Graph::new(&mut arena);
    let c = 3;
    let frozen_w = g.buffer(&[c]).unwrap();
    let trained_w = g.param(&[c]).unwrap();
    let b = g.param(&[c]).unwrap();
    let (m, v) = (g.buffer(&[c]).unwrap(), g.buffer(&[c]).unwrap());
    for t in [frozen_w, trained_w] {
        g.param_data_mut(t).unwrap().copy_from_slice(&[1.5, -0.5, 0.75]);
    }
    g.param_data_mut(m).unwrap().copy_from_slice(&[0.1, -0.2, 0.3]);
    g.param_data_mut(v).unwrap().copy_from_slice(&[2.0, 0.5, 1.0]);
    let vals = values(2 * c * 4, 7);
    let eval = BatchNormParams::default();
    // Bytes one batch_norm adds beyond its output, and the gradients it gives.
    let run = |g: &mut Graph<f32, 64>, w: Tensor, grads: bool| {
        let x = match grads {
            true => g.input_with_grad(&[2, c, 2, 2], &vals).unwrap(),
            false => g.input(&[2, c, 2, 2], &vals).unwrap(),
        };
        g.set_grad_enabled(grads);
        let before = g.arena().used_bytes();
        let y = g.batch_norm(x, Some(w), Some(b), Some(m), Some(v), eval).unwrap();
        let extra = g.arena().used_bytes() - before - vals.len() * 4;
        let out = g.data(y).unwrap().to_vec();
        let mut grad = Vec::new();
        if grads {
            let s = g.sum(y, &[0, 1, 2, 3], false).unwrap();
            g.backward(s).unwrap();
            grad = g.grad(x).unwrap().unwrap().to_vec();
            grad.extend(g.grad(b).unwrap().unwrap());
        }
        g.set_grad_enabled(true);
        g.end_step();
        g.zero_grad();
        (extra, out, grad)
    };
    let (both, y_both, g_both) = run(&mut g, trained_w, true);
    let (scale, y_scale, g_scale) = run(&mut g, frozen_w, true);
    let (none, y_none, _) = run(&mut g, frozen_w, false);
    assert_eq!((both, scale, none), (2 * c * 4, c * 4, 0));
    assert_eq!(y_both, y_scale);
    assert_eq!(y_both, y_none);
    assert_eq!(g_both, g_scale);
}
