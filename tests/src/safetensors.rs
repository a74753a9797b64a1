//! PyTorch interop on the host: reading and writing `safetensors` files (what
//! `safetensors.torch.save_file(model.state_dict(), ...)` writes) and mapping their
//! tensor names onto torchlet's parameters, which are matched by creation order.
//!
//! - Layout: an 8-byte little-endian header length, a JSON header
//!   `{"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
//!   "__metadata__": {...}}`, then the tensors' bytes (little-endian, row-major).
//! - Only `F32` tensors are read (what torchlet computes in); any other dtype is a
//!   clear error naming the tensor.
//! - The writer produces what the Python library produces for the same tensors:
//!   tensors sorted by name, contiguous, header padded with spaces to 8 bytes.
//! - [`import`] checks every name and shape before writing any parameter, so a
//!   missing or misshapen tensor leaves the model untouched.

use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use torchlet::io::{Weights, DIGITS_FCN_NAMES};
use torchlet::{Graph, Scalar};

/// One tensor of a safetensors file, as `f32` values.
#[derive(Clone, Debug, PartialEq)]
pub struct StTensor {
    /// Dimensions, row-major.
    pub shape: Vec<usize>,
    /// `product(shape)` values.
    pub data: Vec<f32>,
}

/// The header entry of one tensor (field order as the Python library writes it).
#[derive(Deserialize)]
struct Entry {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: [usize; 2],
}

/// Parses a safetensors file into its `F32` tensors, by name.
pub fn parse(bytes: &[u8]) -> Result<BTreeMap<String, StTensor>, String> {
    let n = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
        .ok_or("safetensors: shorter than its 8-byte header length")?;
    let body_start = usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_add(8))
        .filter(|&end| end <= bytes.len())
        .ok_or_else(|| {
            format!(
                "safetensors: header length {n} runs past the file ({} bytes)",
                bytes.len()
            )
        })?;
    let header: Map<String, Value> = serde_json::from_slice(&bytes[8..body_start])
        .map_err(|e| format!("safetensors: header is not JSON: {e}"))?;
    let buffer = &bytes[body_start..];
    let mut out = BTreeMap::new();
    let mut spans = Vec::new();
    for (name, v) in header {
        if name == "__metadata__" {
            continue;
        }
        let e: Entry = serde_json::from_value(v)
            .map_err(|e| format!("safetensors: tensor `{name}`: bad header entry: {e}"))?;
        if e.dtype != "F32" {
            return Err(format!(
                "safetensors: tensor `{name}` has dtype {}, only F32 is supported",
                e.dtype
            ));
        }
        let [begin, end] = e.data_offsets;
        let numel = e
            .shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| format!("safetensors: tensor `{name}`: shape {:?} overflows", e.shape))?;
        if begin > end || end > buffer.len() || numel.checked_mul(4) != Some(end - begin) {
            return Err(format!(
                "safetensors: tensor `{name}`: offsets [{begin}, {end}] do not hold shape {:?} as F32 \
                 in a {}-byte buffer",
                e.shape,
                buffer.len()
            ));
        }
        spans.push((begin, end, name.clone()));
        let data = buffer[begin..end]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        out.insert(name, StTensor { shape: e.shape, data });
    }
    // The format requires the tensors to tile the buffer: no overlap, no hole.
    spans.sort();
    let mut at = 0;
    for (begin, end, name) in &spans {
        if *begin != at {
            return Err(format!(
                "safetensors: tensor `{name}` starts at {begin}, expected {at} (overlap or hole)"
            ));
        }
        at = *end;
    }
    if at != buffer.len() {
        return Err(format!(
            "safetensors: {} bytes of the buffer belong to no tensor",
            buffer.len() - at
        ));
    }
    Ok(out)
}

/// Writes tensors as a safetensors file (`metadata` goes to `__metadata__` if not empty).
pub fn write(tensors: &BTreeMap<String, StTensor>, metadata: &BTreeMap<String, String>) -> Vec<u8> {
    // Written by hand: serde_json's map would sort the fields of an entry, and the
    // Python library writes them as dtype, shape, data_offsets.
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let mut parts = Vec::new();
    if !metadata.is_empty() {
        let m = serde_json::to_string(metadata).unwrap_or_default();
        parts.push(format!("\"__metadata__\":{m}"));
    }
    let mut at = 0;
    for (name, t) in tensors {
        let len = t.data.len() * 4;
        let shape: Vec<String> = t.shape.iter().map(|d| d.to_string()).collect();
        parts.push(format!(
            "{}:{{\"dtype\":\"F32\",\"shape\":[{}],\"data_offsets\":[{at},{}]}}",
            quote(name),
            shape.join(","),
            at + len
        ));
        at += len;
    }
    let mut json = format!("{{{}}}", parts.join(",")).into_bytes();
    while json.len() % 8 != 0 {
        json.push(b' ');
    }
    let mut out = Vec::with_capacity(8 + json.len() + at);
    out.extend_from_slice(&(json.len() as u64).to_le_bytes());
    out.extend_from_slice(&json);
    for t in tensors.values() {
        for v in &t.data {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out
}

/// Copies the tensors named `names[i]` into parameter `i` of the model (creation
/// order), converting with `S::from_f32`. Every name and shape is checked first:
/// on error no parameter has changed. Tensors not named are ignored.
pub fn import<S: Scalar, const N: usize>(
    g: &mut Graph<'_, S, N>,
    names: &[&str],
    tensors: &BTreeMap<String, StTensor>,
) -> Result<(), String> {
    if names.len() != g.num_params() {
        return Err(format!(
            "{} names given for a model of {} parameters",
            names.len(),
            g.num_params()
        ));
    }
    for (i, name) in names.iter().enumerate() {
        let t = g.param_handle(i).ok_or("parameter handle")?;
        let want = g.shape(t).map_err(|e| e.to_string())?;
        let got = tensors.get(*name).ok_or_else(|| {
            let have: Vec<&String> = tensors.keys().collect();
            format!(
                "tensor `{name}` (parameter {i}, shape {:?}) is missing; the file has {have:?}",
                want.dims()
            )
        })?;
        if got.shape != want.dims() {
            return Err(format!(
                "tensor `{name}` has shape {:?}, parameter {i} of the model has shape {:?}",
                got.shape,
                want.dims()
            ));
        }
    }
    for (i, name) in names.iter().enumerate() {
        let t = g.param_handle(i).ok_or("parameter handle")?;
        let dst = g.param_data_mut(t).map_err(|e| e.to_string())?;
        for (d, &v) in dst.iter_mut().zip(&tensors[*name].data) {
            *d = S::from_f32(v);
        }
    }
    Ok(())
}

/// The model's parameters as safetensors tensors named `names` (creation order).
pub fn export<S: Scalar, const N: usize>(
    g: &Graph<'_, S, N>,
    names: &[&str],
) -> Result<BTreeMap<String, StTensor>, String> {
    if names.len() != g.num_params() {
        return Err(format!(
            "{} names given for a model of {} parameters",
            names.len(),
            g.num_params()
        ));
    }
    let mut out = BTreeMap::new();
    for (i, name) in names.iter().enumerate() {
        let t = g.param_handle(i).ok_or("parameter handle")?;
        let shape = g.shape(t).map_err(|e| e.to_string())?.dims().to_vec();
        let data = g
            .data(t)
            .map_err(|e| e.to_string())?
            .iter()
            .map(|v| v.to_f32())
            .collect();
        if out.insert(name.to_string(), StTensor { shape, data }).is_some() {
            return Err(format!("name `{name}` given twice"));
        }
    }
    Ok(out)
}

/// safetensors bytes to a torchlet weights file: the tensors named `names` become
/// parameters 0, 1, ... in that order (names are stored in the file). With
/// `names = None` the model is W1 and its names are [`DIGITS_FCN_NAMES`]; its shapes
/// are checked against `digits_fcn`'s.
pub fn to_device(bytes: &[u8], names: Option<&[&str]>) -> Result<Vec<u8>, String> {
    let tensors = parse(bytes)?;
    // Parameters and their gradients: the file's tensors, or W1's 6,218 values.
    let words = tensors
        .values()
        .map(|t| 2 * t.data.len())
        .sum::<usize>()
        .max(2 * 6_218)
        + 64;
    let mut arena = vec![0.0f32; words];
    let mut g: Graph<f32, 64> = Graph::new(&mut arena);
    let names: &[&str] = match names {
        None => {
            torchlet::nn::digits_fcn(&mut g, &mut torchlet::init::Rng::new(0)).map_err(|e| e.to_string())?;
            &DIGITS_FCN_NAMES
        }
        Some(names) => {
            for name in names {
                let t = tensors
                    .get(*name)
                    .ok_or_else(|| format!("tensor `{name}` is missing"))?;
                g.param(&t.shape).map_err(|e| format!("tensor `{name}`: {e}"))?;
            }
            names
        }
    };
    import(&mut g, names, &tensors)?;
    let mut out = vec![0u8; torchlet::io::saved_len_named(&g, names).map_err(|e| e.to_string())?];
    torchlet::io::save_named(&g, names, &mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

/// A torchlet weights file (stored as `f32`) to safetensors bytes. Records without a
/// name take the name of their index in `names` (W1's when `None`).
pub fn to_safetensors(bytes: &[u8], names: Option<&[&str]>) -> Result<Vec<u8>, String> {
    let w = Weights::parse(bytes).map_err(|e| e.to_string())?;
    let scalar = w.scalar_name().map_err(|e| e.to_string())?;
    if scalar != "f32" {
        return Err(format!(
            "weights stored as {scalar}: only f32 files convert to safetensors"
        ));
    }
    let fallback = names.unwrap_or(&DIGITS_FCN_NAMES);
    let mut tensors = BTreeMap::new();
    for r in w.records() {
        let name = if r.name.is_empty() {
            fallback
                .get(r.index as usize)
                .ok_or_else(|| format!("record {} has no name and no name was given for it", r.index))?
        } else {
            r.name
        };
        let t = StTensor {
            shape: r.shape.dims().to_vec(),
            data: r.bits().map(f32::from_bits).collect(),
        };
        if tensors.insert(name.to_string(), t).is_some() {
            return Err(format!("two records are named `{name}`"));
        }
    }
    Ok(write(&tensors, &BTreeMap::new()))
}
