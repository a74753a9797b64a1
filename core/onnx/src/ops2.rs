//! The mappings with more to decide: arithmetic (broadcasting; constants as scalar ops
//! or frozen tensors; the linear bias after a MatMul; `x * sigmoid(x)` as silu),
//! BatchNorm (kept, or folded into its convolution), pooling, reductions, Reshape, Pad
//! and Resize.

use crate::fold::{attr_float, attr_int, attr_ints, attr_str};
use crate::import::Importer;
use crate::tensor::{Dim, Value};
use onnx_protobuf::NodeProto;
use torchlet::model::spec::{AttrValue, TensorKind, ValueRef};

fn ints(v: &[i64]) -> AttrValue {
    AttrValue::Ints(v.to_vec())
}

fn run(v: Option<&Value>, what: &str) -> Result<(ValueRef, Vec<Dim>), String> {
    match v {
        Some(Value::Run { r, shape }) => Ok((*r, shape.clone())),
        Some(_) => Err(format!(
            "its {what} is a constant; only computed tensors are supported there"
        )),
        None => Err(format!("its {what} is missing")),
    }
}

/// The shape of `a op b` under NumPy broadcasting, dim by dim from the right; a free
/// dim against 1 stays free, two different free dims are taken as equal (the engine
/// checks them at run time), `None` when two known dims differ with neither 1.
pub(crate) fn broadcast(a: &[Dim], b: &[Dim]) -> Option<Vec<Dim>> {
    let rank = a.len().max(b.len());
    let one = Dim::Known(1);
    let at = |s: &[Dim], i: usize| {
        if i < s.len() {
            s[s.len() - 1 - i].clone()
        } else {
            one.clone()
        }
    };
    let mut out = vec![Dim::Unknown; rank];
    for i in 0..rank {
        let (p, q) = (at(a, i), at(b, i));
        out[rank - 1 - i] = match (&p, &q) {
            _ if p == q => p,
            (Dim::Known(1), _) => q,
            (_, Dim::Known(1)) => p,
            (Dim::Known(_), Dim::Known(_)) => return None,
            (Dim::Known(_), _) => p,
            _ => q,
        };
    }
    Some(out)
}

/// An attr value rounded to the decimal an f32 was written as.
fn short(v: f32) -> f64 {
    format!("{v}").parse().unwrap_or(v as f64)
}

impl Importer<'_> {
    pub(crate) fn arith(&mut self, n: &NodeProto, ins: &[Option<Value>]) -> Result<Value, String> {
        let op = n.op_type.to_ascii_lowercase();
        let (a, b) = (
            ins.first().and_then(Option::as_ref),
            ins.get(1).and_then(Option::as_ref),
        );
        let (a, b) = (a.ok_or("an input is missing")?, b.ok_or("an input is missing")?);
        if let (Value::Run { r, shape }, c @ Value::Float { dims, .. })
        | (c @ Value::Float { dims, .. }, Value::Run { r, shape }) = (a, b)
        {
            // MatMul + Add: the bias of the linear layer just made.
            if let (ValueRef::Node(k), "add", 1) = (*r, op.as_str(), dims.len()) {
                let single = n.input.iter().all(|i| {
                    self.uses.get(i).copied().unwrap_or(0) <= 1
                        || self.values.get(i).is_some_and(Value::is_const)
                });
                let node = &self.spec.nodes[k];
                let fits = Some(&Dim::Known(dims[0] as i64)) == shape.last();
                if node.op == "linear" && node.inputs.get(2) == Some(&None) && single && fits {
                    let name = self.spec.nodes[k].name.clone();
                    let owner = NodeProto { name, ..n.clone() };
                    let bias = self.tensor(c, &owner, "bias", TensorKind::Param { trainable: true })?;
                    self.spec.nodes[k].inputs[2] = Some(bias);
                    return Ok(Value::Run {
                        r: *r,
                        shape: shape.clone(),
                    });
                }
            }
            let constant_first = matches!(a, Value::Float { .. });
            return self.arith_constant(n, &op, (*r, shape), c, constant_first);
        }
        let ((x, xs), (y, ys)) = (run(Some(a), "first input")?, run(Some(b), "second input")?);
        let shape = broadcast(&xs, &ys).ok_or(format!(
            "{} of shapes that do not broadcast ({xs:?} and {ys:?})",
            n.op_type
        ))?;
        if let Some(v) = self.silu(n, &op, (x, &xs), (y, &ys)) {
            return Ok(v);
        }
        Ok(self.emit(&op, n, vec![Some(x), Some(y)], vec![], shape))
    }

    /// `x * sigmoid(x)` (how both exporters write `nn.SiLU`) as one silu node: the
    /// sigmoid node just made becomes the silu when nothing else reads its output.
    fn silu(
        &mut self,
        n: &NodeProto,
        op: &str,
        a: (ValueRef, &[Dim]),
        b: (ValueRef, &[Dim]),
    ) -> Option<Value> {
        if op != "mul" || a.1 != b.1 {
            return None;
        }
        for ((x, _), (s, shape), name) in [(a, b, n.input.get(1)?), (b, a, n.input.first()?)] {
            let ValueRef::Node(k) = s else {
                continue;
            };
            let node = &self.spec.nodes[k];
            let once = self.uses.get(name).copied().unwrap_or(0) <= 1;
            if node.op == "sigmoid"
                && node.inputs.first() == Some(&Some(x))
                && once
                && k + 1 == self.spec.nodes.len()
            {
                self.spec.nodes[k].op = "silu".into();
                return Some(Value::Run {
                    r: s,
                    shape: shape.to_vec(),
                });
            }
        }
        None
    }

    /// Arithmetic of a computed tensor `x` and a real constant `c`: a scalar constant
    /// becomes `mul_scalar`, `add_scalar` or `affine_scalar` (`c - x`), a constant
    /// divisor its reciprocal; a constant tensor (or a scalar dividend) is a frozen
    /// tensor broadcast against `x`.
    fn arith_constant(
        &mut self,
        n: &NodeProto,
        op: &str,
        (x, xs): (ValueRef, &Vec<Dim>),
        c: &Value,
        constant_first: bool,
    ) -> Result<Value, String> {
        let Value::Float { dims, data, .. } = c else {
            return Err("its constant must be real".into());
        };
        let cs: Vec<Dim> = dims.iter().map(|&d| Dim::Known(d as i64)).collect();
        let shape = broadcast(xs, &cs).ok_or(format!(
            "{} of shapes that do not broadcast ({xs:?} and the constant's {dims:?})",
            n.op_type
        ))?;
        let scalar = match (data.as_slice(), shape == *xs) {
            ([v], true) if v.is_finite() => Some(*v),
            _ => None,
        };
        let scaled = |s: f32, t: f32| -> (&str, Vec<(&str, AttrValue)>) {
            match (s == 1.0, t == 0.0) {
                (_, true) => ("mul_scalar", vec![("other", AttrValue::Float(short(s)))]),
                (true, false) => ("add_scalar", vec![("other", AttrValue::Float(short(t)))]),
                _ => (
                    "affine_scalar",
                    vec![
                        ("scale", AttrValue::Float(short(s))),
                        ("shift", AttrValue::Float(short(t))),
                    ],
                ),
            }
        };
        let mapped = match (op, scalar, constant_first) {
            ("mul", Some(v), _) => Some(scaled(v, 0.0)),
            ("add", Some(v), _) => Some(scaled(1.0, v)),
            ("sub", Some(v), false) => Some(scaled(1.0, -v)),
            ("sub", Some(v), true) => Some(scaled(-1.0, v)),
            ("div", Some(v), false) if v != 0.0 && (1.0 / v).is_finite() => Some(scaled(1.0 / v, 0.0)),
            _ => None,
        };
        if let Some((name, attrs)) = mapped {
            return Ok(self.emit(name, n, vec![Some(x)], attrs, shape));
        }
        let t = self.tensor(c, n, "constant", TensorKind::Buffer)?;
        let inputs = match constant_first {
            true => vec![Some(t), Some(x)],
            false => vec![Some(x), Some(t)],
        };
        Ok(self.emit(op, n, inputs, vec![], shape))
    }
    pub(crate) fn batch_norm(&mut self, n: &NodeProto, ins: &[Option<Value>]) -> Result<Value, String> {
        let (x, s) = run(ins.first().and_then(Option::as_ref), "input")?;
        if attr_int(n, "training_mode").unwrap_or(0) != 0 {
            return Err("BatchNormalization in training mode is not supported (export in eval mode)".into());
        }
        let mut c = Vec::new();
        for (k, role) in ["weight", "bias", "running_mean", "running_var"]
            .iter()
            .enumerate()
        {
            let v = ins.get(k + 1).and_then(Option::as_ref).filter(|v| v.is_const());
            c.push(v.ok_or(format!("its {role} must be a constant"))?.clone());
        }
        let eps = attr_float(n, "epsilon").unwrap_or(1e-5);
        if self.options.fold_bn {
            if let Some(v) = self.fold_bn(n, x, &s, &c, eps)? {
                return Ok(v);
            }
        }
        let momentum = 1.0 - attr_float(n, "momentum").unwrap_or(0.9) as f64;
        let momentum = (momentum * 1e6).round() / 1e6;
        let mut refs = vec![Some(x)];
        for (k, role) in ["weight", "bias", "running_mean", "running_var"]
            .iter()
            .enumerate()
        {
            let kind = if k < 2 {
                TensorKind::Param { trainable: true }
            } else {
                TensorKind::Buffer
            };
            refs.push(Some(self.tensor(&c[k], n, role, kind)?));
        }
        // PyTorch's state_dict also holds the batch counter: a buffer beside the stats.
        if let Some(ValueRef::Tensor(m)) = refs[3] {
            let mean = self.spec.tensors[m].name.clone();
            if let Some(prefix) = mean.strip_suffix(".running_mean") {
                let name = format!("{prefix}.num_batches_tracked");
                if !self.spec.tensors.iter().any(|t| t.name == name) {
                    self.push_tensor(
                        format!("{name}#counter"),
                        name,
                        TensorKind::Buffer,
                        vec![],
                        vec![0.0],
                    );
                }
            }
        }
        let attrs = vec![
            ("momentum", AttrValue::Float(momentum)),
            ("eps", AttrValue::Float(short(eps))),
        ];
        Ok(self.emit("batch_norm", n, refs, attrs, s))
    }

    /// BatchNorm folded into the convolution computing its input, when that is one
    /// whose output only this node reads: `w' = w * g / sqrt(var + eps)`,
    /// `b' = (b - mean) * g / sqrt(var + eps) + beta`.
    fn fold_bn(
        &mut self,
        n: &NodeProto,
        x: ValueRef,
        s: &[Dim],
        c: &[Value],
        eps: f32,
    ) -> Result<Option<Value>, String> {
        let ValueRef::Node(k) = x else { return Ok(None) };
        let reads = self.uses.get(&n.input[0]).copied().unwrap_or(0);
        let node = &self.spec.nodes[k];
        if reads != 1 || !(node.op == "conv2d" || node.op == "conv1d") {
            return Ok(None);
        }
        let Some(ValueRef::Tensor(w)) = node.inputs[1] else {
            return Ok(None);
        };
        let b = node.inputs[2];
        let f = |v: &Value| v.floats().unwrap_or_default();
        let (g, beta, mean, var) = (f(&c[0]), f(&c[1]), f(&c[2]), f(&c[3]));
        let out = self.spec.tensors[w].dims[0];
        if [&g, &beta, &mean, &var].iter().any(|v| v.len() != out) {
            return Err(format!(
                "its parameters do not have the convolution's {out} channels"
            ));
        }
        let scale: Vec<f32> = g.iter().zip(&var).map(|(g, v)| g / (v + eps).sqrt()).collect();
        let per = self.spec.tensors[w].data.len() / out.max(1);
        for (i, v) in self.spec.tensors[w].data.iter_mut().enumerate() {
            *v *= scale[i / per.max(1)];
        }
        let old: Vec<f32> = match b {
            Some(ValueRef::Tensor(b)) => self.spec.tensors[b].data.clone(),
            _ => vec![0.0; out],
        };
        let new: Vec<f32> = (0..out)
            .map(|o| (old[o] - mean[o]) * scale[o] + beta[o])
            .collect();
        match b {
            Some(ValueRef::Tensor(b)) => self.spec.tensors[b].data = new,
            _ => {
                let wname = self.spec.tensors[w].name.clone();
                let name = match wname.strip_suffix(".weight") {
                    Some(p) => format!("{p}.bias"),
                    None => format!("{wname}.bias"),
                };
                let r = self.push_tensor(
                    format!("{name}#folded"),
                    name,
                    TensorKind::Param { trainable: true },
                    vec![out],
                    new,
                );
                self.spec.nodes[k].inputs[2] = Some(r);
            }
        }
        Ok(Some(Value::Run {
            r: x,
            shape: s.to_vec(),
        }))
    }

    pub(crate) fn pool(&mut self, n: &NodeProto, ins: &[Option<Value>]) -> Result<Value, String> {
        let (x, s) = run(ins.first().and_then(Option::as_ref), "input")?;
        if s.len() == 3 {
            return self.pool1d(n, x, s);
        }
        if s.len() != 4 {
            return Err(format!(
                "{} of a rank-{} tensor is not supported (only 2-D pooling)",
                n.op_type,
                s.len()
            ));
        }
        let auto = attr_str(n, "auto_pad").unwrap_or_default();
        if !matches!(auto.as_str(), "" | "NOTSET" | "VALID") {
            return Err(format!("auto_pad {auto} is not supported"));
        }
        let k = attr_ints(n, "kernel_shape")
            .filter(|k| k.len() == 2)
            .ok_or("kernel_shape must have two dims")?;
        let stride = attr_ints(n, "strides").unwrap_or_else(|| vec![1, 1]);
        let pads = attr_ints(n, "pads").unwrap_or_else(|| vec![0; 4]);
        if attr_ints(n, "dilations").is_some_and(|d| d.iter().any(|&d| d != 1)) {
            return Err("dilated pooling is not supported".into());
        }
        crate::ops::window_params(&[("kernel_shape", &k), ("strides", &stride), ("pads", &pads)])?;
        let bad = stride.iter().chain(&k).any(|&v| v < 1) || pads.iter().any(|&p| p < 0);
        if stride.len() != 2 || pads.len() != 4 || pads[..2] != pads[2..] || bad {
            return Err(format!(
                "strides {stride:?} or pads {pads:?} are not symmetric 2-D ones"
            ));
        }
        let ceil = attr_int(n, "ceil_mode").unwrap_or(0) != 0;
        let mut out = s[..2].to_vec();
        for d in 0..2 {
            let tag = format!("pool{},{},{},{}", k[d], stride[d], pads[d], ceil as u8);
            out.push(match &s[2 + d] {
                Dim::Sym(_) => s[2 + d].derived(tag, |l| l),
                Dim::Known(l) => {
                    let span = l + 2 * pads[d] - k[d];
                    let mut o = if ceil {
                        (span + stride[d] - 1).div_euclid(stride[d]) + 1
                    } else {
                        span.div_euclid(stride[d]) + 1
                    };
                    if ceil && (o - 1) * stride[d] >= l + pads[d] {
                        o -= 1;
                    }
                    Dim::Known(o)
                }
                _ => Dim::Unknown,
            });
        }
        let mut attrs = vec![
            ("kernel_size", ints(&k)),
            ("stride", ints(&stride)),
            ("padding", ints(&pads[..2])),
            ("ceil_mode", AttrValue::Flag(ceil)),
        ];
        let op = if n.op_type == "MaxPool" {
            "max_pool2d"
        } else {
            attrs.push((
                "count_include_pad",
                AttrValue::Flag(attr_int(n, "count_include_pad").unwrap_or(0) != 0),
            ));
            "avg_pool2d"
        };
        Ok(self.emit(op, n, vec![Some(x)], attrs, out))
    }

    /// 1-D pooling of `[N, C, L]` as 2-D pooling of `[N, C, 1, L]` (a 1 x k window):
    /// unsqueeze, pool, squeeze.
    fn pool1d(&mut self, n: &NodeProto, x: ValueRef, s: Vec<Dim>) -> Result<Value, String> {
        let one = |name: &str, default: i64| -> Result<i64, String> {
            match attr_ints(n, name).as_deref() {
                None => Ok(default),
                Some([v]) => Ok(*v),
                Some(v) => Err(format!("{name} {v:?} of a 1-D pooling")),
            }
        };
        let k = one("kernel_shape", -1)?;
        let stride = one("strides", 1)?;
        let pads = match attr_ints(n, "pads").as_deref() {
            None => [0, 0],
            Some([a, b]) => [*a, *b],
            Some(v) => return Err(format!("pads {v:?} of a 1-D pooling")),
        };
        let mut n2 = n.clone();
        for a in &mut n2.attribute {
            a.ints = match a.name.as_str() {
                "kernel_shape" => vec![1, k],
                "strides" => vec![1, stride],
                "pads" => vec![0, pads[0], 0, pads[1]],
                "dilations" => [vec![1], a.ints.clone()].concat(),
                _ => continue,
            };
        }
        let four = vec![s[0].clone(), s[1].clone(), Dim::Known(1), s[2].clone()];
        let up = self.emit(
            "unsqueeze",
            n,
            vec![Some(x)],
            vec![("dim", AttrValue::Int(2))],
            four,
        );
        let Value::Run { r, shape } = self.pool(&n2, &[Some(up)])? else {
            return Err("pooling made no computed tensor".into());
        };
        let three = vec![shape[0].clone(), shape[1].clone(), shape[3].clone()];
        Ok(self.emit(
            "squeeze",
            n,
            vec![Some(r)],
            vec![("dim", AttrValue::Int(2))],
            three,
        ))
    }

    pub(crate) fn reduce(&mut self, n: &NodeProto, ins: &[Option<Value>]) -> Result<Value, String> {
        let (x, s) = run(ins.first().and_then(Option::as_ref), "input")?;
        let axes = match ins.get(1).and_then(Option::as_ref) {
            Some(v) => v.known_ints().ok_or("its axes must be constants")?,
            None => attr_ints(n, "axes").unwrap_or_default(),
        };
        if axes.is_empty() {
            return Err("a reduction over all dims (no axes) is not supported".into());
        }
        let rank = s.len() as i64;
        let mut ax: Vec<i64> = axes.iter().map(|&a| if a < 0 { a + rank } else { a }).collect();
        ax.sort_unstable();
        if ax.iter().any(|&a| !(0..rank).contains(&a)) {
            return Err(format!("axes {axes:?} are out of range for rank {rank}"));
        }
        let keep = attr_int(n, "keepdims").unwrap_or(1) != 0;
        let mut out = Vec::new();
        for (k, d) in s.iter().enumerate() {
            if !ax.contains(&(k as i64)) {
                out.push(d.clone());
            } else if keep {
                out.push(Dim::Known(1));
            }
        }
        if n.op_type == "ReduceMax" {
            if ax != [2, 3] || rank != 4 {
                return Err(format!(
                    "ReduceMax over axes {axes:?} is not supported (only the spatial dims 2, 3)"
                ));
            }
            let pooled: Vec<Dim> = s[..2]
                .iter()
                .cloned()
                .chain([Dim::Known(1), Dim::Known(1)])
                .collect();
            let v = self.emit(
                "adaptive_max_pool2d",
                n,
                vec![Some(x)],
                vec![("output_size", ints(&[1, 1]))],
                pooled.clone(),
            );
            let Value::Run { r, .. } = v else {
                return Err("internal".into());
            };
            return if keep { Ok(v) } else { self.flatten(n, r, &pooled) };
        }
        let op = if n.op_type == "ReduceMean" { "mean" } else { "sum" };
        Ok(self.emit(
            op,
            n,
            vec![Some(x)],
            vec![("dim", ints(&ax)), ("keepdim", AttrValue::Flag(keep))],
            out,
        ))
    }

    /// Reshape with a target known up to named dims: `[N, -1]` (or `[N, C*H*W]`) of an
    /// `[N, ...]` input is `flatten(x, 1)`; the same shape is nothing.
    pub(crate) fn reshape(&mut self, n: &NodeProto, ins: &[Option<Value>]) -> Result<Value, String> {
        let (x, s) = run(ins.first().and_then(Option::as_ref), "input")?;
        let t = ins
            .get(1)
            .and_then(Option::as_ref)
            .and_then(Value::ints)
            .ok_or("its target shape must fold to constants")?;
        let same = |k: usize, d: &Dim| match d {
            Dim::Known(0) => attr_int(n, "allowzero").unwrap_or(0) == 0 && k < s.len(),
            d => s.get(k).is_some_and(|sd| !matches!(sd, Dim::Unknown) && sd == d),
        };
        if t.len() == s.len() && t.iter().enumerate().all(|(k, d)| same(k, d)) {
            return Ok(Value::Run { r: x, shape: s });
        }
        let rest = s
            .get(1..)
            .and_then(|r| r.iter().try_fold(1i64, |acc, d| d.known().map(|v| acc * v)));
        let first_ok = t
            .first()
            .is_some_and(|d| same(0, d) || (*d == Dim::Known(-1) && rest.is_some()));
        let last_ok = match t.get(1) {
            Some(Dim::Known(-1)) => t[0] != Dim::Known(-1),
            Some(Dim::Known(v)) => rest == Some(*v),
            _ => false,
        };
        if t.len() == 2 && s.len() >= 2 && first_ok && last_ok {
            return self.flatten(n, x, &s);
        }
        Err(format!(
            "Reshape of {s:?} to {t:?} is not supported (only to [N, -1], a flatten)"
        ))
    }

    pub(crate) fn pad(&mut self, n: &NodeProto, ins: &[Option<Value>]) -> Result<Value, String> {
        let (x, s) = run(ins.first().and_then(Option::as_ref), "input")?;
        let pads = match ins.get(1).and_then(Option::as_ref) {
            Some(v) => v.known_ints().ok_or("its pads must fold to constants")?,
            None => attr_ints(n, "pads").unwrap_or_default(),
        };
        if ins.get(3).and_then(Option::as_ref).is_some() {
            return Err("Pad with axes is not supported".into());
        }
        let value = match ins.get(2).and_then(Option::as_ref) {
            Some(v) => v
                .floats()
                .and_then(|f| f.first().copied())
                .ok_or("its value must be a constant")?,
            None => attr_float(n, "value").unwrap_or(0.0),
        };
        let mode = match attr_str(n, "mode").as_deref().unwrap_or("constant") {
            "constant" => "constant",
            "reflect" => "reflect",
            "edge" => "replicate",
            m => return Err(format!("pad mode {m} is not supported")),
        };
        if s.len() != 4 || pads.len() != 8 || pads[0] != 0 || pads[1] != 0 || pads[4] != 0 || pads[5] != 0 {
            return Err(format!(
                "Pad {pads:?} of a rank-{} tensor is not supported (only H and W of NCHW)",
                s.len()
            ));
        }
        if pads.iter().any(|&v| i16::try_from(v).is_err()) {
            return Err(format!("Pad {pads:?}: torchlet's pad takes -32768..=32767"));
        }
        let p = [pads[3], pads[7], pads[2], pads[6]];
        let mut out = s.clone();
        for (d, (b, e)) in [(2, (pads[2], pads[6])), (3, (pads[3], pads[7]))] {
            out[d] = s[d].derived(format_args!("pad{b},{e}"), |l| l + b + e);
        }
        let attrs = vec![
            ("pad", ints(&p)),
            ("mode", AttrValue::Str(mode.into())),
            ("value", AttrValue::Float(short(value))),
        ];
        Ok(self.emit("pad", n, vec![Some(x)], attrs, out))
    }

    pub(crate) fn resize(&mut self, n: &NodeProto, ins: &[Option<Value>]) -> Result<Value, String> {
        let (x, s) = run(ins.first().and_then(Option::as_ref), "input")?;
        if s.len() != 4 {
            return Err("only 2-D (NCHW) resizing is supported".into());
        }
        let upsample = n.op_type == "Upsample";
        let (scales, sizes) = if upsample {
            (ins.get(1), None)
        } else {
            (ins.get(2), ins.get(3))
        };
        let mode = attr_str(n, "mode").unwrap_or_else(|| "nearest".into());
        let coord = attr_str(n, "coordinate_transformation_mode").unwrap_or_else(|| "half_pixel".into());
        let nearest = attr_str(n, "nearest_mode").unwrap_or_else(|| "round_prefer_floor".into());
        if attr_int(n, "antialias").unwrap_or(0) != 0 {
            return Err("antialiased resizing is not supported".into());
        }
        let mut attrs = match (mode.as_str(), coord.as_str()) {
            ("nearest", "asymmetric") if nearest == "floor" => vec![("mode", AttrValue::Str("nearest".into()))],
            ("nearest", _) if upsample => vec![("mode", AttrValue::Str("nearest".into()))],
            ("linear", "half_pixel" | "pytorch_half_pixel") if !upsample => vec![
                ("mode", AttrValue::Str("bilinear".into())),
                ("align_corners", AttrValue::Flag(false)),
            ],
            ("linear", "align_corners") if !upsample => vec![
                ("mode", AttrValue::Str("bilinear".into())),
                ("align_corners", AttrValue::Flag(true)),
            ],
            _ => {
                return Err(format!(
                    "{} mode {mode} with coordinates {coord} (nearest_mode {nearest}) is not PyTorch's nearest or bilinear",
                    n.op_type
                ))
            }
        };
        let scales = scales
            .and_then(Option::as_ref)
            .and_then(Value::floats)
            .filter(|v| !v.is_empty());
        let sizes = sizes
            .and_then(Option::as_ref)
            .and_then(Value::ints)
            .filter(|v| !v.is_empty());
        let mut out = s.clone();
        match (scales, sizes) {
            (Some(sc), _) if sc.len() == 4 && sc[0] == 1.0 && sc[1] == 1.0 && sc[2] > 0.0 && sc[3] > 0.0 => {
                for d in 2..4 {
                    out[d] = s[d].derived(format_args!("scale{}", sc[d]), |l| {
                        (l as f64 * sc[d] as f64).floor() as i64
                    });
                }
                attrs.push((
                    "scale_factor",
                    AttrValue::Floats(vec![short(sc[2]), short(sc[3])]),
                ));
            }
            (_, Some(sz)) if sz.len() == 4 => match (sz[2].known(), sz[3].known()) {
                (Some(h), Some(w)) if h > 0 && w > 0 => {
                    out[2] = Dim::Known(h);
                    out[3] = Dim::Known(w);
                    attrs.push(("size", ints(&[h, w])));
                }
                _ => {
                    return Err(
                        "output sizes that depend on the input size are not supported (give scales)".into(),
                    )
                }
            },
            _ => return Err("its scales must be constants [1, 1, sh, sw] (or sizes [N, C, h, w])".into()),
        }
        Ok(self.emit("interpolate", n, vec![Some(x)], attrs, out))
    }
}
