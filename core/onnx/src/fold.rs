//! Import-time evaluation of the shape arithmetic exporters emit (`Shape`, `Gather`,
//! `Unsqueeze`, `Concat`, `ConstantOfShape`, `Slice`, `Cast`, `Constant`, ...) on
//! constants and known or named dims, so that none of it reaches the model.

use crate::arr::{arr_of, axis, elements, foldable, Arr};
use crate::tensor::{decode, no_external, Dim, Value};
use onnx_protobuf::{attribute_proto::AttributeType, AttributeProto, NodeProto};

/// The ops this module evaluates when their inputs are constants (`Shape` only needs
/// its input's rank).
pub(crate) const FOLDABLE: &[&str] = &[
    "Constant",
    "Shape",
    "Gather",
    "Unsqueeze",
    "Squeeze",
    "Concat",
    "ConstantOfShape",
    "Slice",
    "Transpose",
    "Reshape",
    "Cast",
    "CastLike",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Expand",
    "Identity",
    "Flatten",
];

pub(crate) fn attr<'n>(n: &'n NodeProto, name: &str) -> Option<&'n AttributeProto> {
    n.attribute.iter().find(|a| a.name == name)
}

pub(crate) fn attr_int(n: &NodeProto, name: &str) -> Option<i64> {
    attr(n, name).map(|a| a.i)
}

pub(crate) fn attr_ints(n: &NodeProto, name: &str) -> Option<Vec<i64>> {
    attr(n, name).map(|a| a.ints.clone())
}

pub(crate) fn attr_float(n: &NodeProto, name: &str) -> Option<f32> {
    attr(n, name).map(|a| a.f)
}

pub(crate) fn attr_str(n: &NodeProto, name: &str) -> Option<String> {
    attr(n, name).map(|a| String::from_utf8_lossy(&a.s).into_owned())
}

/// Applies `f` to whichever kind `v` holds.
macro_rules! map_arr {
    ($v:expr, |$a:ident| $body:expr) => {
        match arr_of($v) {
            Some(Ok($a)) => {
                let r: Result<Arr<Dim>, String> = $body;
                r.map(|a| Value::Int {
                    dims: a.dims,
                    data: a.data,
                })
            }
            Some(Err($a)) => {
                let r: Result<Arr<f32>, String> = $body;
                r.map(|a| Value::Float {
                    dims: a.dims,
                    data: a.data,
                    init: None,
                })
            }
            None => Err("not a constant".to_string()),
        }
    };
}

/// Reshape target dims for `count` elements (`0` copies the input dim, `-1` infers).
pub(crate) fn reshape_dims(input: &[usize], target: &[i64]) -> Result<Vec<usize>, String> {
    let overflows = || format!("reshape of {input:?} to {target:?} overflows");
    let count = elements(input).ok_or_else(overflows)?;
    let mut out = Vec::with_capacity(target.len());
    let mut infer = None;
    for (k, &t) in target.iter().enumerate() {
        match t {
            -1 if infer.is_none() => {
                infer = Some(k);
                out.push(1);
            }
            0 => out.push(*input.get(k).ok_or("reshape 0 past the input's rank")?),
            t if t > 0 => out.push(t as usize),
            t => return Err(format!("bad reshape dim {t}")),
        }
    }
    let known = elements(&out).ok_or_else(overflows)?;
    if let Some(k) = infer {
        if known == 0 || !count.is_multiple_of(known) {
            return Err("reshape -1 does not divide".into());
        }
        out[k] = count / known;
    }
    if elements(&out) != Some(count) {
        return Err(format!("cannot reshape {input:?} to {target:?}"));
    }
    Ok(out)
}

fn binary(op: &str, a: &Value, b: &Value) -> Result<Value, String> {
    let broadcast = |x: &Value, y: &Value| -> Result<Vec<usize>, String> {
        let (xd, yd) = (x.dims(), y.dims());
        let count = |d: &[Dim]| d.iter().map(|d| d.known().unwrap_or(0)).product::<i64>();
        match (count(&xd), count(&yd)) {
            (1, _) => Ok(y.dims().iter().map(|d| d.known().unwrap_or(0) as usize).collect()),
            (_, 1) => Ok(x.dims().iter().map(|d| d.known().unwrap_or(0) as usize).collect()),
            _ if xd == yd => Ok(xd.iter().map(|d| d.known().unwrap_or(0) as usize).collect()),
            _ => Err("constant arithmetic on shapes that differ".into()),
        }
    };
    let dims = broadcast(a, b)?;
    let n: usize = dims.iter().product();
    let pick = |v: usize, len: usize| if len == 1 { 0 } else { v };
    if matches!(a, Value::Float { .. }) || matches!(b, Value::Float { .. }) {
        let (x, y) = (
            a.floats().ok_or("non-constant")?,
            b.floats().ok_or("non-constant")?,
        );
        let data = (0..n)
            .map(|k| {
                let (p, q) = (x[pick(k, x.len())], y[pick(k, y.len())]);
                match op {
                    "Add" => p + q,
                    "Sub" => p - q,
                    "Mul" => p * q,
                    _ => p / q,
                }
            })
            .collect();
        return Ok(Value::Float {
            dims,
            data,
            init: None,
        });
    }
    let (x, y) = (a.ints().ok_or("non-constant")?, b.ints().ok_or("non-constant")?);
    let data = (0..n)
        .map(|k| match (&x[pick(k, x.len())], &y[pick(k, y.len())]) {
            (Dim::Known(p), Dim::Known(q)) => match op {
                "Add" => Dim::Known(p.wrapping_add(*q)),
                "Sub" => Dim::Known(p.wrapping_sub(*q)),
                "Mul" => Dim::Known(p.wrapping_mul(*q)),
                _ if *q != 0 => Dim::Known(p.wrapping_div(*q)),
                _ => Dim::Unknown,
            },
            (s @ Dim::Sym(_), Dim::Known(1)) if op == "Mul" || op == "Div" => s.clone(),
            (s @ Dim::Sym(_), Dim::Known(0)) if op == "Add" || op == "Sub" => s.clone(),
            _ => Dim::Unknown,
        })
        .collect();
    Ok(Value::Int { dims, data })
}

fn is_float_type(t: i64) -> bool {
    matches!(t, 1 | 10 | 11 | 16)
}

fn cast(v: &Value, float: bool) -> Option<Value> {
    Some(match (v, float) {
        (Value::Float { .. }, true) | (Value::Int { .. }, false) => v.clone(),
        (Value::Int { dims, .. }, true) => Value::Float {
            dims: dims.clone(),
            data: v.floats()?,
            init: None,
        },
        (Value::Float { dims, .. }, false) => Value::Int {
            dims: dims.clone(),
            data: v.ints()?,
        },
        (Value::Run { .. }, _) => return None,
    })
}

/// The constant node `n` computes from `inputs`, or `None` when it is not shape
/// arithmetic on constants (the node is then mapped to an op, or refused).
pub(crate) fn fold(n: &NodeProto, inputs: &[Option<&Value>]) -> Option<Result<Value, String>> {
    let op = n.op_type.as_str();
    if !FOLDABLE.contains(&op) {
        return None;
    }
    let input = |k: usize| inputs.get(k).copied().flatten();
    if op == "Constant" {
        return Some(constant(n));
    }
    if op == "Shape" {
        let dims = input(0)?.dims();
        let r = dims.len() as i64;
        let norm = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
        let s = norm(attr_int(n, "start").unwrap_or(0));
        let e = norm(attr_int(n, "end").unwrap_or(r)).max(s);
        return Some(Ok(Value::Int {
            dims: vec![e - s],
            data: dims[s..e].to_vec(),
        }));
    }
    if op == "CastLike" {
        let float = matches!(input(1)?, Value::Run { .. } | Value::Float { .. });
        return cast(input(0)?, float).map(Ok);
    }
    // Every other op folds only constants; a run-time input means it is a real op.
    let x = input(0)?;
    if !inputs.iter().flatten().all(|v| v.is_const()) || !x.is_const() {
        return None;
    }
    let ints_in = |k: usize| input(k).and_then(Value::known_ints);
    Some(match op {
        "Identity" => Ok(x.clone()),
        "Cast" => cast(x, is_float_type(attr_int(n, "to").unwrap_or(1)))?.into_ok(),
        "Add" | "Sub" | "Mul" | "Div" => binary(op, x, input(1)?),
        "Gather" => {
            let idx = input(1)?;
            let (id, iv) = (idx.dims(), idx.known_ints()?);
            let id: Vec<usize> = id.iter().map(|d| d.known().unwrap_or(0) as usize).collect();
            let rank = x.dims().len();
            if rank == 0 {
                return Some(Err("Gather from a scalar".into()));
            }
            (|| {
                let ax = axis(attr_int(n, "axis").unwrap_or(0), rank)?;
                map_arr!(x, |a| a.gather(ax, &iv, &id))
            })()
        }
        "Unsqueeze" | "Squeeze" => {
            let axes = attr_ints(n, "axes").or_else(|| ints_in(1));
            let mut dims: Vec<usize> = x.dims().iter().map(|d| d.known().unwrap_or(0) as usize).collect();
            (|| {
                if op == "Unsqueeze" {
                    let out_rank = dims.len() + axes.as_ref().map_or(0, Vec::len);
                    let mut ax: Vec<usize> = axes
                        .unwrap_or_default()
                        .iter()
                        .map(|&a| axis(a, out_rank))
                        .collect::<Result<_, _>>()?;
                    ax.sort_unstable();
                    for a in ax {
                        dims.insert(a.min(dims.len()), 1);
                    }
                } else {
                    let rank = dims.len();
                    let ax: Vec<usize> = match axes {
                        Some(a) => a.iter().map(|&a| axis(a, rank)).collect::<Result<_, _>>()?,
                        None => (0..rank).filter(|&k| dims[k] == 1).collect(),
                    };
                    if let Some(&a) = ax.iter().find(|&&a| dims[a] != 1) {
                        return Err(format!("Squeeze of axis {a}, whose size is {}", dims[a]));
                    }
                    dims = dims
                        .iter()
                        .enumerate()
                        .filter(|(k, _)| !ax.contains(k))
                        .map(|(_, &d)| d)
                        .collect();
                }
                map_arr!(x, |a| Ok(Arr {
                    dims: dims.clone(),
                    data: a.data
                }))
            })()
        }
        "Concat" => {
            let all: Vec<&Value> = inputs.iter().flatten().copied().collect();
            let rank = x.dims().len();
            if rank != 1 || all.iter().any(|v| v.dims().len() != 1) {
                return Some(Err("constant concat of other than 1-D tensors".into()));
            }
            let total = all.iter().try_fold(0usize, |t, v| {
                let n = v.dims().first().and_then(|d| d.known()).unwrap_or(0) as usize;
                t.checked_add(n)
            });
            if let Err(e) = foldable(&[total.unwrap_or(usize::MAX)]) {
                return Some(Err(e));
            }
            if all.iter().all(|v| matches!(v, Value::Int { .. })) {
                let data: Vec<Dim> = all.iter().flat_map(|v| v.ints().unwrap_or_default()).collect();
                Ok(Value::Int {
                    dims: vec![data.len()],
                    data,
                })
            } else {
                let data: Vec<f32> = all
                    .iter()
                    .map(|v| v.floats())
                    .collect::<Option<Vec<_>>>()?
                    .concat();
                Ok(Value::Float {
                    dims: vec![data.len()],
                    data,
                    init: None,
                })
            }
        }
        "ConstantOfShape" => {
            let dims: Vec<usize> = x.known_ints()?.iter().map(|&d| d.max(0) as usize).collect();
            let count = match foldable(&dims) {
                Ok(c) => c,
                Err(e) => return Some(Err(e)),
            };
            let fill = match attr(n, "value").and_then(|a| a.t.as_ref()) {
                Some(t) => decode(t, &no_external),
                None => Ok(Value::Float {
                    dims: vec![1],
                    data: vec![0.0],
                    init: None,
                }),
            };
            fill.and_then(|f| match f {
                Value::Float { data, .. } if !data.is_empty() => Ok(Value::Float {
                    dims,
                    data: vec![data[0]; count],
                    init: None,
                }),
                Value::Int { data, .. } if !data.is_empty() => Ok(Value::Int {
                    dims,
                    data: vec![data[0].clone(); count],
                }),
                _ => Err("ConstantOfShape without a value".into()),
            })
        }
        "Expand" => {
            let target = ints_in(1)?;
            let xd: Vec<usize> = x.dims().iter().map(|d| d.known().unwrap_or(0) as usize).collect();
            let count: usize = xd.iter().product();
            let dims: Vec<usize> = target.iter().map(|&d| d.max(0) as usize).collect();
            let n_out = match foldable(&dims) {
                Ok(c) => c,
                Err(e) => return Some(Err(e)),
            };
            if count != 1 && xd != dims {
                return Some(Err("constant Expand other than of a scalar".into()));
            }
            map_arr!(x, |a| Ok(Arr {
                dims: dims.clone(),
                data: repeat(&a.data, n_out)
            }))
        }
        "Slice" => {
            let rank = x.dims().len();
            let (starts, ends) = (ints_in(1)?, ints_in(2)?);
            let axes: Vec<i64> = ints_in(3).unwrap_or_else(|| (0..starts.len() as i64).collect());
            let steps = ints_in(4).unwrap_or_default();
            (|| {
                let axes: Vec<usize> = axes.iter().map(|&a| axis(a, rank)).collect::<Result<_, _>>()?;
                if starts.len() != axes.len() || ends.len() != axes.len() {
                    return Err("slice starts, ends and axes differ in length".into());
                }
                map_arr!(x, |a| a.slice(&starts, &ends, &axes, &steps))
            })()
        }
        "Transpose" => {
            let rank = x.dims().len();
            let perm: Vec<usize> = attr_ints(n, "perm").map_or_else(
                || (0..rank).rev().collect(),
                |p| p.iter().map(|&v| v.max(0) as usize).collect(),
            );
            let mut sorted = perm.clone();
            sorted.sort_unstable();
            if sorted != (0..rank).collect::<Vec<_>>() {
                return Some(Err(format!("bad permutation {perm:?}")));
            }
            map_arr!(x, |a| a.transpose(&perm))
        }
        "Reshape" | "Flatten" => {
            let xd: Vec<usize> = x.dims().iter().map(|d| d.known().unwrap_or(0) as usize).collect();
            let target = if op == "Flatten" {
                let ax = attr_int(n, "axis").unwrap_or(1).clamp(0, xd.len() as i64) as usize;
                vec![xd[..ax].iter().product::<usize>() as i64, -1]
            } else {
                ints_in(1)?
            };
            (|| {
                let dims = reshape_dims(&xd, &target)?;
                map_arr!(x, |a| Ok(Arr {
                    dims: dims.clone(),
                    data: a.data
                }))
            })()
        }
        _ => return None,
    })
}

/// `n` elements cycling through `data`.
fn repeat<T: Clone>(data: &[T], n: usize) -> Vec<T> {
    data.iter().cycle().take(n).cloned().collect()
}

trait IntoOk: Sized {
    fn into_ok(self) -> Result<Self, String> {
        Ok(self)
    }
}
impl IntoOk for Value {}

/// A `Constant` node's value.
fn constant(n: &NodeProto) -> Result<Value, String> {
    let a = n.attribute.first().ok_or("Constant without a value")?;
    let ty = a
        .type_
        .enum_value()
        .map_err(|t| format!("unknown attribute type {t}"))?;
    match (a.name.as_str(), ty) {
        ("value", AttributeType::TENSOR) => {
            let t = a.t.as_ref().ok_or("Constant without a tensor")?;
            let mut v = decode(t, &no_external)?;
            if let Value::Float { init, .. } = &mut v {
                *init = None;
            }
            Ok(v)
        }
        ("value_float", _) => Ok(Value::Float {
            dims: vec![],
            data: vec![a.f],
            init: None,
        }),
        ("value_floats", _) => Ok(Value::Float {
            dims: vec![a.floats.len()],
            data: a.floats.clone(),
            init: None,
        }),
        ("value_int", _) => Ok(Value::Int {
            dims: vec![],
            data: vec![Dim::Known(a.i)],
        }),
        ("value_ints", _) => Ok(Value::Int {
            dims: vec![a.ints.len()],
            data: a.ints.iter().map(|&v| Dim::Known(v)).collect(),
        }),
        (name, _) => Err(format!("Constant with attribute {name} is not supported")),
    }
}
