//! `Slice` and `Split` of computed tensors (GhostNet's channel halves, ShuffleNet's
//! split), each axis one torchlet `slice` node. (Slices of constants, the shape
//! arithmetic around Reshape, are folded in `fold.rs`.)

use crate::fold::{attr_int, attr_ints};
use crate::import::Importer;
use crate::ops::{norm_axis, run};
use crate::tensor::{Dim, Value};
use onnx_protobuf::NodeProto;
use torchlet::model::spec::{AttrValue, ValueRef};

/// Python's rule for a bound (negative counts from the end, clamped to `0..=len`).
fn bound(v: i64, len: i64) -> i64 {
    let v = if v < 0 { v.saturating_add(len) } else { v };
    v.clamp(0, len)
}

/// The length of `start:end:step` along a dim of length `len`, when known.
fn count(len: &Dim, start: i64, end: i64, step: i64) -> Dim {
    match len {
        Dim::Known(l) => {
            let (a, b) = (bound(start, *l), bound(end, *l));
            Dim::Known((b - a).max(0).saturating_add(step - 1) / step)
        }
        _ => Dim::Unknown,
    }
}

/// The most parts a split may have (each is a node).
const MAX_PARTS: usize = 4096;

/// The computed tensor a Slice or Split reads.
fn run_input(ins: &[Option<Value>]) -> Result<(ValueRef, Vec<Dim>), String> {
    run(ins.first().and_then(Option::as_ref), "input")
}

/// A dim's size, which an equal split needs.
fn known(d: &Dim, axis: usize) -> Result<i64, String> {
    match d {
        Dim::Known(v) if *v >= 1 => Ok(*v),
        _ => Err(format!("an equal split of axis {axis}, whose size is not known")),
    }
}

impl Importer<'_> {
    /// One `slice` node along `axis`, or nothing when the slice takes the whole dim.
    fn slice_axis(
        &mut self,
        n: &NodeProto,
        (x, mut shape): (ValueRef, Vec<Dim>),
        axis: usize,
        (start, end, step): (i64, i64, i64),
    ) -> Result<(ValueRef, Vec<Dim>), String> {
        if step < 1 {
            return Err(format!(
                "a step of {step} is not supported (only forward steps of 1 or more)"
            ));
        }
        let whole = start == 0 && step == 1 && (end >= i32::MAX as i64 || Dim::Known(end) == shape[axis]);
        if whole {
            return Ok((x, shape));
        }
        // Bounds past any dim mean the same clamped (and stay in the attribute limits).
        let far = i32::MAX as i64;
        let (start, end, step) = (start.clamp(-far, far), end.clamp(-far, far), step.min(far));
        shape[axis] = count(&shape[axis], start, end, step);
        if shape[axis] == Dim::Known(0) {
            return Err(format!("the slice {start}:{end}:{step} of axis {axis} is empty"));
        }
        let attrs = vec![
            ("dim", AttrValue::Int(axis as i64)),
            ("start", AttrValue::Int(start)),
            ("end", AttrValue::Int(end)),
            ("step", AttrValue::Int(step)),
        ];
        match self.emit("slice", n, vec![Some(x)], attrs, shape) {
            Value::Run { r, shape } => Ok((r, shape)),
            _ => Err("a slice made no computed tensor".into()),
        }
    }

    /// ONNX `Slice` of a computed tensor: `starts`, `ends`, `axes`, `steps` constant
    /// inputs (opset 10 on) or attributes (before).
    pub(crate) fn slice(&mut self, n: &NodeProto, ins: &[Option<Value>]) -> Result<Value, String> {
        let (r, shape) = run_input(ins)?;
        let list = |k: usize, name: &str| -> Result<Option<Vec<i64>>, String> {
            match ins.get(k).and_then(Option::as_ref) {
                Some(v) => v
                    .known_ints()
                    .map(Some)
                    .ok_or(format!("its {name} must be constant integers")),
                None => Ok(attr_ints(n, name)),
            }
        };
        let starts = list(1, "starts")?.ok_or("its starts are missing")?;
        let ends = list(2, "ends")?.ok_or("its ends are missing")?;
        let rank = shape.len();
        let axes = list(3, "axes")?.unwrap_or_else(|| (0..starts.len() as i64).collect());
        let steps = list(4, "steps")?.unwrap_or_else(|| vec![1; starts.len()]);
        if [ends.len(), axes.len(), steps.len()]
            .iter()
            .any(|&l| l != starts.len())
        {
            return Err("its starts, ends, axes and steps differ in length".into());
        }
        let mut v = (r, shape.clone());
        for k in 0..starts.len() {
            let axis = norm_axis(axes[k], rank)?;
            v = self.slice_axis(n, v, axis, (starts[k], ends[k], steps[k]))?;
        }
        Ok(Value::Run { r: v.0, shape: v.1 })
    }

    /// ONNX `Unsqueeze` and `Squeeze` of a computed tensor: one view node per axis
    /// (`axes` a constant input from opset 13, an attribute before). Squeeze without
    /// axes takes every dim of a known size 1.
    pub(crate) fn unsqueeze(&mut self, n: &NodeProto, ins: &[Option<Value>]) -> Result<Value, String> {
        let (mut r, mut shape) = run_input(ins)?;
        let given = match ins.get(1).and_then(Option::as_ref) {
            Some(v) => Some(v.known_ints().ok_or("its axes must be constant integers")?),
            None => attr_ints(n, "axes"),
        };
        let squeeze = n.op_type == "Squeeze";
        let rank = if squeeze {
            shape.len()
        } else {
            shape.len() + given.as_ref().map_or(0, Vec::len)
        };
        let mut axes: Vec<usize> = match given {
            Some(a) => a.iter().map(|&a| norm_axis(a, rank)).collect::<Result<_, _>>()?,
            None if squeeze => (0..rank).filter(|&k| shape[k] == Dim::Known(1)).collect(),
            None => return Err("its axes are missing".into()),
        };
        axes.sort_unstable();
        axes.dedup();
        if squeeze {
            axes.reverse();
        }
        for a in axes {
            let op = if squeeze { "squeeze" } else { "unsqueeze" };
            if squeeze {
                if shape[a] != Dim::Known(1) {
                    return Err(format!("axis {a} of {shape:?} is not known to be 1"));
                }
                shape.remove(a);
            } else {
                shape.insert(a, Dim::Known(1));
            }
            let attrs = vec![("dim", AttrValue::Int(a as i64))];
            match self.emit(op, n, vec![Some(r)], attrs, shape.clone()) {
                Value::Run { r: next, .. } => r = next,
                _ => return Err("a view made no computed tensor".into()),
            }
        }
        Ok(Value::Run { r, shape })
    }

    /// ONNX `Split` of a computed tensor into its outputs, one slice each: sizes from
    /// the `split` input (opset 13 on) or attribute, else equal parts of a known dim.
    pub(crate) fn split(&mut self, n: &NodeProto, ins: &[Option<Value>]) -> Result<Vec<Value>, String> {
        let (r, shape) = run_input(ins)?;
        let axis = norm_axis(attr_int(n, "axis").unwrap_or(0), shape.len())?;
        let parts = n.output.len();
        let sizes = match ins.get(1).and_then(Option::as_ref) {
            Some(v) => v
                .known_ints()
                .ok_or("its split sizes must be constant integers")?,
            None => match attr_ints(n, "split") {
                Some(s) => s,
                None => {
                    let len = known(&shape[axis], axis)?;
                    let p = parts.max(1) as i64;
                    let each = len.saturating_add(p - 1) / p;
                    (0..p).map(|k| each.min(len - k * each)).collect()
                }
            },
        };
        if sizes.len() != parts {
            return Err(format!("split sizes {sizes:?} for {parts} outputs"));
        }
        self.split_sizes(n, (r, shape), axis, &sizes)
    }

    /// ONNX `SplitToSequence` (how the dynamo exporter writes `x.chunk(2, dim=1)`): the
    /// parts, kept for the `SequenceAt` nodes that read them. A scalar `split` is the
    /// size of each part (the last may be smaller), a list the sizes; none is parts of 1.
    pub(crate) fn split_to_sequence(
        &mut self,
        n: &NodeProto,
        ins: &[Option<Value>],
    ) -> Result<Vec<Value>, String> {
        let (r, shape) = run_input(ins)?;
        let axis = norm_axis(attr_int(n, "axis").unwrap_or(0), shape.len())?;
        let len = known(&shape[axis], axis)?;
        let sizes = match ins.get(1).and_then(Option::as_ref) {
            Some(v) => {
                let s = v.known_ints().ok_or("its split must be constant integers")?;
                match (v.dims().is_empty(), s.as_slice()) {
                    (true, [each]) if *each >= 1 => {
                        let k = len.saturating_add(each - 1) / each;
                        if k > MAX_PARTS as i64 {
                            return Err(format!("a split into {k} parts (at most {MAX_PARTS})"));
                        }
                        (0..k).map(|i| (*each).min(len - i * each)).collect()
                    }
                    (false, _) => s,
                    _ => return Err(format!("a split of {s:?}")),
                }
            }
            None if len > MAX_PARTS as i64 => {
                return Err(format!("a split into {len} parts (at most {MAX_PARTS})"))
            }
            None if attr_int(n, "keepdims").unwrap_or(1) != 0 => vec![1; len as usize],
            None => return Err("SplitToSequence with keepdims 0 (squeezed parts) is not supported".into()),
        };
        self.split_sizes(n, (r, shape), axis, &sizes)
    }

    /// `SequenceAt` of a sequence `SplitToSequence` made, at a constant position.
    pub(crate) fn sequence_at(&mut self, n: &NodeProto) -> Result<(), String> {
        let seq = n.input.first().and_then(|s| self.sequences.get(s));
        let seq = seq.ok_or("its sequence is not one a SplitToSequence of a computed tensor made")?;
        let at = n
            .input
            .get(1)
            .and_then(|i| self.values.get(i))
            .and_then(Value::known_ints);
        let k = match at.as_deref() {
            Some([k]) => *k,
            _ => return Err("its position must be a constant integer".into()),
        };
        let len = seq.len() as i64;
        let i = if k < 0 { k + len } else { k };
        let v = usize::try_from(i)
            .ok()
            .and_then(|i| seq.get(i))
            .ok_or(format!("position {k} of a sequence of {len}"))?
            .clone();
        let out = n.output.first().ok_or("a node without outputs")?;
        self.values.insert(out.clone(), v);
        Ok(())
    }

    /// Consecutive slices of `sizes` along `axis`.
    fn split_sizes(
        &mut self,
        n: &NodeProto,
        (r, shape): (ValueRef, Vec<Dim>),
        axis: usize,
        sizes: &[i64],
    ) -> Result<Vec<Value>, String> {
        if sizes.is_empty() || sizes.iter().any(|&s| s < 1) || sizes.len() > MAX_PARTS {
            return Err(format!("split sizes {sizes:?}"));
        }
        let mut out = Vec::with_capacity(sizes.len());
        let mut at = 0i64;
        for &s in sizes {
            let end = at.checked_add(s).ok_or("split sizes overflow")?;
            let (r, shape) = self.slice_axis(n, (r, shape.clone()), axis, (at, end, 1))?;
            out.push(Value::Run { r, shape });
            at = end;
        }
        Ok(out)
    }
}
