//! Arrays: Flower's `Array` (a `.npy` v1.0 file, `stype` "numpy.ndarray") and the tensor a
//! client trains on.
//!
//! - Reading uses `npyz` (any `.npy` numpy writes, shape `()` included).
//! - Writing builds numpy's own header text (`np.save` pads it to 64 bytes with spaces and a
//!   newline, and writes `(2, 3)`, `(2,)`, `()`): the bytes, so the object ids, then equal
//!   Flower's for the same array. npyz's writer formats shapes as `(2, 3, )`.

use crate::error::Error;

/// The `stype` of every array Flower's `Array.from_numpy_ndarray` makes.
pub const STYPE_NUMPY: &str = "numpy.ndarray";

/// A tensor's values in one of the dtypes a state_dict carries.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I64(Vec<i64>),
}

/// A named array as it travels: dtype name (numpy's: "float32", "int64"), shape, `.npy` bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    pub dtype: String,
    pub shape: Vec<usize>,
    pub stype: String,
    pub data: Vec<u8>,
}

impl Values {
    pub fn len(&self) -> usize {
        match self {
            Values::F32(v) => v.len(),
            Values::F64(v) => v.len(),
            Values::I64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// numpy's dtype name.
    pub fn dtype(&self) -> &'static str {
        match self {
            Values::F32(_) => "float32",
            Values::F64(_) => "float64",
            Values::I64(_) => "int64",
        }
    }

    fn descr(&self) -> &'static str {
        match self {
            Values::F32(_) => "<f4",
            Values::F64(_) => "<f8",
            Values::I64(_) => "<i8",
        }
    }

    /// The values as f32 (how a torchlet model holds every tensor).
    pub fn to_f32(&self) -> Vec<f32> {
        match self {
            Values::F32(v) => v.clone(),
            Values::F64(v) => v.iter().map(|&x| x as f32).collect(),
            Values::I64(v) => v.iter().map(|&x| x as f32).collect(),
        }
    }

    /// Whether every value is finite (integers always are).
    pub fn all_finite(&self) -> bool {
        match self {
            Values::F32(v) => v.iter().all(|x| x.is_finite()),
            Values::F64(v) => v.iter().all(|x| x.is_finite()),
            Values::I64(_) => true,
        }
    }
}

impl Array {
    /// Encodes values of `shape` as `np.save` would.
    pub fn from_values(name: &str, shape: &[usize], values: &Values) -> Result<Array, Error> {
        let count = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
        if count != Some(values.len()) {
            return Err(Error::BadArray {
                name: name.to_string(),
                why: format!("shape {shape:?} does not hold {} values", values.len()),
            });
        }
        let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
        let shape_text = match dims.len() {
            1 => format!("({},)", dims[0]),
            _ => format!("({})", dims.join(", ")),
        };
        let mut header = format!(
            "{{'descr': '{}', 'fortran_order': False, 'shape': {shape_text}, }}",
            values.descr()
        );
        // magic (6) + version (2) + header length (2) + header, padded to 64 with a newline.
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let header_len = u16::try_from(header.len()).map_err(|_| Error::BadArray {
            name: name.to_string(),
            why: format!("rank {} is too large for a .npy v1.0 header", shape.len()),
        })?;
        let mut data = Vec::with_capacity(10 + header.len() + values.len() * 8);
        data.extend_from_slice(b"\x93NUMPY\x01\x00");
        data.extend_from_slice(&header_len.to_le_bytes());
        data.extend_from_slice(header.as_bytes());
        match values {
            Values::F32(v) => v.iter().for_each(|x| data.extend_from_slice(&x.to_le_bytes())),
            Values::F64(v) => v.iter().for_each(|x| data.extend_from_slice(&x.to_le_bytes())),
            Values::I64(v) => v.iter().for_each(|x| data.extend_from_slice(&x.to_le_bytes())),
        }
        Ok(Array {
            dtype: values.dtype().to_string(),
            shape: shape.to_vec(),
            stype: STYPE_NUMPY.to_string(),
            data,
        })
    }

    /// Decodes the `.npy` bytes, checking them against the declared dtype and shape.
    pub fn values(&self, name: &str) -> Result<Values, Error> {
        let bad = |why: String| Error::BadArray {
            name: name.to_string(),
            why,
        };
        if self.stype != STYPE_NUMPY {
            return Err(bad(format!(
                "stype {:?} (only {STYPE_NUMPY:?} is read)",
                self.stype
            )));
        }
        let npy = npyz::NpyFile::new(&self.data[..]).map_err(|e| bad(format!("not .npy: {e}")))?;
        if npy.order() != npyz::Order::C {
            return Err(bad("Fortran order".to_string()));
        }
        let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
        if shape != self.shape {
            return Err(bad(format!(
                "npy shape {shape:?} but Array shape {:?}",
                self.shape
            )));
        }
        let descr = npy.dtype().descr();
        let values = match (self.dtype.as_str(), descr.as_str()) {
            ("float32", "'<f4'") => npy.into_vec::<f32>().map(Values::F32),
            ("float64", "'<f8'") => npy.into_vec::<f64>().map(Values::F64),
            ("int64", "'<i8'") => npy.into_vec::<i64>().map(Values::I64),
            (dtype, descr) => return Err(bad(format!("dtype {dtype} stored as {descr} is not supported"))),
        }
        .map_err(|e| bad(format!("data: {e}")))?;
        let count = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
        if count != Some(values.len()) {
            return Err(bad(format!("{} values for shape {shape:?}", values.len())));
        }
        Ok(values)
    }
}
