//! Giving step memory back early, so a step needs far less than the sum of its tensors.
//!
//! - Scratch stays one contiguous stack. Freeing a span in the middle slides everything
//!   above it down (a `copy_within`) and shifts the spans the tape holds: the cost is a
//!   copy of the live bytes above the hole and a walk over the tape, never a search.
//! - A tensor's data can go once the caller gave its handle up ([`Graph::free`], or an
//!   in-place op consumed it) and no recorded backward still reads it (conv and linear
//!   read their input, sigmoid and tanh their output; ReLU and max pooling keep compact
//!   masks and indices instead).
//! - Backward frees each activation gradient and each node's saved values as soon as
//!   that node's backward has run (see `backward.rs`).

use super::{Graph, NodeId, Tensor, PARAM_GEN};
use crate::arena::Span;
use crate::error::{Error, Result};
use crate::scalar::Scalar;

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Gives up a handle, like dropping the last reference to a tensor in PyTorch: its
    /// memory is reclaimed now if nothing recorded needs its value for backward, else
    /// as soon as backward has used it. Later use of the handle is refused.
    pub fn free(&mut self, t: Tensor) -> Result<()> {
        if t.gen == PARAM_GEN {
            return Err(Error::InvalidParam {
                op: "free",
                what: "parameters live for the whole run; parameter index",
                value: t.id as i64,
            });
        }
        let i = self.id(t)?;
        self.nodes[i].set_dropped();
        self.reclaim_if_unused(i);
        Ok(())
    }

    /// Whether [`Graph::relu_`] may overwrite `t`'s memory now.
    pub fn can_overwrite_tensor(&self, t: Tensor) -> bool {
        self.id(t)
            .is_ok_and(|i| i >= self.n_params && self.can_overwrite(i))
    }

    /// Whether a recorded backward that has not run yet reads node `k`'s data.
    pub(crate) fn data_needed(&self, k: usize) -> bool {
        let n = &self.nodes[k];
        if n.requires_grad() && !n.spent() && n.op().reads_own_output() {
            return true;
        }
        self.nodes[k + 1..]
            .iter()
            .any(|c| c.requires_grad() && !c.spent() && c.op().reads_input_data(k as NodeId, self.wanted(c)))
    }

    /// Which of `c`'s record inputs want a gradient (bit `j` for input `j`).
    fn wanted(&self, c: &super::Node<S, N>) -> u8 {
        let wants = |j: usize| c.op().inputs()[j].is_some_and(|i| self.nodes[i as usize].requires_grad());
        (0..3).filter(|&j| wants(j)).fold(0, |m, j| m | 1 << j)
    }

    /// Nodes sharing node `k`'s data span (itself, its views, inputs taken over in place).
    fn all_sharers(&self, k: usize, pred: impl Fn(usize) -> bool) -> bool {
        let d = self.nodes[k].data;
        (self.n_params..self.nodes.len())
            .filter(|&m| {
                let s = self.nodes[m].data;
                s.len > 0 && s.off == d.off
            })
            .all(pred)
    }

    /// Whether node `k`'s data may be overwritten in place: not a view, and no other
    /// live handle or pending backward uses the span.
    pub(crate) fn can_overwrite(&self, k: usize) -> bool {
        let n = &self.nodes[k];
        if n.view() || n.data.off >= self.arena.mark() {
            return false;
        }
        self.all_sharers(k, |m| !self.data_needed(m) && (m == k || self.nodes[m].dropped()))
    }

    /// Reclaims the data span node `k` shares with others once every sharer is dropped
    /// and no pending backward reads it.
    pub(crate) fn reclaim_if_unused(&mut self, k: usize) {
        let d = self.nodes[k].data;
        if d.len == 0 || k < self.n_params || d.end() > self.arena.mark() {
            return;
        }
        let free = self.all_sharers(k, |m| self.nodes[m].dropped() && !self.data_needed(m));
        if free {
            self.reclaim(d);
        }
    }

    /// Frees the scratch span `hole` and keeps every recorded span pointing at its data.
    pub(crate) fn reclaim(&mut self, hole: Span) {
        let top = self.arena.mark();
        if hole.len == 0 || hole.end() > top {
            return;
        }
        self.arena.close_hole(hole);
        let fix = |s: &mut Span| {
            if s.off >= hole.off && s.off < hole.end() {
                *s = Span {
                    off: hole.off,
                    len: 0,
                };
            } else if s.off >= hole.end() && s.off < top {
                s.off -= hole.len;
            }
        };
        for n in self.nodes.iter_mut() {
            fix(&mut n.data);
            fix(&mut n.saved);
            if let Some(mut g) = n.grad() {
                fix(&mut g);
                n.set_grad(Some(g));
            }
        }
    }
}
