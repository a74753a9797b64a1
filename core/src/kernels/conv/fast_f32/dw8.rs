//! Depthwise 3x3 convolutions vectorised across channels: forward, backward-input,
//! backward-weight, stride 1 or 2 per axis, any padding, small planes.
//!
//! - The per-plane kernels lose to per-plane overhead on small planes (MobileNet's
//!   7x7 and 4x4): a row has fewer outputs than a vector has lanes. Here the 8 lanes
//!   are 8 channels of one sample instead: their planes are copied, zero-padded, into
//!   a channel-interleaved stack buffer `[rows][cols][8]`, so every output pixel of 8
//!   channels is 9 multiply-adds of whole vectors with per-channel weight vectors, and
//!   rows of any width fill every lane.
//! - Forward: tiles of 4 outputs of a row in registers, written back to the 8 planes
//!   row by row. Backward-input, stride 1: the same on the output gradient padded by
//!   `2 - pad`, with the kernel flipped; other strides: scattered into a padded plane.
//!   Backward-weight: 9 per-lane sums held in registers over every pixel of every sample.
//! - Channel counts that are not a multiple of 8 leave the last block's extra lanes zero.
//! - Only depthwise (one input and one output channel per group), 3x3, no dilation,
//!   strides 1 and 2, and planes that fit [`BUF_WORDS`] (padded) and [`OUT_WORDS`]: the
//!   entry points answer `false` (nothing written) for anything else.
//! - The copies in and out are 8x8 transposes of 8 pixels x 8 channels, read and
//!   written as whole vectors (a plane is read as one run of pixels, so 4x4 and 7x7
//!   planes need no per-row tails).
//! - Backward-input and backward-weight can run in one walk ([`conv2d_backward_both`]),
//!   which copies each block of the output gradient into lanes once for both.
//! - Stack: [`BUF_WORDS`] + [`OUT_WORDS`] words (18 KiB) per call, 28 KiB for both
//!   backward passes at once; twice that with 16 lanes.
//! - The kernels are written once (`dw8_body.rs`) over `L`-lane vectors; on x86_64 the
//!   AVX-512F instance (16 channels per block) takes channel counts
//!   that are multiples of 16 and the AVX2 + FMA one the others, both chosen at run
//!   time (`avx512.rs`, `avx2.rs`); elsewhere and without AVX2 the portable one. The
//!   16-lane instance gives the 8-lane one's bits.

use super::dw8_body::dw8_kernels;
use crate::kernels::conv::ConvGeom;

/// Whether the fast_f32 entry points try this module first (a switch for comparing
/// against the older per-plane kernels; its tests call it directly either way).
pub const DISPATCH: bool = true;

/// Words of the interleaved plane buffer: an 18x18 padded plane of 8 channels (10 KiB).
pub const BUF_WORDS: usize = 18 * 18 * 8;
/// Words of the interleaved buffer of unpadded planes (outputs, or the output gradient
/// read by the backward passes): 16x16 pixels of 8 channels (8 KiB).
pub const OUT_WORDS: usize = 16 * 16 * 8;

/// Which pass a shape is checked for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Pass {
    Forward,
    Input,
    Weight,
}

/// One accepted shape: the planes copied into the buffer (`src`, placed at `pad`) and
/// the planes walked with stride `s` (`out`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dw {
    pub n: usize,
    pub c: usize,
    pub src: [usize; 2],
    pub out: [usize; 2],
    pub pad: [usize; 2],
    pub s: [usize; 2],
    pub rows: usize,
    pub cols: usize,
    /// Backward-input as a correlation of `gy` with the flipped kernel (stride 1).
    pub gather: bool,
}

impl Dw {
    /// The layout for `pass` of `g`, or `None` when this module does not take it.
    pub(super) fn new(g: &ConvGeom, pass: Pass) -> Option<Dw> {
        let depthwise = g.groups == g.c_in && g.c_out == g.c_in;
        let shape = g.kh == 3 && g.kw == 3 && g.dil == [1, 1] && g.stride.iter().all(|&s| s == 1 || s == 2);
        let nonempty = g.n > 0 && g.c_in > 0 && g.h > 0 && g.w > 0 && g.oh > 0 && g.ow > 0;
        if !(depthwise && shape && nonempty) {
            return None;
        }
        let gather = pass == Pass::Input && g.stride == [1, 1];
        let (src, out, pad, s) = if gather {
            let q = [2usize.checked_sub(g.pad[0])?, 2usize.checked_sub(g.pad[1])?];
            ([g.oh, g.ow], [g.h, g.w], q, [1, 1])
        } else {
            ([g.h, g.w], [g.oh, g.ow], g.pad, g.stride)
        };
        let rows = src[0].checked_add(pad[0].checked_mul(2)?)?;
        let cols = src[1].checked_add(pad[1].checked_mul(2)?)?;
        // Every tap of every output lies in the buffer.
        let reach = |i: usize| (out[i] - 1).checked_mul(s[i])?.checked_add(3);
        let inside = reach(0)? <= rows && reach(1)? <= cols;
        let fits = rows.checked_mul(cols)?.checked_mul(8)? <= BUF_WORDS
            && out[0].checked_mul(out[1])?.checked_mul(8)? <= OUT_WORDS;
        (inside && fits).then_some(Dw {
            n: g.n,
            c: g.c_in,
            src,
            out,
            pad,
            s,
            rows,
            cols,
            gather,
        })
    }
}

/// `lanes[t][l] = w[(c0 + l) * 9 + t]` (tap `8 - t` when `flip`), zero for `l >= nl`.
pub(super) fn weight_lanes<const L: usize>(w: &[f32], c0: usize, nl: usize, flip: bool) -> [[f32; L]; 9] {
    let mut lanes = [[0.0f32; L]; 9];
    for (l, wc) in w[c0 * 9..(c0 + nl) * 9].chunks_exact(9).enumerate() {
        for (t, &v) in wc.iter().enumerate() {
            lanes[if flip { 8 - t } else { t }][l] = v;
        }
    }
    lanes
}

/// Where pixel `q` of a `w`-wide plane sits in an interleaved buffer: at vector
/// `(q / w) * cols + q % w + off` (its lanes from word `L` times that).
#[derive(Clone, Copy, Debug)]
pub(super) struct Place {
    pub w: usize,
    pub cols: usize,
    pub off: usize,
}

impl Place {
    /// The vector holding pixel `q`'s lanes.
    #[inline]
    pub fn slot(&self, q: usize) -> usize {
        (q / self.w) * self.cols + q % self.w + self.off
    }
}

impl Dw {
    /// The copied planes in the padded buffer.
    pub(super) fn src_place(&self) -> Place {
        Place {
            w: self.src[1],
            cols: self.cols,
            off: self.pad[0] * self.cols + self.pad[1],
        }
    }
    /// The walked planes, unpadded.
    pub(super) fn out_place(&self) -> Place {
        Place {
            w: self.out[1],
            cols: self.out[1],
            off: 0,
        }
    }
}

/// `buf[place(q) + l] = src[l * plane + q]` for pixels `q0..plane`, lanes `l < nl`
/// of `L`.
pub(super) fn to_lanes_scalar<const L: usize>(
    src: &[f32],
    plane: usize,
    nl: usize,
    pl: Place,
    buf: &mut [f32],
    q0: usize,
) {
    for q in q0..plane {
        let d = &mut buf[pl.slot(q) * L..][..nl];
        for (l, v) in d.iter_mut().enumerate() {
            *v = src[l * plane + q];
        }
    }
}

/// `dst[l * plane + q] (+)= buf[place(q) + l]` for pixels `q0..plane`, lanes `l < nl`
/// of `L`.
#[allow(clippy::too_many_arguments)]
pub(super) fn from_lanes_scalar<const L: usize>(
    buf: &[f32],
    pl: Place,
    dst: &mut [f32],
    plane: usize,
    nl: usize,
    add: bool,
    q0: usize,
) {
    for q in q0..plane {
        let s = &buf[pl.slot(q) * L..][..nl];
        for (l, &v) in s.iter().enumerate() {
            let d = &mut dst[l * plane + q];
            *d = if add { *d + v } else { v };
        }
    }
}

/// Eight `f32` lanes as a plain array (the portable instance).
#[derive(Clone, Copy)]
pub(super) struct P8([f32; 8]);

/// The first 8 words of `s`.
#[inline(always)]
fn load(s: &[f32]) -> P8 {
    let s = &s[..8];
    P8(core::array::from_fn(|l| s[l]))
}

/// Writes the 8 lanes to the first 8 words of `d`.
#[inline(always)]
fn store(v: P8, d: &mut [f32]) {
    d[..8].copy_from_slice(&v.0);
}

/// `v` in every lane.
#[inline(always)]
fn splat(v: f32) -> P8 {
    P8([v; 8])
}

/// `a * b + c`, lane by lane (two roundings: no FMA in portable code).
#[inline(always)]
fn fma(a: P8, b: P8, c: P8) -> P8 {
    P8(core::array::from_fn(|l| a.0[l] * b.0[l] + c.0[l]))
}

/// The 8x8 transpose: lane `j` of vector `i` becomes lane `i` of vector `j`. Written as
/// the three shuffle stages of the AVX2 one (`avx2::transpose8`), each within 4-lane
/// halves but the last, which LLVM maps to SSE2 or simd128 shuffles; the direct
/// `r[j][i]` form compiles to lane-by-lane moves.
#[inline(always)]
fn transpose8(r: [P8; 8]) -> [P8; 8] {
    let r = r.map(|v| v.0);
    let lo = |a: [f32; 8], b: [f32; 8]| [a[0], b[0], a[1], b[1], a[4], b[4], a[5], b[5]];
    let hi = |a: [f32; 8], b: [f32; 8]| [a[2], b[2], a[3], b[3], a[6], b[6], a[7], b[7]];
    let t = [
        lo(r[0], r[1]),
        hi(r[0], r[1]),
        lo(r[2], r[3]),
        hi(r[2], r[3]),
        lo(r[4], r[5]),
        hi(r[4], r[5]),
        lo(r[6], r[7]),
        hi(r[6], r[7]),
    ];
    let even = |a: [f32; 8], b: [f32; 8]| [a[0], a[1], b[0], b[1], a[4], a[5], b[4], b[5]];
    let odd = |a: [f32; 8], b: [f32; 8]| [a[2], a[3], b[2], b[3], a[6], a[7], b[6], b[7]];
    let u = [
        even(t[0], t[2]),
        odd(t[0], t[2]),
        even(t[1], t[3]),
        odd(t[1], t[3]),
        even(t[4], t[6]),
        odd(t[4], t[6]),
        even(t[5], t[7]),
        odd(t[5], t[7]),
    ];
    let low = |a: [f32; 8], b: [f32; 8]| P8([a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]]);
    let high = |a: [f32; 8], b: [f32; 8]| P8([a[4], a[5], a[6], a[7], b[4], b[5], b[6], b[7]]);
    [
        low(u[0], u[4]),
        low(u[1], u[5]),
        low(u[2], u[6]),
        low(u[3], u[7]),
        high(u[0], u[4]),
        high(u[1], u[5]),
        high(u[2], u[6]),
        high(u[3], u[7]),
    ]
}

/// The portable instance.
mod portable {
    use super::{fma, load, splat, store, transpose8 as transpose, P8 as V};
    super::dw8_kernels!(8);
}

/// The AVX2 + FMA instance: call only where `avx2::available` said yes.
#[cfg(target_arch = "x86_64")]
pub(super) mod avx {
    use super::super::avx2::{fma, load, splat, store, transpose8 as transpose, F8 as V};
    super::dw8_kernels!(8, #[target_feature(enable = "avx2,fma")]);
}

/// The AVX-512F instance, 16 channels per block: call only where `avx512::available`
/// said yes. Each lane's arithmetic is the AVX2 instance's (the same bits).
#[cfg(target_arch = "x86_64")]
pub(super) mod avx16 {
    use super::super::avx512::{
        fma16 as fma, load16 as load, splat16 as splat, store16 as store, transpose16 as transpose, F16 as V,
    };
    super::dw8_kernels!(16, #[target_feature(enable = "avx2,fma,avx512f")]);
}

/// Whether the 16-lane instance takes `c` channels: whole blocks of 16 only (a last
/// block of 8 would leave half its lanes idle where the 8-lane one fills them).
#[cfg(target_arch = "x86_64")]
fn wide(c: usize) -> bool {
    c.is_multiple_of(16)
}

/// `y = conv(x, w) + b` for the shapes this module takes; `false` (nothing written)
/// for others.
pub fn conv2d_forward(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) -> bool {
    let Some(d) = Dw::new(g, Pass::Forward) else {
        return false;
    };
    #[cfg(target_arch = "x86_64")]
    if (wide(d.c) && super::avx512::dw16_forward(&d, x, w, b, y)) || super::avx2::dw8_forward(&d, x, w, b, y)
    {
        return true;
    }
    portable::forward(&d, x, w, b, y);
    true
}

/// `gx += conv_transpose(gy, w)`; `false` as [`conv2d_forward`].
pub fn conv2d_backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
    let Some(d) = Dw::new(g, Pass::Input) else {
        return false;
    };
    #[cfg(target_arch = "x86_64")]
    if (wide(d.c) && super::avx512::dw16_backward_input(&d, gy, w, gx))
        || super::avx2::dw8_backward_input(&d, gy, w, gx)
    {
        return true;
    }
    portable::backward_input(&d, gy, w, gx);
    true
}

/// `gw += correlate(gy, x)`; `false` as [`conv2d_forward`].
pub fn conv2d_backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    let Some(d) = Dw::new(g, Pass::Weight) else {
        return false;
    };
    #[cfg(target_arch = "x86_64")]
    if (wide(d.c) && super::avx512::dw16_backward_weight(&d, gy, x, gw))
        || super::avx2::dw8_backward_weight(&d, gy, x, gw)
    {
        return true;
    }
    portable::backward_weight(&d, gy, x, gw);
    true
}

/// `gx += conv_transpose(gy, w)` and `gw += correlate(gy, x)` in one walk, each block of
/// `gy` copied into lanes once; `false` (nothing written) unless this module takes both
/// passes of `g`.
pub fn conv2d_backward_both(
    g: &ConvGeom,
    gy: &[f32],
    x: &[f32],
    w: &[f32],
    gx: &mut [f32],
    gw: &mut [f32],
) -> bool {
    let (Some(di), Some(dw), true) = (Dw::new(g, Pass::Input), Dw::new(g, Pass::Weight), DISPATCH) else {
        return false;
    };
    #[cfg(target_arch = "x86_64")]
    if (wide(dw.c) && super::avx512::dw16_backward_both(&di, &dw, gy, x, w, gx, gw))
        || super::avx2::dw8_backward_both(&di, &dw, gy, x, w, gx, gw)
    {
        return true;
    }
    portable::backward_both(&di, &dw, gy, x, w, gx, gw);
    true
}

/// The portable instance of the three passes, whatever the CPU (for the tests).
#[cfg(test)]
pub(super) mod portable_only {
    use super::{portable, ConvGeom, Dw, Pass};

    /// Portable [`super::conv2d_forward`].
    pub fn conv2d_forward(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) -> bool {
        Dw::new(g, Pass::Forward)
            .map(|d| portable::forward(&d, x, w, b, y))
            .is_some()
    }
    /// Portable [`super::conv2d_backward_input`].
    pub fn conv2d_backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
        Dw::new(g, Pass::Input)
            .map(|d| portable::backward_input(&d, gy, w, gx))
            .is_some()
    }
    /// Portable [`super::conv2d_backward_weight`].
    pub fn conv2d_backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
        Dw::new(g, Pass::Weight)
            .map(|d| portable::backward_weight(&d, gy, x, gw))
            .is_some()
    }
    /// Portable [`super::conv2d_backward_both`].
    pub fn conv2d_backward_both(
        g: &ConvGeom,
        gy: &[f32],
        x: &[f32],
        w: &[f32],
        gx: &mut [f32],
        gw: &mut [f32],
    ) -> bool {
        let (Some(di), Some(dw)) = (Dw::new(g, Pass::Input), Dw::new(g, Pass::Weight)) else {
            return false;
        };
        portable::backward_both(&di, &dw, gy, x, w, gx, gw);
        true
    }
}

/// A test-only module `$name` with one instance's three passes and both backward
/// passes at once, whatever the channel count; `false` where the CPU lacks the
/// instance's features (the dispatch takes 16 lanes only for whole blocks of 16).
#[cfg(all(test, target_arch = "x86_64"))]
macro_rules! instance_only {
    ($name:ident, $what:literal, $m:ident, $fwd:ident, $input:ident, $weight:ident, $both:ident) => {
        #[doc = $what]
        pub(super) mod $name {
            use super::super::$m;
            use super::{ConvGeom, Dw, Pass};

            /// The instance's [`super::conv2d_forward`].
            pub fn conv2d_forward(
                g: &ConvGeom,
                x: &[f32],
                w: &[f32],
                b: Option<&[f32]>,
                y: &mut [f32],
            ) -> bool {
                Dw::new(g, Pass::Forward).is_some_and(|d| $m::$fwd(&d, x, w, b, y))
            }
            /// The instance's [`super::conv2d_backward_input`].
            pub fn conv2d_backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
                Dw::new(g, Pass::Input).is_some_and(|d| $m::$input(&d, gy, w, gx))
            }
            /// The instance's [`super::conv2d_backward_weight`].
            pub fn conv2d_backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
                Dw::new(g, Pass::Weight).is_some_and(|d| $m::$weight(&d, gy, x, gw))
            }
            /// The instance's [`super::conv2d_backward_both`].
            pub fn conv2d_backward_both(
                g: &ConvGeom,
                gy: &[f32],
                x: &[f32],
                w: &[f32],
                gx: &mut [f32],
                gw: &mut [f32],
            ) -> bool {
                let (Some(di), Some(dw)) = (Dw::new(g, Pass::Input), Dw::new(g, Pass::Weight)) else {
                    return false;
                };
                $m::$both(&di, &dw, gy, x, w, gx, gw)
            }
        }
    };
}

#[cfg(all(test, target_arch = "x86_64"))]
instance_only!(
    avx2_only,
    "The AVX2 instance (8 lanes), for the tests.",
    avx2,
    dw8_forward,
    dw8_backward_input,
    dw8_backward_weight,
    dw8_backward_both
);

#[cfg(all(test, target_arch = "x86_64"))]
instance_only!(
    avx16_only,
    "The AVX-512F instance (16 lanes), for the tests.",
    avx512,
    dw16_forward,
    dw16_backward_input,
    dw16_backward_weight,
    dw16_backward_both
);
