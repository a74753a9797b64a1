//! `one_input.rs`'s backward-input with AVX-512F: 14 outputs per row vector, up to 7
//! rows per tile, each gradient row loaded once per channel.
//!
//! - A tile is `R <= 7` row vectors `w` apart x 3 sets of accumulators, one per kernel
//!   column (21 vectors). Every vector of the tile reads the same 16-lane window of its
//!   rows, columns `c0 - 1 ..= c0 + 14`, and its sets sum in that window's lanes:
//!   lane `l` of set `kx` holds the products that read column `c0 - 1 + l`. So each of
//!   the `R + 2` gradient rows is loaded once per channel and feeds the (up to 3)
//!   kernel rows x 3 kernel columns that read it: `R + 2` loads for `9 R`
//!   multiply-adds (beside the 9 broadcast weights: 31 registers at 7 rows), where
//!   loading each row at the 3 shifts of the kernel columns took `3 (R + 2)`.
//! - Once per tile the sets are lined up with the outputs by rotating lanes: output
//!   column `c0 + m` (`m < 14`) is lane `m + 1` of set 1, `m + 2` of set 0 and `m` of
//!   set 2. Window lanes outside columns `0..w` hold words of the neighbouring rows;
//!   each product stays in its lane, and those lanes are dropped: as in
//!   `one_input.rs`, a kernel column that reads across a row end (column `-1` or `w`)
//!   is dropped there, here by the lane masks of a masked add, and the outputs past a
//!   row's end (its last vector may be partial) are neither read nor written in `gx`.
//!   Only lanes move: each output sums the same products in the same order as in
//!   `one_input.rs` (the tests check it bit for bit).
//! - Rows of 15-16 and 29-32 words, which 14 outputs per vector would split into
//!   one vector more (2 for 1, 3 for 2), take vectors of 16 outputs instead, each row
//!   loaded at the 3 shifts of the kernel columns (`3 (R + 2)` loads, no rotations;
//!   at most 6 rows, for the 3 loads).
//! - A plane's rows are split into as few tiles as the most rows allow, as even as
//!   they divide (16 rows: 6, 5, 5), so that no tile is left with too few chains of
//!   multiply-adds. Tiles take at most 4 rows where the zero-padded copies of 7 would
//!   not fit the buffer.
//! - Rows `-1` and `h` are not read; reads outside `gy` (the first and last tiles)
//!   go through a zero-padded copy.

use super::avx512::{
    add16, add16_where, fma16, lanes_down1, load16_first, splat16, store16_first, RowLoads16, F16,
};
use super::one_input::cuts;
use crate::kernels::conv::ConvGeom;

/// Output channels per group this kernel takes.
const MAX_CH: usize = 32;
/// Words of the buffer of a tile's zero-padded reads (16 KiB, zeroed on every call).
const PAD_WORDS: usize = 4096;
/// Most rows per tile, and most where the zero-padded copies of 7 rows would not fit
/// the buffer.
const RM: usize = 7;
const RS: usize = 4;
/// Outputs per row vector: lanes 1-14 of the window.
const COLS: usize = 14;

/// `gx += conv_transpose(gy, w)` for the convolutions `one.rs` covers (with at most
/// [`MAX_CH`] channels per group); `false` (nothing written) for other shapes.
#[target_feature(enable = "avx2,fma,avx512f")]
pub(super) fn backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
    if !super::one::covers(g) {
        return false;
    }
    let (h, wd, hw) = (g.h, g.w, g.h * g.w);
    let cout = g.c_out / g.groups;
    // Vectors of 16 outputs where 14 per vector would take at least half as many
    // again (15-16 and 29-32 words; see `Tiles16::col`).
    let wide = 3 * wd.div_ceil(16) <= 2 * wd.div_ceil(COLS);
    let (cols, reach) = if wide { (16, 18) } else { (COLS, 16) };
    // The cuts of a tile of `r` rows: `r + 2` rows of reads, the last `reach` words.
    let fits = |r: usize| cout * ((r + 1) * wd + reach) <= PAD_WORDS;
    if cout > MAX_CH || !fits(RS) {
        return false;
    }
    // Wide tiles hold 3 loads beside the sets and weights: at most 6 rows.
    let most = if !fits(RM) {
        RS
    } else if wide {
        RM - 1
    } else {
        RM
    };
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
                // As few tiles as `most` rows allow, as even as they divide.
                let left = h - r0;
                let rows = left.div_ceil(left.div_ceil(most));
                let (top, bot) = (r0 == 0, r0 + rows == h);
                let mut c0 = 0;
                while c0 < wd {
                    let a = Args {
                        gy,
                        base,
                        q: r0 * wd + c0,
                        c0,
                        n: (wd - c0).min(cols),
                    };
                    let at = [top, bot];
                    match rows {
                        RM => t.col_at::<RM, false>(at, &a, gxp, &mut pad),
                        6 => t.col_any::<6>(wide, at, &a, gxp, &mut pad),
                        5 => t.col_any::<5>(wide, at, &a, gxp, &mut pad),
                        4 => t.col_any::<4>(wide, at, &a, gxp, &mut pad),
                        3 => t.col_any::<3>(wide, at, &a, gxp, &mut pad),
                        2 => t.col_any::<2>(wide, at, &a, gxp, &mut pad),
                        _ => t.col_any::<1>(wide, at, &a, gxp, &mut pad),
                    }
                    c0 += cols;
                }
                r0 += rows;
            }
        }
    }
    true
}

/// Where a tile reads and writes: channels' planes from `gy[base + o * h * w]`, the
/// tile's first output position `q` (column `c0`), `n <= 14` (`16` wide) outputs per
/// row.
struct Args<'a> {
    gy: &'a [f32],
    base: usize,
    q: usize,
    c0: usize,
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
    /// [`Self::col_at`] for the tile's kind (wide or not).
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline]
    fn col_any<const R: usize>(&self, wide: bool, at: [bool; 2], a: &Args, gx: &mut [f32], pad: &mut [f32]) {
        if wide {
            self.col_at::<R, true>(at, a, gx, pad)
        } else {
            self.col_at::<R, false>(at, a, gx, pad)
        }
    }

    /// [`Self::col`] for the tile's place: first and / or last row.
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline]
    fn col_at<const R: usize, const WIDE: bool>(
        &self,
        at: [bool; 2],
        a: &Args,
        gx: &mut [f32],
        pad: &mut [f32],
    ) {
        match at {
            [false, false] => self.col::<R, false, false, WIDE>(a, gx, pad),
            [true, false] => self.col::<R, true, false, WIDE>(a, gx, pad),
            [false, true] => self.col::<R, false, true, WIDE>(a, gx, pad),
            [true, true] => self.col::<R, true, true, WIDE>(a, gx, pad),
        }
    }

    /// `gx[q + r * w..][..n] += ` the sums of rows `r < R` from position `q`. `TOP` /
    /// `BOT`: the tile holds the first / last row (row `-1` / `h` is not read).
    /// `WIDE`: 16 outputs per row (lanes of the sets are columns `c0..c0 + 16`), each
    /// row loaded at the 3 shifts of the kernel columns (`3 (R + 2)` loads): for rows
    /// of 15-16 and 29-32 words, which 14 outputs per vector would split into one
    /// vector more.
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline(never)]
    fn col<const R: usize, const TOP: bool, const BOT: bool, const WIDE: bool>(
        &self,
        a: &Args,
        gx: &mut [f32],
        pad: &mut [f32],
    ) {
        let (w, hw) = (self.w, self.hw);
        let (gy, q) = (a.gy, a.q);
        let cout = self.wg.len() / 9;
        // Rows `j` from `lo` to `hi` (of the tile's `-1..=R`) are read, 16 words from
        // word `(j - lo) * w` of a channel's cut (and from the 2 words after, wide).
        let (lo, hi) = (usize::from(TOP), if BOT { R } else { R + 1 });
        let rows = RowLoads16::new(w, hi + 1 - lo);
        let cut = rows.reach() + if WIDE { 2 } else { 0 };
        // The cut starts at plane position `q + (lo - 1) * w - 1` (column `c0 - 1`).
        let first = (a.base + q + lo * w) as isize - w as isize - 1;
        let end = first + ((cout - 1) * hw + cut) as isize;
        // In place but for the first and last tiles of `gy` (without the call).
        let (src, stride, start) = if first >= 0 && end as usize <= gy.len() {
            (gy, hw, first as usize)
        } else {
            cuts(gy, [first, end], [cut, cout, hw], pad)
        };
        // `[kx][r]`, in the window's lanes.
        let mut acc = [[splat16(0.0); R]; 3];
        // Indexed loops over rows, as in `one_input.rs` (iterators were not unrolled),
        // over all `R + 2` rows: LLVM left `lo..=hi` and some `lo..hi + 1` rolled, the
        // accumulators in memory.
        for (o, wo) in self.wg.chunks_exact(9).enumerate() {
            let s = &src[start + o * stride..][..cut];
            // `[ky][kx]`, all nine held while the rows pass.
            let wk: [[F16; 3]; 3] = [
                [splat16(wo[0]), splat16(wo[1]), splat16(wo[2])],
                [splat16(wo[3]), splat16(wo[4]), splat16(wo[5])],
                [splat16(wo[6]), splat16(wo[7]), splat16(wo[8])],
            ];
            // Wide, kernel column `kx` reads from word `2 - kx` (column `c0 + 1 - kx`).
            let (s2, s1) = if WIDE { (&s[2..], &s[1..]) } else { (s, s) };
            for j in 0..R + 2 {
                if j < lo || j > hi {
                    continue;
                }
                let l = if WIDE {
                    [rows.load(s2, j - lo), rows.load(s1, j - lo), rows.load(s, j - lo)]
                } else {
                    [rows.load(s, j - lo); 3]
                };
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
        // Window lane `l` is column `c0 - 1 + l`. Kernel column 0 reads column `x + 1`
        // (none at `x = w - 1`, lane `w - c0` of the window), column 2 reads `x - 1`
        // (none at `x = 0`, output lane 0 when `c0 = 0`).
        // Wide, output lane `m` is column `c0 + m` in every set (column 0's lane
        // `w - 1 - c0`).
        let c0 = a.c0;
        let drop0 = if WIDE { w - 1 - c0 } else { w - c0 };
        let keep0 = !(1u32.checked_shl(drop0 as u32).unwrap_or(0) as u16);
        let keep2 = if c0 == 0 { !1u16 } else { u16::MAX };
        for (r, ((&a0, &a1), &a2)) in acc[0].iter().zip(&acc[1]).zip(&acc[2]).enumerate() {
            // Window lane `l`: set 1's lane `l` + set 0's lane `l + 1`; then output
            // lane `m`: that at window lane `m + 1` + set 2's lane `m`.
            let s = if WIDE {
                add16_where(a1, keep0, a0)
            } else {
                lanes_down1(add16_where(a1, keep0, lanes_down1(a0)))
            };
            let s = add16_where(s, keep2, a2);
            add_into(s, &mut gx[q + r * w..], a.n);
        }
    }
}

/// `d[..n] += ` the first `n <= 16` lanes of `s` by masked load and store (the lanes
/// past `n` are neither read nor written).
#[target_feature(enable = "avx2,fma,avx512f")]
#[inline]
fn add_into(s: F16, d: &mut [f32], n: usize) {
    store16_first(add16(s, load16_first(d, n)), d, n);
}
