//! Writing a [`GraphSpec`] as a model file (`std`): [`check_spec`] refuses what the
//! parser would refuse (and says which input, tensor, node or output), [`encode`]
//! writes the layout of [`crate::model`].

use super::error::{ModelResult, Site};
use super::file::{Attr, ModelFile};
use super::format::*;
use super::limits;
use super::spec::{AttrValue, GraphSpec, InputSpec, Int8Spec, NodeSpec, TensorSpec};
use super::{DimSpec, TensorKind, ValueRef};
use crate::error::Error;
use crate::io::crc32;
use crate::shape::{Shape, MAX_RANK};
use std::vec::Vec;

fn bad(what: &'static str, value: usize) -> Error {
    Error::InvalidParam {
        op: "model",
        what: what.strip_prefix("model: ").unwrap_or(what),
        value: value as i64,
    }
}

fn ref_index(r: ValueRef) -> usize {
    match r {
        ValueRef::Input(k) | ValueRef::Tensor(k) | ValueRef::Node(k) => k,
    }
}

fn fits(n: usize, max: usize, what: &'static str) -> Result<(), Error> {
    if n > max {
        Err(bad(what, n))
    } else {
        Ok(())
    }
}

/// Checks that `spec` can be written and would run: ranks and sizes in range, data
/// of the right length, op names in the registry, no more inputs than the op takes,
/// every node reading only earlier nodes, attribute names unique, at least one
/// output. The error names the first input, tensor, node or output at fault.
pub fn check_spec(spec: &GraphSpec) -> ModelResult<'_, ()> {
    let (ni, nt, nn) = (spec.inputs.len(), spec.tensors.len(), spec.nodes.len());
    let file = Site::File;
    for n in [ni, nt, nn, spec.outputs.len()] {
        fits(
            n,
            MAX_REF_INDEX,
            "model: more records than a value reference can name",
        )
        .map_err(|e| file.error(e))?;
    }
    if spec.outputs.is_empty() {
        return Err(file.error(bad(NO_OUTPUT, 0)));
    }
    fits(ni + nt + nn, MAX_RECORDS, TOO_MANY_RECORDS).map_err(|e| file.error(e))?;
    let mut seen = std::collections::HashSet::new();
    for (index, t) in spec.tensors.iter().enumerate() {
        if !seen.insert(t.name.as_str()) {
            return Err(Site::Tensor { index, name: &t.name }.error(bad(DUP_TENSOR, index)));
        }
    }

    for (index, inp) in spec.inputs.iter().enumerate() {
        let site = Site::Input {
            index,
            name: &inp.name,
        };
        let at = |e| site.error(e);
        fits(inp.name.len(), 255, "model: input name longer than 255 bytes").map_err(at)?;
        fits(inp.dims.len(), MAX_RANK, BAD_RANK).map_err(at)?;
        let mut sizes = [0usize; MAX_RANK];
        for (s, d) in sizes.iter_mut().zip(&inp.dims) {
            *s = match *d {
                DimSpec::Fixed(n) | DimSpec::Free { min: n } => n,
            };
            fits(*s, u32::MAX as usize, BAD_SIZE).map_err(at)?;
        }
        Shape::new(&sizes[..inp.dims.len()]).map_err(at)?;
    }
    for (index, t) in spec.tensors.iter().enumerate() {
        let site = Site::Tensor { index, name: &t.name };
        let at = |e| site.error(e);
        fits(
            t.name.len(),
            u16::MAX as usize,
            "model: tensor name longer than 65,535 bytes",
        )
        .map_err(at)?;
        fits(t.dims.len(), MAX_RANK, BAD_RANK).map_err(at)?;
        for &d in &t.dims {
            fits(d, u32::MAX as usize, BAD_SIZE).map_err(at)?;
        }
        let shape = Shape::new(&t.dims).map_err(at)?;
        if shape.numel() != t.data.len() {
            return Err(at(Error::ShapeMismatch {
                op: "model",
                what: "tensor data has {found} values, its dims hold {expected}",
                expected: shape.numel(),
                found: t.data.len(),
            }));
        }
        if let Some(q) = &t.int8 {
            check_int8(t, q, shape.numel()).map_err(at)?;
        }
    }
    for (index, n) in spec.nodes.iter().enumerate() {
        let site = Site::Node {
            index,
            op: &n.op,
            name: &n.name,
        };
        let at = |e| site.error(e);
        let takes = op_inputs(&n.op).ok_or(at(bad(UNKNOWN_OP, n.op.len())))?;
        fits(n.inputs.len(), takes.min(MAX_NODE_INPUTS), TOO_MANY_INPUTS).map_err(at)?;
        fits(n.op.len(), 255, UNKNOWN_OP).map_err(at)?;
        fits(
            n.name.len(),
            u16::MAX as usize,
            "model: node name longer than 65,535 bytes",
        )
        .map_err(at)?;
        for r in n.inputs.iter().flatten() {
            if let Some(why) = check_ref(*r, ni, nt, index) {
                return Err(at(bad(why, ref_index(*r))));
            }
        }
        fits(n.attrs.len(), 255, "model: more than 255 attributes").map_err(at)?;
        for (k, (name, v)) in n.attrs.iter().enumerate() {
            fits(name.len(), 255, "model: attribute name longer than 255 bytes").map_err(at)?;
            if n.attrs[..k].iter().any(|(m, _)| m == name) {
                return Err(at(bad(DUP_ATTR, k)));
            }
            check_limits(name, v).map_err(at)?;
            let len = value_bytes(v).len();
            fits(len, u32::MAX as usize, "model: attribute value longer than 4 GiB").map_err(at)?;
        }
    }
    for (index, r) in spec.outputs.iter().enumerate() {
        if let Some(why) = check_ref(*r, ni, nt, nn) {
            return Err(Site::Output { index }.error(bad(why, ref_index(*r))));
        }
    }
    Ok(())
}

fn check_int8(t: &TensorSpec, q: &Int8Spec, numel: usize) -> Result<(), Error> {
    if t.kind != (TensorKind::Param { trainable: false }) {
        return Err(bad(INT8_KIND, 0));
    }
    let Some(&ch) = t.dims.first() else {
        return Err(bad(INT8_RANK, 0));
    };
    if q.scales.len() != ch || q.q.len() != numel {
        return Err(bad(INT8_LEN, q.scales.len()));
    }
    match q.scales.iter().position(|s| !s.is_finite()) {
        Some(k) => Err(bad(INT8_SCALE, k)),
        None => Ok(()),
    }
}

/// [`limits::check`] of attribute `name` with value `v`.
fn check_limits(name: &str, v: &AttrValue) -> Result<(), Error> {
    match v {
        AttrValue::Int(i) => limits::check(name, limits::Values::Ints(1, &|_| *i)),
        AttrValue::Ints(l) => limits::check(name, limits::Values::Ints(l.len(), &|k| l[k])),
        AttrValue::Float(f) => limits::check(name, limits::Values::Floats(1, &|_| *f)),
        AttrValue::Floats(l) => limits::check(name, limits::Values::Floats(l.len(), &|k| l[k])),
        AttrValue::Flag(_) | AttrValue::Str(_) => limits::check(name, limits::Values::Other),
    }
}

fn type_code(v: &AttrValue) -> u8 {
    match v {
        AttrValue::Int(_) => T_INT,
        AttrValue::Ints(_) => T_INTS,
        AttrValue::Float(_) => T_FLOAT,
        AttrValue::Floats(_) => T_FLOATS,
        AttrValue::Flag(_) => T_FLAG,
        AttrValue::Str(_) => T_STR,
    }
}

fn value_bytes(v: &AttrValue) -> Vec<u8> {
    match v {
        AttrValue::Int(i) => i.to_le_bytes().to_vec(),
        AttrValue::Ints(l) => l.iter().flat_map(|i| i.to_le_bytes()).collect(),
        AttrValue::Float(f) => f.to_le_bytes().to_vec(),
        AttrValue::Floats(l) => l.iter().flat_map(|f| f.to_le_bytes()).collect(),
        AttrValue::Flag(b) => std::vec![*b as u8],
        AttrValue::Str(s) => s.as_bytes().to_vec(),
    }
}

fn pad(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

fn u32le(out: &mut Vec<u8>, v: usize) {
    out.extend_from_slice(&(v as u32).to_le_bytes());
}

/// Checks `spec` ([`check_spec`]) and writes it as a model file.
pub fn encode(spec: &GraphSpec) -> ModelResult<'_, Vec<u8>> {
    check_spec(spec)?;
    let mut out = Vec::new();
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    u32le(&mut out, 0); // total length, filled in below
    for n in [
        spec.inputs.len(),
        spec.tensors.len(),
        spec.nodes.len(),
        spec.outputs.len(),
    ] {
        u32le(&mut out, n);
    }
    for inp in &spec.inputs {
        out.extend_from_slice(&[inp.dims.len() as u8, inp.name.len() as u8, 0, 0]);
        for d in &inp.dims {
            let (kind, size) = match *d {
                DimSpec::Fixed(n) => (0, n),
                DimSpec::Free { min } => (1, min),
            };
            u32le(&mut out, kind);
            u32le(&mut out, size);
        }
        out.extend_from_slice(inp.name.as_bytes());
        pad(&mut out);
    }
    for t in &spec.tensors {
        let kind = match t.kind {
            _ if t.int8.is_some() => K_INT8,
            TensorKind::Param { trainable: false } => K_FROZEN,
            TensorKind::Param { trainable: true } => K_TRAIN,
            TensorKind::Buffer => K_BUFFER,
        };
        out.extend_from_slice(&[t.dims.len() as u8, kind]);
        out.extend_from_slice(&(t.name.len() as u16).to_le_bytes());
        for &d in &t.dims {
            u32le(&mut out, d);
        }
        out.extend_from_slice(t.name.as_bytes());
        pad(&mut out);
        match &t.int8 {
            Some(q) => {
                for v in &q.scales {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                out.extend(q.q.iter().map(|&v| v as u8));
                pad(&mut out);
            }
            None => {
                for v in &t.data {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
    }
    for n in &spec.nodes {
        out.extend_from_slice(&[n.inputs.len() as u8, n.attrs.len() as u8, n.op.len() as u8, 0]);
        out.extend_from_slice(&(n.name.len() as u16).to_le_bytes());
        out.extend_from_slice(&[0, 0]);
        for r in &n.inputs {
            out.extend_from_slice(&ref_word(*r).to_le_bytes());
        }
        out.extend_from_slice(n.op.as_bytes());
        out.extend_from_slice(n.name.as_bytes());
        pad(&mut out);
        for (name, v) in &n.attrs {
            let bytes = value_bytes(v);
            out.extend_from_slice(&[type_code(v), name.len() as u8, 0, 0]);
            u32le(&mut out, bytes.len());
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(&bytes);
            pad(&mut out);
        }
    }
    for r in &spec.outputs {
        out.extend_from_slice(&ref_word(Some(*r)).to_le_bytes());
    }
    let total = out.len() + CRC_LEN;
    if total > u32::MAX as usize {
        return Err(Site::File.error(Error::Overflow { op: "model encode" }));
    }
    out[8..12].copy_from_slice(&(total as u32).to_le_bytes());
    let crc = crc32(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

impl ModelFile<'_> {
    /// The file as host data again (`std`): `encode(&file.to_spec())` gives back the
    /// same bytes (for tools that list or edit a model).
    pub fn to_spec(&self) -> GraphSpec {
        let value = |a: Attr<'_>| match a {
            Attr::Int(v) => AttrValue::Int(v),
            Attr::Ints(l) => AttrValue::Ints((0..l.len()).filter_map(|k| l.int(k)).collect()),
            Attr::Float(v) => AttrValue::Float(v),
            Attr::Floats(l) => AttrValue::Floats((0..l.len()).filter_map(|k| l.float(k)).collect()),
            Attr::Flag(b) => AttrValue::Flag(b),
            Attr::Str(s) => AttrValue::Str(s.into()),
        };
        GraphSpec {
            inputs: self
                .inputs()
                .map(|i| InputSpec {
                    name: i.name.into(),
                    dims: i.dims().to_vec(),
                })
                .collect(),
            tensors: self
                .tensors()
                .map(|t| TensorSpec {
                    name: t.name.into(),
                    kind: t.kind,
                    dims: t.shape.dims().to_vec(),
                    data: t.values().collect(),
                    int8: t.int8.then(|| Int8Spec {
                        scales: (0..t.channels()).map(|c| t.scale(c)).collect(),
                        q: t.int8_weights().iter().map(|&b| b as i8).collect(),
                    }),
                })
                .collect(),
            nodes: self
                .nodes()
                .map(|n| NodeSpec {
                    op: n.op.into(),
                    name: n.name.into(),
                    inputs: n.inputs().collect(),
                    attrs: n.attrs.iter().map(|a| (a.name.into(), value(a.value))).collect(),
                })
                .collect(),
            outputs: self.outputs().collect(),
        }
    }
}
