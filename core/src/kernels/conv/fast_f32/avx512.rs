//! AVX-512F on x86_64, chosen at run time: 16-lane paths of the kernels whose work
//! splits into independent 16-word vectors (Winograd's pipelines over 16 samples or 16
//! channels, 1x1 convolutions over 16 positions, the one-input-channel 3x3 kernels over
//! 16 flat positions, depthwise 3x3 over 16 channels). Beside `avx2.rs`, the crate's only
//! module with `unsafe`.
//!
//! - [`available`] asks `cpuid` (AVX-512F) and `XCR0` (the OS saves the mask and the
//!   upper `zmm` registers) once, on top of [`super::avx2::available`].
//! - The entry points here call the `#[target_feature]` code of those kernels' own files
//!   only after [`available`] said yes, and return `false` (nothing written) otherwise,
//!   so that the caller falls back to the 8-lane AVX2 kernels.
//! - Where a 16-lane path replaces an 8-lane one lane for lane (Winograd's), each lane's
//!   arithmetic is unchanged (same products, same order): the results are bit for bit
//!   those of the 8-lane code, and the tests check it.
#![allow(unsafe_code)]

use super::dw8::{self, Dw};
use super::one::Fwd;
use super::pw16;
use super::pw_weight16;
use super::winograd::Wino;
use super::winograd_weight::WinoWeight;
use crate::kernels::conv::ConvGeom;
use core::arch::x86_64::{
    __cpuid_count, __m512, _mm512_add_ps, _mm512_castps_pd, _mm512_fmadd_ps, _mm512_loadu_ps,
    _mm512_mask_storeu_ps, _mm512_maskz_loadu_ps, _mm512_set1_ps, _mm512_shuffle_f32x4, _mm512_shuffle_ps,
    _mm512_storeu_ps, _mm512_sub_ps, _mm512_unpackhi_ps, _mm512_unpacklo_ps, _xgetbv,
};
use core::sync::atomic::{AtomicU8, Ordering};

/// 16 lanes.
#[derive(Clone, Copy)]
pub(crate) struct F16(__m512);

/// Not asked yet / no / yes.
static STATE: AtomicU8 = AtomicU8::new(0);

/// Whether this CPU and operating system run AVX-512F code, besides AVX2 + FMA (asked
/// once, then cached).
pub fn available() -> bool {
    match STATE.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            let yes = super::avx2::available() && detect();
            STATE.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
            yes
        }
    }
}

/// `cpuid` leaf 7 (AVX-512F) and `XCR0` bits 1, 2 and 5-7 (SSE, AVX, opmask and both
/// halves of the `zmm` state). Called only after `avx2::available` (leaf 7 exists,
/// OSXSAVE is set).
fn detect() -> bool {
    let avx512f = __cpuid_count(7, 0).ebx >> 16 & 1 == 1;
    // SAFETY: `avx2::available` said yes, which checked OSXSAVE (`xgetbv` exists).
    avx512f && unsafe { xcr0() } & 0b1110_0110 == 0b1110_0110
}

#[target_feature(enable = "xsave")]
fn xcr0() -> u64 {
    // SAFETY: register 0 always exists where `xgetbv` does.
    unsafe { _xgetbv(0) }
}

/// The 16 words at the start of `s` (panics if shorter, like indexing).
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn load16(s: &[f32]) -> F16 {
    let s = &s[..16];
    // SAFETY: `s` is 16 readable words (checked above); `loadu` needs no alignment.
    F16(unsafe { _mm512_loadu_ps(s.as_ptr()) })
}

/// The first `n` words of `s` (at most 16, panics if `s` is shorter), zeros after.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn load16_first(s: &[f32], n: usize) -> F16 {
    let s = &s[..n.min(16)];
    let mask = ((1u32 << s.len()) - 1) as u16;
    // SAFETY: the mask selects `s.len()` lanes, all readable; masked lanes are not read.
    F16(unsafe { _mm512_maskz_loadu_ps(mask, s.as_ptr()) })
}

/// `v` into the 16 words at the start of `d` (panics if shorter, like indexing).
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn store16(v: F16, d: &mut [f32]) {
    let d = &mut d[..16];
    // SAFETY: `d` is 16 writable words (checked above); `storeu` needs no alignment.
    unsafe { _mm512_storeu_ps(d.as_mut_ptr(), v.0) }
}

/// The first `n` lanes of `v` (at most 16) into the start of `d`; the rest of `d`
/// untouched.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn store16_first(v: F16, d: &mut [f32], n: usize) {
    let d = &mut d[..n.min(16)];
    let mask = ((1u32 << d.len()) - 1) as u16;
    // SAFETY: the mask selects `d.len()` lanes, all writable; masked lanes are not written.
    unsafe { _mm512_mask_storeu_ps(d.as_mut_ptr(), mask, v.0) }
}

/// `v` in every lane.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn splat16(v: f32) -> F16 {
    F16(_mm512_set1_ps(v))
}

/// `a * b + c`, lane by lane, rounded once.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn fma16(a: F16, b: F16, c: F16) -> F16 {
    F16(_mm512_fmadd_ps(a.0, b.0, c.0))
}

/// `a * b + c` in the lanes whose bit is set in `keep`, `c` in the others (one
/// instruction, as [`fma16`]).
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn fma16_where(a: F16, b: F16, c: F16, keep: u16) -> F16 {
    F16(core::arch::x86_64::_mm512_mask3_fmadd_ps(a.0, b.0, c.0, keep))
}

/// `a + b`, lane by lane.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn add16(a: F16, b: F16) -> F16 {
    F16(_mm512_add_ps(a.0, b.0))
}

/// `a - b`, lane by lane.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn sub16(a: F16, b: F16) -> F16 {
    F16(_mm512_sub_ps(a.0, b.0))
}

/// Lanes 0-7 of `a`, then lanes 0-7 of `b`.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn low_halves(a: F16, b: F16) -> F16 {
    F16(_mm512_shuffle_f32x4::<0x44>(a.0, b.0))
}

/// Lanes 8-15 of `a`, then lanes 8-15 of `b`.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn high_halves(a: F16, b: F16) -> F16 {
    F16(_mm512_shuffle_f32x4::<0xEE>(a.0, b.0))
}

/// Winograd's products of one pass with 16-lane multiply-adds ([`Wino::products_wide`]);
/// `false` (nothing written) when the CPU lacks AVX-512F.
pub(super) fn winograd_products(
    w: &Wino,
    u: &[f32],
    vb: &[f32],
    nt: usize,
    bias: Option<&[f32]>,
    yb: &mut [f32],
) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX-512F, AVX2 and FMA.
    available() && {
        unsafe { w.products_wide(u, vb, nt, bias, yb) };
        true
    }
}

/// `y = conv(x, w) + b` for 1x1 stride-1 convolutions without padding (`pw16.rs`);
/// `false` (nothing written) for other shapes or without AVX-512F.
pub(crate) fn pointwise_forward(
    g: &ConvGeom,
    x: &[f32],
    w: &[f32],
    b: Option<&[f32]>,
    y: &mut [f32],
) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX-512F, AVX2 and FMA.
    available() && unsafe { pw16::forward(g, x, w, b, y) }
}

/// `gx += conv_transpose(gy, w)` for the shapes of [`pointwise_forward`]; `false` as it.
pub(crate) fn pointwise_backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX-512F, AVX2 and FMA.
    available() && unsafe { pw16::backward_input(g, gy, w, gx) }
}

/// `gw += correlate(gy, x)` for the shapes of [`pointwise_forward`] (`pw_weight16.rs`);
/// `false` as it.
pub(crate) fn pointwise_backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX-512F, AVX2 and FMA.
    available() && unsafe { pw_weight16::backward_weight(g, gy, x, gw) }
}

/// The 16-lane instance of `dw8.rs`'s forward pass (16 channels per block); `false`
/// (nothing written) without AVX-512F.
pub(crate) fn dw16_forward(d: &Dw, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX-512F, AVX2 and FMA.
    available() && {
        unsafe { dw8::avx16::forward(d, x, w, b, y) };
        true
    }
}

/// The 16-lane instance of `dw8.rs`'s backward-input pass; `false` as [`dw16_forward`].
pub(crate) fn dw16_backward_input(d: &Dw, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX-512F, AVX2 and FMA.
    available() && {
        unsafe { dw8::avx16::backward_input(d, gy, w, gx) };
        true
    }
}

/// The 16-lane instance of `dw8.rs`'s backward-weight pass; `false` as [`dw16_forward`].
pub(crate) fn dw16_backward_weight(d: &Dw, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX-512F, AVX2 and FMA.
    available() && {
        unsafe { dw8::avx16::backward_weight(d, gy, x, gw) };
        true
    }
}

/// The 16-lane instance of `dw8.rs`'s two backward passes in one walk; `false` as
/// [`dw16_forward`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn dw16_backward_both(
    di: &Dw,
    dw: &Dw,
    gy: &[f32],
    x: &[f32],
    w: &[f32],
    gx: &mut [f32],
    gw: &mut [f32],
) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX-512F, AVX2 and FMA.
    available() && {
        unsafe { dw8::avx16::backward_both(di, dw, gy, x, w, gx, gw) };
        true
    }
}

/// `one.rs`'s forward over one sample and block of `B` channels with 16-lane vectors
/// (`one16.rs`); `false` (nothing written) without AVX-512F or for planes under 16.
pub(super) fn one_forward_plane<const B: usize>(t: &Fwd, dst: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX-512F, AVX2 and FMA.
    available() && unsafe { t.plane16::<B>(dst) }
}

/// Winograd backward-weight's products for one row of 4 `xi` with 16-lane multiply-adds
/// ([`WinoWeight::products_wide`]); `false` (nothing written) without AVX-512F.
pub(super) fn winograd_weight_products(ww: &WinoWeight, v: &[f32], w: &[f32], m: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX-512F, AVX2 and FMA.
    available() && {
        unsafe { ww.products_wide(v, w, m) };
        true
    }
}

/// Winograd backward-weight's transforms of one row of 4 `xi` with 16-lane vectors
/// where the channels allow ([`WinoWeight::rows_wide`]); `false` (nothing written)
/// without AVX-512F.
pub(super) fn winograd_weight_rows(
    ww: &WinoWeight,
    r: usize,
    xt: &[f32],
    gt: &[f32],
    v: &mut [f32],
    w: &mut [f32],
) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX-512F, AVX2 and FMA.
    available() && {
        unsafe { ww.rows_wide(r, xt, gt, v, w) };
        true
    }
}

/// The 8x8 transposes of both 8-lane halves of 8 vectors: lane `j` of half `h` of
/// vector `i` becomes lane `i` of half `h` of vector `j` (`avx2::transpose8` on each
/// half, with half as many instructions).
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn transpose8x2(r: [F16; 8]) -> [F16; 8] {
    use core::arch::x86_64::{
        _mm512_permutex2var_ps, _mm512_setr_epi32, _mm512_shuffle_ps, _mm512_unpackhi_ps, _mm512_unpacklo_ps,
    };
    let lo = |a: F16, b: F16| _mm512_unpacklo_ps(a.0, b.0);
    let hi = |a: F16, b: F16| _mm512_unpackhi_ps(a.0, b.0);
    // As `transpose8`, within each 128-bit quarter.
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
    let u = [
        _mm512_shuffle_ps::<0x44>(t[0], t[2]),
        _mm512_shuffle_ps::<0xEE>(t[0], t[2]),
        _mm512_shuffle_ps::<0x44>(t[1], t[3]),
        _mm512_shuffle_ps::<0xEE>(t[1], t[3]),
        _mm512_shuffle_ps::<0x44>(t[4], t[6]),
        _mm512_shuffle_ps::<0xEE>(t[4], t[6]),
        _mm512_shuffle_ps::<0x44>(t[5], t[7]),
        _mm512_shuffle_ps::<0xEE>(t[5], t[7]),
    ];
    // Quarters 0 and 2 (or 1 and 3) of `a` and `b`, interleaved: `permute2f128` per half.
    let even = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
    let odd = _mm512_setr_epi32(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
    let p = |a: __m512, i, b: __m512| F16(_mm512_permutex2var_ps(a, i, b));
    [
        p(u[0], even, u[4]),
        p(u[1], even, u[5]),
        p(u[2], even, u[6]),
        p(u[3], even, u[7]),
        p(u[0], odd, u[4]),
        p(u[1], odd, u[5]),
        p(u[2], odd, u[6]),
        p(u[3], odd, u[7]),
    ]
}

/// The even and the odd lanes of the 32 words `lo`, `hi` (lanes 0-15, 16-31), each
/// in order: `([w0, w2, .., w30], [w1, w3, .., w31])`.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn evens_odds(lo: F16, hi: F16) -> (F16, F16) {
    use core::arch::x86_64::{_mm512_permutex2var_ps, _mm512_setr_epi32};
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    (
        F16(_mm512_permutex2var_ps(lo.0, even, hi.0)),
        F16(_mm512_permutex2var_ps(lo.0, odd, hi.0)),
    )
}

/// Lanes 0-7 of `v`.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn low8(v: F16) -> super::avx2::F8 {
    super::avx2::F8(core::arch::x86_64::_mm512_castps512_ps256(v.0))
}

/// Lanes 8-15 of `v`.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn high8(v: F16) -> super::avx2::F8 {
    use core::arch::x86_64::{_mm256_castpd_ps, _mm512_extractf64x4_pd};
    super::avx2::F8(_mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(
        v.0,
    ))))
}

/// Winograd backward-weight's plane transposes 16 positions at a time
/// ([`super::winograd_weight::transpose_planes16`]); `false` (nothing written) without
/// AVX-512F.
pub(super) fn winograd_weight_transpose(
    src: &[f32],
    cs: usize,
    hw: [usize; 2],
    layout: [usize; 2],
    dst: &mut [f32],
) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX-512F, AVX2 and FMA.
    available() && {
        unsafe { super::winograd_weight::transpose_planes16(src, cs, hw, layout, dst) };
        true
    }
}

/// The 16x16 transpose: lane `j` of vector `i` becomes lane `i` of vector `j`.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn transpose16(r: [F16; 16]) -> [F16; 16] {
    // Pairs of rows interleaved, then 4 rows per 128-bit lane: `u[4i + k]` holds
    // column `4L + k` of rows `4i..4i + 4` in its lane `L`.
    let mut t = [r[0].0; 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i].0, r[2 * i + 1].0);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i].0, r[2 * i + 1].0);
    }
    let mut u = t;
    for i in 0..4 {
        u[4 * i] = _mm512_shuffle_ps::<0x44>(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_shuffle_ps::<0xEE>(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_shuffle_ps::<0x44>(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_shuffle_ps::<0xEE>(t[4 * i + 1], t[4 * i + 3]);
    }
    // Lanes 0 and 2 (`0x88`) or 1 and 3 (`0xDD`) of two vectors, twice.
    let mut out = [r[0]; 16];
    for k in 0..4 {
        let a = _mm512_shuffle_f32x4::<0x88>(u[k], u[4 + k]);
        let b = _mm512_shuffle_f32x4::<0xDD>(u[k], u[4 + k]);
        let c = _mm512_shuffle_f32x4::<0x88>(u[8 + k], u[12 + k]);
        let d = _mm512_shuffle_f32x4::<0xDD>(u[8 + k], u[12 + k]);
        out[k] = F16(_mm512_shuffle_f32x4::<0x88>(a, c));
        out[4 + k] = F16(_mm512_shuffle_f32x4::<0x88>(b, d));
        out[8 + k] = F16(_mm512_shuffle_f32x4::<0xDD>(a, c));
        out[12 + k] = F16(_mm512_shuffle_f32x4::<0xDD>(b, d));
    }
    out
}

/// Winograd's whole pipeline in groups of 16 samples, one per lane ([`Wino::run16`]);
/// `false` (nothing written) without AVX-512F or where the 16-lane buffers do not
/// hold the shape.
pub(super) fn winograd_run16(
    w: &Wino,
    src: &[f32],
    u: &[f32],
    out: &mut [f32],
    bias: Option<Option<&[f32]>>,
) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX-512F, AVX2 and FMA.
    available() && w.takes16() && {
        unsafe { w.run16(src, u, out, bias) };
        true
    }
}

/// `one16.rs`'s forward (one-input-channel 3x3 "same" convolutions, 16 flat outputs
/// per vector, 8 channels per tile); `false` (nothing written) without AVX-512F or
/// for shapes it does not cover.
pub(super) fn one_forward(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX-512F, AVX2 and FMA.
    available() && unsafe { super::one16::forward(g, x, w, b, y) }
}

/// `one16_s2.rs`'s forward (one-input-channel 3x3 convolutions with stride 2 and
/// padding 1, W2's stem); `false` (nothing written) without AVX-512F or for shapes it
/// does not cover.
pub(super) fn one_forward_s2(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX-512F, AVX2 and FMA.
    available() && unsafe { super::one16_s2::forward(g, x, w, b, y) }
}

/// `one16_s2.rs`'s backward-weight (the shapes of [`one_forward_s2`]); `false` as it.
pub(super) fn one_backward_weight_s2(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX-512F, AVX2 and FMA.
    available() && unsafe { super::one16_s2::backward_weight(g, gy, x, gw) }
}

/// `one_weight16.rs`'s backward-weight (one-input-channel 3x3 "same" convolutions,
/// 16 flat positions per vector); `false` (nothing written) without AVX-512F or for
/// shapes it does not cover.
pub(super) fn one_backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX-512F, AVX2 and FMA.
    available() && unsafe { super::one_weight16::backward_weight(g, gy, x, gw) }
}

/// `one_input16.rs`'s backward-input (one-input-channel 3x3 "same" convolutions, 16
/// positions per row vector); `false` (nothing written) without AVX-512F or for shapes
/// it does not cover.
pub(super) fn one_backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX-512F, AVX2 and FMA.
    available() && unsafe { super::one_input16::backward_input(g, gy, w, gx) }
}

/// `a + b` in the lanes whose bit is set in `keep`, `a` in the others.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn add16_where(a: F16, keep: u16, b: F16) -> F16 {
    F16(core::arch::x86_64::_mm512_mask_add_ps(a.0, keep, a.0, b.0))
}

/// A hint to bring the cache line of `s`'s first word into the L1 cache (no effect on
/// any result; nothing for an empty `s`).
#[inline]
pub(crate) fn prefetch(s: &[f32]) {
    if let Some(w) = s.first() {
        // SAFETY: a prefetch reads nothing architecturally, and `w` is a valid word.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>((w as *const f32).cast())
        }
    }
}

/// `v`'s lanes moved down by one: lane `m` of the result is lane `m + 1` of `v`, lane
/// 15 is lane 0 (a rotation).
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn lanes_down1(v: F16) -> F16 {
    use core::arch::x86_64::{_mm512_alignr_epi32, _mm512_castps_si512, _mm512_castsi512_ps};
    let i = _mm512_castps_si512(v.0);
    F16(_mm512_castsi512_ps(_mm512_alignr_epi32::<1>(i, i)))
}

/// Loads of 16 words at `k * step` (`k < rows`) of slices at least `reach` words long:
/// the length is checked once per slice (the checks of a slice's loads are the same
/// and merge), not twice per load as with slice indexing.
#[derive(Clone, Copy)]
pub(crate) struct RowLoads16 {
    step: usize,
    rows: usize,
    reach: usize,
}

impl RowLoads16 {
    /// `rows` rows `step` words apart (where the last row's end overflows, every load
    /// panics).
    pub(crate) fn new(step: usize, rows: usize) -> Self {
        let reach = step.saturating_mul(rows.saturating_sub(1)).saturating_add(16);
        Self { step, rows, reach }
    }

    /// Words from the first row's start to the last row's end.
    pub(crate) fn reach(&self) -> usize {
        self.reach
    }

    /// The 16 words at `k * step` of `s` (panics if `k >= rows` or `s` is shorter than
    /// [`Self::reach`]).
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) fn load(&self, s: &[f32], k: usize) -> F16 {
        assert!(k < self.rows && s.len() >= self.reach);
        // SAFETY: `k * step + 16 <= (rows - 1) * step + 16 = reach <= s.len()`, none of
        // it overflowing (`reach` would have saturated at `usize::MAX`, longer than any
        // slice); `loadu` needs no alignment.
        F16(unsafe { _mm512_loadu_ps(s.as_ptr().add(k * self.step)) })
    }
}
