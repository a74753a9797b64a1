//! The bodies of the cargo-fuzz targets in `core/fuzz/` (`weights_load`,
//! `conformance_case`), kept here so that `tests/tests/weights_fuzz_regressions.rs`
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
