//! Reading and writing the files the commands take: model files and safetensors.

use safetensors::{Dtype, SafeTensors};
use std::path::Path;
use torchlet::model::ModelFile;

/// The bytes of `path`, or an error naming it.
pub fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Writes `bytes` to `path`, or an error naming it.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// A checked model file borrowed from `bytes` (read from `path`).
pub fn model<'m>(path: &Path, bytes: &'m [u8]) -> Result<ModelFile<'m>, String> {
    ModelFile::parse(bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// One tensor of a safetensors file, as f32 (f32, f64, and integer dtypes are converted).
pub struct Tensor {
    /// Its name.
    pub name: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its values.
    pub data: Vec<f32>,
}

/// Every tensor of a safetensors file, in name order.
pub fn read_tensors(path: &Path) -> Result<Vec<Tensor>, String> {
    let bytes = read(path)?;
    let st = SafeTensors::deserialize(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    let mut names = st.names();
    names.sort();
    for name in names {
        let v = st.tensor(name).map_err(|e| format!("{}: {e}", path.display()))?;
        let b = v.data();
        let data: Vec<f32> = match v.dtype() {
            Dtype::F32 => b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            Dtype::F64 => b
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f32)
                .collect(),
            Dtype::I64 => b
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f32)
                .collect(),
            Dtype::I32 => b
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f32)
                .collect(),
            Dtype::U8 => b.iter().map(|&x| x as f32).collect(),
            d => {
                return Err(format!(
                    "{}: tensor {name:?} has dtype {d:?}, which is not supported",
                    path.display()
                ))
            }
        };
        out.push(Tensor {
            name: name.to_string(),
            shape: v.shape().to_vec(),
            data,
        });
    }
    Ok(out)
}

/// A tensor to write: f32 values, or int64 ones (`num_batches_tracked`, class labels).
pub enum Values {
    /// float32.
    F32(Vec<f32>),
    /// int64.
    I64(Vec<i64>),
}

/// Writes named tensors as a safetensors file.
pub fn write_tensors(path: &Path, tensors: &[(String, Vec<usize>, Values)]) -> Result<(), String> {
    let raw: Vec<(Dtype, Vec<u8>)> = tensors
        .iter()
        .map(|(_, _, v)| match v {
            Values::F32(d) => (Dtype::F32, d.iter().flat_map(|x| x.to_le_bytes()).collect()),
            Values::I64(d) => (Dtype::I64, d.iter().flat_map(|x| x.to_le_bytes()).collect()),
        })
        .collect();
    let mut views = Vec::with_capacity(tensors.len());
    for ((name, shape, _), (dtype, bytes)) in tensors.iter().zip(&raw) {
        let v = safetensors::tensor::TensorView::new(*dtype, shape.clone(), bytes)
            .map_err(|e| format!("tensor {name:?}: {e}"))?;
        views.push((name.as_str(), v));
    }
    let bytes = safetensors::serialize(views, None).map_err(|e| format!("safetensors: {e}"))?;
    write(path, &bytes)
}
