//! The ONNX importer (torchlet-onnx) on the zoo that tests/golden/make_onnx_zoo.py
//! exports from PyTorch with both exporters: every model imports with the expected
//! ops and PyTorch parameter names, free dims stay free, refusals name the node and op
//! type, bad bytes are errors. Models whose ops all exist run through the registry
//! (by name, as a model file will) and match onnxruntime's and PyTorch's outputs.

use safetensors::SafeTensors;
use std::path::PathBuf;
use torchlet::model::spec::{AttrValue, DimSpec, GraphSpec, TensorKind, ValueRef};
use torchlet::ops::registry::{Attrs, OpSpec};
use torchlet::{Graph, Tensor};
use torchlet_onnx::{import, infer, Error, Options};

const ZOO: [&str; 13] = [
    "w1",
    "lenet5",
    "mobilenetish",
    "unetish",
    "seq1d",
    "padresize",
    "mlp",
    "pool1d",
    "senet",
    "mobilenet_v3_small",
    "efficientnet_b0",
    "ghostnet",
    "shufflenet_v2",
];

/// torchvision's models, too long to list node by node: how many of each op.
fn expected_counts(model: &str, exporter: &str) -> Option<Vec<(&'static str, usize)>> {
    let pool = if exporter == "ts" {
        "adaptive_avg_pool2d"
    } else {
        "mean"
    };
    let mut counts = match model {
        // 9 squeeze-and-excitation blocks (hardsigmoid scale) and the head's pool.
        "mobilenet_v3_small" => vec![
            ("conv2d", 50),
            ("batch_norm", 32),
            ("hardswish", 19),
            ("relu", 12),
            (pool, 10),
            ("mul", 9),
            ("hardsigmoid", 9),
            ("add", 7),
            ("linear", 2),
            ("flatten", 1),
        ],
        // SiLU everywhere (one op, not sigmoid and mul), 7 SE blocks (sigmoid scale).
        "efficientnet_b0" => vec![
            ("conv2d", 36),
            ("silu", 22),
            ("batch_norm", 22),
            (pool, 8),
            ("sigmoid", 7),
            ("mul", 7),
            ("linear", 1),
            ("flatten", 1),
            ("add", 1),
        ],
        // Ghost modules (their channel Slices take whole dims here: none left), 7 SE.
        "ghostnet" => vec![
            ("conv2d", 95),
            ("batch_norm", 80),
            ("relu", 42),
            ("cat", 32),
            ("add", 16),
            ("mul", 7),
            ("mean", if exporter == "ts" { 7 } else { 8 }),
            ("hardsigmoid", 7),
            ("linear", 1),
            ("flatten", 1),
        ]
        .into_iter()
        .chain((exporter == "ts").then_some(("adaptive_avg_pool2d", 1)))
        .collect(),
        // Channel split (slices), channel shuffle, concat.
        "shufflenet_v2" => vec![
            ("conv2d", 29),
            ("batch_norm", 29),
            ("relu", 19),
            ("slice", 8),
            ("channel_shuffle", 7),
            ("cat", 7),
            ("mean", 1),
            ("max_pool2d", 1),
            ("linear", 1),
        ],
        _ => return None,
    };
    counts.sort_unstable();
    Some(counts)
}

fn counts<'a>(ops: &[&'a str]) -> Vec<(&'a str, usize)> {
    let mut m = std::collections::BTreeMap::new();
    for op in ops {
        *m.entry(*op).or_insert(0) += 1;
    }
    m.into_iter().collect()
}

fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("golden")
        .join("onnx")
        .join(name)
}

fn load(name: &str, options: &Options) -> Result<GraphSpec, Error> {
    let bytes = std::fs::read(golden(name)).unwrap();
    let data = std::fs::read(golden(&format!("{name}.data"))).ok();
    import(&bytes, data.as_deref(), options)
}

fn ops(spec: &GraphSpec) -> Vec<&str> {
    spec.nodes.iter().map(|n| n.op.as_str()).collect()
}

fn expected_ops(model: &str, exporter: &str) -> Vec<&'static str> {
    let mobile_pool = if exporter == "ts" {
        "adaptive_avg_pool2d"
    } else {
        "mean"
    };
    let w1_pool = mobile_pool;
    match model {
        "w1" => vec![
            "conv2d",
            "relu",
            "max_pool2d",
            "conv2d",
            "relu",
            "max_pool2d",
            "conv2d",
            "relu",
            w1_pool,
            "flatten",
            "linear",
        ],
        "lenet5" => vec![
            "conv2d",
            "tanh",
            "max_pool2d",
            "conv2d",
            "sigmoid",
            "max_pool2d",
            "flatten",
            "linear",
            "relu",
            "linear",
            "leaky_relu",
            "linear",
        ],
        "mobilenetish" => vec![
            "conv2d",
            "batch_norm",
            "relu6",
            "conv2d",
            "batch_norm",
            "relu6",
            "conv2d",
            "batch_norm",
            "relu6",
            "conv2d",
            "batch_norm",
            "add",
            "conv2d",
            "hardswish",
            mobile_pool,
            "flatten",
            "linear",
        ],
        "unetish" => vec![
            "conv2d",
            "relu",
            "max_pool2d",
            "conv2d",
            "relu",
            "conv_transpose2d",
            "cat",
            "conv2d",
            "sigmoid",
            "conv2d",
        ],
        "seq1d" => vec![
            "conv1d",
            "relu",
            "conv1d",
            "tanh",
            "mean",
            "linear",
            "log_softmax",
        ],
        "padresize" => vec![
            "pad",
            "conv2d",
            "hardsigmoid",
            "interpolate",
            "conv2d",
            "relu",
            "interpolate",
            "conv2d",
            "softmax",
        ],
        "mlp" => vec!["linear", "relu", "linear", "log_softmax"],
        "pool1d" => vec![
            "conv1d",
            "relu",
            "unsqueeze",
            "avg_pool2d",
            "squeeze",
            "unsqueeze",
            "avg_pool2d",
            "squeeze",
            "unsqueeze",
            "squeeze",
            "mean",
            "linear",
        ],
        "senet" => vec![
            "conv2d",
            "batch_norm",
            "silu",
            mobile_pool,
            "conv2d",
            "silu",
            "conv2d",
            "sigmoid",
            "mul",
            "conv2d",
            "batch_norm",
            "hardswish",
            mobile_pool,
            "conv2d",
            "relu",
            "conv2d",
            "hardsigmoid",
            "mul",
            "slice",
            "slice",
            "cat",
            "slice",
            "mean",
            "add",
            "sub",
            "mul_scalar",
            "add_scalar",
            "mul_scalar",
            "affine_scalar",
            mobile_pool,
            "flatten",
            "linear",
        ],
        _ => unreachable!(),
    }
}

/// The reference file's tensors as f32 (shape, values).
fn reference(model: &str) -> Vec<(String, Vec<usize>, Vec<f32>)> {
    let bytes = std::fs::read(golden(&format!("{model}.ref.safetensors"))).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut out = Vec::new();
    for (name, view) in st.tensors() {
        let data = match view.dtype() {
            safetensors::Dtype::F32 => view
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
            safetensors::Dtype::I64 => view
                .data()
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f32)
                .collect(),
            d => panic!("{name}: dtype {d:?}"),
        };
        out.push((name, view.shape().to_vec(), data));
    }
    out
}

#[test]
fn every_zoo_model_imports_from_both_exporters_with_its_ops_and_pytorch_names() {
    for model in ZOO {
        let state: Vec<_> = reference(model)
            .into_iter()
            .filter(|(n, _, _)| n.starts_with("sgd."))
            .collect();
        for exporter in ["ts", "dyn"] {
            let file = format!("{model}.{exporter}.onnx");
            let spec = load(&file, &Options::default()).unwrap_or_else(|e| panic!("{file}: {e}"));
            match expected_counts(model, exporter) {
                Some(want) => assert_eq!(counts(&ops(&spec)), want, "{file}"),
                None => assert_eq!(ops(&spec), expected_ops(model, exporter), "{file}"),
            }
            assert_eq!(spec.outputs, vec![ValueRef::Node(spec.nodes.len() - 1)], "{file}");
            // Every tensor is a state_dict entry of the PyTorch model, with its shape,
            // and every state_dict entry is there.
            for t in &spec.tensors {
                let (_, dims, _) = state
                    .iter()
                    .find(|(n, _, _)| n[4..] == t.name)
                    .unwrap_or_else(|| panic!("{file}: {} is not in the state_dict", t.name));
                assert_eq!(&t.dims, dims, "{file}: {}", t.name);
                // senet's `shift` is a registered buffer, subtracted with broadcasting.
                let buffer = t.name.contains("running_")
                    || t.name.ends_with("num_batches_tracked")
                    || t.name == "shift";
                assert_eq!(t.kind == TensorKind::Buffer, buffer, "{file}: {}", t.name);
            }
            assert_eq!(spec.tensors.len(), state.len(), "{file}");
            // Node names are unique, also where one ONNX node became two (the dynamo
            // export of padresize pads before a conv).
            let mut names: Vec<&str> = spec.nodes.iter().map(|n| n.name.as_str()).collect();
            names.sort_unstable();
            let before = names.len();
            names.dedup();
            assert_eq!(names.len(), before, "{file}: a node name repeats");
        }
    }
}

#[test]
fn free_dims_stay_free_with_the_smallest_size_that_fits() {
    let dims = |f: &str| load(f, &Options::default()).unwrap().inputs[0].dims.clone();
    let free = |min| DimSpec::Free { min };
    for e in ["ts", "dyn"] {
        // Two 2x2 max-pools after padded 3x3 convolutions: 4 is the least.
        assert_eq!(
            dims(&format!("w1.{e}.onnx")),
            [free(1), DimSpec::Fixed(1), free(4), free(4)]
        );
        assert_eq!(
            dims(&format!("seq1d.{e}.onnx")),
            [free(1), DimSpec::Fixed(2), free(5)]
        );
        assert_eq!(
            dims(&format!("unetish.{e}.onnx")),
            [free(1), DimSpec::Fixed(1), free(2), free(2)]
        );
        // LeNet-5 was exported with a fixed size: its head needs 28x28.
        assert_eq!(
            dims(&format!("lenet5.{e}.onnx")),
            [free(1), DimSpec::Fixed(1), DimSpec::Fixed(28), DimSpec::Fixed(28)]
        );
    }
    // Sizes never exported go through; too small ones are refused by name.
    let spec = load("w1.dyn.onnx", &Options::default()).unwrap();
    let shapes = infer::shapes(&spec, &[vec![3, 1, 13, 9]]).unwrap();
    assert_eq!(shapes.last().unwrap(), &vec![3, 10]);
    assert!(infer::shapes(&spec, &[vec![1, 1, 3, 9]])
        .unwrap_err()
        .contains("max_pool2d"));
    let spec = load("padresize.ts.onnx", &Options::default()).unwrap();
    assert_eq!(
        infer::shapes(&spec, &[vec![2, 1, 9, 6]]).unwrap().last().unwrap(),
        &vec![2, 3, 16, 12]
    );
}

#[test]
fn batch_norm_keeps_pytorch_momentum_and_eps_and_folds_when_asked() {
    let spec = load("mobilenetish.ts.onnx", &Options::default()).unwrap();
    let bn = &spec.nodes[1];
    assert_eq!(
        bn.attrs,
        vec![
            ("momentum".into(), AttrValue::Float(0.1)),
            ("eps".into(), AttrValue::Float(1e-5))
        ]
    );
    let folded = load("mobilenetish.ts.onnx", &Options { fold_bn: true }).unwrap();
    assert!(!ops(&folded).contains(&"batch_norm"), "{:?}", ops(&folded));
    assert!(folded.tensors.iter().any(|t| t.name == "stem.0.bias"));
    assert!(!folded.tensors.iter().any(|t| t.kind == TensorKind::Buffer));
}

#[test]
fn refused_ops_name_the_node_and_op_type() {
    let e = load("refused_lstm.onnx", &Options::default()).unwrap_err();
    let Error::Node { op_type, index, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(op_type, "LSTM");
    let text = e.to_string();
    assert!(text.starts_with(&format!("node {index} (LSTM \"")), "{text}");
    assert!(text.ends_with("op type LSTM is not supported"), "{text}");
}

#[test]
fn arithmetic_with_a_scalar_constant_becomes_a_scalar_op() {
    // `conv(x) * 2.0 + 1.0`, once refused.
    let spec = load("refused_scale.onnx", &Options::default()).unwrap();
    assert_eq!(ops(&spec), ["conv2d", "mul_scalar", "add_scalar"]);
    assert_eq!(spec.nodes[1].attrs, [("other".into(), AttrValue::Float(2.0))]);
    assert_eq!(spec.nodes[2].attrs, [("other".into(), AttrValue::Float(1.0))]);
}

#[test]
fn missing_external_data_is_an_error_naming_the_file() {
    let bytes = std::fs::read(golden("w1.dyn.onnx")).unwrap();
    let e = import(&bytes, None, &Options::default()).unwrap_err().to_string();
    assert!(e.contains("w1.dyn.onnx.data") && e.contains("not given"), "{e}");
    let data = std::fs::read(golden("w1.dyn.onnx.data")).unwrap();
    let e = import(&bytes, Some(&data[..data.len() / 2]), &Options::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("past the end"), "{e}");
}

#[test]
fn corrupt_or_truncated_bytes_are_errors_not_panics() {
    for file in ["w1.ts.onnx", "mobilenetish.dyn.onnx", "padresize.ts.onnx"] {
        let bytes = std::fs::read(golden(file)).unwrap();
        let data = std::fs::read(golden(&format!("{file}.data"))).ok();
        for cut in (0..bytes.len()).step_by(97) {
            let _ = import(&bytes[..cut], data.as_deref(), &Options::default());
        }
        let mut state = 0x2545_f491_u32;
        for _ in 0..400 {
            let mut b = bytes.clone();
            for _ in 0..4 {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                let k = state as usize % b.len();
                b[k] = (state >> 24) as u8;
            }
            let _ = import(&b, data.as_deref(), &Options::default());
        }
    }
    assert!(matches!(
        import(b"not an onnx file", None, &Options::default()),
        Err(Error::Parse(_))
    ));
    assert!(matches!(
        import(&[], None, &Options::default()),
        Err(Error::Model(_))
    ));
}

/// A node's attrs as the registry reads them.
struct SpecAttrs<'a>(&'a [(String, AttrValue)]);

impl SpecAttrs<'_> {
    fn get(&self, name: &str) -> Option<&AttrValue> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }
}

fn bad() -> torchlet::Error {
    torchlet::Error::Unsupported { op: "attribute kind" }
}

impl Attrs for SpecAttrs<'_> {
    fn int(&self, name: &str) -> torchlet::Result<Option<i64>> {
        match self.get(name) {
            None => Ok(None),
            Some(AttrValue::Int(v)) => Ok(Some(*v)),
            _ => Err(bad()),
        }
    }
    fn ints(&self, name: &str, out: &mut [i64]) -> torchlet::Result<Option<usize>> {
        let v = match self.get(name) {
            None => return Ok(None),
            Some(AttrValue::Int(v)) => vec![*v],
            Some(AttrValue::Ints(v)) => v.clone(),
            _ => return Err(bad()),
        };
        for (d, s) in out.iter_mut().zip(&v) {
            *d = *s;
        }
        Ok(Some(v.len()))
    }
    fn float(&self, name: &str) -> torchlet::Result<Option<f64>> {
        match self.get(name) {
            None => Ok(None),
            Some(AttrValue::Float(v)) => Ok(Some(*v)),
            _ => Err(bad()),
        }
    }
    fn float_at(&self, name: &str, k: usize) -> torchlet::Result<Option<f64>> {
        match self.get(name) {
            Some(AttrValue::Floats(v)) => Ok(v.get(k).copied()),
            Some(AttrValue::Float(v)) => Ok((k == 0).then_some(*v)),
            None => Ok(None),
            _ => Err(bad()),
        }
    }
    fn flag(&self, name: &str) -> torchlet::Result<Option<bool>> {
        match self.get(name) {
            None => Ok(None),
            Some(AttrValue::Flag(v)) => Ok(Some(*v)),
            _ => Err(bad()),
        }
    }
    fn string(&self, name: &str) -> torchlet::Result<Option<&str>> {
        match self.get(name) {
            None => Ok(None),
            Some(AttrValue::Str(v)) => Ok(Some(v)),
            _ => Err(bad()),
        }
    }
}

/// Runs an imported graph forward through the op registry, by name.
fn forward(spec: &GraphSpec, dims: &[usize], x: &[f32]) -> (Vec<usize>, Vec<f32>) {
    let mut arena = vec![0f32; 8 << 20];
    let mut g: Graph<f32, 1024> = Graph::new(&mut arena);
    let input = g.input(dims, x).unwrap();
    let tensors: Vec<Tensor> = spec
        .tensors
        .iter()
        .map(|t| g.input(&t.dims, &t.data).unwrap())
        .collect();
    let mut outs: Vec<Tensor> = Vec::new();
    for n in &spec.nodes {
        let ins: Vec<Option<Tensor>> = n
            .inputs
            .iter()
            .map(|r| {
                r.map(|r| match r {
                    ValueRef::Input(_) => input,
                    ValueRef::Tensor(k) => tensors[k],
                    ValueRef::Node(k) => outs[k],
                })
            })
            .collect();
        let op = OpSpec::<f32, 1024>::find(&n.op).unwrap();
        outs.push(
            (op.call)(&mut g, &ins, &SpecAttrs(&n.attrs))
                .unwrap_or_else(|e| panic!("{} {:?}: {e}", n.op, n.name)),
        );
    }
    let y = *outs.last().unwrap();
    (g.shape(y).unwrap().dims().to_vec(), g.data(y).unwrap().to_vec())
}

#[test]
fn outputs_match_onnxruntime_and_pytorch_at_exported_and_new_sizes() {
    let mut ran = Vec::new();
    for model in ZOO {
        let refs = reference(model);
        let get = |n: &str| refs.iter().find(|(k, _, _)| k == n);
        for exporter in ["ts", "dyn"] {
            let spec = load(&format!("{model}.{exporter}.onnx"), &Options::default()).unwrap();
            let mut k = 0;
            while let Some((_, dims, x)) = get(&format!("x.{k}")) {
                let (shape, y) = forward(&spec, dims, x);
                for want in [format!("ort.{k}"), format!("y.{k}")] {
                    let (_, wd, w) = get(&want).unwrap();
                    assert_eq!(&shape, wd, "{model}.{exporter} {want}");
                    for (i, (a, b)) in y.iter().zip(w).enumerate() {
                        assert!(
                            (a - b).abs() <= 1e-5 * b.abs() + 1e-6,
                            "{model}.{exporter} {want}[{i}]: {a} vs {b}"
                        );
                    }
                }
                k += 1;
            }
            ran.push(format!("{model}.{exporter}"));
        }
    }
    assert_eq!(ran.len(), 2 * ZOO.len(), "{ran:?}");
}
