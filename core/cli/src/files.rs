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

/// Class labels read as integers (`y` of `train`), never through f32.
pub struct Labels {
    /// Their shape.
    pub shape: Vec<usize>,
    /// Their values.
    pub values: Vec<i64>,
}

/// Every tensor of a safetensors file, in name order.
pub fn read_tensors(path: &Path) -> Result<Vec<Tensor>, String> {
    read_tensors_and_labels(path, None).map(|(t, _)| t)
}

/// Every tensor of a safetensors file, in name order, except the one named `labels`,
/// which is read as integer classes (a float that is not a whole number in i64's range,
/// such as 2.5, NaN or 1e30, is refused, naming the first one). Every vector is as long
/// as the file's own data, so the file's size bounds what is allocated.
pub fn read_tensors_and_labels(
    path: &Path,
    labels: Option<&str>,
) -> Result<(Vec<Tensor>, Option<Labels>), String> {
    let bytes = read(path)?;
    let at = |e: String| format!("{}: {e}", path.display());
    let st = SafeTensors::deserialize(&bytes).map_err(|e| at(e.to_string()))?;
    let (mut out, mut found) = (Vec::new(), None);
    let mut names = st.names();
    names.sort();
    for name in names {
        let v = st.tensor(name).map_err(|e| at(e.to_string()))?;
        let shape = v.shape().to_vec();
        if Some(name) == labels {
            let values = classes(name, v.dtype(), v.data()).map_err(at)?;
            found = Some(Labels { shape, values });
            continue;
        }
        let data = floats(name, v.dtype(), v.data()).map_err(at)?;
        out.push(Tensor {
            name: name.to_string(),
            shape,
            data,
        });
    }
    Ok((out, found))
}

fn unsupported(name: &str, d: Dtype) -> String {
    format!("tensor {name:?} has dtype {d:?}, which is not supported")
}

/// The values of a tensor as f32 (f32, f64 and integer dtypes).
fn floats(name: &str, dtype: Dtype, b: &[u8]) -> Result<Vec<f32>, String> {
    Ok(match dtype {
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
        d => return Err(unsupported(name, d)),
    })
}

/// The values of a tensor as integer classes: integer dtypes exactly, float dtypes
/// only when every value is a whole number that i64 holds.
fn classes(name: &str, dtype: Dtype, b: &[u8]) -> Result<Vec<i64>, String> {
    let whole = |v: Vec<f64>| -> Result<Vec<i64>, String> {
        // -2^63 <= v < 2^63: exactly i64's range (both bounds are exact in f64).
        const LIMIT: f64 = 9_223_372_036_854_775_808.0;
        match v
            .iter()
            .position(|x| !(x.fract() == 0.0 && (-LIMIT..LIMIT).contains(x)))
        {
            Some(i) => Err(format!(
                "tensor {name:?}: label {i} is {}, not a whole class number (labels are integers)",
                v[i]
            )),
            None => Ok(v.iter().map(|&x| x as i64).collect()),
        }
    };
    match dtype {
        Dtype::I64 => Ok(b
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect()),
        Dtype::I32 => Ok(b
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
            .collect()),
        Dtype::U8 => Ok(b.iter().map(|&x| x as i64).collect()),
        Dtype::F32 => whole(
            b.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
                .collect(),
        ),
        Dtype::F64 => whole(
            b.chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .collect(),
        ),
        d => Err(unsupported(name, d)),
    }
}

/// A tensor to write: f32 values, or int64 ones (`num_batches_tracked`, class labels).
pub enum Values {
    /// float32.
    F32(Vec<f32>),
    /// int64.
    I64(Vec<i64>),
}

/// Writes named tensors as a safetensors file; two tensors of one name are refused
/// (safetensors would keep one, or panic), naming it.
pub fn write_tensors(path: &Path, tensors: &[(String, Vec<usize>, Values)]) -> Result<(), String> {
    let mut names: Vec<&str> = tensors.iter().map(|t| t.0.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!(
            "{}: two tensors are named {:?}; a safetensors file holds one per name",
            path.display(),
            w[0]
        ));
    }
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
