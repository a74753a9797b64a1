//! Which kernels each scalar type runs: the one place where kernels are chosen.
//!
//! - [`KernelSet`] lists the hot kernels the ops call through a scalar's
//!   [`Scalar::Kernels`]; its default methods are the generic reference kernels, so a
//!   set overrides only what it specialises.
//! - [`Reference`] is the generic kernels for any scalar.
//! - [`F32`] is `f32`'s set on the target being built, chosen below with one `cfg` per
//!   choice; [`Q16Kernels`] is `Q16`'s (exact-sum convolutions).

use super::conv::{self, ConvGeom};
use super::linear;
use super::norm::{self, NormGeom};
use super::pool::{self, PoolGeom};
use super::{activation, compact};
use crate::fixed::Q16;
use crate::scalar::Scalar;

/// The kernels the ops call for one scalar type `S`. Every method defaults to the
/// generic reference kernel of the same name.
pub trait KernelSet<S: Scalar> {
    /// Convolution, NCHW: `y = conv(x, w) + b` (see [`conv::conv2d_forward`]).
    fn conv2d_forward(g: &ConvGeom, x: &[S], w: &[S], b: Option<&[S]>, y: &mut [S]) {
        conv::conv2d_forward(g, x, w, b, y)
    }
    /// `gx += ` the input gradient of a convolution.
    fn conv2d_backward_input(g: &ConvGeom, gy: &[S], w: &[S], gx: &mut [S]) {
        conv::conv2d_backward_input(g, gy, w, gx)
    }
    /// `gw += ` the weight gradient of a convolution.
    fn conv2d_backward_weight(g: &ConvGeom, gy: &[S], x: &[S], gw: &mut [S]) {
        conv::conv2d_backward_weight(g, gy, x, gw)
    }
    /// `gb += ` the bias gradient of a convolution (sum of `gy` per output channel).
    fn conv2d_backward_bias(g: &ConvGeom, gy: &[S], gb: &mut [S]) {
        conv::conv2d_backward_bias(g, gy, gb)
    }
    /// `gx +=` and `gw +=` a convolution's input and weight gradients in one call,
    /// where a kernel shares work between them; `false` (nothing written): call
    /// [`KernelSet::conv2d_backward_input`] and [`KernelSet::conv2d_backward_weight`].
    fn conv2d_backward_input_weight(
        _g: &ConvGeom,
        _gy: &[S],
        _x: &[S],
        _w: &[S],
        _gx: &mut [S],
        _gw: &mut [S],
    ) -> bool {
        false
    }
    /// Max pooling with packed winner positions (`kernels/pool/max.rs`).
    fn max_pool2d_forward_packed(g: &PoolGeom, x: &[S], y: &mut [S], idx: &mut [S]) {
        pool::max::max_pool2d_forward_packed(g, x, y, idx)
    }
    /// `gx[winner] += gy`, decoding the packed positions of
    /// [`KernelSet::max_pool2d_forward_packed`].
    fn max_pool2d_backward_packed(g: &PoolGeom, gy: &[S], idx: &[S], gx: &mut [S]) {
        pool::max::max_pool2d_backward_packed(g, gy, idx, gx)
    }
    /// `gx = scatter(gy)`, writing every element of a `gx` that holds garbage;
    /// `false` (nothing written) where this set has no such path for the shape.
    fn max_pool2d_backward_overwrite(_g: &PoolGeom, _gy: &[S], _idx: &[S], _gx: &mut [S]) -> bool {
        false
    }
    /// Batch norm's batch statistics (`kernels/norm.rs`).
    fn channel_stats(g: NormGeom, x: &[S], stats: &mut [S], running_var: &mut [S], momentum: S) {
        norm::channel_stats(g, x, stats, running_var, momentum)
    }
    /// `gb[ch] += sum gy` per channel (`kernels/norm.rs`).
    fn norm_bias_grads(g: NormGeom, gy: &[S], gb: &mut [S]) {
        norm::bias_grads(g, gy, gb)
    }
    /// Batch norm's backward with batch statistics, weight and input gradients from one
    /// pass of sums (`kernels/norm.rs`).
    fn batch_norm_backward_batch(
        g: NormGeom,
        x: &[S],
        gy: &[S],
        saved: &[S],
        w: &[S],
        gw: &mut [S],
        gx: &mut [S],
    ) {
        norm::batch_norm_backward_batch(g, x, gy, saved, w, gw, gx)
    }
    /// [`KernelSet::batch_norm_backward_batch`] for a fresh input gradient, over the
    /// output's, with the affine gradients' sums left in `saved` (`kernels/norm.rs`).
    fn batch_norm_backward_batch_in_place(g: NormGeom, x: &[S], w: &[S], saved: &mut [S], gy: &mut [S]) {
        norm::batch_norm_backward_batch_in_place(g, x, w, saved, gy)
    }
    /// `x = relu6(x)` in place, with the bits of `0 < x < 6` in `mask` (empty: none kept).
    fn relu6_masked(x: &mut [S], mask: &mut [S]) {
        let six = S::from_count(6);
        compact::band_mask(x, mask, |v| v > S::ZERO && v < six);
        x.iter_mut().for_each(|v| *v = activation::relu6(*v));
    }
    /// `x = max(x, 0)` in place, with the mask bits (`kernels/compact.rs`).
    fn relu_masked(x: &mut [S], mask: &mut [S]) {
        compact::relu_inplace_masked(x, mask)
    }
    /// `g = 0` where the ReLU mask bit is clear (`kernels/compact.rs`).
    fn relu_mask_in_place(g: &mut [S], mask: &[S]) {
        compact::relu_mask_in_place(g, mask)
    }
    /// Fully connected: `y[b, o] = dot(x[b], w[o]) + bias[o]`.
    fn linear_forward(batch: usize, inp: usize, out: usize, x: &[S], w: &[S], b: Option<&[S]>, y: &mut [S]) {
        linear::linear_forward(batch, inp, out, x, w, b, y)
    }
    /// `gx[b] += sum_o gy[b, o] * w[o]`.
    fn linear_backward_input(batch: usize, inp: usize, out: usize, gy: &[S], w: &[S], gx: &mut [S]) {
        linear::linear_backward_input(batch, inp, out, gy, w, gx)
    }
    /// `gw[o] += sum_b gy[b, o] * x[b]`.
    fn linear_backward_weight(batch: usize, inp: usize, out: usize, gy: &[S], x: &[S], gw: &mut [S]) {
        linear::linear_backward_weight(batch, inp, out, gy, x, gw)
    }
}

/// The generic reference kernels, for any scalar.
pub struct Reference;
impl<S: Scalar> KernelSet<S> for Reference {}

// ---- f32: the per-target choice ---------------------------------------------------
// `small-kernels`: the generic kernels everywhere, the smallest code.
// x86, x86_64, wasm32, aarch64: register tiles over SIMD lanes (kernels/conv/fast_f32); on
// x86_64 they hand stride-1 shapes to the AVX2 + FMA kernels when `cpuid` has them.
// Cortex-M with an FPU (hard-float ABI): scalar FPU tiles sized for its 32 registers and
// small stacks (kernels/conv/m_f32). Elsewhere (the soft-float Cortex-M0, where the tiles were
// slower than the generic kernels in backward): generic convolutions.
// Every set but `Reference` sums the bias gradient in lane-wise partial sums.

/// `f32`'s kernels on this target.
#[cfg(feature = "small-kernels")]
pub type F32 = Reference;
/// `f32`'s kernels on this target.
#[cfg(all(
    not(feature = "small-kernels"),
    any(
        target_arch = "x86_64",
        target_arch = "x86",
        target_arch = "wasm32",
        target_arch = "aarch64"
    )
))]
pub type F32 = F32Tiles;
/// `f32`'s kernels on this target.
#[cfg(all(not(feature = "small-kernels"), target_arch = "arm", target_abi = "eabihf"))]
pub type F32 = F32CortexM;
/// `f32`'s kernels on this target.
#[cfg(all(
    not(feature = "small-kernels"),
    not(any(
        target_arch = "x86_64",
        target_arch = "x86",
        target_arch = "wasm32",
        target_arch = "aarch64",
        all(target_arch = "arm", target_abi = "eabihf")
    ))
))]
pub type F32 = F32Generic;

/// Register-tiled `f32` convolutions for hosts and wasm (AVX2 chosen at run time on
/// x86_64), lane-wise bias gradient.
#[cfg(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "wasm32",
    target_arch = "aarch64"
))]
pub struct F32Tiles;
#[cfg(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "wasm32",
    target_arch = "aarch64"
))]
impl KernelSet<f32> for F32Tiles {
    fn conv2d_forward(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) {
        conv::fast_f32::conv::conv2d_forward(g, x, w, b, y)
    }
    fn conv2d_backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) {
        conv::fast_f32::conv::conv2d_backward_input(g, gy, w, gx)
    }
    fn conv2d_backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) {
        conv::fast_f32::conv::conv2d_backward_weight(g, gy, x, gw)
    }
    fn conv2d_backward_input_weight(
        g: &ConvGeom,
        gy: &[f32],
        x: &[f32],
        w: &[f32],
        gx: &mut [f32],
        gw: &mut [f32],
    ) -> bool {
        conv::fast_f32::dw8::conv2d_backward_both(g, gy, x, w, gx, gw)
    }
    fn conv2d_backward_bias(g: &ConvGeom, gy: &[f32], gb: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if conv::fast_f32::avx2::conv2d_backward_bias(g, gy, gb) {
            return;
        }
        conv::bias::conv2d_backward_bias(g, gy, gb)
    }
    fn max_pool2d_forward_packed(g: &PoolGeom, x: &[f32], y: &mut [f32], idx: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if conv::fast_f32::avx2::max_pool2d_forward_packed(g, x, y, idx) {
            return;
        }
        pool::max::max_pool2d_forward_packed(g, x, y, idx)
    }
    fn max_pool2d_backward_packed(g: &PoolGeom, gy: &[f32], idx: &[f32], gx: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if conv::fast_f32::avx2::max_pool2d_backward_packed(g, gy, idx, gx) {
            return;
        }
        pool::max::max_pool2d_backward_packed(g, gy, idx, gx)
    }
    fn max_pool2d_backward_overwrite(g: &PoolGeom, gy: &[f32], idx: &[f32], gx: &mut [f32]) -> bool {
        #[cfg(target_arch = "x86_64")]
        return conv::fast_f32::avx2::max_pool2d_backward_overwrite(g, gy, idx, gx);
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (g, gy, idx, gx);
            false
        }
    }
    fn channel_stats(g: NormGeom, x: &[f32], stats: &mut [f32], running_var: &mut [f32], momentum: f32) {
        #[cfg(target_arch = "x86_64")]
        if conv::fast_f32::avx2::channel_stats(g, x, stats, running_var, momentum) {
            return;
        }
        norm::channel_stats(g, x, stats, running_var, momentum)
    }
    fn norm_bias_grads(g: NormGeom, gy: &[f32], gb: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if conv::fast_f32::avx2::bias_grads(g, gy, gb) {
            return;
        }
        norm::bias_grads(g, gy, gb)
    }
    fn batch_norm_backward_batch(
        g: NormGeom,
        x: &[f32],
        gy: &[f32],
        saved: &[f32],
        w: &[f32],
        gw: &mut [f32],
        gx: &mut [f32],
    ) {
        #[cfg(target_arch = "x86_64")]
        if conv::fast_f32::avx2::batch_norm_backward_batch(g, x, gy, saved, w, gw, gx) {
            return;
        }
        norm::batch_norm_backward_batch(g, x, gy, saved, w, gw, gx)
    }
    fn batch_norm_backward_batch_in_place(
        g: NormGeom,
        x: &[f32],
        w: &[f32],
        saved: &mut [f32],
        gy: &mut [f32],
    ) {
        #[cfg(target_arch = "x86_64")]
        if conv::fast_f32::avx2::batch_norm_backward_batch_in_place(g, x, w, saved, gy) {
            return;
        }
        norm::batch_norm_backward_batch_in_place(g, x, w, saved, gy)
    }
    fn relu6_masked(x: &mut [f32], mask: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if conv::fast_f32::avx2::relu6_masked(x, mask) {
            return;
        }
        compact::band_mask(x, mask, |v| v > 0.0 && v < 6.0);
        x.iter_mut().for_each(|v| *v = activation::relu6(*v));
    }
    fn relu_masked(x: &mut [f32], mask: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if conv::fast_f32::avx2::relu_masked(x, mask) {
            return;
        }
        compact::relu_inplace_masked(x, mask)
    }
    fn relu_mask_in_place(g: &mut [f32], mask: &[f32]) {
        #[cfg(target_arch = "x86_64")]
        if conv::fast_f32::avx2::relu_mask_in_place(g, mask) {
            return;
        }
        compact::relu_mask_in_place(g, mask)
    }
}

/// Register-tiled `f32` convolutions for Cortex-M with an FPU, lane-wise bias gradient
/// (built for that target and for the host's tests).
#[cfg(any(test, all(target_arch = "arm", target_abi = "eabihf")))]
pub struct F32CortexM;
#[cfg(any(test, all(target_arch = "arm", target_abi = "eabihf")))]
impl KernelSet<f32> for F32CortexM {
    fn conv2d_forward(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) {
        conv::m_f32::conv2d_forward(g, x, w, b, y)
    }
    fn conv2d_backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) {
        conv::m_f32::conv2d_backward_input(g, gy, w, gx)
    }
    fn conv2d_backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) {
        conv::m_f32::conv2d_backward_weight(g, gy, x, gw)
    }
    fn conv2d_backward_bias(g: &ConvGeom, gy: &[f32], gb: &mut [f32]) {
        conv::bias::conv2d_backward_bias(g, gy, gb)
    }
}

/// Generic `f32` convolutions, lane-wise bias gradient.
pub struct F32Generic;
impl KernelSet<f32> for F32Generic {
    fn conv2d_backward_bias(g: &ConvGeom, gy: &[f32], gb: &mut [f32]) {
        conv::bias::conv2d_backward_bias(g, gy, gb)
    }
}

// ---- Q16 --------------------------------------------------------------------------

/// `Q16`'s kernels: exact-sum convolutions (one rounding per output), cheaper on a
/// Cortex-M0 than the generic ones, which round and saturate every product.
pub struct Q16Kernels;
impl KernelSet<Q16> for Q16Kernels {
    fn conv2d_forward(g: &ConvGeom, x: &[Q16], w: &[Q16], b: Option<&[Q16]>, y: &mut [Q16]) {
        conv::q16::conv2d_forward(g, x, w, b, y)
    }
    fn conv2d_backward_input(g: &ConvGeom, gy: &[Q16], w: &[Q16], gx: &mut [Q16]) {
        conv::q16::conv2d_backward_input(g, gy, w, gx)
    }
    fn conv2d_backward_weight(g: &ConvGeom, gy: &[Q16], x: &[Q16], gw: &mut [Q16]) {
        conv::q16::conv2d_backward_weight(g, gy, x, gw)
    }
}
