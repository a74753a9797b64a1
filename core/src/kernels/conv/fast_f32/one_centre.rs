//! The input of `one16.rs`'s 16-lane forward at stride 1, without `one.rs`'s three
//! copies per sample. (`one_weight16.rs`'s backward-weight keeps the copies: reading
//! the plane in place was slower there, tests/RESULTS.md.)
//!
//! - Tap `(ky, kx)` reads the plane at flat offset `(ky - 1) * w + kx - 1` from the
//!   output's position. Where that crosses a row end (column 0 for `kx = 0`, column
//!   `w - 1` for `kx = 2`) it would read the neighbouring row's last or first word,
//!   so those two columns' multiply-adds are masked ([`Centre::keep`]): the lanes of
//!   such outputs keep their sum. A masked multiply-add costs what a plain one does.
//! - Positions whose reads stay inside the plane ([`Centre::inner`]) read the input
//!   in place. Only the first and last words of the plane are copied
//!   ([`Centre::fill`]), into a buffer laid out as `one.rs`'s middle copy (zeros for
//!   rows -1 and `h`), for the positions that read beyond the plane.
//! - Why: the three copies were a large share of W1's conv1 forward
//!   (tests/RESULTS.md).

use super::avx512::{load16_first, store16_first};
use super::one::Flat;
use crate::kernels::conv::ConvGeom;

/// The layout for one shape: `one.rs`'s middle copy, and the row width.
pub(super) struct Centre {
    pub(super) w: usize,
    pub(super) hw: usize,
    /// Where the copied plane starts in the buffer (past at least `w + 1` zeros).
    pub(super) at: usize,
    /// Words of the buffer.
    pub(super) words: usize,
    /// Positions copied at each end of the plane.
    edge: usize,
}

impl Centre {
    /// The layout for `g`, for callers whose reads in the buffer span at most `span`
    /// consecutive positions; `None` where `one.rs` does not cover `g`.
    pub(super) fn new(g: &ConvGeom, span: usize) -> Option<Centre> {
        let f = Flat::new(g)?;
        Some(Centre {
            w: f.w,
            hw: f.hw,
            at: f.at,
            words: f.chan,
            edge: (2 * f.w + 1 + span).min(f.hw),
        })
    }

    /// Offset in the buffer, past an output's position, of the word tap `t` reads
    /// (less [`Self::at`] for the plane itself).
    pub(super) fn off(&self, t: usize) -> usize {
        self.at - self.w - 1 + t / 3 * self.w + t % 3
    }

    /// Whether the outputs at positions `a..b` read only inside the plane.
    #[inline]
    pub(super) fn inner(&self, a: usize, b: usize) -> bool {
        a > self.w && b + self.w < self.hw
    }

    /// Column of position `p`.
    #[inline]
    pub(super) fn column(&self, p: usize) -> usize {
        p % self.w
    }

    /// `[left, right]`: the lanes the kernel's outer columns keep, for a vector
    /// starting at column `r` (`r < w`).
    #[inline]
    pub(super) fn keep(&self, r: usize) -> [u16; 2] {
        let w = self.w;
        if w < 16 {
            return row_ends(w, r);
        }
        // One lane at most each, the first at column 0 and at column `w - 1`; none
        // where that is 16 lanes or more away (the bit shifted out of the mask).
        let lane = |l: usize| !((1u32 << l.min(16)) as u16);
        [lane(if r == 0 { 0 } else { w - r }), lane(w - 1 - r)]
    }

    /// The column 16 positions after column `r`.
    #[inline]
    pub(super) fn column_after(&self, r: usize) -> usize {
        let mut r = r + 16;
        while r >= self.w {
            r -= self.w;
        }
        r
    }

    /// The first and last [`Self::edge`] words of the input plane `x` into `buf` (its
    /// borders, and the words between, stay as they are: zero).
    #[target_feature(enable = "avx2,fma,avx512f")]
    pub(super) fn fill(&self, buf: &mut [f32], x: &[f32]) {
        let hw = self.hw;
        let (x, buf) = (&x[..hw], &mut buf[self.at..][..hw]);
        let back = hw - self.edge;
        // Masked loads and stores: a loop of plain ones became a `memcpy` call.
        for r in [0..self.edge, back..hw] {
            for (d, v) in buf[r.clone()].chunks_mut(16).zip(x[r].chunks(16)) {
                store16_first(load16_first(v, v.len()), d, v.len());
            }
        }
    }
}

/// `[left, right]` lanes kept for a vector starting at column `r` of a `w`-wide row:
/// those whose left (right) neighbour is in the same row.
fn row_ends(w: usize, r: usize) -> [u16; 2] {
    let mut keep = [u16::MAX; 2];
    // The first lanes at column 0 and at column `w - 1`, then every `w` lanes.
    for (k, mut l) in keep.iter_mut().zip([(w - r) % w, w - 1 - r]) {
        while l < 16 {
            *k &= !(1 << l);
            l += w;
        }
    }
    keep
}
