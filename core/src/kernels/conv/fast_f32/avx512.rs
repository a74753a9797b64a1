//! AVX-512F on x86_64, chosen at run time, for the inner products of kernels whose
//! 8-lane layout holds two independent vectors side by side (`winograd.rs`: two tiles
//! of 8 samples). Beside `avx2.rs`, the crate's only module with `unsafe`.
//!
//! - [`available`] asks `cpuid` (AVX-512F) and `XCR0` (the OS saves the mask and the
//!   upper `zmm` registers) once, on top of [`super::avx2::available`].
//! - Where the CPU runs 512-bit multiply-adds at full width, one instruction does the
//!   work of two 8-lane ones; each lane's arithmetic is unchanged (same products,
//!   same order), so results are bit for bit those of the 8-lane code.
#![allow(unsafe_code)]

use super::avx2::load;
use super::one::Fwd;
use super::pw16;
use super::winograd::Wino;
use super::winograd_weight::WinoWeight;
use crate::kernels::conv::ConvGeom;
use core::arch::x86_64::{
    __cpuid_count, __m512, _mm256_castps_pd, _mm512_add_ps, _mm512_castpd_ps, _mm512_castps256_ps512,
    _mm512_castps_pd, _mm512_fmadd_ps, _mm512_insertf64x4, _mm512_loadu_ps, _mm512_mask_storeu_ps,
    _mm512_maskz_loadu_ps, _mm512_set1_ps, _mm512_shuffle_f32x4, _mm512_storeu_ps, _mm512_sub_ps, _xgetbv,
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

/// The 8 words at the start of `a`, then the 8 at the start of `b` (panics if either
/// is shorter, like indexing).
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn load8x2(a: &[f32], b: &[f32]) -> F16 {
    let (lo, hi) = (load(a), load(b));
    let hi = _mm256_castps_pd(hi.0);
    F16(_mm512_castpd_ps(_mm512_insertf64x4::<1>(
        _mm512_castps_pd(_mm512_castps256_ps512(lo.0)),
        hi,
    )))
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

/// `one.rs`'s forward over one sample and block of `B` channels with 16-lane vectors
/// (`one16.rs`); `false` (nothing written) without AVX-512F or for planes under 16.
pub(super) fn one_forward_plane<const B: usize>(t: &Fwd, dst: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX-512F, AVX2 and FMA.
    available() && unsafe { t.plane16::<B>(dst) }
}

/// Winograd backward-weight's products for one `xi` with 16-lane multiply-adds
/// ([`WinoWeight::products_wide`]); `false` (nothing written) without AVX-512F.
pub(super) fn winograd_weight_products(
    ww: &WinoWeight,
    v: &[f32],
    w: &[f32],
    xi: usize,
    m: &mut [f32],
) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX-512F, AVX2 and FMA.
    available() && {
        unsafe { ww.products_wide(v, w, xi, m) };
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
