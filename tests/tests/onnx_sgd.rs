//! One SGD step of every ONNX zoo model (tests/golden/make_onnx_zoo.py), imported,
//! encoded as a model file and run by `torchlet::model::Model` in training mode, equals
//! PyTorch's step (lr 0.1 on `x.0` and targets `t`, cross-entropy or mean-square loss as
//! the script lists): every parameter and buffer of the updated `state_dict` within 1e-5
//! of PyTorch's float32 step, or, for the models the script also stepped in float64
//! (`sgd64.*`), within 1e-5 plus twice float32 PyTorch's own distance of the float64
//! step (one SGD step through BatchNorm in training mode can be ill-conditioned in
//! float32: GhostNet's first weight moves 2.6e-4 between PyTorch's float32 and float64).

use safetensors::SafeTensors;
use std::collections::BTreeMap;
use torchlet::model::{encode, Model, ModelFile};
use torchlet::optim::Sgd;
use torchlet::Graph;
use torchlet_onnx::{import, Options};

/// (model, loss) as the fixture script trains them.
const ZOO: [(&str, &str); 13] = [
    ("w1", "ce"),
    ("lenet5", "ce"),
    ("mobilenetish", "ce"),
    ("unetish", "mse"),
    ("seq1d", "ce"),
    ("padresize", "mse"),
    ("mlp", "ce"),
    ("pool1d", "ce"),
    ("senet", "ce"),
    ("mobilenet_v3_small", "ce"),
    ("efficientnet_b0", "ce"),
    ("ghostnet", "ce"),
    ("shufflenet_v2", "ce"),
];

fn golden(f: &str) -> Vec<u8> {
    std::fs::read(format!("{}/golden/onnx/{f}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn reference(model: &str) -> BTreeMap<String, (Vec<usize>, Vec<f32>)> {
    let bytes = golden(&format!("{model}.ref.safetensors"));
    let st = SafeTensors::deserialize(&bytes).unwrap();
    st.tensors()
        .into_iter()
        .map(|(name, v)| {
            let data = match v.dtype() {
                safetensors::Dtype::F32 => v
                    .data()
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                    .collect(),
                _ => v
                    .data()
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f32)
                    .collect(),
            };
            (name, (v.shape().to_vec(), data))
        })
        .collect()
}

#[test]
fn one_sgd_step_of_every_zoo_model_equals_pytorchs() {
    for (model, loss) in ZOO {
        for exporter in ["ts", "dyn"] {
            let file = format!("{model}.{exporter}.onnx");
            let data = (exporter == "dyn").then(|| golden(&format!("{file}.data")));
            let spec = import(&golden(&file), data.as_deref(), &Options::default()).unwrap();
            let bytes = encode(&spec).unwrap();
            let mf = ModelFile::parse(&bytes).unwrap();
            let refs = reference(model);
            let mut arena = vec![0.0f32; 4 << 20];
            let mut g: Graph<f32, 1024> = Graph::new(&mut arena);
            let m = Model::new(&mut g, mf).unwrap();
            let mut sgd = Sgd::new(&mut g, 0.1, 0.0, 0.0).unwrap();
            g.set_training(true);
            g.zero_grad();
            let (xd, xv) = &refs["x.0"];
            let x = g.input(xd, xv).unwrap();
            let y = m.forward(&mut g, &[x]).unwrap();
            let (td, tv) = &refs["t"];
            let l = if loss == "ce" {
                let t: Vec<i64> = tv.iter().map(|v| *v as i64).collect();
                g.cross_entropy_with(y, &t, Default::default()).unwrap()
            } else {
                let t = g.input(td, tv).unwrap();
                g.mse_loss(y, t).unwrap()
            };
            g.backward(l).unwrap();
            sgd.step(&mut g).unwrap();
            g.end_step();
            let mut checked = 0;
            for t in mf.tensors() {
                let Some((wd, want)) = refs.get(&format!("sgd.{}", t.name)) else {
                    continue;
                };
                if t.name.ends_with("num_batches_tracked") {
                    continue; // not carried by ONNX; exported as 0
                }
                let got = g.data(m.param(t.index).unwrap()).unwrap();
                assert_eq!(t.shape.dims(), &wd[..], "{file} {}", t.name);
                let exact = refs.get(&format!("sgd64.{}", t.name)).map(|(_, v)| v);
                for (i, (a, b)) in got.iter().zip(want).enumerate() {
                    // Against the float64 step where the script made one: as close to it
                    // as PyTorch's float32 step is (twice its gap), or 1e-5.
                    let (b, slack) = match exact {
                        Some(e) => (e[i], 2.0 * (b - e[i]).abs()),
                        None => (*b, 0.0),
                    };
                    assert!(
                        (a - b).abs() <= 1e-5 * (1.0 + b.abs()) + slack,
                        "{file} {}[{i}]: {a} vs {b} (float32 PyTorch off by {})",
                        t.name,
                        slack / 2.0
                    );
                }
                checked += 1;
            }
            let expected = refs
                .keys()
                .filter(|k| k.starts_with("sgd.") && !k.ends_with("num_batches_tracked"))
                .count();
            assert_eq!(checked, expected, "{file}: every state_dict entry compared");
        }
    }
}
