//! Backward-input of the one-input-channel 3x3 "same" convolutions (`one.rs`), AVX2 +
//! FMA: `gx[q] += sum over channels o and taps (ky, kx) of w[o][ky][kx] * gy[o][q + d]`,
//! `d = (1 - ky) * w + (1 - kx)`, every channel summed into the one input plane.
//!
//! - Flat positions as in `one.rs`; the output gradient is read in place. A tile is `V`
//!   vectors `w` apart (8 positions in each of `V` consecutive rows) x 3 sets of
//!   accumulators, one per kernel column. Per channel and kernel column it loads the
//!   `V + 2` rows once and each feeds the (up to 3) kernel rows that read it: `V + 2`
//!   loads for `3 V` FMAs, where vectors 8 apart would need `3 V`.
//! - A read across a row end (column `-1` or `w`) lands in a lane whose kernel column is
//!   invalid there; those lanes are dropped once per vector, when the three sets are
//!   combined with bit masks (`acc1 + (acc0 & m0) + (acc2 & m2)`), not per product (a
//!   product by 0 would turn an infinite gradient there into a NaN). Rows
//!   `-1` and `h` are not read at all (the tiles of the first and last rows skip them).
//! - A row whose width is not a multiple of 8 ends with a partial vector, whose extra
//!   lanes are computed and dropped. Reads before the first or past the last plane of
//!   `gy` (only the first and last tile of a call) go through a zero-padded copy.
//! - Only what `one.rs` covers, with at most [`MAX_CH`] channels per group and tiles
//!   whose reads fit the stack buffer; anything else answers `false`.

use super::avx2::{add, fma, keep, load, splat, store, KEEP};
use crate::kernels::conv::ConvGeom;

/// Output channels per group this kernel takes.
const MAX_CH: usize = 32;
/// Words of the buffer of a tile's zero-padded reads (32 KiB) and of each mask (8 KiB).
const PAD_WORDS: usize = 8192;
const MASK_WORDS: usize = 2048;
/// Rows per tile.
const V: usize = 4;

/// `gx += conv_transpose(gy, w)` for the convolutions `one.rs` covers; `false`
/// (nothing written) for other shapes.
#[target_feature(enable = "avx2,fma")]
pub(super) fn conv2d_backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
    super::avx512::one_backward_input(g, gy, w, gx) || backward_input8(g, gy, w, gx)
}

/// [`conv2d_backward_input`] with 8 lanes only.
#[target_feature(enable = "avx2,fma")]
pub(super) fn backward_input8(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
    if !super::one::covers(g) {
        return false;
    }
    let (h, wd, hw) = (g.h, g.w, g.h * g.w);
    let cout = g.c_out / g.groups;
    if cout > MAX_CH || cout * ((V + 1) * wd + 10) > PAD_WORDS || hw + 8 > MASK_WORDS {
        return false;
    }
    // Kernel column 0 reads column `qx + 1` (none at `qx = w - 1`), column 2 reads
    // `qx - 1` (none at `qx = 0`).
    let mut m0 = [0.0f32; MASK_WORDS];
    let mut m2 = [0.0f32; MASK_WORDS];
    // Row by row: a division per position cost more than a W1 sample's products.
    for (r0, r2) in m0[..hw].chunks_exact_mut(wd).zip(m2[..hw].chunks_exact_mut(wd)) {
        r0[..wd - 1].fill(KEEP);
        r2[1..].fill(KEEP);
    }
    let mut pad = [0.0f32; PAD_WORDS];
    for grp in 0..g.groups {
        let t = Tiles {
            w: wd,
            hw,
            wg: &w[grp * cout * 9..][..cout * 9],
            m0: &m0[..hw + 8],
            m2: &m2[..hw + 8],
        };
        for n in 0..g.n {
            let base = (n * g.c_out + grp * cout) * hw;
            let gxp = &mut gx[(n * g.c_in + grp) * hw..][..hw];
            let mut r0 = 0;
            while r0 < h {
                let rows = V.min(h - r0);
                let (top, bot) = (r0 == 0, r0 + rows == h);
                let mut c0 = 0;
                while c0 < wd {
                    let lanes = (wd - c0).min(8);
                    let at = r0 * wd + c0;
                    match (rows, top, bot) {
                        (4, false, false) => t.col::<4, false, false>(gy, base, at, gxp, lanes, &mut pad),
                        (4, true, false) => t.col::<4, true, false>(gy, base, at, gxp, lanes, &mut pad),
                        (4, false, true) => t.col::<4, false, true>(gy, base, at, gxp, lanes, &mut pad),
                        (4, true, true) => t.col::<4, true, true>(gy, base, at, gxp, lanes, &mut pad),
                        (3, false, _) => t.col::<3, false, true>(gy, base, at, gxp, lanes, &mut pad),
                        (3, true, _) => t.col::<3, true, true>(gy, base, at, gxp, lanes, &mut pad),
                        (2, false, _) => t.col::<2, false, true>(gy, base, at, gxp, lanes, &mut pad),
                        (2, true, _) => t.col::<2, true, true>(gy, base, at, gxp, lanes, &mut pad),
                        (_, false, _) => t.col::<1, false, true>(gy, base, at, gxp, lanes, &mut pad),
                        (_, true, _) => t.col::<1, true, true>(gy, base, at, gxp, lanes, &mut pad),
                    }
                    c0 += 8;
                }
                r0 += rows;
            }
        }
    }
    true
}

/// Backward-input tiles of one group.
struct Tiles<'a> {
    w: usize,
    hw: usize,
    /// The group's weights, `[channel][tap]`.
    wg: &'a [f32],
    m0: &'a [f32],
    m2: &'a [f32],
}

impl Tiles<'_> {
    /// `gx[q + r * w..][..n] += ` the sums of rows `r < R` from position `q`, whose
    /// channels' planes start at `gy[base + o * h * w]`. `TOP` / `BOT`: the tile holds
    /// the first / last row (row `-1` / `h` is not read).
    #[target_feature(enable = "avx2,fma")]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn col<const R: usize, const TOP: bool, const BOT: bool>(
        &self,
        gy: &[f32],
        base: usize,
        q: usize,
        gx: &mut [f32],
        n: usize,
        pad: &mut [f32],
    ) {
        let (w, hw) = (self.w, self.hw);
        let cout = self.wg.len() / 9;
        // Rows `j` from `lo` to `hi` (of the tile's `-1..=R`) are read, from word
        // `(j - lo) * w + 2 - kx` of a channel's cut.
        let (lo, hi) = (usize::from(TOP), if BOT { R } else { R + 1 });
        let cut = (hi - lo) * w + 10;
        // The cut starts at plane position `q + (lo - 1) * w - 1`.
        let first = (base + q + lo * w) as isize - w as isize - 1;
        let end = first + ((cout - 1) * hw + cut) as isize;
        let (src, stride, start) = cuts(gy, [first, end], [cut, cout, hw], pad);
        let mut acc = [[splat(0.0); R]; 3];
        // Indexed loops over rows: as iterators (`skip`, `take`) LLVM did not unroll
        // them, indexed the accumulators at run time and ran 7 times slower.
        #[allow(clippy::needless_range_loop)]
        for (o, wo) in self.wg.chunks_exact(9).enumerate() {
            let s = &src[start + o * stride..][..cut];
            // The 10 words of each row read (one bounds check per row).
            let mut rows: [&[f32]; V + 2] = [&[]; V + 2];
            for j in lo..=hi {
                rows[j] = &s[(j - lo) * w..][..10];
            }
            for (kx, a) in acc.iter_mut().enumerate() {
                let wk = [splat(wo[kx]), splat(wo[3 + kx]), splat(wo[6 + kx])];
                for j in lo..=hi {
                    // Gradient row `j` (of the tile's `-1..=R`, from 0) feeds tile row
                    // `j + ky - 2`.
                    let l = load(&rows[j][2 - kx..]);
                    for (ky, &wv) in wk.iter().enumerate() {
                        let Some(r) = (j + ky).checked_sub(2) else {
                            continue;
                        };
                        if r < R {
                            a[r] = fma(wv, l, a[r]);
                        }
                    }
                }
            }
        }
        for (r, ((&a0, &a1), &a2)) in acc[0].iter().zip(&acc[1]).zip(&acc[2]).enumerate() {
            let p = q + r * w;
            let s = add(keep(a0, load(&self.m0[p..])), a1);
            let s = add(keep(a2, load(&self.m2[p..])), s);
            if n == 8 {
                let d = &mut gx[p..];
                store(fma(s, splat(1.0), load(d)), d);
            } else {
                let mut tmp = [0.0f32; 8];
                store(s, &mut tmp);
                for (dv, &t) in gx[p..p + n].iter_mut().zip(&tmp) {
                    *dv += t;
                }
            }
        }
    }
}

/// The cuts of `cout` channels, `cut` words each, starting at plane position `first`
/// (planes `hw` apart, the last cut ending at `end`): read in place from `gy` where they
/// all lie inside it, else as zero-padded copies in `pad` (the first and the last tile
/// of `gy`). Returns the words, the stride between channels and where the first starts.
pub(super) fn cuts<'a>(
    gy: &'a [f32],
    [first, end]: [isize; 2],
    [cut, cout, hw]: [usize; 3],
    pad: &'a mut [f32],
) -> (&'a [f32], usize, usize) {
    if first >= 0 && end as usize <= gy.len() {
        return (gy, hw, first as usize);
    }
    for o in 0..cout {
        let d = &mut pad[o * cut..][..cut];
        let s0 = first + (o * hw) as isize;
        // `d[k]` is `gy[s0 + k]` for `k` in `a..b`, zero elsewhere.
        let len = gy.len() as isize;
        let a = (-s0).clamp(0, cut as isize) as usize;
        let b = (len - s0).clamp(a as isize, cut as isize) as usize;
        d[..a].fill(0.0);
        if a < b {
            let from = (s0 + a as isize) as usize;
            d[a..b].copy_from_slice(&gy[from..from + (b - a)]);
        }
        d[b..].fill(0.0);
    }
    (&pad[..cout * cut], cut, 0)
}
