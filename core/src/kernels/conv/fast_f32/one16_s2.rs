//! One-input-channel 3x3 convolutions with stride 2 and padding 1 (W2's stem) on 16
//! lanes (AVX-512F), forward and backward-weight, through the stride-1 tiles of
//! `one16.rs` and `one_weight16.rs`.
//!
//! - The input plane is split into six copies, one per row parity `a` and kernel
//!   column `kx`: copy `(a, kx)` holds, at flat position `i * ow + ox`, the input at
//!   row `2 i + a - 1`, column `2 ox + kx - 1` (zero outside the plane), for rows `i`
//!   in `0..=oh`. Tap `(ky, kx)` then reads copy `([0, 1, 0][ky], kx)` at the output's
//!   flat position, plus `ow` when `ky = 2`: fixed offsets, as the stride-1 tiles
//!   want, 16 outputs per vector and 8 output channels per tile.
//! - A copy's row is one masked load of 32 input words per 16 outputs, split into its
//!   even and odd words: kernel column 1 reads the even ones, 2 the odd ones, and 0
//!   the odd ones one position later.
//! - Each output sums the bias, then the taps in order, as the generic kernel does.
//! - Backward-weight runs `one_weight16.rs`'s sweeps over the same copies.

use super::avx512::{evens_odds, load16_first, splat16, store16_first};
use super::one::X_WORDS;
use super::one16::{forward_from, Copies};
use super::one_weight16::sums;
use crate::kernels::conv::ConvGeom;

/// The covered shapes' layout: input and output sizes, words per copy.
pub(super) struct Split {
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    copy: usize,
}

impl Split {
    /// The layout for `g`, or `None` if this file does not cover it.
    pub(super) fn new(g: &ConvGeom) -> Option<Split> {
        let fits = g.stride == [2, 2]
            && g.dil == [1, 1]
            && [g.kh, g.kw] == [3, 3]
            && g.pad == [1, 1]
            && g.groups > 0
            && g.c_in == g.groups
            && g.c_out >= g.groups
            && g.h > 0
            && g.w > 0
            && [g.oh, g.ow] == [(g.h - 1) / 2 + 1, (g.w - 1) / 2 + 1];
        if !fits || g.oh.checked_mul(g.ow)? < 16 {
            return None;
        }
        let copy = (g.oh + 1).checked_mul(g.ow)?.next_multiple_of(16);
        // The six copies share `one.rs`'s buffer (24 KiB): planes up to about 64x64.
        (copy.checked_mul(6)? <= X_WORDS).then_some(Split {
            h: g.h,
            w: g.w,
            oh: g.oh,
            ow: g.ow,
            copy,
        })
    }

    /// Words of the six copies.
    pub(super) fn words(&self) -> usize {
        6 * self.copy
    }

    /// Where tap `t` reads, past an output's flat position.
    pub(super) fn off(&self, t: usize) -> usize {
        let (ky, kx) = (t / 3, t % 3);
        let a = usize::from(ky == 1);
        (a * 3 + kx) * self.copy + if ky == 2 { self.ow } else { 0 }
    }

    /// The six copies of the plane `x`.
    #[target_feature(enable = "avx2,fma,avx512f")]
    pub(super) fn fill(&self, buf: &mut [f32], x: &[f32]) {
        let (w, ow) = (self.w, self.ow);
        for a in 0..2 {
            let [c0, c1, c2] = [0, 1, 2].map(|kx| (a * 3 + kx) * self.copy);
            for i in 0..=self.oh {
                let at = i * ow;
                // Input row `2 i + a - 1`, or none (zeros) outside the plane.
                let row = (2 * i + a).checked_sub(1).filter(|&r| r < self.h);
                let Some(r) = row else {
                    for c in [c0, c1, c2] {
                        buf[c + at..][..ow].fill(0.0);
                    }
                    continue;
                };
                let src = &x[r * w..][..w];
                buf[c0 + at] = 0.0;
                for ox0 in (0..ow).step_by(16) {
                    let from = 2 * ox0;
                    let lo = load16_first(&src[from..], w - from);
                    let hi = match src.get(from + 16..) {
                        Some(s) if !s.is_empty() => load16_first(s, s.len()),
                        _ => splat16(0.0),
                    };
                    let (even, odd) = evens_odds(lo, hi);
                    let n = ow - ox0;
                    store16_first(even, &mut buf[c1 + at + ox0..], n);
                    store16_first(odd, &mut buf[c2 + at + ox0..], n);
                    if n > 1 {
                        store16_first(odd, &mut buf[c0 + at + ox0 + 1..], n - 1);
                    }
                }
            }
        }
    }
}

/// `y = conv(x, w) + b` for one-input-channel 3x3 convolutions with stride 2 and
/// padding 1 whose outputs fill at least one vector; `false` (nothing written) for
/// other shapes.
#[target_feature(enable = "avx2,fma,avx512f")]
pub(super) fn forward(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) -> bool {
    let Some(s) = Split::new(g) else {
        return false;
    };
    forward_from(g, Copies::Halved(&s), x, w, b, y);
    true
}

/// `gw += correlate(gy, x)` for the shapes [`forward`] takes (`one_weight16.rs`'s
/// tiles on the six copies); `false` (nothing written) for others.
#[target_feature(enable = "avx2,fma,avx512f")]
pub(super) fn backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    let Some(s) = Split::new(g) else {
        return false;
    };
    sums(g, Copies::Halved(&s), gy, x, gw);
    true
}
