//! AVX2 + FMA on x86_64, chosen at run time: with `avx512.rs`, the crate's only modules
//! with `unsafe`.
//!
//! - Users build without `-C target-cpu=native`, so the default build only knows SSE2.
//!   [`available`] asks the CPU once (`cpuid`, and `xgetbv` for the operating system's
//!   support of the 256-bit registers) and caches the answer in an atomic.
//! - The kernels in `strip.rs` are `#[target_feature(enable = "avx2,fma")]` functions;
//!   calling one is `unsafe` because it is undefined behaviour on a CPU without those
//!   features. The entry points here make that call only after [`available`] said yes.
//! - The 8-lane vector helpers (`load`, `store`, `splat`, `fma`, `keep`) wrap the
//!   intrinsics; loads and stores go through bounds-checked slices first, so the raw
//!   pointer they take always points at 8 valid words.
//! - Rust does not contract `a * b + c` into an FMA instruction: `fma` asks for
//!   `vfmadd` explicitly.
#![allow(unsafe_code)]

use super::dw8::{self, Dw};
use super::{bias8, norm8, pool8, strip, strip_weight};
use crate::kernels::conv::ConvGeom;
use crate::kernels::norm::NormGeom;
use crate::kernels::pool::{max, PoolGeom};
use core::arch::x86_64::{
    __cpuid, __cpuid_count, __m256, _mm256_add_ps, _mm256_and_ps, _mm256_fmadd_ps, _mm256_loadu_ps,
    _mm256_mul_ps, _mm256_permute2f128_ps, _mm256_set1_ps, _mm256_shuffle_ps, _mm256_storeu_ps,
    _mm256_sub_ps, _mm256_unpackhi_ps, _mm256_unpacklo_ps, _xgetbv,
};
use core::sync::atomic::{AtomicU8, Ordering};

/// Not asked yet / no / yes.
static STATE: AtomicU8 = AtomicU8::new(0);

/// Whether this CPU and operating system run AVX2 + FMA code (asked once, then cached).
pub fn available() -> bool {
    match STATE.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            let yes = detect();
            STATE.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
            yes
        }
    }
}

/// `cpuid` leaf 1 (FMA, OSXSAVE, AVX) and leaf 7 (AVX2), and `XCR0` (the OS saves the
/// SSE and AVX register state on context switches).
fn detect() -> bool {
    let max_leaf = __cpuid(0).eax;
    if max_leaf < 7 {
        return false;
    }
    let ecx1 = __cpuid(1).ecx;
    let (fma, osxsave, avx) = (ecx1 >> 12 & 1 == 1, ecx1 >> 27 & 1 == 1, ecx1 >> 28 & 1 == 1);
    let avx2 = __cpuid_count(7, 0).ebx >> 5 & 1 == 1;
    if !(fma && osxsave && avx && avx2) {
        return false;
    }
    // SAFETY: OSXSAVE (leaf 1, ecx bit 27) says the OS enabled `xgetbv`.
    let xcr0 = unsafe { xcr0() };
    xcr0 & 0b110 == 0b110
}

/// The extended control register 0 (which register states the OS saves).
#[target_feature(enable = "xsave")]
fn xcr0() -> u64 {
    // SAFETY: register 0 always exists where `xgetbv` does (the caller checked OSXSAVE).
    unsafe { _xgetbv(0) }
}

/// `y = conv(x, w) + b` with AVX2 + FMA; `false` (nothing written) when the CPU lacks
/// them or the shape is not one `strip.rs` handles.
pub fn conv2d_forward(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && unsafe { strip::conv2d_forward(g, x, w, b, y) }
}

/// `gx += conv_transpose(gy, w)` with AVX2 + FMA; `false` as [`conv2d_forward`].
pub fn conv2d_backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && unsafe { strip::conv2d_backward_input(g, gy, w, gx) }
}

/// `gw += correlate(gy, x)` with AVX2 + FMA; `false` as [`conv2d_forward`].
pub fn conv2d_backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && unsafe { strip_weight::conv2d_backward_weight(g, gy, x, gw) }
}

/// Winograd's forward pass (`winograd.rs`) whatever the dispatch would choose, with
/// 16-lane products where `wide` and the CPU allow; `false` (nothing written) without
/// AVX2 + FMA or for shapes it does not take.
#[cfg(test)]
pub(crate) fn winograd_forward(
    g: &ConvGeom,
    x: &[f32],
    w: &[f32],
    b: Option<&[f32]>,
    y: &mut [f32],
    wide: bool,
) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && unsafe { super::winograd::forward(g, x, w, b, y, wide) }
}

/// Winograd's backward-input pass; `false` as [`winograd_forward`].
#[cfg(test)]
pub(crate) fn winograd_backward_input(
    g: &ConvGeom,
    gy: &[f32],
    w: &[f32],
    gx: &mut [f32],
    wide: bool,
) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && unsafe { super::winograd::backward_input(g, gy, w, gx, wide) }
}

/// Winograd's backward-weight pass (`winograd_weight.rs`) whatever the dispatch would
/// choose; `false` as [`winograd_forward`].
#[cfg(test)]
pub(crate) fn winograd_backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && unsafe { super::winograd_weight::conv2d_backward_weight(g, gy, x, gw) }
}

/// [`winograd_backward_weight`] with 8-lane products only.
#[cfg(test)]
pub(crate) fn winograd_backward_weight_narrow(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && unsafe { super::winograd_weight::backward_weight(g, gy, x, gw, false) }
}

/// The strip kernels' backward-weight pass (`strip_weight.rs`) whatever the dispatch
/// would choose; `false` as [`winograd_forward`].
#[cfg(test)]
pub(crate) fn strip_backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && unsafe { strip_weight::strip_backward_weight(g, gy, x, gw) }
}

/// The AVX2 + FMA instance of `dw8.rs`'s forward pass; `false` (nothing written) when
/// the CPU lacks them.
pub(crate) fn dw8_forward(d: &Dw, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && {
        unsafe { dw8::avx::forward(d, x, w, b, y) };
        true
    }
}

/// The AVX2 + FMA instance of `dw8.rs`'s backward-input pass; `false` as [`dw8_forward`].
pub(crate) fn dw8_backward_input(d: &Dw, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && {
        unsafe { dw8::avx::backward_input(d, gy, w, gx) };
        true
    }
}

/// The AVX2 + FMA instance of `dw8.rs`'s backward-weight pass; `false` as [`dw8_forward`].
pub(crate) fn dw8_backward_weight(d: &Dw, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && {
        unsafe { dw8::avx::backward_weight(d, gy, x, gw) };
        true
    }
}

/// The AVX2 + FMA instance of `dw8.rs`'s two backward passes in one walk; `false` as
/// [`dw8_forward`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn dw8_backward_both(
    di: &Dw,
    dw: &Dw,
    gy: &[f32],
    x: &[f32],
    w: &[f32],
    gx: &mut [f32],
    gw: &mut [f32],
) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && {
        unsafe { dw8::avx::backward_both(di, dw, gy, x, w, gx, gw) };
        true
    }
}

/// BatchNorm's batch statistics (`norm8.rs`); `false` (nothing written) without AVX2.
pub(crate) fn channel_stats(
    g: NormGeom,
    x: &[f32],
    stats: &mut [f32],
    running_var: &mut [f32],
    m: f32,
) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && {
        unsafe { norm8::channel_stats(g, x, stats, running_var, m) };
        true
    }
}

/// BatchNorm's bias gradient (`norm8.rs`); `false` (nothing written) without AVX2.
pub(crate) fn bias_grads(g: NormGeom, gy: &[f32], gb: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && {
        unsafe { norm8::bias_grads(g, gy, gb) };
        true
    }
}

/// BatchNorm's backward with batch statistics (`norm8.rs`); `false` (nothing written)
/// without AVX2.
#[allow(clippy::too_many_arguments)]
pub(crate) fn batch_norm_backward_batch(
    g: NormGeom,
    x: &[f32],
    gy: &[f32],
    saved: &[f32],
    w: &[f32],
    gw: &mut [f32],
    gx: &mut [f32],
) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && {
        unsafe { norm8::batch_norm_backward_batch(g, x, gy, saved, w, gw, gx) };
        true
    }
}

/// BatchNorm's backward with batch statistics over the output gradient (`norm8.rs`);
/// `false` (nothing written) without AVX2.
pub(crate) fn batch_norm_backward_batch_in_place(
    g: NormGeom,
    x: &[f32],
    w: &[f32],
    saved: &mut [f32],
    gy: &mut [f32],
) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && {
        unsafe { norm8::batch_norm_backward_batch_in_place(g, x, w, saved, gy) };
        true
    }
}

/// ReLU6 in place with its mask bits (`norm8.rs`); `false` (nothing written) without AVX2.
pub(crate) fn relu6_masked(x: &mut [f32], mask: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && {
        unsafe { norm8::relu6_masked(x, mask) };
        true
    }
}

/// ReLU in place with its mask bits (`norm8.rs`); `false` (nothing written) without AVX2.
pub(crate) fn relu_masked(x: &mut [f32], mask: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && {
        unsafe { norm8::relu_masked(x, mask) };
        true
    }
}

/// A ReLU mask applied to a gradient in place (`norm8.rs`); `false` (nothing written)
/// without AVX2.
pub(crate) fn relu_mask_in_place(g: &mut [f32], mask: &[f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && {
        unsafe { norm8::relu_mask_in_place(g, mask) };
        true
    }
}

/// A convolution's bias gradient (`bias8.rs`); `false` (nothing written) without AVX2.
pub(crate) fn conv2d_backward_bias(g: &ConvGeom, gy: &[f32], gb: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && {
        unsafe { bias8::conv2d_backward_bias(g, gy, gb) };
        true
    }
}

/// Eight `f32` lanes in one `ymm` register.
#[derive(Clone, Copy)]
pub(crate) struct F8(pub(crate) __m256);

/// The first 8 words of `s` (panics if shorter, like slice indexing).
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(crate) fn load(s: &[f32]) -> F8 {
    let s = &s[..8];
    // SAFETY: `s` is 8 readable words (checked above); `loadu` needs no alignment.
    F8(unsafe { _mm256_loadu_ps(s.as_ptr()) })
}

/// Writes the 8 lanes to the first 8 words of `d`.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(crate) fn store(v: F8, d: &mut [f32]) {
    let d = &mut d[..8];
    // SAFETY: `d` is 8 writable words (checked above); `storeu` needs no alignment.
    unsafe { _mm256_storeu_ps(d.as_mut_ptr(), v.0) }
}

/// `a + b`, lane by lane.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(crate) fn add(a: F8, b: F8) -> F8 {
    F8(_mm256_add_ps(a.0, b.0))
}

/// `a - b`, lane by lane.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(crate) fn sub(a: F8, b: F8) -> F8 {
    F8(_mm256_sub_ps(a.0, b.0))
}

/// The bits of `a` where `mask`'s are set: with masks whose lanes are all ones
/// ([`KEEP`]) or all zeros, `a`'s lane or `+0`, whatever `a` holds (a product by 0
/// would turn an infinity into a NaN).
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(crate) fn keep(a: F8, mask: F8) -> F8 {
    F8(_mm256_and_ps(a.0, mask.0))
}

/// A lane of a [`keep`] mask that keeps (all bits set).
pub(crate) const KEEP: f32 = f32::from_bits(u32::MAX);

/// `v` in every lane.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(crate) fn splat(v: f32) -> F8 {
    F8(_mm256_set1_ps(v))
}

/// `a * b + c`, lane by lane, rounded once.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(crate) fn fma(a: F8, b: F8, c: F8) -> F8 {
    F8(_mm256_fmadd_ps(a.0, b.0, c.0))
}

/// Max pooling's 2x2 stride-2 path (`pool8.rs` when each pooled row covers its input
/// row, else the generic loop compiled here for 8 lanes); `false` (nothing written)
/// for other windows or when the CPU lacks AVX2.
pub(crate) fn max_pool2d_forward_packed(g: &PoolGeom, x: &[f32], y: &mut [f32], idx: &mut [f32]) -> bool {
    if !available() || !max::is_2x2(g) {
        return false;
    }
    // SAFETY: `available` checked that the CPU and the OS support AVX2.
    unsafe { max_pool_2x2_avx2(g, x, y, idx) };
    true
}

#[target_feature(enable = "avx2,fma")]
fn max_pool_2x2_avx2(g: &PoolGeom, x: &[f32], y: &mut [f32], idx: &mut [f32]) {
    if !pool8::max_pool_2x2(g, x, y, idx) {
        max::max_pool_2x2_staged(g, x, y, idx)
    }
}

/// Max pooling's 2x2 backward (`pool8.rs`); `false` (nothing written) for the shapes
/// it does not handle or when the CPU lacks AVX2.
pub(crate) fn max_pool2d_backward_packed(g: &PoolGeom, gy: &[f32], idx: &[f32], gx: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2.
    available() && unsafe { pool8::max_pool_2x2_backward(g, gy, idx, gx, false) }
}

/// [`max_pool2d_backward_packed`] writing over every element of `gx` (whatever it
/// held); `false` (nothing written) where the windows do not cover every input row.
pub(crate) fn max_pool2d_backward_overwrite(g: &PoolGeom, gy: &[f32], idx: &[f32], gx: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2.
    available() && unsafe { pool8::max_pool_2x2_backward(g, gy, idx, gx, true) }
}

/// The 8x8 transpose: lane `j` of vector `i` becomes lane `i` of vector `j`.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(crate) fn transpose8(r: [F8; 8]) -> [F8; 8] {
    let lo = |a: F8, b: F8| _mm256_unpacklo_ps(a.0, b.0);
    let hi = |a: F8, b: F8| _mm256_unpackhi_ps(a.0, b.0);
    // Pairs of rows interleaved: t0 = r0[0] r1[0] r0[1] r1[1] | r0[4] r1[4] r0[5] r1[5], ...
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
    // Four rows per 128-bit half: u0 = column 0 of rows 0-3 | column 4 of rows 0-3, ...
    let u = [
        _mm256_shuffle_ps::<0x44>(t[0], t[2]),
        _mm256_shuffle_ps::<0xEE>(t[0], t[2]),
        _mm256_shuffle_ps::<0x44>(t[1], t[3]),
        _mm256_shuffle_ps::<0xEE>(t[1], t[3]),
        _mm256_shuffle_ps::<0x44>(t[4], t[6]),
        _mm256_shuffle_ps::<0xEE>(t[4], t[6]),
        _mm256_shuffle_ps::<0x44>(t[5], t[7]),
        _mm256_shuffle_ps::<0xEE>(t[5], t[7]),
    ];
    [
        F8(_mm256_permute2f128_ps::<0x20>(u[0], u[4])),
        F8(_mm256_permute2f128_ps::<0x20>(u[1], u[5])),
        F8(_mm256_permute2f128_ps::<0x20>(u[2], u[6])),
        F8(_mm256_permute2f128_ps::<0x20>(u[3], u[7])),
        F8(_mm256_permute2f128_ps::<0x31>(u[0], u[4])),
        F8(_mm256_permute2f128_ps::<0x31>(u[1], u[5])),
        F8(_mm256_permute2f128_ps::<0x31>(u[2], u[6])),
        F8(_mm256_permute2f128_ps::<0x31>(u[3], u[7])),
    ]
}

/// `a * b`, lane by lane.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(crate) fn mul(a: F8, b: F8) -> F8 {
    F8(_mm256_mul_ps(a.0, b.0))
}

/// The 8-lane kernels of `one.rs` and `one_input.rs` without the 16-lane ones their
/// entry points try first, so that tests on a CPU with AVX-512F run them too; `false`
/// without AVX2 + FMA or for shapes they decline.
#[cfg(test)]
pub(super) fn one_forward8(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && unsafe { super::one::forward8(g, x, w, b, y) }
}

/// `one.rs`'s 8-lane backward-weight (see [`one_forward8`]).
#[cfg(test)]
pub(super) fn one_backward_weight8(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && unsafe { super::one::backward_weight8(g, gy, x, gw) }
}

/// `one_input.rs`'s 8-lane backward-input (see [`one_forward8`]).
#[cfg(test)]
pub(super) fn one_backward_input8(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
    // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
    available() && unsafe { super::one_input::backward_input8(g, gy, w, gx) }
}
