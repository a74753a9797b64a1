//! The work count of the steps a graph runs: multiply-accumulates of convolutions and
//! linear layers, and a small constant per element every other kernel touches.
//!
//! - Each op computes its count next to its shape rule and adds it when its kernel
//!   would run ([`Graph::exec`](crate::graph::Graph) counts the elements of its views
//!   unless the op gives a count), in a meta graph as in a real one, so the count of a
//!   planned step equals the count of the real step, as its bytes do.
//! - Saturating: a count past `u64::MAX` stays there (a shape a file controls can ask
//!   for more work than any machine will do, and the point is to see it).

use super::Graph;
use crate::arena::Span;
use crate::scalar::Scalar;

/// The saturating product of `parts` (a work count).
pub(crate) fn product(parts: &[usize]) -> u64 {
    parts.iter().fold(1u64, |acc, &p| acc.saturating_mul(p as u64))
}

/// Elements of `reads` and `write` together: the work of a kernel that touches each a
/// few times.
pub(crate) fn touched(reads: &[Span], write: Span) -> u64 {
    reads
        .iter()
        .fold(write.len as u64, |acc, r| acc.saturating_add(r.len as u64))
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Multiply-accumulates (and element operations) counted since the graph was made
    /// or [`Graph::reset_macs`]: forward, backward and optimizer work alike, meta
    /// graphs included (a plan's [`crate::plan::Plan::macs`] is this count for its
    /// step). Saturates at `u64::MAX`.
    pub fn macs(&self) -> u64 {
        self.work
    }

    /// Starts [`Graph::macs`] again from zero (for example before a step).
    pub fn reset_macs(&mut self) {
        self.work = 0;
    }

    /// Puts the work count back to `n` (after backward's dry run).
    pub(crate) fn work_restore(&mut self, n: u64) {
        self.work = n;
    }

    /// Adds `n` to the work count.
    pub(crate) fn count(&mut self, n: u64) {
        self.work = self.work.saturating_add(n);
    }
}
