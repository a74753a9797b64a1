//! Values during import: run-time tensors (with what is known of their shape) and
//! constants (initializers, `Constant` nodes, folded shape arithmetic), and the
//! decoding of ONNX `TensorProto`s into constants.

use onnx_protobuf::TensorProto;
use std::borrow::Cow;
use torchlet::model::spec::ValueRef;

/// One dim of a run-time shape, or one element of an integer constant that shape
/// arithmetic computed: a number, a named free dim (`"batch"`), or unknown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Dim {
    Known(i64),
    Sym(String),
    Unknown,
}

impl Dim {
    pub(crate) fn known(&self) -> Option<i64> {
        match self {
            Dim::Known(v) => Some(*v),
            _ => None,
        }
    }

    /// The dim an op makes of this one: `f` of a known size (past 2^31, unknown: no
    /// tiny network's, and `f` cannot overflow), and of a named free size a name for
    /// "`tag` of it", so that two dims computed alike from one input dim compare equal
    /// (a Reshape back to `[N, C, H, W]` is then recognised); unknown stays unknown.
    pub(crate) fn derived(&self, tag: impl std::fmt::Display, f: impl FnOnce(i64) -> i64) -> Dim {
        match self {
            Dim::Known(v) if (0..=1 << 31).contains(v) => Dim::Known(f(*v)),
            Dim::Sym(s) => {
                let name = format!("{tag}({s})");
                // Deep networks nest names: past a few hundred bytes, a digest of it.
                Dim::Sym(match name.len() {
                    0..=256 => name,
                    _ => {
                        use std::hash::{Hash, Hasher};
                        let mut h = std::collections::hash_map::DefaultHasher::new();
                        name.hash(&mut h);
                        format!("#{:016x}", h.finish())
                    }
                })
            }
            _ => Dim::Unknown,
        }
    }
}

/// A value of the ONNX graph.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    /// Computed at run time: where it comes from and its shape (rank always known).
    Run { r: ValueRef, shape: Vec<Dim> },
    /// Real constants; `init` is the initializer's name when it is one.
    Float {
        dims: Vec<usize>,
        data: Vec<f32>,
        init: Option<String>,
    },
    /// Integer constants (or the symbolic sizes shape arithmetic works on).
    Int { dims: Vec<usize>, data: Vec<Dim> },
}

impl Value {
    pub(crate) fn dims(&self) -> Vec<Dim> {
        match self {
            Value::Run { shape, .. } => shape.clone(),
            Value::Float { dims, .. } | Value::Int { dims, .. } => {
                dims.iter().map(|&d| Dim::Known(d as i64)).collect()
            }
        }
    }

    /// Integer elements, reals truncated (shape arithmetic mixes both via Cast).
    pub(crate) fn ints(&self) -> Option<Vec<Dim>> {
        match self {
            Value::Int { data, .. } => Some(data.clone()),
            Value::Float { data, .. } => Some(data.iter().map(|&v| Dim::Known(v as i64)).collect()),
            Value::Run { .. } => None,
        }
    }

    /// Known integer elements.
    pub(crate) fn known_ints(&self) -> Option<Vec<i64>> {
        self.ints()?.iter().map(Dim::known).collect()
    }

    /// Real elements.
    pub(crate) fn floats(&self) -> Option<Vec<f32>> {
        match self {
            Value::Float { data, .. } => Some(data.clone()),
            Value::Int { data, .. } => data.iter().map(|d| d.known().map(|v| v as f32)).collect(),
            Value::Run { .. } => None,
        }
    }

    pub(crate) fn is_const(&self) -> bool {
        !matches!(self, Value::Run { .. })
    }
}

/// ONNX's element type numbers.
const FLOAT: i32 = 1;
const INT32: i32 = 6;
const INT64: i32 = 7;
const BOOL: i32 = 9;
const DOUBLE: i32 = 11;

/// Decodes a tensor (inline, or external data from `read`) into a constant.
pub(crate) fn decode(t: &TensorProto, read: &Reader<'_, '_>) -> Result<Value, String> {
    let mut dims = Vec::with_capacity(t.dims.len());
    let mut count: usize = 1;
    for &d in &t.dims {
        let d = usize::try_from(d).map_err(|_| format!("tensor {:?} has a negative dim {d}", t.name))?;
        // Each dim too, not only the product: after a zero dim it stays 0.
        count = count
            .checked_mul(d)
            .filter(|&c| c <= 1 << 28 && d <= 1 << 28)
            .ok_or(format!("tensor {:?} is absurdly large", t.name))?;
        dims.push(d);
    }
    let width = match t.data_type {
        FLOAT | INT32 => 4,
        INT64 | DOUBLE => 8,
        BOOL => 1,
        k => {
            return Err(format!(
                "tensor {:?} has element type {k}, not float, double, int32, int64 or bool",
                t.name
            ))
        }
    };
    let external;
    let raw: &[u8] = if t.data_location.value() == 1 {
        // At most 2^28 values of at most 8 bytes: no overflow.
        external = external_bytes(t, (count * width) as u64, read)?;
        &external
    } else {
        &t.raw_data
    };
    let bad = |n: usize| {
        format!(
            "tensor {:?} has {n} values, its dims {:?} hold {count}",
            t.name, dims
        )
    };
    if !raw.is_empty() || t.data_location.value() == 1 {
        if raw.len() != count * width {
            return Err(bad(raw.len() / width));
        }
        let chunks = raw.chunks_exact(width);
        return Ok(match t.data_type {
            FLOAT => float(
                dims,
                chunks
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
                t,
            ),
            DOUBLE => float(
                dims,
                chunks
                    .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f32)
                    .collect(),
                t,
            ),
            INT32 => int(
                dims,
                chunks.map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64),
            ),
            INT64 => int(
                dims,
                chunks.map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8]))),
            ),
            _ => int(dims, chunks.map(|c| (c[0] != 0) as i64)),
        });
    }
    let v = match t.data_type {
        FLOAT => (t.float_data.len(), float(dims.clone(), t.float_data.clone(), t)),
        DOUBLE => (
            t.double_data.len(),
            float(dims.clone(), t.double_data.iter().map(|&v| v as f32).collect(), t),
        ),
        INT64 => (
            t.int64_data.len(),
            int(dims.clone(), t.int64_data.iter().copied()),
        ),
        _ => (
            t.int32_data.len(),
            int(dims.clone(), t.int32_data.iter().map(|&v| v as i64)),
        ),
    };
    if v.0 != count {
        return Err(bad(v.0));
    }
    Ok(v.1)
}

fn float(dims: Vec<usize>, data: Vec<f32>, t: &TensorProto) -> Value {
    let init = (!t.name.is_empty()).then(|| t.name.clone());
    Value::Float { dims, data, init }
}

fn int(dims: Vec<usize>, data: impl Iterator<Item = i64>) -> Value {
    Value::Int {
        dims,
        data: data.map(Dim::Known).collect(),
    }
}

/// Where an initializer's external data is, as its `TensorProto` says: `length` is
/// the number of bytes its dims and element type take (a declared `length` that
/// differs is refused before anything is read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExternalRef<'t> {
    /// The initializer's name.
    pub tensor: &'t str,
    /// Its `location`: a file name relative to the model's folder.
    pub location: &'t str,
    /// Its `offset` in that file (0 when absent).
    pub offset: u64,
    /// How many bytes to read from `offset`.
    pub length: u64,
}

/// What gives the bytes of external data: exactly `length` bytes from `offset` of
/// `location`, or why not (the caller adds the tensor's name).
pub(crate) type Reader<'r, 'a> = dyn Fn(&ExternalRef<'_>) -> Result<Cow<'a, [u8]>, String> + 'r;

/// A [`Reader`] for tensors that may not be external (`Constant` values).
pub(crate) fn no_external<'a>(_: &ExternalRef<'_>) -> Result<Cow<'a, [u8]>, String> {
    Err("only initializers may be external".into())
}

/// The bytes of an external tensor that takes `want` bytes: `location`, `offset`,
/// `length` in its file, read through `read`.
fn external_bytes<'a>(t: &TensorProto, want: u64, read: &Reader<'_, 'a>) -> Result<Cow<'a, [u8]>, String> {
    let (mut location, mut offset, mut length) = (None, 0u64, None);
    for e in &t.external_data {
        let num = || {
            e.value
                .parse::<u64>()
                .map_err(|_| format!("tensor {:?}: bad external {} {:?}", t.name, e.key, e.value))
        };
        match e.key.as_str() {
            "location" => location = Some(e.value.as_str()),
            "offset" => offset = num()?,
            "length" => length = Some(num()?),
            _ => {}
        }
    }
    let location = location.ok_or(format!("tensor {:?} is external but names no location", t.name))?;
    if let Some(n) = length.filter(|&n| n != want) {
        return Err(format!(
            "tensor {:?}: external data {location:?} declares {n} bytes, its dims and type take {want}",
            t.name
        ));
    }
    let r = ExternalRef {
        tensor: &t.name,
        location,
        offset,
        length: want,
    };
    let bytes = read(&r).map_err(|why| format!("tensor {:?}: external data {location:?}: {why}", t.name))?;
    match bytes.len() as u64 == want {
        true => Ok(bytes),
        false => Err(format!(
            "tensor {:?}: external data {location:?} gave {} bytes, not {want}",
            t.name,
            bytes.len()
        )),
    }
}

/// A [`Reader`] over whole files by location (`lookup`), as [`crate::import_with`] takes
/// them: the range must lie inside the file.
pub(crate) fn slice_of<'a>(
    lookup: &dyn Fn(&str) -> Option<&'a [u8]>,
    r: &ExternalRef<'_>,
) -> Result<Cow<'a, [u8]>, String> {
    let file = lookup(r.location).ok_or("it was not given (pass the external data file)")?;
    let end = r.offset.checked_add(r.length);
    end.and_then(|end| file.get(usize::try_from(r.offset).ok()?..usize::try_from(end).ok()?))
        .map(Cow::Borrowed)
        .ok_or(format!(
            "bytes {}..{} are past the end of the file ({} bytes)",
            r.offset,
            end.map_or("?".into(), |e| e.to_string()),
            file.len()
        ))
}
