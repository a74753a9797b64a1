//! One caller-provided buffer, allocated from both ends.
//!
//! ```text
//!  word 0                                                         capacity
//!  +-------------------------+--------------------+-----------------------+
//!  | step scratch  --->      |        free        |   <--- long-lived     |
//!  | activations, saved      |                    | parameters, their     |
//!  | values, activation      |                    | gradients, optimizer  |
//!  | gradients, workspaces   |                    | state                 |
//!  +-------------------------+--------------------+-----------------------+
//!                       scratch_top          persist_bottom
//! ```
//!
//! - Scratch is a bump allocator reset at the end of every step; a temporary
//!   workspace can be returned early with [`Arena::mark`] / [`Arena::release`].
//! - The long-lived end only grows (parameters are created once, at setup).
//! - The high-water mark is the largest `scratch + long-lived` ever in use: the number a
//!   device has to provide.
//! - A *meta* arena has no buffer at all: it does the same bookkeeping and so reports
//!   the exact high-water mark a real step would reach, while kernels are skipped.
//! - Every allocation is checked; running out is [`Error::ArenaExhausted`] with the
//!   bytes needed and free, and leaves the arena as it was.
//! - *External* data (frozen weights in flash, see [`crate::Graph::external`]) is not in
//!   the buffer at all: it is mapped read-only after the buffer's end, at word offsets
//!   `capacity..`, so a span names it like any other and the ops' reads find it through
//!   [`Arena::views`] unchanged. It takes no arena bytes and is never written.

use crate::error::{Error, Result, Site};
use crate::scalar::Scalar;

/// A range of words in the arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Span {
    pub off: usize,
    pub len: usize,
}

impl Span {
    pub const EMPTY: Span = Span { off: 0, len: 0 };
    pub fn end(&self) -> usize {
        self.off + self.len
    }
}

/// How many external (read-only, outside the buffer) slices one arena can map.
pub const MAX_EXTERNAL: usize = 8;

/// The memory of one graph: a typed buffer and two bump pointers.
pub struct Arena<'a, S: Scalar> {
    buf: &'a mut [S],
    /// Read-only slices mapped after the buffer, in order, from word `capacity` on
    /// (a plain array, not a `heapless::Vec`: the arena must have no `Drop`, or a
    /// caller's buffer would stay borrowed until the graph goes out of scope).
    external: [&'a [S]; MAX_EXTERNAL],
    /// How many of `external` are in use.
    n_external: usize,
    /// Words mapped so far: the next external slice starts at `capacity + external_words`.
    external_words: usize,
    capacity: usize,
    meta: bool,
    dry: bool,
    scratch_top: usize,
    persist_bottom: usize,
    /// Bottom of backward's gradient stack, which grows down from `persist_bottom`
    /// (hosts and wasm; see [`Arena::alloc_grad`]).
    #[cfg(not(target_arch = "arm"))]
    grads_bottom: usize,
    high_water: usize,
    /// Who allocates now (the graph keeps it current), named by an exhausted arena.
    pub(crate) site: Site,
}

impl<'a, S: Scalar> Arena<'a, S> {
    /// An arena over `buf`; its whole length is usable.
    pub fn new(buf: &'a mut [S]) -> Self {
        let capacity = buf.len();
        Arena {
            buf,
            external: [&[]; MAX_EXTERNAL],
            n_external: 0,
            external_words: 0,
            capacity,
            meta: false,
            dry: false,
            scratch_top: 0,
            persist_bottom: capacity,
            #[cfg(not(target_arch = "arm"))]
            grads_bottom: capacity,
            high_water: 0,
            site: Site::default(),
        }
    }

    /// A counting arena of `capacity_words` words that holds no data.
    pub fn meta(capacity_words: usize) -> Arena<'static, S> {
        Arena {
            buf: &mut [],
            external: [&[]; MAX_EXTERNAL],
            n_external: 0,
            external_words: 0,
            capacity: capacity_words,
            meta: true,
            dry: false,
            scratch_top: 0,
            persist_bottom: capacity_words,
            #[cfg(not(target_arch = "arm"))]
            grads_bottom: capacity_words,
            high_water: 0,
            site: Site::default(),
        }
    }

    /// Whether this arena only counts (no data, kernels skipped).
    pub fn is_meta(&self) -> bool {
        self.meta || self.dry
    }

    /// Capacity in bytes.
    pub fn capacity_bytes(&self) -> usize {
        self.capacity.saturating_mul(core::mem::size_of::<S>())
    }

    /// Bytes in use now (scratch and long-lived).
    pub fn used_bytes(&self) -> usize {
        self.words_in_use() * core::mem::size_of::<S>()
    }

    /// Bytes of the long-lived region (parameters, gradients, optimizer state).
    pub fn persistent_bytes(&self) -> usize {
        (self.capacity - self.persist_bottom) * core::mem::size_of::<S>()
    }

    /// The most bytes ever in use at once since creation or the last
    /// [`Arena::reset_high_water`].
    pub fn high_water_bytes(&self) -> usize {
        self.high_water * core::mem::size_of::<S>()
    }

    /// Start measuring the high-water mark afresh from what is in use now.
    pub fn reset_high_water(&mut self) {
        self.high_water = self.words_in_use();
    }

    fn words_in_use(&self) -> usize {
        self.scratch_top + (self.capacity - self.low_end())
    }

    fn free_words(&self) -> usize {
        self.low_end() - self.scratch_top
    }

    fn exhausted(&self, len: usize) -> Error {
        let w = core::mem::size_of::<S>();
        self.site.exhausted(len.saturating_mul(w), self.free_words() * w)
    }

    /// Scratch words, contents unspecified (kernels overwrite them).
    pub(crate) fn alloc(&mut self, len: usize) -> Result<Span> {
        if len > self.free_words() {
            return Err(self.exhausted(len));
        }
        let span = Span {
            off: self.scratch_top,
            len,
        };
        self.scratch_top += len;
        self.high_water = self.high_water.max(self.words_in_use());
        Ok(span)
    }

    /// Scratch words set to zero (Cortex-M's gradient buffers, see [`Arena::alloc_grad`]).
    #[cfg(target_arch = "arm")]
    pub(crate) fn alloc_zeroed(&mut self, len: usize) -> Result<Span> {
        let span = self.alloc(len)?;
        self.fill(span, S::ZERO);
        Ok(span)
    }

    /// Long-lived words, set to zero.
    pub(crate) fn alloc_persistent(&mut self, len: usize) -> Result<Span> {
        #[cfg(not(target_arch = "arm"))]
        if self.grads_bottom != self.persist_bottom {
            return Err(Error::InvalidState {
                what: "long-lived memory cannot grow under the gradients of an unfinished backward (end the step first)",
            });
        }
        if len > self.free_words() {
            return Err(self.exhausted(len));
        }
        self.persist_bottom -= len;
        #[cfg(not(target_arch = "arm"))]
        {
            self.grads_bottom = self.persist_bottom;
        }
        self.high_water = self.high_water.max(self.words_in_use());
        let span = Span {
            off: self.persist_bottom,
            len,
        };
        self.fill(span, S::ZERO);
        Ok(span)
    }

    /// Maps a read-only slice after the buffer and returns its span. It takes no arena
    /// bytes (the high-water mark does not move), in a meta arena too.
    /// A slice inside one already mapped (a tensor of a mapped model file) takes no
    /// new slot: its span points into that one.
    pub(crate) fn map_external(&mut self, data: &'a [S]) -> Result<Span> {
        if let Some(span) = self.inside_external(data) {
            return Ok(span);
        }
        let off = self
            .capacity
            .checked_add(self.external_words)
            .ok_or(Error::Overflow { op: "external" })?;
        let words = self
            .external_words
            .checked_add(data.len())
            .filter(|w| w.checked_add(self.capacity).is_some())
            .ok_or(Error::Overflow { op: "external" })?;
        let slot = self
            .external
            .get_mut(self.n_external)
            .ok_or(Error::InvalidParam {
                op: "external",
                what: "too many external tensors for one graph; the limit is",
                value: MAX_EXTERNAL as i64,
            })?;
        *slot = data;
        self.n_external += 1;
        self.external_words = words;
        Ok(Span { off, len: data.len() })
    }

    /// The span of `data` if its memory lies inside a mapped slice (compared by
    /// address; nothing is dereferenced).
    fn inside_external(&self, data: &[S]) -> Option<Span> {
        let size = core::mem::size_of::<S>();
        let (start, len) = (data.as_ptr() as usize, data.len());
        let mut base = self.capacity;
        for e in &self.external[..self.n_external] {
            let from = start.checked_sub(e.as_ptr() as usize);
            if let Some(from) = from.filter(|f| f % size == 0 && f / size + len <= e.len() && len > 0) {
                return Some(Span {
                    off: base + from / size,
                    len,
                });
            }
            base += e.len();
        }
        None
    }

    /// Whether `span` names external (read-only) data rather than the buffer.
    pub(crate) fn is_external(&self, span: Span) -> bool {
        span.len > 0 && span.off >= self.capacity
    }

    /// The external data `span` names, if it lies inside one mapped slice (a free
    /// function of the fields, so it can run while the buffer is borrowed mutably).
    fn external_slice(external: &[&'a [S]], capacity: usize, span: Span) -> Option<&'a [S]> {
        let mut base = capacity;
        for &e in external {
            if span.off >= base && span.end() <= base + e.len() {
                return e.get(span.off - base..span.end() - base);
            }
            base += e.len();
        }
        None
    }

    /// The current scratch top, to hand back to [`Arena::release`].
    pub(crate) fn mark(&self) -> usize {
        self.scratch_top
    }

    /// Frees every scratch allocation made after `mark` was taken.
    pub(crate) fn release(&mut self, mark: usize) {
        if mark <= self.scratch_top {
            self.scratch_top = mark;
        }
    }

    /// Sets the scratch top back to a value taken with [`Arena::mark`] (undoing a
    /// dry run, which may have moved it either way).
    pub(crate) fn set_scratch_top(&mut self, top: usize) {
        if top <= self.low_end() {
            self.scratch_top = top;
        }
    }

    /// Turns data handling off (a dry run: bookkeeping only) or back on. Only has an
    /// effect on an arena that has a buffer.
    pub(crate) fn set_dry(&mut self, dry: bool) {
        self.dry = dry;
    }

    /// Removes the scratch span `hole`, sliding everything above it down so that
    /// scratch stays one contiguous stack. Callers shift their spans to match.
    pub(crate) fn close_hole(&mut self, hole: Span) {
        let top = self.scratch_top;
        if hole.len == 0 || hole.end() > top {
            return;
        }
        if !self.is_meta() {
            self.buf.copy_within(hole.end()..top, hole.off);
        }
        self.scratch_top = top - hole.len;
    }

    /// Frees the sorted, disjoint scratch spans `holes` at once: each live run between
    /// them slides down once, however many holes lie below it.
    #[cfg(not(target_arch = "arm"))]
    pub(crate) fn close_holes(&mut self, holes: &[Span]) {
        let (top, mut shift) = (self.scratch_top, 0);
        for (k, h) in holes.iter().enumerate() {
            shift += h.len;
            let end = holes.get(k + 1).map_or(top, |n| n.off);
            if !self.is_meta() {
                self.buf.copy_within(h.end()..end, h.end() - shift);
            }
        }
        self.scratch_top = top - shift;
    }

    /// Frees all scratch (end of a step).
    pub(crate) fn reset_scratch(&mut self) {
        self.scratch_top = 0;
        #[cfg(not(target_arch = "arm"))]
        {
            self.grads_bottom = self.persist_bottom;
        }
    }

    pub(crate) fn fill(&mut self, span: Span, v: S) {
        if self.dry {
            return;
        }
        if let Some(s) = self.buf.get_mut(span.off..span.end()) {
            s.fill(v);
        }
    }

    /// Read access to a span (empty in a meta arena, except for external data).
    pub(crate) fn get(&self, span: Span) -> &[S] {
        if self.is_external(span) {
            return Self::external_slice(&self.external[..self.n_external], self.capacity, span)
                .unwrap_or(&[]);
        }
        self.buf.get(span.off..span.end()).unwrap_or(&[])
    }

    /// Write access to a span (empty in a meta arena).
    pub(crate) fn get_mut(&mut self, span: Span) -> &mut [S] {
        self.buf.get_mut(span.off..span.end()).unwrap_or(&mut [])
    }

    /// The whole buffer (optimizers index parameter, gradient and state spans in it).
    pub(crate) fn whole_mut(&mut self) -> &mut [S] {
        self.buf
    }

    /// `R` read views and one disjoint write view, borrowed at once. Spans come
    /// from this arena's allocator, so they never overlap a fresh write span;
    /// an overlap would be an engine bug and is reported as an error, not UB.
    pub(crate) fn views<const R: usize>(
        &mut self,
        reads: [Span; R],
        write: Span,
    ) -> Result<([&[S]; R], &mut [S])> {
        let mut out: [&[S]; R] = [&[]; R];
        let mid = self.views_into(&reads, &mut out, write)?;
        Ok((out, mid))
    }

    /// The body of [`Arena::views`], one copy for every `R` (it is called by every op;
    /// monomorphized per `R` it was four copies of about 400 bytes on the Cortex-M4F).
    /// Fills `out[i]` with the view of `reads[i]`.
    #[inline(never)]
    fn views_into<'s>(&'s mut self, reads: &[Span], out: &mut [&'s [S]], write: Span) -> Result<&'s mut [S]> {
        if self.is_meta() {
            return Ok(&mut []);
        }
        if self.is_external(write) {
            return Err(read_only());
        }
        let (external, cap) = (&self.external[..self.n_external], self.capacity);
        let (lo, rest) = self.buf.split_at_mut(write.off.min(self.capacity));
        let (mid, hi) = rest.split_at_mut(write.len.min(rest.len()));
        for (o, r) in out.iter_mut().zip(reads.iter()) {
            *o = if r.len > 0 && r.off >= cap {
                Self::external_slice(external, cap, *r).ok_or_else(outside)?
            } else if r.end() <= write.off {
                &lo[r.off..r.end()]
            } else if r.off >= write.end() && r.end() <= write.end() + hi.len() {
                &hi[r.off - write.end()..r.end() - write.end()]
            } else if r.len == 0 {
                &[]
            } else {
                return Err(Error::InvalidState {
                    what: "arena views overlap (engine bug)",
                });
            };
        }
        Ok(mid)
    }
}

/// A write to external data was asked for: they are read-only (frozen).
fn read_only() -> Error {
    Error::InvalidState {
        what: "external (frozen) data is read-only",
    }
}

/// An external span that no mapped slice holds.
fn outside() -> Error {
    Error::InvalidState {
        what: "external span outside its data (engine bug)",
    }
}

/// `R` read views and two write views.
type ReadsAndTwoWrites<'b, S, const R: usize> = ([&'b [S]; R], &'b mut [S], &'b mut [S]);

impl<S: Scalar> Arena<'_, S> {
    /// Like [`Arena::views`] with two disjoint write views (kernels with two outputs).
    pub(crate) fn views2<const R: usize>(
        &mut self,
        reads: [Span; R],
        w1: Span,
        w2: Span,
    ) -> Result<ReadsAndTwoWrites<'_, S, R>> {
        let mut out: [&[S]; R] = [&[]; R];
        let (a, b) = self.views2_into(&reads, &mut out, w1, w2)?;
        Ok((out, a, b))
    }

    /// The body of [`Arena::views2`], one copy for every `R`; fills `out[i]` with the
    /// view of `reads[i]` and returns the views of `w1` and `w2`.
    #[inline(never)]
    fn views2_into<'s>(
        &'s mut self,
        reads: &[Span],
        out: &mut [&'s [S]],
        w1: Span,
        w2: Span,
    ) -> Result<(&'s mut [S], &'s mut [S])> {
        if self.is_meta() {
            return Ok((&mut [], &mut []));
        }
        if self.is_external(w1) || self.is_external(w2) {
            return Err(read_only());
        }
        let (external, cap) = (&self.external[..self.n_external], self.capacity);
        let swap = w2.off < w1.off;
        let (a, b) = if swap { (w2, w1) } else { (w1, w2) };
        if a.end() > b.off || b.end() > self.capacity {
            return Err(Error::InvalidState {
                what: "arena write views overlap (engine bug)",
            });
        }
        // Pieces: [0, a.off) a [a.end, b.off) b [b.end, cap)
        let (p0, rest) = self.buf.split_at_mut(a.off);
        let (wa, rest) = rest.split_at_mut(a.len);
        let (p1, rest) = rest.split_at_mut(b.off - a.end());
        let (wb, p2) = rest.split_at_mut(b.len);
        let pieces: [(usize, &[S]); 3] = [(0, p0), (a.end(), p1), (b.end(), p2)];
        for (o, r) in out.iter_mut().zip(reads.iter()) {
            if r.len > 0 && r.off >= cap {
                *o = Self::external_slice(external, cap, *r).ok_or_else(outside)?;
                continue;
            }
            let piece = pieces
                .iter()
                .find(|(start, p)| r.off >= *start && r.end() <= start + p.len());
            *o = match piece {
                Some((start, p)) => &p[r.off - start..r.end() - start],
                None if r.len == 0 => &[],
                None => {
                    return Err(Error::InvalidState {
                        what: "arena views overlap (engine bug)",
                    })
                }
            };
        }
        Ok(if swap { (wb, wa) } else { (wa, wb) })
    }
}

mod grads;
#[cfg(not(target_arch = "arm"))]
pub(crate) use grads::grads_shift;
#[cfg(test)]
mod tests;
