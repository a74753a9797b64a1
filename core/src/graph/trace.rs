//! The shape trace: a callback per recorded op, like PyTorch forward hooks that print
//! each layer's output shape. It gets the op's name, its input and output shapes and
//! the arena bytes the record took; it works in a meta graph too, so a whole network
//! can be traced at any input size without data.

use super::Graph;
use crate::scalar::Scalar;
use crate::shape::Shape;

/// One recorded op, as the trace callback sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    /// Position on the tape.
    pub index: usize,
    /// PyTorch-style op name (`"conv2d"`, `"relu_"`, `"leaf"` for inputs).
    pub op: &'static str,
    /// Shapes of the op's tensor inputs (parameters included), in order.
    pub inputs: [Option<Shape>; 3],
    /// Shape of the output.
    pub output: Shape,
    /// Arena bytes this record took (output and saved values; 0 for views).
    pub bytes: usize,
    /// Arena bytes in use right after the record.
    pub arena_used: usize,
}

#[cfg(feature = "defmt")]
impl defmt::Format for TraceEvent {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(
            f,
            "#{=usize} {=str} -> {} ({=usize} B, arena {=usize} B)",
            self.index,
            self.op,
            self.output,
            self.bytes,
            self.arena_used
        )
    }
}

/// The callback type: called once per record, during the op call.
pub type TraceFn<'a> = &'a mut dyn FnMut(&TraceEvent);

/// The function that builds a [`TraceEvent`] for the last record and calls the trace.
pub(crate) type Reporter<S, const N: usize> = for<'g> fn(&mut Graph<'g, S, N>, usize);

impl<'a, S: Scalar, const N: usize> Graph<'a, S, N> {
    /// Sets (or with `None` removes) the shape-trace callback.
    pub fn set_trace(&mut self, f: Option<TraceFn<'a>>) {
        self.trace = f;
        self.tracer = Some(Self::trace_last);
    }

    /// Reports the last record, which took `fresh_words` of arena, to the trace
    /// callback if one is set.
    #[inline]
    pub(crate) fn report_trace(&mut self, fresh_words: usize) {
        if let Some(report) = self.tracer {
            report(self, fresh_words);
        }
    }

    /// What [`Graph::report_trace`] calls, through `Graph::tracer`, which only
    /// [`Graph::set_trace`] sets: without a trace, a program does not link this.
    fn trace_last(g: &mut Graph<'_, S, N>, fresh_words: usize) {
        if g.trace.is_none() {
            return;
        }
        let Some(index) = g.nodes.len().checked_sub(1) else {
            return;
        };
        let n = g.nodes[index];
        let mut inputs = [None; 3];
        for (d, j) in inputs.iter_mut().zip(n.op().inputs()) {
            *d = j.map(|j| g.nodes[j as usize].shape());
        }
        let ev = TraceEvent {
            index,
            op: n.op().name(),
            inputs,
            output: n.shape(),
            bytes: fresh_words * core::mem::size_of::<S>(),
            arena_used: g.arena.used_bytes(),
        };
        if let Some(f) = g.trace.as_mut() {
            f(&ev);
        }
    }
}
