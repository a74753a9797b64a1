//! What the tape records for each tensor: its shape, where its data and gradient live,
//! and the op that produced it (with the parameters backward needs).

use crate::arena::Span;
use crate::ops::conv::Conv2dParams;
use crate::ops::interpolate::InterpMode;
use crate::ops::pad::PadParams;
use crate::ops::pool::Pool2dParams;
use crate::shape::Shape;

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
#[derive(Clone, Copy, Debug)]
pub(crate) struct Node {
    pub shape: Shape,
    pub data: Span,
    pub grad: Option<Span>,
    pub requires_grad: bool,
    pub op: Op,
    /// Extra values saved for backward (max-pool argmax, softmax, targets).
    pub saved: Span,
}
