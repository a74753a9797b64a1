//! Central-difference gradient checks: for every golden case (every op and every
//! parameter family in `golden/ops.json`) the analytic gradient of
//! `L = sum(output * grad_output)` is compared with `(L(x+e) - L(x-e)) / 2e`, element by
//! element, for every floating-point input. Plus a whole W1 network and a graph that
//! uses one tensor several times (gradients must accumulate).

use torchlet::init::Rng;
use torchlet::nn::digits_fcn;
use torchlet::Graph;
use torchlet_tests::conformance::{objective, run_f32, Cases};

fn golden() -> Cases {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/golden/ops.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn every_op_gradient_matches_central_differences() {
    let mut checked = std::collections::BTreeMap::<String, usize>::new();
    let mut failures = Vec::new();
    for case in golden().cases {
        if case.expected_error.is_some() || matches!(case.op.as_str(), "pad" | "interpolate") {
            continue;
        }
        let Ok(analytic) = run_f32(&case) else {
            failures.push(format!("{}: did not run", case.id));
            continue;
        };
        // Kinks (ReLU at 0, max-pool ties) need a step smaller than the inputs' spacing.
        let eps = match case.op.as_str() {
            "relu" | "leaky_relu" | "max_pool2d" => 1e-3,
            _ => 1e-2,
        };
        for (name, grad) in &analytic.grads {
            let n = case.inputs[name].data.len();
            for i in 0..n {
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
        *checked.entry(case.op.clone()).or_default() += 1;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    for op in [
        "conv2d",
        "max_pool2d",
        "avg_pool2d",
        "adaptive_avg_pool2d",
        "linear",
        "relu",
        "leaky_relu",
        "sigmoid",
        "tanh",
        "add",
        "mul",
        "flatten",
        "cross_entropy",
        "mse_loss",
    ] {
        assert!(
            checked.get(op).copied().unwrap_or(0) > 0,
            "no gradient check for {op}"
        );
    }
}

/// W1's loss at a 9x11 input, as a function of one parameter element.
fn w1_loss(param: usize, elem: usize, delta: f32) -> (f32, Vec<f32>) {
    let mut arena = vec![0.0f32; 64 * 1024];
    let mut g: Graph<f32, 32> = Graph::new(&mut arena);
    let model = digits_fcn(&mut g, &mut Rng::new(7)).unwrap();
    let p = g.param_handle(param).unwrap();
    g.param_data_mut(p).unwrap()[elem] += delta;
    let mut rng = Rng::new(3);
    let img: Vec<f32> = (0..2 * 9 * 11).map(|_| rng.uniform(0.0, 1.0)).collect();
    let x = g.input(&[2, 1, 9, 11], &img).unwrap();
    let logits = model.forward(&mut g, x).unwrap();
    let loss = g.cross_entropy(logits, &[3, 8]).unwrap();
    let value = g.data(loss).unwrap()[0];
    g.backward(loss).unwrap();
    (value, g.grad(p).unwrap().unwrap().to_vec())
}

#[test]
fn whole_w1_network_gradient_matches_central_differences() {
    let mut rng = Rng::new(11);
    for param in 0..8 {
        let (_, grad) = w1_loss(param, 0, 0.0);
        for _ in 0..4 {
            let elem = rng.below(grad.len());
            let eps = 1e-2;
            let numeric = (w1_loss(param, elem, eps).0 - w1_loss(param, elem, -eps).0) / (2.0 * eps);
            let a = grad[elem];
            assert!(
                (numeric - a).abs() < 2e-3 + 2e-2 * a.abs(),
                "param {param}[{elem}]: analytic {a}, numeric {numeric}"
            );
        }
    }
}

#[test]
fn a_tensor_used_twice_gets_both_gradients() {
    // y = x*x + x  =>  dy/dx = 2x + 1
    let mut arena = [0.0f32; 64];
    let mut g: Graph<f32, 8> = Graph::new(&mut arena);
    let x = g.input_with_grad(&[3], &[1.0, -2.0, 0.5]).unwrap();
    let sq = g.mul(x, x).unwrap();
    let y = g.add(sq, x).unwrap();
    g.backward_with(y, &[1.0, 1.0, 1.0]).unwrap();
    assert_eq!(g.grad(x).unwrap().unwrap(), &[3.0, -3.0, 2.0]);
}
