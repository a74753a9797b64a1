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
    /// Its values, row-major, `dims.iter().product()` of them.
    pub data: Vec<f32>,
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
