//! Reading a model file from a byte slice without copying: [`ModelFile::parse`] checks
//! everything once (length, magic, version, checksum, every record's bounds and
//! contents) and the iterators then hand out views into the bytes.

use super::attrs::NodeAttrs;
use super::error::{ModelResult, Site};
use super::format::*;
use super::limits;
use super::unique::first_duplicate;
use super::{DimSpec, TensorKind, ValueRef};
use crate::error::Error;
use crate::io::crc32;
use crate::shape::{Shape, MAX_RANK};

pub use super::attrs::{Attr, AttrRecord};

/// A checked model file borrowed from its bytes.
#[derive(Clone, Copy, Debug)]
pub struct ModelFile<'m> {
    bytes: &'m [u8],
    counts: [usize; 4],
    tensors_at: usize,
    nodes_at: usize,
    outputs_at: usize,
}

/// A graph input: its name and dims.
#[derive(Clone, Copy, Debug)]
pub struct InputRecord<'m> {
    /// Position among the inputs.
    pub index: usize,
    /// Its name in the source model.
    pub name: &'m str,
    rank: usize,
    dims: [DimSpec; MAX_RANK],
}

impl InputRecord<'_> {
    /// Its dims (fixed or free with a minimum).
    pub fn dims(&self) -> &[DimSpec] {
        &self.dims[..self.rank]
    }

    /// The smallest shape it accepts (free dims at their minimum).
    pub fn min_shape(&self) -> Shape {
        let mut d = [0usize; MAX_RANK];
        for (o, dim) in d.iter_mut().zip(self.dims()) {
            *o = match *dim {
                DimSpec::Fixed(n) | DimSpec::Free { min: n } => n,
            };
        }
        // Checked when the file was parsed.
        Shape::new(&d[..self.rank]).unwrap_or_default()
    }
}

/// A parameter or buffer: a view into the file's bytes.
#[derive(Clone, Copy, Debug)]
pub struct TensorRecord<'m> {
    /// Position among the tensors.
    pub index: usize,
    /// Its PyTorch `state_dict` name.
    pub name: &'m str,
    /// Parameter (trainable by default or not) or buffer.
    pub kind: TensorKind,
    /// Its shape.
    pub shape: Shape,
    /// The stored bytes: `shape.numel()` little-endian `f32`s; for an int8 tensor
    /// one `f32` scale per output channel (dim 0), then `shape.numel()` `i8`s, then
    /// zero padding to a multiple of 4.
    pub data: &'m [u8],
    /// Where `data` starts in the file (a multiple of 4).
    pub offset: usize,
    /// Stored as int8 with a scale per output channel (a frozen parameter; value
    /// `q * scale[dim-0 index]`).
    pub int8: bool,
}

impl<'m> TensorRecord<'m> {
    /// The values, in order (an int8 tensor's dequantized: `q * scale`).
    pub fn values(&self) -> impl Iterator<Item = f32> + '_ {
        let n = self.shape.numel();
        let per = n / self.channels().max(1);
        (0..n).map(move |i| match self.int8 {
            true => self.scale(i / per.max(1)) * self.int8_weights().get(i).map_or(0, |&q| q as i8) as f32,
            false => f32_at(self.data, 4 * i),
        })
    }

    /// Number of scales of an int8 tensor (its dim 0); 0 for an `f32` one.
    pub fn channels(&self) -> usize {
        match self.int8 && self.shape.rank() > 0 {
            true => self.shape.dim(0),
            false => 0,
        }
    }

    /// Scale `c` of an int8 tensor (0 past the end or for an `f32` tensor).
    pub fn scale(&self, c: usize) -> f32 {
        match c < self.channels() {
            true => f32_at(self.data, 4 * c),
            false => 0.0,
        }
    }

    /// An int8 tensor's weights as stored (bytes to read as `i8`); empty for an `f32`
    /// tensor.
    pub fn int8_weights(&self) -> &'m [u8] {
        let at = 4 * self.channels();
        match self.int8 {
            true => self.data.get(at..at + self.shape.numel()).unwrap_or(&[]),
            false => &[],
        }
    }
}

fn f32_at(b: &[u8], at: usize) -> f32 {
    match b.get(at..at + 4) {
        Some(c) => f32::from_le_bytes([c[0], c[1], c[2], c[3]]),
        None => 0.0,
    }
}

/// One node: its op, name, inputs and attributes, viewed in place.
#[derive(Clone, Copy, Debug)]
pub struct NodeRecord<'m> {
    /// Position among the nodes.
    pub index: usize,
    /// The op's registry name.
    pub op: &'m str,
    /// The node's name in the source model.
    pub name: &'m str,
    refs: &'m [u8],
    /// Its attributes, read in place.
    pub attrs: NodeAttrs<'m>,
}

impl<'m> NodeRecord<'m> {
    /// Its inputs in the op's input order (`None` for an absent optional one).
    pub fn inputs(&self) -> impl Iterator<Item = Option<ValueRef>> + '_ {
        self.refs
            .chunks_exact(4)
            .map(|c| word_ref(u32::from_le_bytes([c[0], c[1], c[2], c[3]])).unwrap_or(None))
    }

    /// Where this node's errors belong.
    pub fn site(&self) -> Site<'m> {
        Site::Node {
            index: self.index,
            op: self.op,
            name: self.name,
        }
    }
}

/// Bytes of an int8 tensor's data: `channels` scales, `numel` bytes, padding.
pub(crate) fn int8_len(channels: usize, numel: usize) -> Option<usize> {
    pad4(channels.checked_mul(4)?.checked_add(numel)?)
}

fn utf8<'m>(b: Option<&'m [u8]>, site: Site<'m>) -> ModelResult<'m, &'m str> {
    let b = b.ok_or(site.corrupt(BAD_RECORD))?;
    core::str::from_utf8(b).map_err(|_| site.corrupt(BAD_NAME))
}

/// Checks that `body[from..to]` exists and is zero (padding, reserved bytes).
fn zeros<'m>(body: &[u8], from: usize, to: usize, site: Site<'m>) -> ModelResult<'m, ()> {
    match body.get(from..to) {
        Some(z) if z.iter().all(|&b| b == 0) => Ok(()),
        _ => Err(site.corrupt(BAD_RECORD)),
    }
}

impl<'m> ModelFile<'m> {
    /// Checks a whole file: exactly the declared length, nothing after it.
    pub fn parse(bytes: &'m [u8]) -> ModelResult<'m, Self> {
        let f = Self::parse_prefix(bytes)?;
        if f.bytes.len() != bytes.len() {
            return Err(Site::File.corrupt(TRAILING));
        }
        Ok(f)
    }

    /// Checks a file at the start of `bytes` and ignores what follows its declared
    /// length (a flash slot, a larger buffer).
    pub fn parse_prefix(bytes: &'m [u8]) -> ModelResult<'m, Self> {
        let file = Site::File;
        let head = &bytes[..bytes.len().min(MAGIC.len())];
        if head != &MAGIC[..head.len()] {
            return Err(file.corrupt(BAD_MAGIC));
        }
        let (Some(version), Some(flags), Some(total)) =
            (u16_at(bytes, 4), u16_at(bytes, 6), u32_at(bytes, 8))
        else {
            return Err(file.corrupt(TRUNCATED));
        };
        let bad_param = |what, value: u16| {
            file.error(Error::InvalidParam {
                op: "model",
                what,
                value: value as i64,
            })
        };
        if version != VERSION {
            return Err(bad_param(UNKNOWN_VERSION, version));
        }
        if flags != 0 {
            return Err(bad_param(UNKNOWN_FLAGS, flags));
        }
        let total = total as usize;
        if total < HEADER_LEN + CRC_LEN {
            return Err(file.corrupt(BAD_LENGTH));
        }
        let Some(whole) = bytes.get(..total) else {
            return Err(file.corrupt(TRUNCATED));
        };
        let body = &whole[..total - CRC_LEN];
        if u32_at(whole, total - CRC_LEN) != Some(crc32(body)) {
            return Err(file.corrupt(BAD_CHECKSUM));
        }
        let mut counts = [0usize; 4];
        for (k, c) in counts.iter_mut().enumerate() {
            *c = u32_at(body, 12 + 4 * k).ok_or(file.corrupt(TRUNCATED))? as usize;
        }
        if counts[3] == 0 {
            return Err(file.corrupt(NO_OUTPUT));
        }
        // Every input, tensor and node is a record of the graph that runs the model:
        // a file with more than a tape can hold cannot run (and would make the
        // duplicate-name checks below slow).
        let records = counts[..3].iter().try_fold(0usize, |a, &c| a.checked_add(c));
        if records.is_none_or(|r| r > MAX_RECORDS) {
            return Err(file.corrupt(TOO_MANY_RECORDS));
        }
        let mut f = ModelFile {
            bytes: whole,
            counts,
            tensors_at: 0,
            nodes_at: 0,
            outputs_at: 0,
        };
        // Walk every record once so that the iterators can trust the layout.
        let mut off = HEADER_LEN;
        for k in 0..counts[0] {
            off = f.input_at(off, k)?.1;
        }
        f.tensors_at = off;
        for k in 0..counts[1] {
            off = f.tensor_at(off, k)?.1;
        }
        f.nodes_at = off;
        // Tensor names are what weights are saved and loaded by: one each. (Node names
        // are labels: the importer gives every node made from one ONNX node its name.)
        let names = |r: (TensorRecord<'m>, usize)| (r.0.name, r.1);
        let tensor_names = |o| f.tensor_at(o, 0).ok().map(names);
        if let Some((index, name)) = first_duplicate(counts[1], f.tensors_at, tensor_names) {
            return Err(Site::Tensor { index, name }.corrupt(DUP_TENSOR));
        }
        for k in 0..counts[2] {
            off = f.node_at(off, k, true)?.1;
        }
        f.outputs_at = off;
        for k in 0..counts[3] {
            let out = Site::Output { index: k };
            let w = u32_at(body, off).ok_or(out.corrupt(BAD_RECORD))?;
            let r = word_ref(w).ok().flatten().ok_or(out.corrupt(BAD_REF))?;
            if let Some(why) = check_ref(r, counts[0], counts[1], counts[2]) {
                return Err(out.corrupt(why));
            }
            off += 4;
        }
        if off != body.len() {
            return Err(file.corrupt(BAD_END));
        }
        Ok(f)
    }

    /// The file's bytes (exactly its declared length).
    pub fn as_bytes(&self) -> &'m [u8] {
        self.bytes
    }

    /// Number of graph inputs.
    pub fn num_inputs(&self) -> usize {
        self.counts[0]
    }

    /// Number of tensors (parameters and buffers).
    pub fn num_tensors(&self) -> usize {
        self.counts[1]
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.counts[2]
    }

    /// Number of outputs.
    pub fn num_outputs(&self) -> usize {
        self.counts[3]
    }

    /// The graph inputs, in order.
    pub fn inputs(&self) -> impl Iterator<Item = InputRecord<'m>> + '_ {
        let mut off = HEADER_LEN;
        (0..self.counts[0]).map_while(move |k| {
            let (r, next) = self.input_at(off, k).ok()?;
            off = next;
            Some(r)
        })
    }

    /// The tensors, in order.
    pub fn tensors(&self) -> impl Iterator<Item = TensorRecord<'m>> + '_ {
        let mut off = self.tensors_at;
        (0..self.counts[1]).map_while(move |k| {
            let (r, next) = self.tensor_at(off, k).ok()?;
            off = next;
            Some(r)
        })
    }

    /// The nodes, in execution order.
    pub fn nodes(&self) -> impl Iterator<Item = NodeRecord<'m>> + '_ {
        let mut off = self.nodes_at;
        (0..self.counts[2]).map_while(move |k| {
            let (r, next) = self.node_at(off, k, false).ok()?;
            off = next;
            Some(r)
        })
    }

    /// The values the model returns, in order.
    pub fn outputs(&self) -> impl Iterator<Item = ValueRef> + '_ {
        (0..self.counts[3]).filter_map(move |k| {
            word_ref(u32_at(self.bytes, self.outputs_at + 4 * k)?)
                .ok()
                .flatten()
        })
    }

    /// The tensor called `name`, if there is one.
    pub fn tensor(&self, name: &str) -> Option<TensorRecord<'m>> {
        self.tensors().find(|t| t.name == name)
    }

    fn body(&self) -> &'m [u8] {
        &self.bytes[..self.bytes.len() - CRC_LEN]
    }

    fn input_at(&self, off: usize, index: usize) -> ModelResult<'m, (InputRecord<'m>, usize)> {
        let body = self.body();
        let mut site = Site::Input { index, name: "" };
        let head = body.get(off..off + 4).ok_or(site.corrupt(BAD_RECORD))?;
        let (rank, name_len) = (head[0] as usize, head[1] as usize);
        zeros(body, off + 2, off + 4, site)?;
        if rank > MAX_RANK {
            return Err(site.corrupt(BAD_RANK));
        }
        let name_at = off + 4 + 8 * rank;
        let name = utf8(body.get(name_at..name_at + name_len), site)?;
        site = Site::Input { index, name };
        let mut dims = [DimSpec::Fixed(0); MAX_RANK];
        let mut sizes = [0usize; MAX_RANK];
        for (k, (d, s)) in dims.iter_mut().zip(sizes.iter_mut()).take(rank).enumerate() {
            let at = off + 4 + 8 * k;
            let (Some(kind), Some(size)) = (u32_at(body, at), u32_at(body, at + 4)) else {
                return Err(site.corrupt(BAD_RECORD));
            };
            *s = size as usize;
            *d = match kind {
                0 => DimSpec::Fixed(*s),
                1 => DimSpec::Free { min: *s },
                _ => return Err(site.corrupt(BAD_DIM_KIND)),
            };
        }
        Shape::new(&sizes[..rank]).map_err(|_| site.corrupt(BAD_SIZE))?;
        let end = name_at + name_len;
        let next = pad4(end).ok_or(site.corrupt(BAD_RECORD))?;
        zeros(body, end, next, site)?;
        Ok((
            InputRecord {
                index,
                name,
                rank,
                dims,
            },
            next,
        ))
    }

    fn tensor_at(&self, off: usize, index: usize) -> ModelResult<'m, (TensorRecord<'m>, usize)> {
        let body = self.body();
        let mut site = Site::Tensor { index, name: "" };
        let head = body.get(off..off + 4).ok_or(site.corrupt(BAD_RECORD))?;
        let (rank, kind) = (head[0] as usize, head[1]);
        let name_len = u16_at(head, 2).unwrap_or(0) as usize;
        if rank > MAX_RANK {
            return Err(site.corrupt(BAD_RANK));
        }
        let name_at = off + 4 + 4 * rank;
        let name = utf8(body.get(name_at..name_at + name_len), site)?;
        site = Site::Tensor { index, name };
        let (kind, int8) = match kind {
            K_FROZEN => (TensorKind::Param { trainable: false }, false),
            K_TRAIN => (TensorKind::Param { trainable: true }, false),
            K_BUFFER => (TensorKind::Buffer, false),
            K_INT8 if rank == 0 => return Err(site.corrupt(INT8_RANK)),
            K_INT8 => (TensorKind::Param { trainable: false }, true),
            _ => return Err(site.corrupt(BAD_KIND)),
        };
        let mut dims = [0usize; MAX_RANK];
        for (k, d) in dims.iter_mut().take(rank).enumerate() {
            *d = u32_at(body, off + 4 + 4 * k).ok_or(site.corrupt(BAD_RECORD))? as usize;
        }
        let shape = Shape::new(&dims[..rank]).map_err(|_| site.corrupt(BAD_SIZE))?;
        let end = name_at + name_len;
        let at = pad4(end).ok_or(site.corrupt(BAD_RECORD))?;
        zeros(body, end, at, site)?;
        let len = match int8 {
            true => int8_len(dims[0], shape.numel()),
            false => shape.numel().checked_mul(4),
        };
        let len = len.ok_or(site.corrupt(BAD_SIZE))?;
        let next = at.checked_add(len).ok_or(site.corrupt(BAD_SIZE))?;
        let data = body.get(at..next).ok_or(site.corrupt(BAD_RECORD))?;
        if int8 {
            let (scales, end) = (4 * dims[0], 4 * dims[0] + shape.numel());
            zeros(data, end, len, site)?;
            if data[..scales].chunks_exact(4).any(|c| !f32_at(c, 0).is_finite()) {
                return Err(site.corrupt(INT8_SCALE));
            }
        }
        Ok((
            TensorRecord {
                index,
                name,
                kind,
                shape,
                data,
                offset: at,
                int8,
            },
            next,
        ))
    }

    /// The node at `off`; `check` runs the checks that the parse needs once (op
    /// name, input count and references, attributes).
    fn node_at(&self, off: usize, index: usize, check: bool) -> ModelResult<'m, (NodeRecord<'m>, usize)> {
        let body = self.body();
        let site0 = Site::Node {
            index,
            op: "",
            name: "",
        };
        let head = body.get(off..off + 8).ok_or(site0.corrupt(BAD_RECORD))?;
        let (n_in, n_attr, op_len) = (head[0] as usize, head[1] as usize, head[2] as usize);
        let name_len = u16_at(head, 4).unwrap_or(0) as usize;
        if head[3] != 0 || head[6] != 0 || head[7] != 0 {
            return Err(site0.corrupt(BAD_RECORD));
        }
        let refs_at = off + 8;
        let op_at = refs_at + 4 * n_in;
        let name_at = op_at + op_len;
        let end = name_at + name_len;
        let op = utf8(body.get(op_at..name_at), site0)?;
        let site1 = Site::Node { index, op, name: "" };
        let name = utf8(body.get(name_at..end), site1)?;
        let site = Site::Node { index, op, name };
        let refs = body.get(refs_at..op_at).ok_or(site.corrupt(BAD_RECORD))?;
        let attrs_at = pad4(end).ok_or(site.corrupt(BAD_RECORD))?;
        zeros(body, end, attrs_at, site)?;
        if check {
            let takes = op_inputs(op).ok_or(site.corrupt(UNKNOWN_OP))?;
            if n_in > takes || n_in > MAX_NODE_INPUTS {
                return Err(site.corrupt(TOO_MANY_INPUTS));
            }
            for c in refs.chunks_exact(4) {
                let w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                let r = word_ref(w).map_err(|_| site.corrupt(BAD_REF))?;
                if let Some(why) = r.and_then(|r| check_ref(r, self.counts[0], self.counts[1], index)) {
                    return Err(site.corrupt(why));
                }
            }
        }
        let (attrs, next) =
            NodeAttrs::walk(body, attrs_at, n_attr, check).map_err(|why| site.corrupt(why))?;
        if check {
            for a in attrs.iter() {
                limits::check_attr(a.name, a.value).map_err(|e| site.error(e))?;
            }
        }
        Ok((
            NodeRecord {
                index,
                op,
                name,
                refs,
                attrs,
            },
            next,
        ))
    }
}
