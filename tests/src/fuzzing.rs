//! The bodies of the cargo-fuzz targets in `core/fuzz/` (`weights_load`,
//! `conformance_case`, `model_load`, `onnx_import`), kept here so that `tests/tests/weights_fuzz_regressions.rs`
//! replays every input the fuzzers ever crashed on with a plain `cargo test`.

use arbitrary::{Result, Unstructured};
use serde_json::{json, Map, Value};
use torchlet::{io, Graph};

/// Fuzzes the weights loader (`torchlet::io`) and the host safetensors parser with
/// arbitrary bytes. If the first byte is odd, the rest gets a correct length field
/// and CRC-32 first, so that the fuzzer reaches the record parser and the shape checks
/// behind the checksum. Invariants: no panic; a failed load leaves the model as it was;
/// a successful load round-trips through `save`.
pub fn weights_load(data: &[u8]) {
    let mut bytes = data.get(1..).unwrap_or_default().to_vec();
    if data.first().is_some_and(|b| b & 1 == 1) && bytes.len() >= 24 {
        let n = bytes.len() as u32;
        bytes[16..20].copy_from_slice(&n.to_le_bytes());
        let body = bytes.len() - 4;
        let crc = io::crc32(&bytes[..body]);
        bytes[body..].copy_from_slice(&crc.to_le_bytes());
    }
    if let Ok(w) = io::Weights::parse_prefix(&bytes) {
        let _ = w.scalar_name();
        for r in w.records() {
            let _ = r.bits().count();
        }
    }
    // The model of the seed corpus: conv [3, 2, 3, 3] + [3], linear [4, 3] + [4].
    let mut arena = vec![0.0f32; 1024];
    let mut g: Graph<f32, 8> = Graph::new(&mut arena);
    for (k, dims) in [&[3, 2, 3, 3][..], &[3], &[4, 3], &[4]].into_iter().enumerate() {
        let t = g.param(dims).unwrap();
        for (i, v) in g.param_data_mut(t).unwrap().iter_mut().enumerate() {
            *v = (k * 100 + i) as f32;
        }
    }
    let before: Vec<Vec<f32>> = (0..4)
        .map(|i| g.data(g.param_handle(i).unwrap()).unwrap().to_vec())
        .collect();
    match io::load(&mut g, &bytes) {
        Ok(()) => {
            let mut out = vec![0u8; io::saved_len(&g).unwrap()];
            io::save(&g, &mut out).unwrap();
            let mut again = vec![0.0f32; 1024];
            let mut g2: Graph<f32, 8> = Graph::new(&mut again);
            for dims in [&[3, 2, 3, 3][..], &[3], &[4, 3], &[4]] {
                g2.param(dims).unwrap();
            }
            io::load(&mut g2, &out).unwrap();
        }
        Err(_) => {
            for (i, b) in before.iter().enumerate() {
                let now = g.data(g.param_handle(i).unwrap()).unwrap();
                assert!(
                    now.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()),
                    "failed load changed parameter {i}"
                );
            }
        }
    }
    let _ = crate::safetensors::parse(data);
    let _ = crate::safetensors::to_safetensors(&bytes, None);
    let _ = crate::safetensors::to_device(data, None);
}

/// Fuzzes the conformance runner's op entry (`run_document`, the JSON door whose
/// format tests/golden/README.md describes). The first byte picks the mode: raw UTF-8
/// text as the whole document, or a document built from the bytes with real op names
/// (and some made up), PyTorch parameter names with values of every JSON kind, tensors of small or
/// absurd shapes whose data may not match, and optional grad_output. Invariant: no
/// panic, and one result per case when the document parses.
pub fn conformance_case(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let text = if mode < 32 {
        String::from_utf8_lossy(rest).into_owned()
    } else {
        match document(&mut Unstructured::new(rest)) {
            Ok(t) => t,
            Err(_) => return,
        }
    };
    if let Ok(results) = crate::conformance::run_document(&text) {
        let doc: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(results.len(), doc["cases"].as_array().map_or(0, |c| c.len()));
    }
}

const OPS: &[&str] = &[
    "conv2d",
    "max_pool2d",
    "avg_pool2d",
    "adaptive_avg_pool2d",
    "linear",
    "relu",
    "sigmoid",
    "tanh",
    "leaky_relu",
    "add",
    "mul",
    "flatten",
    "pad",
    "interpolate",
    "cross_entropy",
    "mse_loss",
    "reshape",
];
const PARAMS: &[&str] = &[
    "stride",
    "padding",
    "dilation",
    "groups",
    "kernel_size",
    "ceil_mode",
    "count_include_pad",
    "output_size",
    "negative_slope",
    "start_dim",
    "pad",
    "mode",
    "value",
    "size",
    "align_corners",
    "reduction",
    "shape",
];
const INPUTS: &[&str] = &["input", "weight", "bias", "other", "target"];

fn int(u: &mut Unstructured) -> Result<Value> {
    Ok(match u.int_in_range(0..=9)? {
        0 => json!(u.arbitrary::<i64>()?),
        1 => json!(u.arbitrary::<u64>()?),
        2 => json!(-(u.int_in_range(1..=3)? as i64)),
        _ => json!(u.int_in_range(0..=4)?),
    })
}

fn value(u: &mut Unstructured, depth: u32) -> Result<Value> {
    Ok(match u.int_in_range(0..=8)? {
        0..=2 => int(u)?,
        3 => json!(u.arbitrary::<bool>()?),
        4 => json!(u
            .arbitrary::<f64>()
            .map(|f| if f.is_finite() { f } else { 0.5 })?),
        5 => json!(u.arbitrary::<String>()?),
        6 => json!(
            [
                "constant",
                "reflect",
                "replicate",
                "nearest",
                "bilinear",
                "mean",
                "sum"
            ][u.choose_index(7)?]
        ),
        7 if depth < 2 => {
            let n = u.int_in_range(0..=5)?;
            Value::Array((0..n).map(|_| value(u, depth + 1)).collect::<Result<_>>()?)
        }
        _ => Value::Null,
    })
}

fn tensor(u: &mut Unstructured) -> Result<Value> {
    let rank = u.int_in_range(0..=5)?;
    let mut dims: Vec<u64> = Vec::new();
    for _ in 0..rank {
        dims.push(if u.ratio(1, 16)? {
            u.arbitrary::<u64>()?
        } else {
            u.int_in_range(0..=6)?
        });
    }
    let numel = dims
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .unwrap_or(u64::MAX);
    let len = if u.ratio(1, 6)? {
        u.int_in_range(0..=40)?
    } else {
        numel.min(2048)
    };
    let mut data = Vec::with_capacity(len as usize);
    for i in 0..len {
        let v = match u.int_in_range(0..=15).unwrap_or(0) {
            0 => 1e30,
            1 => -1e30,
            2 => 0.0,
            3 => u.int_in_range(0..=9).unwrap_or(0) as f64,
            _ => ((i * 7919) % 97) as f64 / 13.0 - 3.0,
        };
        data.push(v);
    }
    Ok(json!({ "shape": dims, "data": data }))
}

fn document(u: &mut Unstructured) -> Result<String> {
    let mut cases = Vec::new();
    for id in 0..u.int_in_range(1..=3)? {
        let op = if u.ratio(1, 10)? {
            u.arbitrary::<String>()?
        } else {
            OPS[u.choose_index(OPS.len())?].to_string()
        };
        let mut params = Map::new();
        for _ in 0..u.int_in_range(0..=4)? {
            params.insert(PARAMS[u.choose_index(PARAMS.len())?].to_string(), value(u, 0)?);
        }
        let mut inputs = Map::new();
        for _ in 0..u.int_in_range(0..=3)? {
            inputs.insert(INPUTS[u.choose_index(INPUTS.len())?].to_string(), tensor(u)?);
        }
        let mut case = json!({ "id": format!("f{id}"), "op": op, "params": params, "inputs": inputs });
        if u.arbitrary::<bool>()? {
            case["grad_output"] = tensor(u)?;
        }
        if u.ratio(1, 10)? {
            case["dtype"] = json!(["f32", "q16.16", ""][u.choose_index(3)?]);
        }
        cases.push(case);
    }
    Ok(json!({ "cases": cases }).to_string())
}

/// Fuzzes the model file (`torchlet::model`): the parser, `Model` on a meta graph and
/// on a small real one, a forward pass at the smallest input the file allows, and
/// both writers. The first byte picks the mode: even, the rest is the file as is;
/// odd, it gets a correct length field and CRC-32 first (to reach the records behind
/// the checksum); at least 128, the rest drives a structured model (real op names,
/// attributes of every type, references anywhere) that goes through `encode`.
/// Invariants: no panic; a file the writers produce parses again.
pub fn model_load(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let bytes = if mode >= 128 {
        match model_spec(&mut Unstructured::new(rest)) {
            Ok(spec) => match torchlet::model::encode(&spec) {
                Ok(b) => b,
                Err(_) => return,
            },
            Err(_) => return,
        }
    } else {
        let mut b = rest.to_vec();
        if mode & 1 == 1 && b.len() >= 28 {
            let n = b.len() as u32;
            b[8..12].copy_from_slice(&n.to_le_bytes());
            let body = b.len() - 4;
            let crc = io::crc32(&b[..body]);
            b[body..].copy_from_slice(&crc.to_le_bytes());
        }
        b
    };
    let Ok(file) = torchlet::model::ModelFile::parse(&bytes) else {
        return;
    };
    run_model_file(file, &bytes);
}

/// Fuzzes the ONNX importer (`torchlet_onnx`): the first byte's low bit asks to fold
/// BatchNorm, the rest is the ONNX file (no external data). A model that imports is
/// then what `torchlet convert` makes of it, a model file, and goes through
/// [`model_load`]'s checks. Invariants: no panic; an imported model encodes into a
/// model file that parses.
pub fn onnx_import(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let options = torchlet_onnx::Options {
        fold_bn: mode & 1 == 1,
    };
    let Ok(spec) = torchlet_onnx::import(rest, None, &options) else {
        return;
    };
    let Ok(bytes) = torchlet::model::encode(&spec) else {
        return;
    };
    let file = torchlet::model::ModelFile::parse(&bytes).unwrap();
    run_model_file(file, &bytes);
}

/// [`model_load`]'s checks of a parsed model file `bytes`.
fn run_model_file(file: torchlet::model::ModelFile<'_>, bytes: &[u8]) {
    // Every file that parses is what encode writes for its spec, and nothing else.
    assert_eq!(torchlet::model::encode(&file.to_spec()).unwrap(), bytes);
    for n in file.nodes() {
        let _ = (n.inputs().count(), n.attrs.iter().count());
    }
    let _ = (file.tensors().count(), file.outputs().count());
    let mins: Vec<Vec<usize>> = file.inputs().map(|i| i.min_shape().dims().to_vec()).collect();
    // Planning: any sizes, no data.
    let mut meta: Graph<f32, 64> = Graph::meta(usize::MAX);
    if let Ok(m) = torchlet::model::Model::new(&mut meta, file) {
        let xs: Option<Vec<_>> = mins.iter().map(|d| meta.input(d, &[]).ok()).collect();
        if let Some(xs) = xs {
            let _ = m.forward(&mut meta, &xs);
        }
    }
    // A real run when the smallest inputs are small.
    let mut arena = vec![0.0f32; 1 << 16];
    let mut g: Graph<f32, 64> = Graph::new(&mut arena);
    let Ok(m) = torchlet::model::Model::new(&mut g, file) else {
        return;
    };
    if forward_small(&mut g, &m, &mins) {
        g.end_step();
    }
    let again = m.to_file_bytes(&g).unwrap();
    torchlet::model::ModelFile::parse(&again).unwrap();
    if let Ok(w) = m.to_weights_bytes(&g) {
        io::Weights::parse(&w).unwrap();
    }
    in_place_forward(file, &mins);
}

/// `file`'s frozen tensors read in place from its bytes (int8 weights included), as a
/// device runs them: eval mode, a forward pass at the smallest inputs when small.
fn in_place_forward(file: torchlet::model::ModelFile<'_>, mins: &[Vec<usize>]) {
    use torchlet::model::{Model, Placement, TensorKind};
    let mut arena = vec![0.0f32; 1 << 16];
    let mut g: Graph<f32, 64> = Graph::new(&mut arena);
    g.set_training(false);
    let place = |t: &torchlet::model::TensorRecord<'_>| match t.kind {
        TensorKind::Param { trainable: true } => Placement::Train,
        _ => Placement::InPlace,
    };
    let Ok(m) = Model::in_place(&mut g, file, place) else {
        return;
    };
    forward_small(&mut g, &m, mins);
}

/// A forward pass of `m` on inputs of 0.25 at sizes `mins` when they are small (at most
/// 4,096 values each); whether it ran.
fn forward_small(g: &mut Graph<f32, 64>, m: &torchlet::model::Model<'_>, mins: &[Vec<usize>]) -> bool {
    if mins.iter().any(|d| d.iter().product::<usize>() > 4096) {
        return false;
    }
    let xs: Option<Vec<_>> = mins
        .iter()
        .map(|d| g.input(d, &vec![0.25; d.iter().product()]).ok())
        .collect();
    if let Some(xs) = xs {
        if let Ok(y) = m.forward(g, &xs) {
            let _ = g.data(y);
        }
    }
    true
}

const MODEL_OPS: &[&str] = &[
    "conv2d",
    "linear",
    "max_pool2d",
    "avg_pool2d",
    "adaptive_avg_pool2d",
    "relu",
    "leaky_relu",
    "add",
    "mul",
    "softmax",
    "flatten",
    "cat",
    "permute",
    "mean",
    "pad",
    "interpolate",
    "cross_entropy",
    "lstm",
];

fn model_spec(u: &mut Unstructured) -> Result<torchlet::model::spec::GraphSpec> {
    use torchlet::model::spec::*;
    let small = |u: &mut Unstructured| -> Result<usize> {
        Ok(if u.ratio(1, 20)? {
            u.arbitrary::<u32>()? as usize
        } else {
            u.int_in_range(0..=5)?
        })
    };
    let mut spec = GraphSpec::default();
    for k in 0..u.int_in_range(1..=2)? {
        let mut dims = Vec::new();
        for _ in 0..u.int_in_range(0..=4)? {
            let n = small(u)?;
            dims.push(if u.arbitrary()? {
                DimSpec::Fixed(n)
            } else {
                DimSpec::Free { min: n }
            });
        }
        spec.inputs.push(InputSpec {
            name: format!("x{k}"),
            dims,
        });
    }
    for k in 0..u.int_in_range(0..=4)? {
        let dims: Vec<usize> = (0..u.int_in_range(0..=4)?)
            .map(|_| u.int_in_range(1..=4))
            .collect::<Result<_>>()?;
        let n = dims.iter().product::<usize>();
        let kind = match u.int_in_range(0..=2)? {
            0 => TensorKind::Param { trainable: true },
            1 => TensorKind::Param { trainable: false },
            _ => TensorKind::Buffer,
        };
        let data = (0..n).map(|i| (i % 7) as f32 / 7.0 - 0.3).collect();
        let mut t = TensorSpec {
            name: format!("t{k}"),
            kind,
            dims,
            data,
            int8: None,
        };
        // Some frozen parameters as int8 records (kind 3), wherever an op reads them.
        if kind == (TensorKind::Param { trainable: false }) && u.arbitrary()? {
            t.quantize_int8();
        }
        spec.tensors.push(t);
    }
    let refs = |u: &mut Unstructured, nodes: usize, s: &GraphSpec| -> Result<ValueRef> {
        Ok(match u.int_in_range(0..=3)? {
            0 => ValueRef::Input(u.int_in_range(0..=s.inputs.len())?),
            1 => ValueRef::Tensor(u.int_in_range(0..=s.tensors.len())?),
            _ => ValueRef::Node(u.int_in_range(0..=nodes)?),
        })
    };
    for k in 0..u.int_in_range(0..=8)? {
        let op = MODEL_OPS[u.choose_index(MODEL_OPS.len())?].to_string();
        let mut inputs = Vec::new();
        for _ in 0..u.int_in_range(0..=3)? {
            inputs.push(if u.ratio(1, 8)? {
                None
            } else {
                Some(refs(u, k, &spec)?)
            });
        }
        let mut attrs = Vec::new();
        for _ in 0..u.int_in_range(0..=3)? {
            let name = PARAMS
                .iter()
                .chain(&["dim", "output_size", "keepdim", "dims", "target"])
                .nth(u.int_in_range(0..=PARAMS.len() + 4)?)
                .unwrap()
                .to_string();
            let int = |u: &mut Unstructured| -> Result<i64> {
                Ok(if u.ratio(1, 10)? {
                    u.arbitrary()?
                } else {
                    u.int_in_range(-2..=4)?
                })
            };
            let v = match u.int_in_range(0..=5)? {
                0 => AttrValue::Int(int(u)?),
                1 => AttrValue::Ints(
                    (0..u.int_in_range(0..=4)?)
                        .map(|_| int(u))
                        .collect::<Result<_>>()?,
                ),
                2 => AttrValue::Float(u.arbitrary()?),
                3 => AttrValue::Floats(
                    (0..u.int_in_range(0..=3)?)
                        .map(|_| u.arbitrary())
                        .collect::<Result<_>>()?,
                ),
                4 => AttrValue::Flag(u.arbitrary()?),
                _ => {
                    AttrValue::Str(["reflect", "bilinear", "nearest", "mean", "x"][u.choose_index(5)?].into())
                }
            };
            attrs.push((name, v));
        }
        spec.nodes.push(NodeSpec {
            op,
            name: format!("n{k}"),
            inputs,
            attrs,
        });
    }
    for _ in 0..u.int_in_range(1..=2)? {
        let n = spec.nodes.len();
        spec.outputs.push(refs(u, n.saturating_sub(1), &spec)?);
    }
    Ok(spec)
}
