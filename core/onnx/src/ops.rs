//! ONNX ops mapped to torchlet registry ops (names and attrs as `torch.nn.functional`
//! has them, see `/work/shared/CONFORMANCE.md`), with what is known of each output's
//! shape; anything else is refused with the reason.

use crate::fold::{attr_float, attr_int, attr_ints, attr_str};
use crate::import::Importer;
use crate::tensor::{Dim, Value};
use onnx_protobuf::NodeProto;
use torchlet::model::spec::{AttrValue, TensorKind, ValueRef};

const PARAM: TensorKind = TensorKind::Param { trainable: true };

/// An f32 attribute as the decimal it was written as (0.1f32 -> 0.1, not 0.100000001).
fn short(v: f32) -> f64 {
    format!("{v}").parse().unwrap_or(v as f64)
}

fn ints(v: &[i64]) -> AttrValue {
    AttrValue::Ints(v.to_vec())
}

pub(crate) fn run(v: Option<&Value>, what: &str) -> Result<(ValueRef, Vec<Dim>), String> {
    match v {
        Some(Value::Run { r, shape }) => Ok((*r, shape.clone())),
        Some(_) => Err(format!(
            "its {what} is a constant; only computed tensors are supported there"
        )),
        None => Err(format!("its {what} is missing")),
    }
}

fn sized(len: &Dim, tag: impl std::fmt::Display, f: impl Fn(i64) -> i64) -> Dim {
    len.derived(tag, f)
}

pub(crate) fn norm_axis(a: i64, rank: usize) -> Result<usize, String> {
    let v = if a < 0 { a + rank as i64 } else { a };
    usize::try_from(v)
        .ok()
        .filter(|&v| v < rank)
        .ok_or(format!("axis {a} is out of range for rank {rank}"))
}

/// The largest stride, padding or dilation torchlet's window ops take (a word each), so
/// that the size arithmetic here cannot overflow either.
const MAX_WINDOW_PARAM: i64 = 65535;

/// An error naming the attributes `named` when any of their values is over
/// [`MAX_WINDOW_PARAM`].
pub(crate) fn window_params(named: &[(&str, &[i64])]) -> Result<(), String> {
    if named
        .iter()
        .flat_map(|(_, v)| v.iter())
        .all(|&v| v <= MAX_WINDOW_PARAM)
    {
        return Ok(());
    }
    let list: Vec<String> = named.iter().map(|(n, v)| format!("{n} {v:?}")).collect();
    Err(format!("{} exceed {MAX_WINDOW_PARAM}", list.join(", ")))
}

/// Sliding-window output length (convolution, pooling).
fn window(len: &Dim, k: i64, s: i64, pad: i64, d: i64, ceil: bool) -> Dim {
    sized(len, format_args!("win{k},{s},{pad},{d},{}", ceil as u8), |l| {
        let span = l + pad - d * (k - 1) - 1;
        if ceil {
            let mut o = (span + s - 1).div_euclid(s) + 1;
            if (o - 1) * s >= l + pad / 2 {
                o -= 1;
            }
            o
        } else {
            span.div_euclid(s) + 1
        }
    })
}

impl Importer<'_> {
    pub(crate) fn map(&mut self, n: &NodeProto, ins: &[Option<Value>]) -> Result<Value, String> {
        let input = |k: usize| ins.get(k).and_then(Option::as_ref);
        let op = n.op_type.as_str();
        match op {
            "Relu" | "Sigmoid" | "Tanh" | "HardSwish" => {
                let (x, s) = run(input(0), "input")?;
                let name = op.to_ascii_lowercase();
                Ok(self.emit(&name, n, vec![Some(x)], vec![], s))
            }
            "LeakyRelu" => {
                let (x, s) = run(input(0), "input")?;
                let slope = short(attr_float(n, "alpha").unwrap_or(0.01));
                Ok(self.emit(
                    "leaky_relu",
                    n,
                    vec![Some(x)],
                    vec![("negative_slope", AttrValue::Float(slope))],
                    s,
                ))
            }
            "HardSigmoid" => {
                let (x, s) = run(input(0), "input")?;
                let (a, b) = (
                    attr_float(n, "alpha").unwrap_or(0.2),
                    attr_float(n, "beta").unwrap_or(0.5),
                );
                if (a - 1.0 / 6.0).abs() > 1e-6 || (b - 0.5).abs() > 1e-6 {
                    return Err(format!(
                        "HardSigmoid with alpha {a}, beta {b} is not PyTorch's hardsigmoid (1/6, 1/2)"
                    ));
                }
                Ok(self.emit("hardsigmoid", n, vec![Some(x)], vec![], s))
            }
            "Clip" => {
                let (x, s) = run(input(0), "input")?;
                let bound = |k: usize, name: &str| match input(k) {
                    Some(v) => v
                        .floats()
                        .and_then(|f| f.first().copied())
                        .ok_or(format!("its {name} bound must be a constant")),
                    None => Ok(attr_float(n, name).unwrap_or(if name == "min" {
                        f32::NEG_INFINITY
                    } else {
                        f32::INFINITY
                    })),
                };
                match (bound(1, "min")?, bound(2, "max")?) {
                    (lo, hi) if lo == 0.0 && hi == 6.0 => Ok(self.emit("relu6", n, vec![Some(x)], vec![], s)),
                    (lo, hi) if lo == 0.0 && hi == f32::INFINITY => {
                        Ok(self.emit("relu", n, vec![Some(x)], vec![], s))
                    }
                    (lo, hi) => Err(format!(
                        "Clip to [{lo}, {hi}] is not supported (only [0, 6] as relu6 and [0, inf) as relu)"
                    )),
                }
            }
            "Softmax" | "LogSoftmax" => {
                let (x, s) = run(input(0), "input")?;
                let default = if self.opset >= 13 { -1 } else { 1 };
                let axis = attr_int(n, "axis").unwrap_or(default);
                let a = norm_axis(axis, s.len())?;
                if self.opset < 13 && a + 1 != s.len() {
                    return Err(format!(
                        "{op} before opset 13 over axis {axis} of a rank-{} tensor flattens it",
                        s.len()
                    ));
                }
                let name = if op == "Softmax" { "softmax" } else { "log_softmax" };
                Ok(self.emit(name, n, vec![Some(x)], vec![("dim", AttrValue::Int(a as i64))], s))
            }
            "Identity" => input(0).cloned().ok_or("its input is missing".into()),
            "Cast" => {
                let to = attr_int(n, "to").unwrap_or(1);
                if to != 1 {
                    return Err(format!(
                        "Cast of a computed tensor to element type {to} is not supported"
                    ));
                }
                input(0).cloned().ok_or("its input is missing".into())
            }
            "Dropout" => {
                let (x, s) = run(input(0), "input")?;
                let p = match input(1) {
                    Some(v) => v
                        .floats()
                        .and_then(|f| f.first().copied())
                        .ok_or("its ratio must be a constant")?,
                    None => attr_float(n, "ratio").unwrap_or(0.5),
                };
                Ok(self.emit(
                    "dropout",
                    n,
                    vec![Some(x)],
                    vec![("p", AttrValue::Float(short(p)))],
                    s,
                ))
            }
            "Conv" => self.conv(n, ins),
            "ConvTranspose" => self.conv_transpose(n, ins),
            "Gemm" => self.gemm(n, ins),
            "MatMul" => {
                let (x, s) = run(input(0), "input")?;
                let w = input(1)
                    .filter(|v| v.is_const())
                    .ok_or("MatMul of two computed tensors is not supported")?;
                let Value::Float { dims, data, init } = w else {
                    return Err("its weight must be real".into());
                };
                if dims.len() != 2 || s.len() < 2 {
                    return Err(
                        "MatMul other than [.., K] x [K, M] (a linear layer) is not supported".into(),
                    );
                }
                let (k, m) = (dims[0], dims[1]);
                let t: Vec<f32> = (0..m * k).map(|i| data[(i % k) * m + i / k]).collect();
                let wt = Value::Float {
                    dims: vec![m, k],
                    data: t,
                    init: init.clone(),
                };
                let w = self.tensor(&wt, n, "weight", PARAM)?;
                let mut shape = s;
                *shape.last_mut().unwrap_or(&mut Dim::Unknown) = Dim::Known(m as i64);
                Ok(self.emit("linear", n, vec![Some(x), Some(w), None], vec![], shape))
            }
            "Add" | "Sub" | "Mul" | "Div" => self.arith(n, ins),
            "BatchNormalization" => self.batch_norm(n, ins),
            "MaxPool" | "AveragePool" => self.pool(n, ins),
            "GlobalAveragePool" | "GlobalMaxPool" => {
                let (x, s) = run(input(0), "input")?;
                let mut out = s.clone();
                for d in out.iter_mut().skip(2) {
                    *d = Dim::Known(1);
                }
                match (op, s.len()) {
                    ("GlobalAveragePool", 4) => Ok(self.emit(
                        "adaptive_avg_pool2d",
                        n,
                        vec![Some(x)],
                        vec![("output_size", ints(&[1, 1]))],
                        out,
                    )),
                    ("GlobalMaxPool", 4) => Ok(self.emit(
                        "adaptive_max_pool2d",
                        n,
                        vec![Some(x)],
                        vec![("output_size", ints(&[1, 1]))],
                        out,
                    )),
                    ("GlobalAveragePool", 3) => Ok(self.emit(
                        "mean",
                        n,
                        vec![Some(x)],
                        vec![("dim", ints(&[2])), ("keepdim", AttrValue::Flag(true))],
                        out,
                    )),
                    (_, r) => Err(format!("{op} of a rank-{r} tensor is not supported")),
                }
            }
            "ReduceMean" | "ReduceSum" | "ReduceMax" => self.reduce(n, ins),
            "Concat" => {
                let (mut acc, mut s) = run(input(0), "first input")?;
                let axis = norm_axis(attr_int(n, "axis").unwrap_or(0), s.len())?;
                if ins.len() < 2 {
                    return Ok(Value::Run { r: acc, shape: s });
                }
                for k in 1..ins.len() {
                    let (y, ys) = run(input(k), "input")?;
                    if ys.len() != s.len() {
                        return Err("Concat of tensors of different ranks".into());
                    }
                    s[axis] = match (&s[axis], &ys[axis]) {
                        (Dim::Known(a), Dim::Known(b)) => Dim::Known(a + b),
                        _ => Dim::Unknown,
                    };
                    let v = self.emit(
                        "cat",
                        n,
                        vec![Some(acc), Some(y)],
                        vec![("dim", AttrValue::Int(axis as i64))],
                        s.clone(),
                    );
                    acc = match v {
                        Value::Run { r, .. } => r,
                        _ => unreachable_run(),
                    };
                }
                Ok(Value::Run { r: acc, shape: s })
            }
            "Flatten" => {
                let (x, s) = run(input(0), "input")?;
                let axis = attr_int(n, "axis").unwrap_or(1);
                let a = if axis < 0 { axis + s.len() as i64 } else { axis };
                if a != 1 {
                    return Err(format!(
                        "Flatten at axis {axis} is not supported (only axis 1, torch.flatten(x, 1))"
                    ));
                }
                self.flatten(n, x, &s)
            }
            "Reshape" => self.reshape(n, ins),
            "Transpose" => {
                let (x, s) = run(input(0), "input")?;
                let perm = attr_ints(n, "perm").unwrap_or_else(|| (0..s.len() as i64).rev().collect());
                let mut seen = vec![false; s.len()];
                let mut norm = Vec::with_capacity(perm.len());
                for &p in &perm {
                    let p = norm_axis(p, s.len())?;
                    if std::mem::replace(&mut seen[p], true) {
                        return Err(format!("bad permutation {perm:?}"));
                    }
                    norm.push(p as i64);
                }
                if perm.len() != s.len() {
                    return Err(format!("permutation {perm:?} for rank {}", s.len()));
                }
                let out = norm.iter().map(|&p| s[p as usize].clone()).collect();
                Ok(self.emit("permute", n, vec![Some(x)], vec![("dims", ints(&norm))], out))
            }
            "Pad" => self.pad(n, ins),
            "Slice" => self.slice(n, ins),
            "Unsqueeze" | "Squeeze" => self.unsqueeze(n, ins),
            "Resize" | "Upsample" => self.resize(n, ins),
            _ => Err(format!("op type {op} is not supported")),
        }
    }

    /// `flatten(x, 1)` (nothing when `x` is already 2-D).
    pub(crate) fn flatten(&mut self, n: &NodeProto, x: ValueRef, s: &[Dim]) -> Result<Value, String> {
        if s.len() < 2 {
            return Err(format!("flattening a rank-{} tensor from dim 1", s.len()));
        }
        let rest = s[1..].iter().try_fold(1i64, |acc, d| d.known().map(|v| acc * v));
        let out = vec![s[0].clone(), rest.map_or(Dim::Unknown, Dim::Known)];
        if s.len() == 2 {
            return Ok(Value::Run { r: x, shape: out });
        }
        Ok(self.emit(
            "flatten",
            n,
            vec![Some(x)],
            vec![("start_dim", AttrValue::Int(1))],
            out,
        ))
    }

    fn conv(&mut self, n: &NodeProto, ins: &[Option<Value>]) -> Result<Value, String> {
        let (mut x, s) = run(ins.first().and_then(Option::as_ref), "input")?;
        let w = ins
            .get(1)
            .and_then(Option::as_ref)
            .filter(|v| v.is_const())
            .ok_or("its weight must be a constant")?;
        let wd = w.dims();
        let nd = wd
            .len()
            .checked_sub(2)
            .filter(|&d| (1..=2).contains(&d) && s.len() == d + 2);
        let nd = nd.ok_or(format!(
            "a {}-D convolution is not supported (only 1-D and 2-D)",
            wd.len().saturating_sub(2)
        ))?;
        let auto = attr_str(n, "auto_pad").unwrap_or_default();
        if !matches!(auto.as_str(), "" | "NOTSET" | "VALID") {
            return Err(format!(
                "auto_pad {auto} is not supported (its padding depends on the input size)"
            ));
        }
        let k: Vec<i64> = wd[2..].iter().map(|d| d.known().unwrap_or(1)).collect();
        let stride = attr_ints(n, "strides").unwrap_or_else(|| vec![1; nd]);
        let dil = attr_ints(n, "dilations").unwrap_or_else(|| vec![1; nd]);
        let mut pads = attr_ints(n, "pads").unwrap_or_else(|| vec![0; 2 * nd]);
        let groups = attr_int(n, "group").unwrap_or(1);
        window_params(&[("strides", &stride), ("dilations", &dil), ("pads", &pads)])?;
        let bad = stride.iter().chain(&dil).any(|&v| v < 1) || pads.iter().any(|&p| p < 0);
        if stride.len() != nd || dil.len() != nd || pads.len() != 2 * nd || bad {
            return Err("strides, dilations or pads do not match the kernel's rank".into());
        }
        let mut s = s;
        if pads[..nd] != pads[nd..] {
            if nd == 1 {
                return Err(format!(
                    "asymmetric padding {pads:?} of a 1-D convolution is not supported"
                ));
            }
            // [top, left, bottom, right] -> a pad node [left, right, top, bottom] first.
            let p = vec![pads[1], pads[3], pads[0], pads[2]];
            s[2] = sized(&s[2], format_args!("pad{},{}", pads[0], pads[2]), |h| {
                h + pads[0] + pads[2]
            });
            s[3] = sized(&s[3], format_args!("pad{},{}", pads[1], pads[3]), |w| {
                w + pads[1] + pads[3]
            });
            let v = self.emit(
                "pad",
                n,
                vec![Some(x)],
                vec![("pad", ints(&p)), ("mode", AttrValue::Str("constant".into()))],
                s.clone(),
            );
            x = match v {
                Value::Run { r, .. } => r,
                _ => unreachable_run(),
            };
            pads = vec![0; 2 * nd];
        }
        let wv = self.tensor(w, n, "weight", PARAM)?;
        let b = match ins.get(2).and_then(Option::as_ref) {
            // The dynamo exporter writes a bias-free conv's bias as folded zeros.
            Some(Value::Float { init: None, data, .. }) if data.iter().all(|&v| v == 0.0) => None,
            Some(b) => Some(self.tensor(b, n, "bias", PARAM)?),
            None => None,
        };
        let mut out = vec![s[0].clone(), wd[0].clone()];
        for d in 0..nd {
            out.push(window(&s[2 + d], k[d], stride[d], 2 * pads[d], dil[d], false));
        }
        let attrs = vec![
            ("stride", ints(&stride)),
            ("padding", ints(&pads[..nd])),
            ("dilation", ints(&dil)),
            ("groups", AttrValue::Int(groups)),
        ];
        let op = if nd == 1 { "conv1d" } else { "conv2d" };
        Ok(self.emit(op, n, vec![Some(x), Some(wv), b], attrs, out))
    }

    fn conv_transpose(&mut self, n: &NodeProto, ins: &[Option<Value>]) -> Result<Value, String> {
        let (x, s) = run(ins.first().and_then(Option::as_ref), "input")?;
        let w = ins
            .get(1)
            .and_then(Option::as_ref)
            .filter(|v| v.is_const())
            .ok_or("its weight must be a constant")?;
        let wd = w.dims();
        if wd.len() != 4 || s.len() != 4 {
            return Err("only 2-D transposed convolutions are supported".into());
        }
        if attr_ints(n, "output_shape").is_some() {
            return Err("output_shape is not supported (give pads and output_padding)".into());
        }
        let auto = attr_str(n, "auto_pad").unwrap_or_default();
        if !matches!(auto.as_str(), "" | "NOTSET" | "VALID") {
            return Err(format!("auto_pad {auto} is not supported"));
        }
        let stride = attr_ints(n, "strides").unwrap_or_else(|| vec![1, 1]);
        let dil = attr_ints(n, "dilations").unwrap_or_else(|| vec![1, 1]);
        let pads = attr_ints(n, "pads").unwrap_or_else(|| vec![0; 4]);
        let opad = attr_ints(n, "output_padding").unwrap_or_else(|| vec![0, 0]);
        let groups = attr_int(n, "group").unwrap_or(1);
        window_params(&[
            ("strides", &stride),
            ("dilations", &dil),
            ("pads", &pads),
            ("output_padding", &opad),
        ])?;
        let bad = stride.iter().chain(&dil).any(|&v| v < 1) || pads.iter().chain(&opad).any(|&p| p < 0);
        if stride.len() != 2 || dil.len() != 2 || pads.len() != 4 || opad.len() != 2 || bad {
            return Err("strides, dilations, pads or output_padding are not 2-D".into());
        }
        if pads[..2] != pads[2..] {
            return Err(format!(
                "asymmetric padding {pads:?} of a transposed convolution is not supported"
            ));
        }
        let wv = self.tensor(w, n, "weight", PARAM)?;
        let b = match ins.get(2).and_then(Option::as_ref) {
            Some(b) => Some(self.tensor(b, n, "bias", PARAM)?),
            None => None,
        };
        let cout = sized(&wd[1], format_args!("mul{groups}"), |c| c * groups);
        let mut out = vec![s[0].clone(), cout];
        for d in 0..2 {
            let k = wd[2 + d].known().unwrap_or(1);
            let tag = format_args!("up{},{},{},{k},{}", stride[d], pads[d], dil[d], opad[d]);
            out.push(sized(&s[2 + d], tag, |l| {
                (l - 1) * stride[d] - 2 * pads[d] + dil[d] * (k - 1) + opad[d] + 1
            }));
        }
        let attrs = vec![
            ("stride", ints(&stride)),
            ("padding", ints(&pads[..2])),
            ("output_padding", ints(&opad)),
            ("groups", AttrValue::Int(groups)),
            ("dilation", ints(&dil)),
        ];
        Ok(self.emit("conv_transpose2d", n, vec![Some(x), Some(wv), b], attrs, out))
    }

    fn gemm(&mut self, n: &NodeProto, ins: &[Option<Value>]) -> Result<Value, String> {
        let (x, s) = run(ins.first().and_then(Option::as_ref), "input")?;
        let w = ins
            .get(1)
            .and_then(Option::as_ref)
            .filter(|v| v.is_const())
            .ok_or("its weight (B) must be a constant")?;
        if attr_int(n, "transA").unwrap_or(0) != 0
            || attr_float(n, "alpha").unwrap_or(1.0) != 1.0
            || attr_float(n, "beta").unwrap_or(1.0) != 1.0
        {
            return Err(
                "Gemm with transA, alpha or beta other than PyTorch's Linear (0, 1, 1) is not supported"
                    .into(),
            );
        }
        let Value::Float { dims, data, init } = w else {
            return Err("its weight must be real".into());
        };
        if dims.len() != 2 || s.len() != 2 {
            return Err("Gemm of other than 2-D tensors".into());
        }
        let w = if attr_int(n, "transB").unwrap_or(0) != 0 {
            w.clone()
        } else {
            let (k, m) = (dims[0], dims[1]);
            let t = (0..m * k).map(|i| data[(i % k) * m + i / k]).collect();
            Value::Float {
                dims: vec![m, k],
                data: t,
                init: init.clone(),
            }
        };
        let out_features = w.dims()[0].clone();
        let wv = self.tensor(&w, n, "weight", PARAM)?;
        let b = match ins.get(2).and_then(Option::as_ref) {
            Some(b @ Value::Float { dims, .. }) if dims.len() == 1 => Some(self.tensor(b, n, "bias", PARAM)?),
            Some(_) => return Err("its bias (C) must be a 1-D constant".into()),
            None => None,
        };
        Ok(self.emit(
            "linear",
            n,
            vec![Some(x), Some(wv), b],
            vec![],
            vec![s[0].clone(), out_features],
        ))
    }
}

/// `emit` always answers a run-time value.
fn unreachable_run() -> ValueRef {
    ValueRef::Node(usize::MAX)
}
