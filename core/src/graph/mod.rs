//! The user-facing step: a define-by-run tape over one arena.
//!
//! - Parameters are created once, at setup, in the arena's long-lived end; their
//!   gradients sit next to them and accumulate until [`Graph::zero_grad`].
//! - Frozen tensors whose data stays outside the arena ([`Graph::external`], for
//!   example pretrained weights in flash) are created at setup too: they take no arena
//!   bytes, get no gradient, and ops read them in place.
//! - A step creates inputs and calls ops (methods of [`Graph`], one file per op family
//!   in `ops/`); each call validates its parameters, allocates its output from scratch,
//!   runs the kernel and appends a record to the tape.
//! - [`Graph::backward`] walks the records in reverse. The tape is append-only, so it is
//!   already in topological order.
//! - [`Graph::end_step`] drops the step's records and scratch; handles from that step
//!   become stale and are refused with [`Error::StaleTensor`].
//! - With a meta arena ([`Graph::meta`]) the same calls only do shape arithmetic and
//!   allocation bookkeeping: the high-water mark equals a real step's by construction.

mod backward;
mod finite;
mod leaves;
mod memory;
mod mode;
mod no_grad;
mod node;
mod site;
mod trace;
mod work;

pub(crate) use finite::first_non_finite;
pub use no_grad::NoGrad;
pub(crate) use node::{
    f32_words, reads, word, words_f32, BackwardFn, Node, NodeId, Op, OpKind, Packed, Params, NO_PARAMS,
};
pub use trace::{TraceEvent, TraceFn};
pub(crate) use work::{product, touched};

use crate::arena::{Arena, Span};
use crate::error::{Error, Phase, Result};
use crate::scalar::Scalar;
use crate::shape::Shape;

/// A handle to a tensor of a graph: cheap to copy, checked on use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tensor {
    pub(crate) id: NodeId,
    pub(crate) gen: u16,
}

/// Generation of parameters: valid in every step.
pub(crate) const PARAM_GEN: u16 = 0;

/// A define-by-run graph over an arena, with room for `N` tape records (parameters,
/// inputs and op outputs together).
///
/// Choosing `N`: a record is at most 64 bytes on 32-bit targets, and all `N` are held
/// inline, so `N` should be what a step needs. A step run on a meta graph tells it:
/// [`Graph::tape_len`] before [`Graph::end_step`] (or [`crate::plan::Plan::records`]
/// from a [`crate::plan::Planner`]). A step that needs more than `N` fails with
/// [`Error::TapeFull`].
///
/// ```
/// use torchlet::{Conv2dParams, Graph};
/// let mut g: Graph<f32, 64> = Graph::meta(usize::MAX);
/// let w = g.param(&[4, 1, 3, 3])?;
/// let x = g.input(&[1, 1, 8, 8], &[])?;
/// let y = g.conv2d(x, w, None, Conv2dParams::default())?;
/// let t = g.input(&[1, 4, 6, 6], &[])?;
/// let loss = g.mse_loss(y, t)?;
/// g.backward(loss)?;
/// assert_eq!(g.tape_len(), 5); // w, x, y, t, loss: `Graph<f32, 5>` runs this step
/// # Ok::<(), torchlet::Error>(())
/// ```
pub struct Graph<'a, S: Scalar, const N: usize> {
    pub(crate) arena: Arena<'a, S>,
    pub(crate) nodes: heapless::Vec<Node<S, N>, N>,
    n_params: usize,
    gen: u16,
    grad_enabled: bool,
    /// Whether inputs refuse non-finite data (see [`Graph::set_check_finite`]).
    check_finite: bool,
    /// Train (true) or eval mode, read by layers (see [`Graph::set_training`]).
    pub(crate) training: bool,
    /// Whether ops may keep lossy 16-bit saves (see [`Graph::set_compact_saves`]).
    pub(crate) compact_saves: bool,
    /// Dropout's generator state: each dropout call takes its mask seed from it.
    pub(crate) dropout_state: u32,
    /// The optimizer's hook called during backward (fused SGD, see
    /// [`Graph::set_fused_sgd`]); with one, parameters have no gradient buffer.
    pub(crate) param_hook: Option<crate::optim::ParamHook<S, N>>,
    /// The shape-trace callback, if any.
    trace: Option<TraceFn<'a>>,
    /// What reports a record to `trace`: set only by [`Graph::set_trace`], so a program
    /// that never traces links none of the reporting code.
    tracer: Option<trace::Reporter<S, N>>,
    /// Records a step needs, from its plan ([`Graph::set_plan`]), for [`Error::TapeFull`].
    planned_records: Option<usize>,
    /// The arena's high-water mark when backward last started (the forward pass's).
    pub(crate) forward_high_water: usize,
    /// Work counted so far ([`Graph::macs`]).
    work: u64,
    /// Holes backward frees while a record's memory is given back (`memory.rs`).
    #[cfg_attr(target_arch = "arm", allow(dead_code))]
    pending: memory::Pending,
}

impl<'a, S: Scalar, const N: usize> Graph<'a, S, N> {
    /// A graph whose arena is the caller's buffer.
    pub fn new(buf: &'a mut [S]) -> Self {
        Self::with_arena(Arena::new(buf))
    }

    /// A graph that computes nothing and only plans: shapes and arena bytes, for an
    /// arena of `capacity_bytes` (pass `usize::MAX` to ask "how much?" rather than
    /// "does it fit?").
    pub fn meta(capacity_bytes: usize) -> Self {
        Graph::with_arena(Arena::meta(capacity_bytes / core::mem::size_of::<S>()))
    }

    fn with_arena(arena: Arena<'a, S>) -> Self {
        Graph {
            arena,
            nodes: heapless::Vec::new(),
            n_params: 0,
            gen: 1,
            grad_enabled: true,
            check_finite: true,
            training: true,
            compact_saves: false,
            dropout_state: 0,
            param_hook: None,
            trace: None,
            tracer: None,
            planned_records: None,
            forward_high_water: 0,
            work: 0,
            pending: memory::Pending::default(),
        }
    }

    /// The arena, for its byte counts.
    pub fn arena(&self) -> &Arena<'a, S> {
        &self.arena
    }

    /// Start measuring the arena's high-water mark afresh (for example before a step).
    pub fn reset_high_water(&mut self) {
        self.arena.reset_high_water();
    }

    /// Whether this graph only plans.
    pub fn is_meta(&self) -> bool {
        self.arena.is_meta()
    }

    /// Turn gradient recording off (inference) or on. Off, ops keep no saved values
    /// and outputs cannot be differentiated.
    pub fn set_grad_enabled(&mut self, on: bool) {
        self.grad_enabled = on;
    }

    /// Whether gradient recording is on (see [`Graph::set_grad_enabled`]).
    pub fn grad_enabled(&self) -> bool {
        self.grad_enabled
    }

    /// Number of records on the tape now (parameters included).
    pub fn tape_len(&self) -> usize {
        self.nodes.len()
    }

    /// Number of parameter *tensors*, frozen external tensors included (they share
    /// the parameters' numbering and handles); the same as
    /// [`Graph::num_param_tensors`]. For PyTorch's count of parameter values, see
    /// [`Graph::num_param_elements`].
    pub fn num_params(&self) -> usize {
        self.n_params
    }

    /// Number of parameter tensors (a conv's weight and bias are two), frozen
    /// external tensors included.
    pub fn num_param_tensors(&self) -> usize {
        self.n_params
    }

    /// Number of parameter values (`sum(p.numel() for p in model.parameters())`),
    /// frozen external tensors included.
    pub fn num_param_elements(&self) -> usize {
        self.nodes[..self.n_params]
            .iter()
            .map(|n| n.shape().numel())
            .sum()
    }

    /// The handle of parameter `i` (creation order).
    pub fn param_handle(&self, i: usize) -> Option<Tensor> {
        (i < self.n_params).then_some(Tensor {
            id: i as NodeId,
            gen: PARAM_GEN,
        })
    }

    // ---- handles -------------------------------------------------------------------

    pub(crate) fn id(&self, t: Tensor) -> Result<usize> {
        let id = t.id as usize;
        let ok = if t.gen == PARAM_GEN {
            id < self.n_params
        } else {
            t.gen == self.gen && id >= self.n_params && id < self.nodes.len()
        };
        if !ok {
            Err(Error::StaleTensor)
        } else if self.nodes[id].dropped() {
            Err(Error::InvalidState {
                what: "tensor was freed or consumed by an in-place op",
            })
        } else {
            Ok(id)
        }
    }

    pub(crate) fn node(&self, t: Tensor) -> Result<&Node<S, N>> {
        let id = self.id(t)?;
        Ok(&self.nodes[id])
    }

    /// The shape of a tensor.
    pub fn shape(&self, t: Tensor) -> Result<Shape> {
        Ok(self.node(t)?.shape())
    }

    /// Whether `t` gets a gradient (a trainable parameter, or computed from one or
    /// from an input that asked for one), as PyTorch's `Tensor.requires_grad`.
    pub fn requires_grad(&self, t: Tensor) -> Result<bool> {
        Ok(self.nodes[self.id(t)?].requires_grad())
    }

    /// The name of the op that produced a tensor (`"leaf"` for inputs and parameters,
    /// and for outputs recorded with gradients off).
    pub fn op_name(&self, t: Tensor) -> Result<&'static str> {
        Ok(self.node(t)?.op().name())
    }

    /// A tensor's values (empty in a meta graph).
    pub fn data(&self, t: Tensor) -> Result<&[S]> {
        let span = self.node(t)?.data;
        Ok(self.arena.get(span))
    }

    /// A tensor's gradient, if it has one (after [`Graph::backward`]).
    pub fn grad(&self, t: Tensor) -> Result<Option<&[S]>> {
        Ok(self.node(t)?.grad().map(|g| self.arena.get(g)))
    }

    /// Whether `t`'s data is external (a frozen tensor from [`Graph::external`]).
    pub(crate) fn is_external(&self, t: Tensor) -> Result<bool> {
        Ok(self.arena.is_external(self.node(t)?.data))
    }

    /// Write access to a parameter's values (initialisation, loading weights).
    pub fn param_data_mut(&mut self, t: Tensor) -> Result<&mut [S]> {
        if t.gen != PARAM_GEN {
            return Err(Error::InvalidParam {
                op: "param_data_mut",
                what: "tensor is not a parameter",
                value: t.id as i64,
            });
        }
        let span = self.node(t)?.data;
        if self.arena.is_external(span) {
            return Err(Error::InvalidParam {
                op: "param_data_mut",
                what: "tensor is external (frozen, read-only data); parameter index",
                value: t.id as i64,
            });
        }
        Ok(self.arena.get_mut(span))
    }

    // ---- recording -----------------------------------------------------------------

    /// Whether an op on these inputs records a gradient path.
    pub(crate) fn needs_grad(&self, inputs: &[Option<usize>]) -> bool {
        self.grad_enabled && inputs.iter().flatten().any(|&i| self.nodes[i].requires_grad())
    }

    /// Fails early, before any allocation, when the tape has no room.
    pub(crate) fn ensure_room(&self) -> Result<()> {
        if self.nodes.is_full() {
            Err(self.tape_full())
        } else {
            Ok(())
        }
    }

    /// Appends a record with a fresh data span of `shape` and `saved_len` saved words;
    /// `backward` is the op's rule (kept unless `op` is [`Op::LEAF`]). On failure
    /// nothing is allocated and nothing is recorded.
    pub(crate) fn push(
        &mut self,
        shape: Shape,
        op: Op,
        backward: Option<BackwardFn<S, N>>,
        requires_grad: bool,
        saved_len: usize,
    ) -> Result<Tensor> {
        self.ensure_room()?;
        let name = if op.is_leaf() {
            "input or no-grad op"
        } else {
            op.name()
        };
        self.set_site(name, Phase::Forward);
        let mark = self.arena.mark();
        let data = self.arena.alloc(shape.numel())?;
        let saved = match self.arena.alloc(saved_len) {
            Ok(s) => s,
            Err(e) => {
                self.arena.release(mark);
                return Err(e);
            }
        };
        let t = self.push_node(Node::new(shape, data, op, backward, requires_grad, saved))?;
        self.report_trace(data.len + saved.len);
        Ok(t)
    }

    /// Appends a record whose data span was chosen by the caller (views).
    pub(crate) fn push_node(&mut self, node: Node<S, N>) -> Result<Tensor> {
        let id = self.nodes.len();
        self.nodes.push(node).map_err(|_| self.tape_full())?;
        Ok(Tensor {
            id: id as NodeId,
            gen: self.gen,
        })
    }

    // ---- backward (see backward.rs) ----------------------------------------------

    /// `grad[input] += f(grad[output], ...)`: the read spans and the input's gradient
    /// span, or `None` when the input needs no gradient.
    pub(crate) fn grad_of(&self, id: NodeId) -> Option<Span> {
        let n = &self.nodes[id as usize];
        if n.requires_grad() {
            n.grad()
        } else {
            None
        }
    }

    // ---- end of step ---------------------------------------------------------------

    /// Zeroes every parameter gradient (before accumulating a new batch).
    pub fn zero_grad(&mut self) {
        for i in 0..self.n_params {
            if let Some(g) = self.nodes[i].grad() {
                self.arena.fill(g, S::ZERO);
            }
        }
    }

    /// Ends the step: drops its records and scratch memory. Parameters, their
    /// gradients and optimizer state stay.
    pub fn end_step(&mut self) {
        self.nodes.truncate(self.n_params);
        if self.param_hook.is_some() {
            for n in self.nodes.iter_mut() {
                n.set_grad(None);
            }
        }
        self.arena.reset_scratch();
        self.gen = match self.gen.wrapping_add(1) {
            PARAM_GEN => PARAM_GEN + 1,
            g => g,
        };
    }

    /// Visit every trainable parameter with its index (creation order), data and
    /// gradient (optimizers); frozen external tensors are left out.
    pub(crate) fn param_spans(&self) -> impl Iterator<Item = (usize, Span, Span)> + '_ {
        self.nodes[..self.n_params]
            .iter()
            .enumerate()
            .filter(|(_, n)| n.requires_grad())
            .map(|(j, n)| (j, n.data, n.grad().unwrap_or(Span::EMPTY)))
    }

    /// [`Graph::param_spans`] in a list of capacity `N`, filled without `collect`
    /// (heapless' `FromIterator` panics on overflow, which links a panic message and
    /// `core::fmt` code into every optimizer). The tape holds at most `N` records, so
    /// the parameters always fit and no push is refused.
    pub(crate) fn param_span_list(&self) -> heapless::Vec<(usize, Span, Span), N> {
        let mut list = heapless::Vec::new();
        for spans in self.param_spans() {
            let _ = list.push(spans);
        }
        list
    }

    /// Raw arena access for optimizers.
    pub(crate) fn arena_mut(&mut self) -> &mut Arena<'a, S> {
        &mut self.arena
    }
}
