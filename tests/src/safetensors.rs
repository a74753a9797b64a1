//! PyTorch interop on the host: reading and writing `safetensors` files (what
//! `safetensors.torch.save_file(model.state_dict(), ...)` writes) and mapping their
//! tensor names onto torchlet's parameters, which are matched by creation order.
//!
//! - Reading and writing is the `safetensors` crate's (the library the Python package
//!   wraps, so files are byte for byte what `save_file` writes).
//! - Only `F32` tensors are read (what torchlet computes in); any other dtype is a
//!   clear error naming the tensor.
//! - [`import`] checks every name and shape before writing any parameter, so a
//!   missing or misshapen tensor leaves the model untouched.

use safetensors::{Dtype, SafeTensors};
use std::collections::{BTreeMap, HashMap};
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

/// Parses a safetensors file (with the `safetensors` crate, which checks the header,
/// the offsets and that the tensors tile the buffer) into its `F32` tensors, by name.
pub fn parse(bytes: &[u8]) -> Result<BTreeMap<String, StTensor>, String> {
    let st = SafeTensors::deserialize(bytes).map_err(|e| format!("safetensors: {e}"))?;
    let mut out = BTreeMap::new();
    for (name, view) in st.iter() {
        if view.dtype() != Dtype::F32 {
            return Err(format!(
                "safetensors: tensor `{name}` has dtype {:?}, only F32 is supported",
                view.dtype()
            ));
        }
        let data = view
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        out.insert(
            name.to_string(),
            StTensor {
                shape: view.shape().to_vec(),
                data,
            },
        );
    }
    Ok(out)
}

/// Writes tensors as a safetensors file with the `safetensors` crate (what
/// `safetensors.torch.save_file` writes, byte for byte; `metadata` goes to
/// `__metadata__` if not empty). A tensor whose data does not fill its shape is an error.
pub fn write(
    tensors: &BTreeMap<String, StTensor>,
    metadata: &BTreeMap<String, String>,
) -> Result<Vec<u8>, String> {
    let bytes: Vec<Vec<u8>> = tensors
        .values()
        .map(|t| t.data.iter().flat_map(|v| v.to_le_bytes()).collect())
        .collect();
    let mut views = Vec::with_capacity(tensors.len());
    for ((name, t), b) in tensors.iter().zip(&bytes) {
        let v = safetensors::tensor::TensorView::new(Dtype::F32, t.shape.clone(), b)
            .map_err(|e| format!("safetensors: tensor `{name}`: {e}"))?;
        views.push((name.as_str(), v));
    }
    let meta = (!metadata.is_empty()).then(|| {
        metadata
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<HashMap<_, _>>()
    });
    safetensors::serialize(views, meta).map_err(|e| format!("safetensors: {e}"))
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
    write(&tensors, &BTreeMap::new())
}
