//! SGD and Adam against torch.optim: `golden/optim.json` (made by
//! `golden/make_optim.py`) holds a parameter vector, five gradients and PyTorch's
//! parameter after each step for every recipe.

use serde_json::Value;
use torchlet::optim::{Adam, Sgd};
use torchlet::Graph;

#[test]
fn sgd_and_adam_match_torch_optim() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/golden/optim.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let f = |v: &Value| {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect::<Vec<_>>()
    };
    let p0 = f(&doc["p0"]);
    let grads: Vec<Vec<f32>> = doc["grads"].as_array().unwrap().iter().map(f).collect();
    let recipes = doc["recipes"].as_array().unwrap();
    assert_eq!(recipes.len(), 5);
    for r in recipes {
        let mut arena = vec![0.0f32; 256];
        let mut g: Graph<f32, 4> = Graph::new(&mut arena);
        let p = g.param(&[p0.len()]).unwrap();
        g.param_data_mut(p).unwrap().copy_from_slice(&p0);
        let lr = r["lr"].as_f64().unwrap() as f32;
        let wd = r["weight_decay"].as_f64().unwrap() as f32;
        enum Opt {
            Sgd(Sgd),
            Adam(Adam),
        }
        let mut opt = if r["opt"] == "sgd" {
            Opt::Sgd(Sgd::new(&mut g, lr, r["momentum"].as_f64().unwrap() as f32, wd).unwrap())
        } else {
            let mut a = Adam::new(&mut g, lr).unwrap();
            a.weight_decay = wd;
            Opt::Adam(a)
        };
        for (k, (grad, want)) in grads.iter().zip(r["steps"].as_array().unwrap()).enumerate() {
            // Gradient via a tiny graph: d/dp sum(p * grad) = grad.
            g.zero_grad();
            let c = g.input(&[grad.len()], grad).unwrap();
            let y = g.mul(p, c).unwrap();
            g.backward_with(y, &vec![1.0; grad.len()]).unwrap();
            match &mut opt {
                Opt::Sgd(s) => s.step(&mut g).unwrap(),
                Opt::Adam(a) => a.step(&mut g).unwrap(),
            };
            g.end_step();
            let got = g.data(p).unwrap();
            for (i, (&a, b)) in got.iter().zip(f(want)).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-6 + 1e-5 * b.abs(),
                    "{} step {k} [{i}]: {a} vs torch {b}",
                    r["name"]
                );
            }
        }
    }
}
