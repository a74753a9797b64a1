//! Backward's gradient stack (hosts and wasm).
//!
//! - Activation gradients are allocated at the top of the free gap, growing down
//!   from the long-lived end, apart from the forward's data and saved values at
//!   scratch's bottom. Backward frees those from scratch's top down, mostly with
//!   nothing live above them, and no gradient slides with them; a record's input
//!   gradient slides up only over the output gradient it replaces, or, when that one
//!   is the shorter, the output gradient is moved below the new input gradients
//!   first and frees its words without moving anything.
//! - The words in use, and so the high-water mark, are the same as with one stack:
//!   both stay compact.
//! - When backward ends, the gradients still held (inputs created with a gradient)
//!   move down to scratch's top, so the long-lived end may grow again.
//! - Cortex-M keeps one stack: its gradients come from [`Arena::alloc_grad`] on
//!   scratch, and none of the rest is linked.

use super::{Arena, Span};
use crate::error::Result;
use crate::scalar::Scalar;

impl<S: Scalar> Arena<'_, S> {
    /// Where the words above scratch's free gap start: the gradient stack's bottom.
    pub(super) fn low_end(&self) -> usize {
        #[cfg(not(target_arch = "arm"))]
        return self.grads_bottom;
        #[cfg(target_arch = "arm")]
        self.persist_bottom
    }

    /// A zeroed gradient buffer: on the gradient stack (hosts and wasm), or scratch.
    pub(crate) fn alloc_grad(&mut self, len: usize) -> Result<Span> {
        #[cfg(not(target_arch = "arm"))]
        {
            let span = self.alloc_grad_unset(len)?;
            self.fill(span, S::ZERO);
            Ok(span)
        }
        #[cfg(target_arch = "arm")]
        self.alloc_zeroed(len)
    }
}

#[cfg(not(target_arch = "arm"))]
impl<S: Scalar> Arena<'_, S> {
    /// [`Arena::alloc_grad`] without clearing: for a kernel that writes every element.
    pub(crate) fn alloc_grad_unset(&mut self, len: usize) -> Result<Span> {
        if len > self.free_words() {
            return Err(self.exhausted(len));
        }
        self.grads_bottom -= len;
        self.high_water = self.high_water.max(self.words_in_use());
        Ok(Span {
            off: self.grads_bottom,
            len,
        })
    }

    /// The gradient stack's bottom, to hand back to [`Arena::set_grads_bottom`].
    pub(crate) fn grads_mark(&self) -> usize {
        self.grads_bottom
    }

    /// Sets the gradient stack's bottom back (undoing a dry run).
    pub(crate) fn set_grads_bottom(&mut self, bottom: usize) {
        if bottom >= self.scratch_top && bottom <= self.persist_bottom {
            self.grads_bottom = bottom;
        }
    }

    /// Whether `span` lies on the gradient stack.
    pub(crate) fn in_grads(&self, span: Span) -> bool {
        span.len > 0 && span.off >= self.grads_bottom && span.end() <= self.persist_bottom
    }

    /// Frees the sorted, disjoint spans `holes` of the gradient stack at once: what
    /// lies below each slides up, once. Callers shift their spans with
    /// [`grads_shift`].
    pub(crate) fn close_grad_holes(&mut self, holes: &[Span]) {
        let mut shift = 0;
        for (k, h) in holes.iter().enumerate().rev() {
            shift += h.len;
            let start = match k {
                0 => self.grads_bottom,
                _ => holes[k - 1].end(),
            };
            if !self.is_meta() {
                self.buf.copy_within(start..h.off, start + shift);
            }
        }
        self.grads_bottom += shift;
    }

    /// When `above` lies right on top of the `fresh` words at the stack's bottom (new
    /// gradients, not yet written) and is the shorter, moves it below them and returns
    /// its new offset; the fresh spans then start `above.len` words higher. Freeing
    /// `above` later moves nothing: copying it once is cheaper than sliding the fresh
    /// words up over it (a pool's input gradient over its 4x smaller output's).
    pub(crate) fn sink_below_fresh(&mut self, above: Span, fresh: usize) -> Option<usize> {
        let bottom = self.grads_bottom;
        if above.len == 0 || fresh <= above.len || above.off != bottom + fresh {
            return None;
        }
        if !self.is_meta() {
            self.buf.copy_within(above.off..above.end(), bottom);
        }
        Some(bottom)
    }

    /// Moves the whole gradient stack down to scratch's top (it becomes scratch) and
    /// returns `(from, to, len)`: spans in `from..from + len` now start at `to`
    /// onwards. The words in use do not change.
    pub(crate) fn grads_to_scratch(&mut self) -> (usize, usize, usize) {
        let (from, to) = (self.grads_bottom, self.scratch_top);
        let len = self.persist_bottom - from;
        if len > 0 && !self.is_meta() {
            self.buf.copy_within(from..from + len, to);
        }
        self.scratch_top += len;
        self.grads_bottom = self.persist_bottom;
        (from, to, len)
    }
}

/// Where span `s` goes when the sorted `holes` of the gradient stack close: inside a
/// hole it dies (empty); below holes it moves up by their lengths; `None` when it
/// does not move (not on the stack below a hole).
#[cfg(not(target_arch = "arm"))]
pub(crate) fn grads_shift(s: Span, bottom: usize, holes: &[Span]) -> Option<Span> {
    if s.off < bottom || holes.last().is_none_or(|h| s.off >= h.end()) {
        return None;
    }
    let mut shift = 0;
    for h in holes.iter().rev() {
        if s.off >= h.end() {
            break;
        }
        if s.off >= h.off {
            return Some(Span {
                off: h.end() + shift,
                len: 0,
            });
        }
        shift += h.len;
    }
    Some(Span {
        off: s.off + shift,
        len: s.len,
    })
}

#[cfg(all(test, not(target_arch = "arm")))]
mod tests {
    use super::super::{Arena, Span};
    use super::grads_shift;

    #[test]
    fn gradients_grow_down_from_the_long_lived_end_and_count_as_used() {
        let mut buf = [7.0f32; 16];
        let mut a = Arena::new(&mut buf);
        a.alloc_persistent(2).unwrap();
        let s = a.alloc(3).unwrap();
        let g = a.alloc_grad(4).unwrap();
        assert_eq!((s, g), (Span { off: 0, len: 3 }, Span { off: 10, len: 4 }));
        assert_eq!(a.get(g), &[0.0; 4]);
        assert_eq!(a.used_bytes(), 9 * 4);
        assert_eq!(a.high_water_bytes(), 9 * 4);
        // The two stacks meet with the usual error, and long-lived memory waits.
        assert!(a.alloc(8).is_err());
        assert!(a.alloc_grad(8).is_err());
        assert!(a.alloc_persistent(1).is_err());
        a.reset_scratch();
        assert_eq!(a.used_bytes(), 2 * 4);
        assert!(a.alloc_persistent(1).is_ok());
    }

    #[test]
    fn closing_gradient_holes_slides_what_lies_below_them_up() {
        let mut buf = [0.0f32; 12];
        let mut a = Arena::new(&mut buf);
        let g: [Span; 4] = core::array::from_fn(|k| a.alloc_grad(k + 1).unwrap());
        for (k, s) in g.iter().enumerate() {
            a.get_mut(*s).fill(k as f32);
        }
        // Stack from the top: g0 (1 word) at 11, g1 at 9..11, g2 at 6..9, g3 at 2..6.
        let holes = [g[2], g[0]];
        let bottom = a.grads_mark();
        a.close_grad_holes(&holes);
        assert_eq!(a.used_bytes(), 6 * 4);
        let g1 = grads_shift(g[1], bottom, &holes).unwrap();
        let g3 = grads_shift(g[3], bottom, &holes).unwrap();
        assert_eq!((g1, g3), (Span { off: 10, len: 2 }, Span { off: 6, len: 4 }));
        assert_eq!((a.get(g1), a.get(g3)), (&[1.0; 2][..], &[3.0; 4][..]));
        assert_eq!(grads_shift(g[2], bottom, &holes).map(|s| s.len), Some(0));
        // A scratch span does not move.
        assert_eq!(grads_shift(Span { off: 0, len: 2 }, bottom, &holes), None);
        // What is left moves down to scratch's top, unchanged.
        a.alloc(1).unwrap();
        assert_eq!(a.grads_to_scratch(), (6, 1, 6));
        assert_eq!(a.get(Span { off: 1, len: 6 }), &[3.0, 3.0, 3.0, 3.0, 1.0, 1.0]);
        assert_eq!(a.used_bytes(), 7 * 4);
        assert!(a.alloc_persistent(1).is_ok());
    }

    #[test]
    fn a_short_gradient_sinks_below_the_fresh_ones_allocated_under_it() {
        let mut buf = [0.0f32; 12];
        let mut a = Arena::new(&mut buf);
        let gy = a.alloc_grad(2).unwrap();
        a.get_mut(gy).copy_from_slice(&[5.0, 6.0]);
        let gx = a.alloc_grad_unset(4).unwrap();
        // Not when the fresh words are no longer than it, or it is not right above.
        assert_eq!(a.sink_below_fresh(gy, 2), None);
        assert_eq!(a.sink_below_fresh(Span { off: 0, len: 2 }, 4), None);
        let off = a.sink_below_fresh(gy, gx.len).unwrap();
        assert_eq!((off, a.grads_mark()), (gx.off, 6));
        assert_eq!(a.get(Span { off, len: 2 }), &[5.0, 6.0]);
        // Freeing it, now at the bottom, moves nothing and frees its words.
        a.close_grad_holes(&[Span { off, len: 2 }]);
        assert_eq!((a.grads_mark(), a.used_bytes()), (8, 4 * 4));
    }
}
