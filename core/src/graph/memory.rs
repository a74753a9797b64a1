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
//!   that node's backward has run (see `backward.rs`). On hosts and wasm the
//!   gradients live on a second stack at the free gap's top (`arena/grads.rs`), so
//!   freeing the forward's data under them moves no gradient.

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

    /// Records an in-place op on node `xi`, which the caller checked may be
    /// overwritten ([`Graph::can_overwrite`]): the output node takes over `xi`'s span,
    /// `saved_len` words are allocated for backward (given back if recording fails),
    /// and `xi`'s handle is consumed. Returns the output and the saved span.
    pub(crate) fn take_over(
        &mut self,
        site: &'static str,
        xi: usize,
        op: super::Op,
        rule: Option<super::BackwardFn<S, N>>,
        rg: bool,
        saved_len: usize,
    ) -> Result<(Tensor, Span)> {
        self.ensure_room()?;
        self.set_site(site, crate::error::Phase::Forward);
        let mark = self.arena.mark();
        let saved = self.arena.alloc(saved_len)?;
        let xn = self.nodes[xi];
        let node = super::Node::new(xn.shape(), xn.data, op, rule, rg, saved);
        let out = self.push_node(node).inspect_err(|_| self.arena.release(mark))?;
        self.nodes[xi].set_view();
        self.nodes[xi].set_dropped();
        self.report_trace(saved.len);
        Ok((out, saved))
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

    /// Frees the scratch (or gradient stack) span `hole` and keeps every recorded span
    /// pointing at its data.
    pub(crate) fn reclaim(&mut self, hole: Span) {
        let top = self.arena.mark();
        #[cfg(not(target_arch = "arm"))]
        let grads = self.arena.in_grads(hole);
        #[cfg(target_arch = "arm")]
        let grads = false;
        if hole.len == 0 || (hole.end() > top && !grads) {
            return;
        }
        #[cfg(not(target_arch = "arm"))]
        if self.pending.on {
            if self.pending.n < PENDING {
                self.pending.spans[self.pending.n] = hole;
                self.pending.n += 1;
                // The spans inside die now; the ones above move when the holes close.
                self.fix_spans(|s| {
                    if s.off >= hole.off && s.off < hole.end() {
                        *s = Span {
                            off: hole.off,
                            len: 0,
                        };
                    }
                });
                return;
            }
            // Full: closed together with this one (closing them first would move it).
            return self.close_pending_with(Some(hole));
        }
        #[cfg(not(target_arch = "arm"))]
        if grads {
            return self.close_grad_holes(&[hole]);
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
        self.fix_spans(fix);
    }

    /// Applies `fix` to every span the tape holds (data, saved values, gradients).
    fn fix_spans(&mut self, fix: impl Fn(&mut Span)) {
        for n in self.nodes.iter_mut() {
            fix(&mut n.data);
            fix(&mut n.saved);
            if let Some(mut g) = n.grad() {
                fix(&mut g);
                n.set_grad(Some(g));
            }
        }
    }

    /// From here until [`Graph::close_pending`], freed spans are collected instead of
    /// closed one by one (backward frees several per record: each close would slide
    /// the live gradients above them down again).
    pub(crate) fn defer_reclaims(&mut self) {
        #[cfg(not(target_arch = "arm"))]
        {
            self.pending.on = true;
        }
    }

    /// Closes the collected holes in one pass and stops collecting. Between
    /// [`Graph::defer_reclaims`] and this call nothing may be allocated.
    pub(crate) fn close_pending(&mut self) {
        #[cfg(not(target_arch = "arm"))]
        self.close_pending_with(None);
    }
}

#[cfg(not(target_arch = "arm"))]
impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// [`Graph::close_pending`], with one more hole not collected yet.
    fn close_pending_with(&mut self, extra: Option<Span>) {
        {
            let mut spans = [Span::EMPTY; PENDING + 1];
            let mut n = self.pending.n;
            spans[..n].copy_from_slice(&self.pending.spans[..n]);
            if let Some(h) = extra {
                spans[n] = h;
                n += 1;
            }
            self.pending = Pending::default();
            let holes = &mut spans[..n];
            holes.sort_unstable_by_key(|h| h.off);
            // Scratch's holes, then the gradient stack's (above every scratch span).
            let split = holes.iter().position(|h| self.arena.in_grads(*h)).unwrap_or(n);
            let (holes, grads) = holes.split_at(split);
            self.close_grad_holes(grads);
            debug_assert!(
                holes.windows(2).all(|w| w[0].end() <= w[1].off),
                "overlapping holes"
            );
            if holes.is_empty() {
                return;
            }
            let top = self.arena.mark();
            self.arena.close_holes(holes);
            self.fix_spans(|s| {
                if s.off < holes[0].off || s.off >= top {
                    return;
                }
                let mut shift = 0;
                for h in holes {
                    if s.off >= h.end() {
                        shift += h.len;
                    } else if s.off >= h.off {
                        *s = Span {
                            off: h.off - shift,
                            len: 0,
                        };
                        return;
                    } else {
                        break;
                    }
                }
                s.off -= shift;
            });
        }
    }

    /// Frees the sorted, disjoint `holes` of the gradient stack and moves the spans.
    fn close_grad_holes(&mut self, holes: &[Span]) {
        if holes.is_empty() {
            return;
        }
        let bottom = self.arena.grads_mark();
        self.arena.close_grad_holes(holes);
        self.fix_spans(|s| {
            if let Some(t) = crate::arena::grads_shift(*s, bottom, holes) {
                *s = t;
            }
        });
    }

    /// At the end of backward: the gradients still held move down to scratch.
    pub(crate) fn grads_to_scratch(&mut self) {
        let (from, to, len) = self.arena.grads_to_scratch();
        if len > 0 {
            self.fix_spans(|s| {
                if s.off >= from && s.off < from + len {
                    s.off = s.off - from + to;
                }
            });
        }
    }
}

/// Holes a backward record frees, collected for [`Graph::close_pending`] (hosts and
/// wasm; Cortex-M closes each at once and links none of this).
#[cfg(not(target_arch = "arm"))]
const PENDING: usize = 8;

/// The collected holes (see [`Graph::defer_reclaims`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Pending {
    #[cfg(not(target_arch = "arm"))]
    spans: [Span; PENDING],
    #[cfg(not(target_arch = "arm"))]
    n: usize,
    #[cfg(not(target_arch = "arm"))]
    on: bool,
}

#[cfg(all(test, not(target_arch = "arm")))]
mod tests {
    use crate::graph::Graph;

    #[test]
    fn collected_holes_close_at_once_and_the_spans_follow_their_data() {
        let mut buf = [0.0f32; 64];
        let mut g: Graph<f32, 8> = Graph::new(&mut buf);
        let t: [_; 5] = core::array::from_fn(|k| g.input(&[k + 1], &[k as f32 + 0.5; 8][..k + 1]).unwrap());
        let used = g.arena().used_bytes();
        g.defer_reclaims();
        g.free(t[3]).unwrap();
        g.free(t[1]).unwrap();
        // Nothing moves until the holes close.
        assert_eq!(g.arena().used_bytes(), used);
        assert_eq!(g.data(t[4]).unwrap(), &[4.5; 5]);
        g.close_pending();
        assert_eq!(g.arena().used_bytes(), used - 6 * 4);
        for k in [0, 2, 4] {
            assert_eq!(g.data(t[k]).unwrap(), &[k as f32 + 0.5; 8][..k + 1], "tensor {k}");
        }
        // Back to closing each hole at once.
        g.free(t[2]).unwrap();
        assert_eq!(g.arena().used_bytes(), used - 9 * 4);
        assert_eq!(g.data(t[4]).unwrap(), &[4.5; 5]);
    }

    #[test]
    fn gradients_grow_apart_from_the_data_and_end_on_scratch() {
        let mut buf = [0.0f32; 256];
        let mut g: Graph<f32, 8> = Graph::new(&mut buf);
        let x = g.input_with_grad(&[4], &[1.0, -2.0, 3.0, -4.0]).unwrap();
        let y = g.mul(x, x).unwrap();
        let s = g.sum(y, &[], false).unwrap();
        let top = g.arena.mark();
        g.defer_reclaims();
        // A gradient comes from the free gap's far end, not scratch's top.
        g.ensure_grad(s.id as usize).unwrap();
        let gs = g.nodes[s.id as usize].grad().unwrap();
        assert!(g.arena.in_grads(gs) && g.arena.mark() == top, "{gs:?}");
        g.nodes[s.id as usize].set_grad(None);
        g.reclaim(gs);
        g.close_pending();
        assert_eq!(g.arena.grads_mark(), 256);
        g.backward(s).unwrap();
        assert_eq!(g.grad(x).unwrap().unwrap(), &[2.0, -4.0, 6.0, -8.0]);
        // What backward leaves moves down to scratch: the gap is whole again.
        let gx = g.nodes[x.id as usize].grad().unwrap();
        assert!(!g.arena.in_grads(gx) && gx.end() <= g.arena.mark(), "{gx:?}");
        assert_eq!(g.arena.grads_mark(), 256);
    }
}
