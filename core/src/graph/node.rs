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
use crate::scalar::Scalar;
use crate::shape::Shape;

/// An op's backward rule: `rule(graph, i)` adds node `i`'s contribution to the
/// gradients of its inputs (node `i`'s output gradient is allocated and its inputs'
/// gradients exist when it runs).
pub(crate) type BackwardFn<S, const N: usize> = for<'g> fn(&mut Graph<'g, S, N>, usize) -> Result<()>;

/// What a rule answers when the record it was given is not its op's (an engine bug).
const RULE_MISMATCH: Error = Error::InvalidState {
    what: "backward rule given another op's record (engine bug)",
};

/// Index of a node in the tape.
pub(crate) type NodeId = u16;

/// "No input" in a record's input list.
const NO_INPUT: NodeId = NodeId::MAX;

/// What kind of op produced a record, for the walk, memory reclamation and the
/// trace: one `static` per op, beside the op in `ops/`.
#[derive(Debug)]
pub(crate) struct OpKind {
    /// The PyTorch-style name (`"conv2d"`, `"relu_"`), for errors and the trace.
    pub name: &'static str,
    /// Bit `k` set: the op's backward reads input `k`'s data, which must then live
    /// until that backward has run.
    pub reads_inputs: u8,
    /// The op's backward reads the record's own output.
    pub reads_output: bool,
}

/// Parameters and inputs: nothing to replay.
pub(crate) static LEAF: OpKind = OpKind {
    name: "leaf",
    reads_inputs: 0,
    reads_output: false,
};

/// Words of op parameters a record holds (conv2d's stride, padding and dilation take
/// all six; its groups follow from the input and weight shapes). Each word costs every
/// record four bytes, on the Cortex-M0 too.
pub(crate) const PARAM_WORDS: usize = 6;

/// An op's parameters as a record holds them; each op packs and unpacks its own.
pub(crate) type Params = [u32; PARAM_WORDS];

/// The parameters of an op that has none.
pub(crate) const NO_PARAMS: Params = [0; PARAM_WORDS];

/// Parameters an op saves in its record for backward ([`Params`]).
pub(crate) trait Packed: Sized {
    /// The words, or [`Error::Overflow`] naming `op` when a value does not fit.
    fn pack(&self, op: &'static str) -> Result<Params>;
    /// The parameters back from [`Packed::pack`]'s words.
    fn unpack(p: &Params) -> Self;
}

/// A parameter value as one word of [`Params`].
pub(crate) fn word(v: usize, op: &'static str) -> Result<u32> {
    u32::try_from(v).map_err(|_| Error::Overflow { op })
}

/// The op that produced a node: its kind, its inputs (node ids; saved values are
/// either those inputs' own data, which live until the step ends, or the node's
/// `saved` span) and its parameters.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Op {
    pub kind: &'static OpKind,
    inputs: [NodeId; 3],
    pub params: Params,
}

impl Op {
    /// A parameter or an input: nothing to replay.
    pub(crate) const LEAF: Op = Op {
        kind: &LEAF,
        inputs: [NO_INPUT; 3],
        params: NO_PARAMS,
    };

    /// A record of `kind` reading `inputs` (node indices) with parameters `params`.
    pub(crate) fn new(kind: &'static OpKind, inputs: [Option<usize>; 3], params: Params) -> Op {
        let id = |i: Option<usize>| i.map_or(NO_INPUT, |i| i as NodeId);
        Op {
            kind,
            inputs: [id(inputs[0]), id(inputs[1]), id(inputs[2])],
            params,
        }
    }

    /// A record of `kind` reading node `x`, without parameters.
    pub(crate) fn unary(kind: &'static OpKind, x: usize) -> Op {
        Op::new(kind, [Some(x), None, None], NO_PARAMS)
    }

    /// Whether this is a leaf (nothing to replay).
    pub(crate) fn is_leaf(&self) -> bool {
        core::ptr::eq(self.kind, &LEAF)
    }

    /// The nodes this op read (up to three).
    pub(crate) fn inputs(&self) -> [Option<NodeId>; 3] {
        let id = |i: NodeId| (i != NO_INPUT).then_some(i);
        [id(self.inputs[0]), id(self.inputs[1]), id(self.inputs[2])]
    }

    /// Input `k`, which the op's kind always has.
    pub(crate) fn input(&self, k: usize) -> NodeId {
        self.inputs[k]
    }

    /// Input `k`, if the record has it (an optional bias).
    pub(crate) fn opt_input(&self, k: usize) -> Option<NodeId> {
        self.inputs()[k]
    }

    /// Whether this op's backward reads the data of input `k`.
    pub(crate) fn reads_input_data(&self, k: NodeId) -> bool {
        let (bits, [a, b, c]) = (self.kind.reads_inputs, self.inputs);
        (bits & 1 != 0 && a == k) || (bits & 2 != 0 && b == k) || (bits & 4 != 0 && c == k)
    }

    /// Whether this op's backward reads its own output.
    pub(crate) fn reads_own_output(&self) -> bool {
        self.kind.reads_output
    }

    /// The PyTorch-style name of the op, for errors and the shape trace.
    pub(crate) fn name(&self) -> &'static str {
        self.kind.name
    }
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Node `i`'s record, checked to be of `kind`: what a backward rule reads first.
    pub(crate) fn record(&self, i: usize, kind: &'static OpKind) -> Result<Op> {
        let op = self.nodes[i].op;
        if core::ptr::eq(op.kind, kind) {
            Ok(op)
        } else {
            Err(RULE_MISMATCH)
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
            backward: if op.is_leaf() { None } else { backward },
        }
    }
}

// A tape record must not grow unnoticed: every record of a graph's `N` is held inline
// (the Cortex-M0 program keeps its tape in 16 KiB of RAM).
#[cfg(target_pointer_width = "32")]
const _: () = assert!(core::mem::size_of::<Node<f32, 32>>() <= 92);
