//! Register-tiled `f32` convolutions, `f32`'s kernel set on hosts and in wasm (see
//! `kernels/set.rs`).
//!
//! - [`conv`]: register-tiled direct convolution over zero-padded stack copies of a
//!   few planes (`planes.rs`), forward and backward-input; [`weight`]: backward-weight
//!   (the bias gradient with lane-wise partial sums is `conv/bias.rs`). Plain safe Rust over
//!   fixed-size `[f32; 8]` arrays, which LLVM turns into SSE2 (the x86_64 baseline),
//!   AVX/AVX2 with `-C target-cpu=native`, or wasm `simd128` when that target feature
//!   is on ("portable" kernels).
//! - On x86_64 the entry points first try the AVX2 + FMA kernels of `strip.rs`, chosen
//!   at run time ([`avx2::available`] asks `cpuid` once), so a default build uses them
//!   on any CPU that has them: stride-1 convolutions as implicit matrix products with
//!   12 `ymm` accumulators and explicit FMAs. [`avx2`] and [`avx512`] are the crate's only
//!   modules with `unsafe` (the intrinsics and the calls into `#[target_feature]`
//!   code).
//! - Before the strip kernels, 3x3 "same" convolutions with one input channel per
//!   group (W1's first layer) take `one.rs` (forward, backward-weight) and
//!   `one_input.rs` (backward-input): flat positions, read and written in place;
//!   with AVX-512F all three take 16 lanes (`one16.rs`, its input read in place
//!   through `one_centre.rs`, and `one_weight16.rs`: 8 channels per tile;
//!   `one_input16.rs`: up to 7 rows x 14 outputs per tile, each gradient row loaded
//!   once per channel); such convolutions with stride 2 (W2's
//!   stem) take the forward and backward-weight tiles of `one16.rs` and
//!   `one_weight16.rs` over six copies of the input split by row parity and kernel
//!   column (`one16_s2.rs`).
//! - With AVX-512F, 1x1 stride-1 convolutions (W2's expand and project layers) take
//!   `pw16.rs` first, forward and backward-input: matrix products over 16 positions
//!   per vector; and `pw_weight16.rs` for backward-weight on planes of 32 positions
//!   and more: sums along both operands' rows, across lanes once per weight.
//! - `winograd.rs`: Winograd F(2x2, 3x3) over 8-sample lanes for 3x3 stride-1
//!   padding-1 convolutions, forward and backward-input, tried first by the strip
//!   kernels' entry points for the shapes where it measured faster (`winograd::pays`:
//!   planes narrower than 8, or 16 with AVX-512F, batches of 8 and more); where the
//!   CPU has AVX-512F ([`avx512`]) the whole pipeline runs on 16-sample lanes
//!   (`winograd16.rs`).
//! - `winograd_weight.rs`: Winograd F(2x2, 3x3) backward-weight of such convolutions
//!   over 8-channel lanes (16 with AVX-512F), tried first by the strip kernels'
//!   backward-weight for the shapes where it measured faster (`winograd_weight::pays`:
//!   8 channels in and out and more, 64 positions over the batch and more).
//! - [`dw8`]: depthwise 3x3 convolutions (strides 1 and 2) vectorised across channels
//!   (16 per vector with AVX-512F where they come in blocks of 16), tried first by
//!   every entry point; then [`depthwise`]: other strided depthwise
//!   convolutions on small planes.
//! - No heap, no arena workspace: stack buffers only (portable: at most
//!   [`conv::PLANE_WORDS`] + [`conv::PACK_WORDS`] words; AVX2: at most 100 KiB, Winograd
//!   at most 194 KiB, its backward-weight 88 KiB).
//! - Every kernel falls back to the portable or generic one for shapes it does not
//!   cover, and every path is tested against the generic kernels on random shapes
//!   (`tests.rs`), the AVX2 one whenever the CPU has it.

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
#[cfg(target_arch = "x86_64")]
mod bias8;
pub mod conv;
pub mod depthwise;
pub mod dw8;
mod dw8_body;
#[cfg(target_arch = "x86_64")]
mod layout;
#[cfg(target_arch = "x86_64")]
mod norm8;
#[cfg(target_arch = "x86_64")]
mod one;
#[cfg(target_arch = "x86_64")]
mod one16;
#[cfg(target_arch = "x86_64")]
mod one16_s2;
#[cfg(target_arch = "x86_64")]
mod one_centre;
#[cfg(target_arch = "x86_64")]
mod one_input;
#[cfg(target_arch = "x86_64")]
mod one_input16;
#[cfg(target_arch = "x86_64")]
mod one_weight16;
pub(crate) mod planes;
#[cfg(target_arch = "x86_64")]
mod pool8;
#[cfg(target_arch = "x86_64")]
mod pw16;
#[cfg(target_arch = "x86_64")]
mod pw_weight16;
#[cfg(target_arch = "x86_64")]
mod rows;
#[cfg(target_arch = "x86_64")]
mod strip;
#[cfg(target_arch = "x86_64")]
mod strip_weight;
pub mod weight;
#[cfg(target_arch = "x86_64")]
mod winograd;
#[cfg(target_arch = "x86_64")]
mod winograd16;
#[cfg(target_arch = "x86_64")]
mod winograd_products;
#[cfg(target_arch = "x86_64")]
mod winograd_weight;

#[cfg(all(test, target_arch = "x86_64"))]
mod one_tests;
#[cfg(test)]
mod tests;
#[cfg(all(test, target_arch = "x86_64"))]
mod winograd_tests;
#[cfg(all(test, target_arch = "x86_64"))]
mod winograd_weight_tests;
