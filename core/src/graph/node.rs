//! What the tape records for each tensor: its shape, where its data and gradient live,
//! the op that produced it (with the parameters backward needs) and that op's
//! backward rule.
//!
//! - The rule is a function pointer the op chooses when it records (it lives beside
//!   the op's forward in `ops/`), so backward never matches over every op kind: a
//!   program links the backward rules of the ops it records with gradients and no
//!   others (an op called only through [`Graph::no_grad`] references none).

use super::Graph;
use crate::arena::Span;
use crate::error::{Error, Result};
use crate::ops::conv::Conv2dParams;
use crate::ops::interpolate::InterpMode;
use crate::ops::pad::PadParams;
use crate::ops::pool::Pool2dParams;
use crate::scalar::Scalar;
use crate::shape::Shape;

/// An op's backward rule: `rule(graph, i)` adds node `i`'s contribution to the
/// gradients of its inputs (node `i`'s output gradient is allocated and its inputs'
/// gradients exist when it runs).
pub(crate) type BackwardFn<S, const N: usize> = for<'g> fn(&mut Graph<'g, S, N>, usize) -> Result<()>;

/// What a rule answers when the record it was given is not its op's (an engine bug).
pub(crate) const RULE_MISMATCH: Error = Error::InvalidState {
    what: "backward rule given another op's record (engine bug)",
};

/// Index of a node in the tape.
pub(crate) type NodeId = u16;

/// The op that produced a node. Inputs are node ids; saved values are either those
/// inputs' own data (they live until the step ends) or the node's `saved` span.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Op {
    /// A parameter or an input: nothing to replay.
    Leaf,
    Conv2d {
        x: NodeId,
        w: NodeId,
        b: Option<NodeId>,
        p: Conv2dParams,
    },
    MaxPool2d {
        x: NodeId,
        p: Pool2dParams,
    },
    AvgPool2d {
        x: NodeId,
        p: Pool2dParams,
    },
    AdaptiveAvgPool2d {
        x: NodeId,
    },
    Linear {
        x: NodeId,
        w: NodeId,
        b: Option<NodeId>,
    },
    Relu {
        x: NodeId,
    },
    /// In-place ReLU: the output took over the input's memory; a bit mask is saved.
    ReluMasked {
        x: NodeId,
    },
    LeakyRelu {
        x: NodeId,
        slope: f32,
    },
    Sigmoid {
        x: NodeId,
    },
    Tanh {
        x: NodeId,
    },
    Add {
        a: NodeId,
        b: NodeId,
    },
    Mul {
        a: NodeId,
        b: NodeId,
    },
    Reshape {
        x: NodeId,
    },
    CrossEntropy {
        logits: NodeId,
    },
    MseLoss {
        x: NodeId,
        t: NodeId,
    },
    Pad {
        x: NodeId,
        p: PadParams,
    },
    Interpolate {
        x: NodeId,
        mode: InterpMode,
    },
}

impl Op {
    /// Whether this is a leaf (nothing to replay).
    pub(crate) fn is_leaf(&self) -> bool {
        matches!(self, Op::Leaf)
    }

    /// The nodes this op read (up to three).
    pub(crate) fn inputs(&self) -> [Option<NodeId>; 3] {
        match *self {
            Op::Leaf => [None; 3],
            Op::Conv2d { x, w, b, .. } | Op::Linear { x, w, b } => [Some(x), Some(w), b],
            Op::Add { a, b } | Op::Mul { a, b } => [Some(a), Some(b), None],
            Op::MseLoss { x, t } => [Some(x), Some(t), None],
            Op::CrossEntropy { logits } => [Some(logits), None, None],
            Op::MaxPool2d { x, .. }
            | Op::AvgPool2d { x, .. }
            | Op::AdaptiveAvgPool2d { x }
            | Op::Relu { x }
            | Op::ReluMasked { x }
            | Op::LeakyRelu { x, .. }
            | Op::Sigmoid { x }
            | Op::Tanh { x }
            | Op::Reshape { x }
            | Op::Pad { x, .. }
            | Op::Interpolate { x, .. } => [Some(x), None, None],
        }
    }

    /// Whether this op's backward reads the data of input `k`.
    pub(crate) fn reads_input_data(&self, k: NodeId) -> bool {
        match *self {
            Op::Conv2d { x, .. } | Op::Linear { x, .. } | Op::LeakyRelu { x, .. } => x == k,
            Op::Mul { a, b } => a == k || b == k,
            Op::MseLoss { x, t } => x == k || t == k,
            _ => false,
        }
    }

    /// Whether this op's backward reads its own output.
    pub(crate) fn reads_own_output(&self) -> bool {
        matches!(self, Op::Relu { .. } | Op::Sigmoid { .. } | Op::Tanh { .. })
    }

    /// The PyTorch-style name of the op, for errors and the shape trace.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Op::Leaf => "leaf",
            Op::Conv2d { .. } => "conv2d",
            Op::MaxPool2d { .. } => "max_pool2d",
            Op::AvgPool2d { .. } => "avg_pool2d",
            Op::AdaptiveAvgPool2d { .. } => "adaptive_avg_pool2d",
            Op::Linear { .. } => "linear",
            Op::Relu { .. } => "relu",
            Op::ReluMasked { .. } => "relu_",
            Op::LeakyRelu { .. } => "leaky_relu",
            Op::Sigmoid { .. } => "sigmoid",
            Op::Tanh { .. } => "tanh",
            Op::Add { .. } => "add",
            Op::Mul { .. } => "mul",
            Op::Reshape { .. } => "reshape",
            Op::CrossEntropy { .. } => "cross_entropy",
            Op::MseLoss { .. } => "mse_loss",
            Op::Pad { .. } => "pad",
            Op::Interpolate { .. } => "interpolate",
        }
    }
}

/// One record of the tape.
#[derive(Clone, Copy)]
pub(crate) struct Node<S: Scalar, const N: usize> {
    pub shape: Shape,
    pub data: Span,
    pub grad: Option<Span>,
    pub requires_grad: bool,
    pub op: Op,
    /// Extra values saved for backward (max-pool argmax, softmax, targets).
    pub saved: Span,
    /// The data span belongs to another node (a reshape view, or an input that an
    /// in-place op took over), so it is never reclaimed through this node.
    pub view: bool,
    /// The caller gave the handle up ([`crate::Graph::free`]) or an in-place op
    /// consumed it: its data is reclaimed once backward no longer needs it.
    pub dropped: bool,
    /// Backward ran through this node: its saved values are gone.
    pub spent: bool,
    /// The op's backward rule (`None` for leaves).
    pub backward: Option<BackwardFn<S, N>>,
}

impl<S: Scalar, const N: usize> Node<S, N> {
    /// A record with no memory flags set; `backward` is kept unless `op` is a leaf.
    pub(crate) fn new(
        shape: Shape,
        data: Span,
        op: Op,
        backward: Option<BackwardFn<S, N>>,
        requires_grad: bool,
        saved: Span,
    ) -> Self {
        Node {
            shape,
            data,
            grad: None,
            requires_grad,
            op,
            saved,
            view: false,
            dropped: false,
            spent: false,
            backward: if matches!(op, Op::Leaf) { None } else { backward },
        }
    }
}
