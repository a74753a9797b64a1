//! `one_input.rs`'s backward-input with AVX-512F: the same tiles with 16 positions
//! per row vector and up to 6 rows per tile.
//!
//! - A tile is `R <= 6` vectors `w` apart x 3 sets of accumulators, one per kernel
//!   column (18 vectors). Per channel the 9 weights are broadcast once; each of the
//!   `R + 2` gradient rows is loaded at its 3 shifts, and each load feeds the (up to 3)
//!   kernel rows that read it: `3 (R + 2)` loads for `9 R` multiply-adds. (8 rows
//!   would need 24 accumulators beside the 9 weights and 3 loads: more than 32
//!   registers.)
//! - As in `one_input.rs`: lanes whose kernel column reads across a row end are
//!   dropped once per vector (here with the lane masks of a masked add, the same
//!   for every row of a tile); rows `-1` and `h` are not read; a row's
//!   last vector may be partial (its extra lanes computed and dropped); reads outside
//!   `gy` go through a zero-padded copy.

use super::avx512::{add16_where, fma16, load16, load16_first, splat16, store16, store16_first, F16};
use super::one_input::cuts;
use crate::kernels::conv::ConvGeom;

/// Output channels per group this kernel takes.
const MAX_CH: usize = 32;
/// Words of the buffer of a tile's zero-padded reads (16 KiB, zeroed on every call).
const PAD_WORDS: usize = 4096;
/// Most rows per tile.
const RM: usize = 6;

/// `gx += conv_transpose(gy, w)` for the convolutions `one.rs` covers (with at most
/// [`MAX_CH`] channels per group); `false` (nothing written) for other shapes.
#[target_feature(enable = "avx2,fma,avx512f")]
pub(super) fn backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
    if !super::one::covers(g) {
        return false;
    }
    let (h, wd, hw) = (g.h, g.w, g.h * g.w);
    let cout = g.c_out / g.groups;
    if cout > MAX_CH || cout * ((RM + 1) * wd + 18) > PAD_WORDS {
        return false;
    }
    let mut pad = [0.0f32; PAD_WORDS];
    for grp in 0..g.groups {
        let t = Tiles16 {
            w: wd,
            hw,
            wg: &w[grp * cout * 9..][..cout * 9],
        };
        for n in 0..g.n {
            let base = (n * g.c_out + grp * cout) * hw;
            let gxp = &mut gx[(n * g.c_in + grp) * hw..][..hw];
            let mut r0 = 0;
            while r0 < h {
                let left = h - r0;
                let rows = if left >= RM {
                    RM
                } else if left >= 4 {
                    4
                } else {
                    left
                };
                let (top, bot) = (r0 == 0, r0 + rows == h);
                let mut c0 = 0;
                while c0 < wd {
                    let lanes = (wd - c0).min(16);
                    let a = Args {
                        gy,
                        base,
                        q: r0 * wd + c0,
                        n: lanes,
                    };
                    match rows {
                        6 => t.col_any::<6>(top, bot, &a, gxp, &mut pad),
                        4 => t.col_any::<4>(top, bot, &a, gxp, &mut pad),
                        3 => t.col_any::<3>(top, bot, &a, gxp, &mut pad),
                        2 => t.col_any::<2>(top, bot, &a, gxp, &mut pad),
                        _ => t.col_any::<1>(top, bot, &a, gxp, &mut pad),
                    }
                    c0 += 16;
                }
                r0 += rows;
            }
        }
    }
    true
}

/// Where a tile reads and writes: channels' planes from `gy[base + o * h * w]`, the
/// tile's first position `q`, `n <= 16` positions per row.
struct Args<'a> {
    gy: &'a [f32],
    base: usize,
    q: usize,
    n: usize,
}

/// Backward-input tiles of one group.
struct Tiles16<'a> {
    w: usize,
    hw: usize,
    /// The group's weights, `[channel][tap]`.
    wg: &'a [f32],
}

impl Tiles16<'_> {
    /// [`Self::col`] for the tile's place (first and / or last row).
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline]
    fn col_any<const R: usize>(&self, top: bool, bot: bool, a: &Args, gx: &mut [f32], pad: &mut [f32]) {
        match (top, bot) {
            (false, false) => self.col::<R, false, false>(a, gx, pad),
            (true, false) => self.col::<R, true, false>(a, gx, pad),
            (false, true) => self.col::<R, false, true>(a, gx, pad),
            (true, true) => self.col::<R, true, true>(a, gx, pad),
        }
    }

    /// `gx[q + r * w..][..n] += ` the sums of rows `r < R` from position `q`. `TOP` /
    /// `BOT`: the tile holds the first / last row (row `-1` / `h` is not read).
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline(never)]
    fn col<const R: usize, const TOP: bool, const BOT: bool>(
        &self,
        a: &Args,
        gx: &mut [f32],
        pad: &mut [f32],
    ) {
        let (w, hw) = (self.w, self.hw);
        let (gy, q) = (a.gy, a.q);
        let cout = self.wg.len() / 9;
        // Rows `j` from `lo` to `hi` (of the tile's `-1..=R`) are read, from word
        // `(j - lo) * w + 2 - kx` of a channel's cut.
        let (lo, hi) = (usize::from(TOP), if BOT { R } else { R + 1 });
        let cut = (hi - lo) * w + 18;
        // The cut starts at plane position `q + (lo - 1) * w - 1`.
        let first = (a.base + q + lo * w) as isize - w as isize - 1;
        let end = first + ((cout - 1) * hw + cut) as isize;
        let (src, stride, start) = cuts(gy, [first, end], [cut, cout, hw], pad);
        let mut acc = [[splat16(0.0); R]; 3];
        // Indexed loops over rows, as in `one_input.rs` (iterators were not unrolled),
        // over exclusive ranges: LLVM left `lo..=hi` rolled, the accumulators in memory.
        #[allow(clippy::needless_range_loop)]
        for (o, wo) in self.wg.chunks_exact(9).enumerate() {
            let s = &src[start + o * stride..][..cut];
            // The 18 words of each row read (one bounds check per row).
            let mut rows: [&[f32]; RM + 2] = [&[]; RM + 2];
            for j in lo..hi + 1 {
                rows[j] = &s[(j - lo) * w..][..18];
            }
            // `[ky][kx]`, all nine held while the rows pass.
            let wk: [[F16; 3]; 3] = [
                [splat16(wo[0]), splat16(wo[1]), splat16(wo[2])],
                [splat16(wo[3]), splat16(wo[4]), splat16(wo[5])],
                [splat16(wo[6]), splat16(wo[7]), splat16(wo[8])],
            ];
            for j in lo..hi + 1 {
                let l = [load16(&rows[j][2..]), load16(&rows[j][1..]), load16(rows[j])];
                // Gradient row `j` (of the tile's `-1..=R`, from 0) feeds tile row
                // `j + ky - 2`.
                for (ky, wr) in wk.iter().enumerate() {
                    let Some(r) = (j + ky).checked_sub(2) else {
                        continue;
                    };
                    if r < R {
                        for ((ak, &wv), &lk) in acc.iter_mut().zip(wr).zip(&l) {
                            ak[r] = fma16(wv, lk, ak[r]);
                        }
                    }
                }
            }
        }
        // Kernel column 0 reads column `qx + 1` (none at `qx = w - 1`), column 2 reads
        // `qx - 1` (none at `qx = 0`); the tile's rows start at the same column.
        let c0 = q % w;
        let keep0 = !(1u32.checked_shl((w - 1 - c0) as u32).unwrap_or(0) as u16);
        let keep2 = if c0 == 0 { !1u16 } else { u16::MAX };
        for (r, ((&a0, &a1), &a2)) in acc[0].iter().zip(&acc[1]).zip(&acc[2]).enumerate() {
            let s = add16_where(a1, keep0, a0);
            let s = add16_where(s, keep2, a2);
            add_into(s, &mut gx[q + r * w..], a.n);
        }
    }
}

/// `d[..n] += ` the first `n <= 16` lanes of `s` (a row's last, partial vector by
/// masked load and store: the lanes past `n` are neither read nor written).
#[target_feature(enable = "avx2,fma,avx512f")]
#[inline]
fn add_into(s: F16, d: &mut [f32], n: usize) {
    if n == 16 {
        store16(fma16(s, splat16(1.0), load16(d)), d);
    } else {
        let v = fma16(s, splat16(1.0), load16_first(d, n));
        store16_first(v, d, n);
    }
}
