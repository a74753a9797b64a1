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

use super::avx2::F8;
use super::winograd::Wino;
use core::arch::x86_64::{
    __cpuid_count, __m512, _mm256_castpd_ps, _mm512_castps512_ps256, _mm512_castps_pd,
    _mm512_extractf64x4_pd, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_set1_ps, _xgetbv,
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

/// Lanes 0-7 and 8-15 as two 8-lane vectors.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn halves(v: F16) -> [F8; 2] {
    let hi = _mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v.0));
    [F8(_mm512_castps512_ps256(v.0)), F8(_mm256_castpd_ps(hi))]
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
