//! A model as plain host data (`std`): what an importer produces and what
//! the model file encoder writes. Nodes name ops by their registry name
//! ([`crate::ops::registry::OpSpec::name`], PyTorch's `torch.nn.functional` name) and
//! keep their keyword parameters by PyTorch's names, so a loaded model calls the
//! same ops, by name, as the conformance door does.

use std::string::String;
use std::vec::Vec;

pub use super::{DimSpec, TensorKind, ValueRef};

/// A whole model: its inputs, its tensors (parameters and buffers), its nodes in
/// execution order and which values are its outputs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GraphSpec {
    /// The graph's inputs, in call order.
    pub inputs: Vec<InputSpec>,
    /// Parameters and buffers, with their PyTorch `state_dict` names.
    pub tensors: Vec<TensorSpec>,
    /// The ops, in an order where every node's inputs come before it.
    pub nodes: Vec<NodeSpec>,
    /// The values the model returns, in order.
    pub outputs: Vec<ValueRef>,
}

/// One input of the graph.
#[derive(Clone, Debug, PartialEq)]
pub struct InputSpec {
    /// Its name in the source model (`"input"`).
    pub name: String,
    /// Its dims; free ones (batch, H, W, L) can change from call to call.
    pub dims: Vec<DimSpec>,
}

/// A parameter or buffer with its values.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSpec {
    /// The PyTorch `state_dict` name (`"features.0.weight"`).
    pub name: String,
    /// Parameter or buffer.
    pub kind: TensorKind,
    /// Its shape.
    pub dims: Vec<usize>,
    /// Its values, row-major, `dims.iter().product()` of them (for an int8 tensor,
    /// the dequantized values; the file stores [`TensorSpec::int8`]).
    pub data: Vec<f32>,
    /// Stored as int8 with a scale per output channel (a frozen parameter only).
    pub int8: Option<Int8Spec>,
}

/// A frozen tensor's int8 form: value `i` is `q[i] * scales[i / (numel / dims[0])]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Int8Spec {
    /// One finite scale per output channel (dim 0).
    pub scales: Vec<f32>,
    /// The weights, row-major.
    pub q: Vec<i8>,
}

impl GraphSpec {
    /// Quantizes to int8 ([`TensorSpec::quantize_int8`]) every frozen parameter of
    /// rank 4 that only convolutions read, as their weight (`conv2d` input 1: the
    /// tensors [`Model::in_place`](super::Model::in_place) reads in place as int8);
    /// returns their indices.
    pub fn quantize_frozen_conv_weights(&mut self) -> Vec<usize> {
        let mut done = Vec::new();
        for k in 0..self.tensors.len() {
            let me = Some(ValueRef::Tensor(k));
            let conv_only = self.nodes.iter().all(|n| {
                n.inputs
                    .iter()
                    .enumerate()
                    .all(|(i, r)| *r != me || (n.op == "conv2d" && i == 1))
            });
            let t = &mut self.tensors[k];
            let frozen = t.kind == (TensorKind::Param { trainable: false });
            if frozen && t.int8.is_none() && t.dims.len() == 4 && conv_only && t.quantize_int8() {
                done.push(k);
            }
        }
        done
    }
}

impl TensorSpec {
    /// Quantizes the tensor per output channel (dim 0), symmetric: `scale = max|w| /
    /// 127` (1 for an all-zero channel), `q = round(w / scale)`; `data` becomes the
    /// dequantized values and the tensor a frozen parameter. Tensors of rank 0 and
    /// non-finite values are left alone (`false`).
    pub fn quantize_int8(&mut self) -> bool {
        let ch = self.dims.first().copied().unwrap_or(0);
        if ch == 0
            || self.data.is_empty()
            || !self.data.len().is_multiple_of(ch)
            || self.data.iter().any(|v| !v.is_finite())
        {
            return false;
        }
        let per = self.data.len() / ch;
        let mut scales = Vec::with_capacity(ch);
        let mut q = Vec::with_capacity(self.data.len());
        for (c, row) in self.data.chunks_mut(per.max(1)).enumerate().take(ch) {
            let max = row.iter().fold(0f32, |m, v| m.max(v.abs()));
            let s = if max > 0.0 { max / 127.0 } else { 1.0 };
            scales.push(s);
            for v in row.iter_mut() {
                let k = (*v / s).round().clamp(-127.0, 127.0) as i8;
                q.push(k);
                *v = k as f32 * scales[c];
            }
        }
        self.kind = TensorKind::Param { trainable: false };
        self.int8 = Some(Int8Spec { scales, q });
        true
    }
}

/// One op call.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSpec {
    /// The op's registry name (`"conv2d"`, `"batch_norm"`, ...).
    pub op: String,
    /// The node's name in the source model, for messages (`"/features/0/Conv"`).
    pub name: String,
    /// Its tensor inputs in the op's input order ([`OpSpec::inputs`]); `None` for an
    /// absent optional one (a convolution without bias).
    ///
    /// [`OpSpec::inputs`]: crate::ops::registry::OpSpec::inputs
    pub inputs: Vec<Option<ValueRef>>,
    /// Its keyword parameters by PyTorch's names.
    pub attrs: Vec<(String, AttrValue)>,
}

/// A keyword parameter's value.
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    /// An integer (`dim`, `groups`).
    Int(i64),
    /// A list of integers (`stride`, `padding`, `dims`).
    Ints(Vec<i64>),
    /// A real number (`eps`, `momentum`, `negative_slope`).
    Float(f64),
    /// A list of real numbers (`scale_factor`).
    Floats(Vec<f64>),
    /// A boolean (`ceil_mode`, `align_corners`).
    Flag(bool),
    /// A string (`mode`).
    Str(String),
}
