//! Backward-input of the one-input-channel 3x3 "same" convolutions (`one.rs`), AVX2 +
//! FMA: `gx[q] += sum over channels o and taps (ky, kx) of w[o][ky][kx] * gy[o][q + d]`,
//! `d = (1 - ky) * w + (1 - kx)`, every channel summed into the one input plane.
//!
//! - Flat positions as in `one.rs`; the output gradient is read in place. A tile is
//!   `V <= 4` vectors of `gx` x 3 sets of accumulators, one per kernel column: a read
//!   across a row end (column `-1` or `w`) lands in a lane whose kernel column is
//!   invalid there, and those lanes are dropped once per vector, when the sets are
//!   combined with 0/1 masks (`acc1 + acc0 * m0 + acc2 * m2`), not per product.
//! - Rows `-1` and `h` are not in the planes: positions whose reads reach them (the
//!   first `w + 1` and about the last `w + 1`) read zero-bordered copies of the first
//!   and last rows of every channel (`Bands`), a quarter of a 28x28 plane.
//! - Per channel and tap one broadcast weight feeds `V` FMAs (the loop over channels
//!   stays a loop, so LLVM keeps the 12 accumulators in registers).
//! - Only what `one.rs` covers, with at most [`MAX_CH`] channels per group and bands
//!   that fit the stack buffer; anything else answers `false`.

use super::avx2::{fma, load, splat, store, F8};
use crate::kernels::conv::ConvGeom;

/// Output channels per group this kernel takes.
const MAX_CH: usize = 32;
/// Words of the band buffer (32 KiB) and of each mask (8 KiB).
const BAND_WORDS: usize = 8192;
const MASK_WORDS: usize = 2048;

/// `gx += conv_transpose(gy, w)` for the convolutions `one.rs` covers; `false`
/// (nothing written) for other shapes.
#[target_feature(enable = "avx2,fma")]
pub(super) fn conv2d_backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
    if !super::one::covers(g) {
        return false;
    }
    let (wd, hw) = (g.w, g.h * g.w);
    let cout = g.c_out / g.groups;
    // Positions read in place: `[top, bottom)`, a whole number of vectors.
    let top = (wd + 1).min(hw);
    let inner = hw.saturating_sub(2 * wd + 2) / 8 * 8;
    let bottom = top + inner;
    // A band holds the reads of positions `[p0, p1)`: `[p0 - w - 1, p1 + w + 8)`.
    let len = top.max(hw - bottom) + 2 * wd + 16;
    if cout > MAX_CH || 2 * cout * len > BAND_WORDS || hw + 8 > MASK_WORDS {
        return false;
    }
    // Kernel column 0 reads column `qx + 1` (none at `qx = w - 1`), column 2 reads
    // `qx - 1` (none at `qx = 0`).
    let mut m0 = [0.0f32; MASK_WORDS];
    let mut m2 = [0.0f32; MASK_WORDS];
    for q in 0..hw {
        m0[q] = if q % wd == wd - 1 { 0.0 } else { 1.0 };
        m2[q] = if q % wd == 0 { 0.0 } else { 1.0 };
    }
    // Band `k` holds plane positions from `firsts[k] - w - 1` on, zeros outside the plane.
    let mut band = [0.0f32; BAND_WORDS];
    let firsts = [0, bottom];
    for grp in 0..g.groups {
        let wg = &w[grp * cout * 9..][..cout * 9];
        for n in 0..g.n {
            let planes = &gy[(n * g.c_out + grp * cout) * hw..][..cout * hw];
            for (k, &first) in firsts.iter().enumerate() {
                let dst = &mut band[k * cout * len..][..cout * len];
                // Plane positions `[a, b)` at words `[a + w + 1 - first, ..)`.
                let a = first.saturating_sub(wd + 1);
                let b = (first + len).saturating_sub(wd + 1).min(hw);
                let at = a + wd + 1 - first;
                for (o, d) in dst.chunks_exact_mut(len).enumerate() {
                    d[..at].fill(0.0);
                    d[at..at + b - a].copy_from_slice(&planes[o * hw + a..][..b - a]);
                    d[at + b - a..].fill(0.0);
                }
            }
            let gxp = &mut gx[(n * g.c_in + grp) * hw..][..hw];
            let t = Tiles {
                w: wd,
                wg,
                m0: &m0[..hw + 8],
                m2: &m2[..hw + 8],
            };
            // Top band, inner positions in place, bottom band.
            let tb = Src {
                s: &band[..cout * len],
                stride: len,
                first: 0,
            };
            t.span(&tb, 0, top, gxp);
            let inplace = Src {
                s: planes,
                stride: hw,
                first: wd + 1,
            };
            let mut q = top;
            while q < bottom {
                let v = ((bottom - q) / 8).min(4);
                match v {
                    4 => t.add::<4>(&inplace, q, gxp, 32),
                    3 => t.add::<3>(&inplace, q, gxp, 24),
                    2 => t.add::<2>(&inplace, q, gxp, 16),
                    _ => t.add::<1>(&inplace, q, gxp, 8),
                }
                q += 8 * v;
            }
            let bb = Src {
                s: &band[cout * len..][..cout * len],
                stride: len,
                first: bottom,
            };
            t.span(&bb, bottom, hw, gxp);
        }
    }
    true
}

/// Where the channels' planes are read: the reads of position `q >= first` of channel
/// `o` start (at plane position `q - w - 1`) at `s[o * stride + q - first]`.
struct Src<'a> {
    s: &'a [f32],
    stride: usize,
    first: usize,
}

/// Backward-input tiles of one sample.
struct Tiles<'a> {
    w: usize,
    /// The group's weights, `[channel][tap]`.
    wg: &'a [f32],
    m0: &'a [f32],
    m2: &'a [f32],
}

impl Tiles<'_> {
    /// Positions `[p0, p1)` in tiles of up to 4 vectors, the last one partial (tiles of
    /// one vector have 3 accumulators, too few to hide the FMAs' latency).
    #[target_feature(enable = "avx2,fma")]
    fn span(&self, src: &Src, p0: usize, p1: usize, gx: &mut [f32]) {
        let mut q = p0;
        while q < p1 {
            let n = (p1 - q).min(32);
            match n.div_ceil(8) {
                4 => self.add::<4>(src, q, gx, n),
                3 => self.add::<3>(src, q, gx, n),
                2 => self.add::<2>(src, q, gx, n),
                _ => self.add::<1>(src, q, gx, n),
            }
            q += n;
        }
    }

    /// `gx[q..q + n] += ` the sums of `V` vectors from `q` (`n <= 8 * V`; a partial
    /// last vector adds only its first lanes).
    #[target_feature(enable = "avx2,fma")]
    #[inline(never)]
    fn add<const V: usize>(&self, src: &Src, q: usize, gx: &mut [f32], n: usize) {
        let mut acc = [[splat(0.0); V]; 3];
        let w = self.w;
        // Offsets of the 9 taps from `q`, plus `w + 1` (reads start at `q - w - 1`).
        let at = q - src.first;
        for (o, wo) in self.wg.chunks_exact(9).enumerate() {
            let s = &src.s[o * src.stride + at..][..2 * w + 2 + 8 * V];
            for ky in 0..3 {
                for kx in 0..3 {
                    let wv = splat(wo[3 * ky + kx]);
                    let r = &s[(2 - ky) * w + 2 - kx..][..8 * V];
                    for (v, a) in acc[kx].iter_mut().enumerate() {
                        *a = fma(wv, load(&r[8 * v..]), *a);
                    }
                }
            }
        }
        let mut sums = [splat(0.0); V];
        for (v, sv) in sums.iter_mut().enumerate() {
            let p = q + 8 * v;
            let r = fma(acc[0][v], load(&self.m0[p..]), acc[1][v]);
            *sv = fma(acc[2][v], load(&self.m2[p..]), r);
        }
        if n == 8 * V {
            for (v, &sv) in sums.iter().enumerate() {
                let d = &mut gx[q + 8 * v..];
                store(add(load(d), sv), d);
            }
            return;
        }
        let mut tmp = [0.0f32; 32];
        for (v, &sv) in sums.iter().enumerate() {
            store(sv, &mut tmp[8 * v..]);
        }
        let d = &mut gx[q..q + n];
        for (dv, &t) in d.iter_mut().zip(&tmp) {
            *dv += t;
        }
    }
}

/// `a + b` lane-wise.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn add(a: F8, b: F8) -> F8 {
    fma(a, splat(1.0), b)
}
