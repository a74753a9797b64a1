//! Output shapes of an imported [`GraphSpec`] for given input sizes (the arithmetic of
//! each registry op), and from them the smallest size each free input dim may take.

use torchlet::model::spec::{AttrValue, DimSpec, GraphSpec, NodeSpec, ValueRef};

fn attr<'a>(n: &'a NodeSpec, name: &str) -> Option<&'a AttrValue> {
    n.attrs.iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

fn ints(n: &NodeSpec, name: &str, default: &[i64]) -> Vec<i64> {
    match attr(n, name) {
        Some(AttrValue::Ints(v)) => v.clone(),
        Some(AttrValue::Int(v)) => vec![*v],
        _ => default.to_vec(),
    }
}

fn int(n: &NodeSpec, name: &str, default: i64) -> i64 {
    match attr(n, name) {
        Some(AttrValue::Int(v)) => *v,
        _ => default,
    }
}

fn flag(n: &NodeSpec, name: &str) -> bool {
    matches!(attr(n, name), Some(AttrValue::Flag(true)))
}

fn axis(a: i64, rank: usize) -> Result<usize, String> {
    let v = if a < 0 { a + rank as i64 } else { a };
    usize::try_from(v)
        .ok()
        .filter(|&v| v < rank)
        .ok_or(format!("dim {a} out of range for rank {rank}"))
}

/// The largest dim an input, a tensor or a node's output may have here: with it and
/// [`MAX_ATTR`], every size below is worked out in `i64` without overflow.
pub const MAX_DIM: usize = 1 << 28;

/// The largest magnitude of an integer attribute that shape inference accepts.
pub const MAX_ATTR: i64 = 1 << 31;

/// The shape of every node's output for inputs of sizes `inputs`, or why the graph
/// cannot run on them (a window larger than its input, channels that do not match,
/// a dim past [`MAX_DIM`]).
pub fn shapes(spec: &GraphSpec, inputs: &[Vec<usize>]) -> Result<Vec<Vec<usize>>, String> {
    for (k, (given, want)) in inputs.iter().zip(&spec.inputs).enumerate() {
        let fits = given.len() == want.dims.len()
            && given.iter().zip(&want.dims).all(|(&g, d)| match d {
                DimSpec::Fixed(v) => g == *v,
                DimSpec::Free { .. } => g >= 1,
            })
            && given.iter().all(|&g| g <= MAX_DIM);
        if !fits {
            return Err(format!(
                "input {k} has dims {given:?}, the graph takes {:?}",
                want.dims
            ));
        }
    }
    let mut out: Vec<Vec<usize>> = Vec::with_capacity(spec.nodes.len());
    for (i, n) in spec.nodes.iter().enumerate() {
        let get = |k: usize| -> Result<Vec<usize>, String> {
            let dims = match n.inputs.get(k).copied().flatten() {
                Some(ValueRef::Input(j)) => inputs.get(j).cloned().ok_or(format!("input {j} not given")),
                Some(ValueRef::Tensor(j)) => spec
                    .tensors
                    .get(j)
                    .map(|t| t.dims.clone())
                    .ok_or(format!("no tensor {j}")),
                Some(ValueRef::Node(j)) if j < i => Ok(out[j].clone()),
                r => Err(format!("bad input {r:?}")),
            }?;
            match dims.iter().any(|&d| d > MAX_DIM) {
                true => Err(format!("input {k} has dims {dims:?}, past {MAX_DIM}")),
                false => Ok(dims),
            }
        };
        let s = node_shape(n, &get).map_err(|e| format!("node {i} ({} {:?}): {e}", n.op, n.name))?;
        if s.contains(&0) {
            return Err(format!("node {i} ({} {:?}): output {s:?} is empty", n.op, n.name));
        }
        if s.iter().any(|&d| d > MAX_DIM) {
            return Err(format!(
                "node {i} ({} {:?}): output {s:?} has a dim past {MAX_DIM}",
                n.op, n.name
            ));
        }
        out.push(s);
    }
    Ok(out)
}

/// Element `k` of a per-dim list (its first for a single value), else `default`.
fn at(v: &[i64], k: usize, default: i64) -> i64 {
    v.get(k).or(v.first()).copied().unwrap_or(default)
}

/// Ops whose input must be NCHW.
const FOUR_D: &[&str] = &[
    "conv2d",
    "conv_transpose2d",
    "max_pool2d",
    "avg_pool2d",
    "adaptive_avg_pool2d",
    "adaptive_max_pool2d",
    "pad",
    "interpolate",
];

/// A size worked out in `i64` as a dim: negative ones become 0 (an empty output, which
/// [`shapes`] refuses), ones past [`MAX_DIM`] are refused.
fn to_dim(v: i64) -> Result<usize, String> {
    match usize::try_from(v.max(0)) {
        Ok(d) if d <= MAX_DIM => Ok(d),
        _ => Err(format!("an output dim of {v}, past {MAX_DIM}")),
    }
}

fn node_shape(n: &NodeSpec, get: &dyn Fn(usize) -> Result<Vec<usize>, String>) -> Result<Vec<usize>, String> {
    for (name, v) in &n.attrs {
        let too_big = match v {
            AttrValue::Int(v) => v.unsigned_abs() > MAX_ATTR as u64,
            AttrValue::Ints(v) => v.iter().any(|v| v.unsigned_abs() > MAX_ATTR as u64),
            _ => false,
        };
        if too_big {
            return Err(format!("attribute {name} {v:?} is past {MAX_ATTR} in magnitude"));
        }
    }
    let groups = int(n, "groups", 1);
    if groups < 1 {
        return Err(format!("groups {groups} is below 1"));
    }
    let x = get(0)?;
    let rank = x.len();
    let need = if FOUR_D.contains(&n.op.as_str()) {
        Some(4)
    } else {
        (n.op == "conv1d").then_some(3)
    };
    if need.is_some_and(|r| r != rank) {
        return Err(format!("input {x:?} has the wrong rank"));
    }
    if matches!(n.op.as_str(), "conv2d" | "conv1d" | "conv_transpose2d" | "linear") {
        let w = get(1)?;
        let want = if n.op == "linear" { 2 } else { rank };
        if w.len() != want {
            return Err(format!("weight {w:?} does not fit input {x:?}"));
        }
    }
    let window = |l: usize, k: i64, s: i64, p: i64, d: i64, ceil: bool| -> Result<usize, String> {
        let span = l as i64 + 2 * p - d * (k - 1) - 1;
        if span < 0 || s < 1 {
            return Err(format!(
                "a window of {k} does not fit {l} (+{p} padding each side)"
            ));
        }
        let mut o = if ceil {
            (span + s - 1) / s + 1
        } else {
            span / s + 1
        };
        if ceil && (o - 1) * s >= l as i64 + p {
            o -= 1;
        }
        to_dim(o)
    };
    Ok(match n.op.as_str() {
        "conv2d" | "conv1d" => {
            let w = get(1)?;
            let nd = rank - 2;
            if x[1] as u64 != w[1] as u64 * groups as u64 {
                return Err(format!("input {x:?} does not fit weight {w:?}"));
            }
            let (s, p, d) = (
                ints(n, "stride", &[1]),
                ints(n, "padding", &[0]),
                ints(n, "dilation", &[1]),
            );
            let mut o = vec![x[0], w[0]];
            for k in 0..nd {
                o.push(window(
                    x[2 + k],
                    w[2 + k] as i64,
                    at(&s, k, 1),
                    at(&p, k, 0),
                    at(&d, k, 1),
                    false,
                )?);
            }
            o
        }
        "conv_transpose2d" => {
            let w = get(1)?;
            let (s, p) = (ints(n, "stride", &[1]), ints(n, "padding", &[0]));
            let (op, d) = (ints(n, "output_padding", &[0]), ints(n, "dilation", &[1]));
            let mut o = vec![x[0], to_dim(w[1] as i64 * groups)?];
            for k in 0..2 {
                let l = (x[2 + k] as i64 - 1) * at(&s, k, 1) - 2 * at(&p, k, 0)
                    + at(&d, k, 1) * (w[2 + k] as i64 - 1)
                    + at(&op, k, 0)
                    + 1;
                o.push(to_dim(l)?);
            }
            o
        }
        "max_pool2d" | "avg_pool2d" => {
            let (k, s, p) = (
                ints(n, "kernel_size", &[1]),
                ints(n, "stride", &[]),
                ints(n, "padding", &[0]),
            );
            let ceil = flag(n, "ceil_mode");
            let (k0, k1) = (at(&k, 0, 1), at(&k, 1, 1));
            let (h, w) = (
                window(x[2], k0, at(&s, 0, k0), at(&p, 0, 0), 1, ceil)?,
                window(x[3], k1, at(&s, 1, k1), at(&p, 1, 0), 1, ceil)?,
            );
            vec![x[0], x[1], h, w]
        }
        "adaptive_avg_pool2d" | "adaptive_max_pool2d" => {
            let o = ints(n, "output_size", &[1]);
            vec![x[0], x[1], to_dim(at(&o, 0, 1))?, to_dim(at(&o, 1, 1))?]
        }
        "pad" => {
            let p = ints(n, "pad", &[0; 4]);
            let add = |l: usize, a: i64, b: i64| to_dim(l as i64 + a + b);
            vec![
                x[0],
                x[1],
                add(x[2], at(&p, 2, 0), at(&p, 3, 0))?,
                add(x[3], at(&p, 0, 0), at(&p, 1, 0))?,
            ]
        }
        "interpolate" => match attr(n, "scale_factor") {
            Some(AttrValue::Floats(f)) if !f.is_empty() => {
                let (a, b) = (f[0], f[f.len() - 1]);
                vec![
                    x[0],
                    x[1],
                    (x[2] as f64 * a).floor() as usize,
                    (x[3] as f64 * b).floor() as usize,
                ]
            }
            _ => {
                let s = ints(n, "size", &[0]);
                vec![x[0], x[1], to_dim(at(&s, 0, 0))?, to_dim(at(&s, 1, 0))?]
            }
        },
        "flatten" => {
            let sd = axis(int(n, "start_dim", 0), rank)?;
            let mut o = x[..sd].to_vec();
            let product = x[sd..]
                .iter()
                .try_fold(1usize, |a, &d| a.checked_mul(d).filter(|&p| p <= MAX_DIM));
            o.push(product.ok_or(format!("flattening {x:?} makes a dim past {MAX_DIM}"))?);
            o
        }
        "linear" => {
            let w = get(1)?;
            if x.last() != w.get(1) {
                return Err(format!("input {x:?} does not fit weight {w:?}"));
            }
            let mut o = x.clone();
            *o.last_mut().unwrap_or(&mut 0) = w[0];
            o
        }
        "mean" | "sum" => {
            let dims: Vec<usize> = ints(n, "dim", &[])
                .iter()
                .map(|&a| axis(a, rank))
                .collect::<Result<_, _>>()?;
            let keep = flag(n, "keepdim");
            x.iter()
                .enumerate()
                .filter_map(|(k, &d)| {
                    if !dims.contains(&k) {
                        Some(d)
                    } else {
                        keep.then_some(1)
                    }
                })
                .collect()
        }
        "cat" => {
            let y = get(1)?;
            let a = axis(int(n, "dim", 0), rank)?;
            if y.len() != rank || (0..rank).any(|k| k != a && x[k] != y[k]) {
                return Err(format!("cannot concatenate {x:?} and {y:?} along {a}"));
            }
            let mut o = x.clone();
            o[a] += y[a];
            o
        }
        "permute" => ints(n, "dims", &[])
            .iter()
            .map(|&p| axis(p, rank).map(|p| x[p]))
            .collect::<Result<_, _>>()?,
        "add" | "sub" | "mul" | "div" => {
            let y = get(1)?;
            // The engine's own rule (ranks past its maximum are refused there too).
            let shape = |d: &[usize]| torchlet::Shape::new(d).map_err(|e| e.to_string());
            let o = shape(&x)?.broadcast(&shape(&y)?);
            o.ok_or(format!("shapes {x:?} and {y:?} do not broadcast"))?
                .dims()
                .to_vec()
        }
        "unsqueeze" => {
            let d = axis(int(n, "dim", 0), rank + 1)?;
            let mut o = x.clone();
            o.insert(d, 1);
            o
        }
        "squeeze" => {
            let d = axis(int(n, "dim", 0), rank)?;
            let mut o = x.clone();
            if o[d] == 1 {
                o.remove(d);
            }
            o
        }
        "slice" => {
            let d = axis(int(n, "dim", 0), rank)?;
            let len = x[d] as i64;
            let b = |v: i64| (if v < 0 { v.saturating_add(len) } else { v }).clamp(0, len);
            let (start, end, step) = (b(int(n, "start", 0)), b(int(n, "end", len)), int(n, "step", 1));
            if step < 1 {
                return Err(format!("slice step {step}"));
            }
            let mut o = x.clone();
            o[d] = to_dim((end - start).max(0).saturating_add(step - 1) / step)?;
            o
        }
        "batch_norm" => {
            if rank < 2 || get(1)?.first() != Some(&x[1]) {
                return Err(format!("input {x:?} does not have the BatchNorm's channels"));
            }
            x
        }
        _ => x,
    })
}

/// The largest size the importer tries for a free input dim when it looks for the
/// smallest one that fits.
pub const SEARCH_LIMIT: usize = 4096;

/// Sets each free input dim's minimum: 1 for the batch (dim 0); for the others the
/// smallest size (up to [`SEARCH_LIMIT`]) at which every node's output is non-empty
/// and fits, found with all other free dims at the smallest common size that works.
/// When none fits, the error says why at the largest size, naming the node.
pub(crate) fn set_min_sizes(spec: &mut GraphSpec) -> Result<(), String> {
    const LIMIT: usize = SEARCH_LIMIT;
    let free: Vec<(usize, usize)> = spec
        .inputs
        .iter()
        .enumerate()
        .flat_map(|(i, inp)| {
            inp.dims
                .iter()
                .enumerate()
                .filter(|(k, d)| *k > 0 && matches!(d, DimSpec::Free { .. }))
                .map(move |(k, _)| (i, k))
        })
        .collect();
    if free.is_empty() {
        return Ok(());
    }
    let sizes = |over: &[((usize, usize), usize)], base: usize| -> Vec<Vec<usize>> {
        spec.inputs
            .iter()
            .enumerate()
            .map(|(i, inp)| {
                inp.dims
                    .iter()
                    .enumerate()
                    .map(|(k, d)| match d {
                        DimSpec::Fixed(v) => *v,
                        DimSpec::Free { .. } if k == 0 => 1,
                        DimSpec::Free { .. } => over
                            .iter()
                            .find(|(ik, _)| *ik == (i, k))
                            .map_or(base, |(_, v)| *v),
                    })
                    .collect()
            })
            .collect()
    };
    let Some(base) = (1..=LIMIT).find(|&b| shapes(spec, &sizes(&[], b)).is_ok()) else {
        let why = shapes(spec, &sizes(&[], LIMIT)).err().unwrap_or_default();
        return Err(format!(
            "no input size up to {LIMIT} fits the graph (at {LIMIT}, {why})"
        ));
    };
    let mins: Vec<usize> = free
        .iter()
        .map(|&f| {
            (1..=base)
                .find(|&v| shapes(spec, &sizes(&[(f, v)], base)).is_ok())
                .unwrap_or(base)
        })
        .collect();
    for (&(i, k), m) in free.iter().zip(mins) {
        spec.inputs[i].dims[k] = DimSpec::Free { min: m };
    }
    Ok(())
}
