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
use crate::shape::{Shape, MAX_RANK};

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
    /// Entry `k`: the inputs (bit `j` for input `j`) whose gradient the backward
    /// computes from input `k`'s data. Input `k`'s data must live until that backward
    /// has run only when one of them wants a gradient: a convolution whose weight is
    /// frozen keeps nothing of its input ([`reads`] for "whatever is wanted").
    pub reads_inputs: [u8; 3],
    /// The op's backward reads the record's own output.
    pub reads_output: bool,
}

/// Parameters and inputs: nothing to replay.
pub(crate) static LEAF: OpKind = OpKind {
    name: "leaf",
    reads_inputs: reads(0),
    reads_output: false,
};

/// [`OpKind::reads_inputs`] of an op whose backward reads input `k`'s data (bit `k` of
/// `bits`) whichever gradients are wanted.
pub(crate) const fn reads(bits: u8) -> [u8; 3] {
    let mut out = [0; 3];
    let mut k = 0;
    while k < 3 {
        if bits & (1 << k) != 0 {
            out[k] = 0b111;
        }
        k += 1;
    }
    out
}

/// Half-words of op parameters a record holds (conv2d's stride, padding and dilation
/// take all six; its groups follow from the input and weight shapes). Each costs every
/// record two bytes, on the Cortex-M0 too.
pub(crate) const PARAM_WORDS: usize = 6;

/// An op's parameters as a record holds them; each op packs and unpacks its own.
pub(crate) type Params = [u16; PARAM_WORDS];

/// The parameters of an op that has none.
pub(crate) const NO_PARAMS: Params = [0; PARAM_WORDS];

/// Parameters an op saves in its record for backward ([`Params`]).
pub(crate) trait Packed: Sized {
    /// The words, or [`Error::Overflow`] naming `op` when a value does not fit.
    fn pack(&self, op: &'static str) -> Result<Params>;
    /// The parameters back from [`Packed::pack`]'s words.
    fn unpack(p: &Params) -> Self;
}

/// A parameter value as one word of [`Params`]: [`Error::Overflow`] naming `op` above
/// 65,535 (never truncated).
pub(crate) fn word(v: usize, op: &'static str) -> Result<u16> {
    u16::try_from(v).map_err(|_| Error::Overflow { op })
}

/// An `f32` parameter (leaky_relu's slope) as two words, low half first.
pub(crate) fn f32_words(v: f32) -> [u16; 2] {
    let b = v.to_bits();
    [b as u16, (b >> 16) as u16]
}

/// The `f32` back from [`f32_words`].
pub(crate) fn words_f32(w: [u16; 2]) -> f32 {
    f32::from_bits(w[0] as u32 | (w[1] as u32) << 16)
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

    /// Whether this op's backward reads the data of node `k`, given which of the
    /// record's inputs want a gradient (bit `j` of `wanted` for input `j`).
    pub(crate) fn reads_input_data(&self, k: NodeId, wanted: u8) -> bool {
        (0..3).any(|j| self.inputs[j] == k && self.kind.reads_inputs[j] & wanted != 0)
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
        let op = self.nodes[i].op();
        if core::ptr::eq(op.kind, kind) {
            Ok(op)
        } else {
            Err(RULE_MISMATCH)
        }
    }
}

/// [`Node::flags`] bits.
const REQUIRES_GRAD: u8 = 1;
const VIEW: u8 = 2;
const DROPPED: u8 = 4;
const SPENT: u8 = 8;
/// The node has a gradient, at `grad_off`.
const HAS_GRAD: u8 = 16;
/// The gradient's span was emptied (its memory reclaimed): length 0, not the node's.
const GRAD_EMPTY: u8 = 32;

/// One record of the tape. Its fields are laid out so that a record is at most 64
/// bytes on 32-bit targets: the shape's rank, the flags, the input ids and the op's
/// parameters share words; a gradient is stored as an offset (its length is the
/// node's element count) with its presence in the flags.
#[derive(Clone, Copy)]
pub(crate) struct Node<S: Scalar, const N: usize> {
    dims: [usize; MAX_RANK],
    pub data: Span,
    /// Extra values saved for backward (max-pool argmax, softmax, targets).
    pub saved: Span,
    /// Where the gradient starts, when [`HAS_GRAD`] is set.
    pub(super) grad_off: usize,
    kind: &'static OpKind,
    /// The op's backward rule (`None` for leaves).
    pub backward: Option<BackwardFn<S, N>>,
    params: Params,
    inputs: [NodeId; 3],
    rank: u8,
    /// [`REQUIRES_GRAD`], [`VIEW`], [`DROPPED`], [`SPENT`], [`HAS_GRAD`], [`GRAD_EMPTY`].
    pub(super) flags: u8,
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
        let (dims, rank) = shape.raw();
        Node {
            dims,
            data,
            saved,
            grad_off: 0,
            kind: op.kind,
            backward: if op.is_leaf() { None } else { backward },
            params: op.params,
            inputs: op.inputs,
            rank,
            flags: if requires_grad { REQUIRES_GRAD } else { 0 },
        }
    }

    /// The node's shape.
    pub(crate) fn shape(&self) -> Shape {
        Shape::from_raw(self.dims, self.rank)
    }

    /// The op that produced the node.
    pub(crate) fn op(&self) -> Op {
        Op {
            kind: self.kind,
            inputs: self.inputs,
            params: self.params,
        }
    }

    fn flag(&self, bit: u8) -> bool {
        self.flags & bit != 0
    }

    fn set_flag(&mut self, bit: u8, on: bool) {
        self.flags = if on { self.flags | bit } else { self.flags & !bit };
    }

    /// Whether a gradient flows to this node.
    pub(crate) fn requires_grad(&self) -> bool {
        self.flag(REQUIRES_GRAD)
    }

    /// The data span belongs to another node (a reshape view, or an input that an
    /// in-place op took over), so it is never reclaimed through this node.
    pub(crate) fn view(&self) -> bool {
        self.flag(VIEW)
    }

    /// Marks the data span as another node's ([`Node::view`]).
    pub(crate) fn set_view(&mut self) {
        self.set_flag(VIEW, true)
    }

    /// The caller gave the handle up ([`crate::Graph::free`]) or an in-place op
    /// consumed it: its data is reclaimed once backward no longer needs it.
    pub(crate) fn dropped(&self) -> bool {
        self.flag(DROPPED)
    }

    /// Marks the handle given up ([`Node::dropped`]).
    pub(crate) fn set_dropped(&mut self) {
        self.set_flag(DROPPED, true)
    }

    /// Backward ran through this node: its saved values are gone.
    pub(crate) fn spent(&self) -> bool {
        self.flag(SPENT)
    }

    /// Marks backward as run through this node ([`Node::spent`]).
    pub(crate) fn set_spent(&mut self) {
        self.set_flag(SPENT, true)
    }

    /// The gradient's span, if the node has one.
    pub(crate) fn grad(&self) -> Option<Span> {
        self.flag(HAS_GRAD).then(|| Span {
            off: self.grad_off,
            len: if self.flag(GRAD_EMPTY) {
                0
            } else {
                self.shape().numel()
            },
        })
    }

    /// Sets or clears the gradient. A gradient span is the node's element count long
    /// (or emptied by reclamation); anything else is an engine bug.
    pub(crate) fn set_grad(&mut self, g: Option<Span>) {
        self.set_flag(HAS_GRAD, g.is_some());
        let g = g.unwrap_or(Span::EMPTY);
        debug_assert!(g.len == 0 || g.len == self.shape().numel());
        self.grad_off = g.off;
        self.set_flag(GRAD_EMPTY, g.len == 0);
    }

    /// The gradient, cleared (what `Option::take` does for a field).
    pub(crate) fn take_grad(&mut self) -> Option<Span> {
        let g = self.grad();
        self.set_grad(None);
        g
    }
}

// A tape record must not grow unnoticed: every record of a graph's `N` is held inline
// (the Cortex-M0 program keeps its tape in 16 KiB of RAM). The 32-bit targets (thumbv6m,
// thumbv7em, wasm32) are checked when the core builds for them.
#[cfg(target_pointer_width = "32")]
const _: () = assert!(core::mem::size_of::<Node<f32, 8>>() <= 64);
#[cfg(target_pointer_width = "32")]
const _: () = assert!(core::mem::size_of::<Node<f32, 1024>>() <= 64);

#[cfg(test)]
mod tests {
    use super::*;

    /// The record sizes the docs quote: at most 64 bytes on 32-bit targets (checked
    /// at compile time above), 112 on 64-bit hosts.
    #[test]
    fn record_size() {
        let size = core::mem::size_of::<Node<f32, 8>>();
        assert_eq!(size, core::mem::size_of::<Node<f32, 1024>>());
        #[cfg(target_pointer_width = "64")]
        assert!(size <= 112, "{size}");
    }

    /// A gradient keeps its offset, its presence and a reclaimed (empty) span.
    #[test]
    fn grad_slot_round_trips() {
        let shape = Shape::new(&[2, 3]).unwrap();
        let mut n = Node::<f32, 8>::new(shape, Span::EMPTY, Op::LEAF, None, true, Span::EMPTY);
        assert_eq!(n.grad(), None);
        n.set_grad(Some(Span { off: 40, len: 6 }));
        assert_eq!(n.grad(), Some(Span { off: 40, len: 6 }));
        n.set_grad(Some(Span { off: 7, len: 0 }));
        assert_eq!(n.grad(), Some(Span { off: 7, len: 0 }));
        assert_eq!(n.take_grad(), Some(Span { off: 7, len: 0 }));
        assert_eq!(n.grad(), None);
        assert!(n.requires_grad() && !n.view() && !n.dropped() && !n.spent());
        n.set_spent();
        n.set_view();
        assert!(n.spent() && n.view() && !n.dropped() && n.requires_grad());
        assert_eq!(n.shape(), shape);
    }

    /// A parameter that does not fit a record's half-word is refused, never
    /// truncated, and the graph stays usable.
    #[test]
    fn a_parameter_above_a_half_word_is_an_error() {
        use crate::Conv2dParams;
        let mut buf = [0.0f32; 256];
        let mut g: Graph<f32, 8> = Graph::new(&mut buf);
        let w = g.param(&[1, 1, 1, 1]).unwrap();
        let x = g.input(&[1, 1, 4, 4], &[0.0; 16]).unwrap();
        let p = Conv2dParams {
            stride: [70_000, 1],
            ..Conv2dParams::default()
        };
        // Refused by the window's checks before it would be packed (`word`).
        let e = g.conv2d(x, w, None, p);
        assert!(
            matches!(e, Err(Error::InvalidParam { op: "conv2d", .. })),
            "{e:?}"
        );
        assert!(matches!(
            word(70_000, "conv2d"),
            Err(Error::Overflow { op: "conv2d" })
        ));
        assert_eq!(g.tape_len(), 2);
        assert!(g.conv2d(x, w, None, Conv2dParams::default()).is_ok());
    }
}
