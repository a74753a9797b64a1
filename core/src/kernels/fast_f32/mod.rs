//! Specialised `f32` kernels, used through the `f32` kernel hooks of
//! [`Scalar`](crate::Scalar) on hosts and in wasm (see `scalar.rs` for where).
//!
//! - [`conv`]: register-tiled direct convolution over zero-padded stack copies of a
//!   few planes (`planes.rs`), forward and backward-input; [`weight`]: backward-weight.
//! - Plain safe Rust over fixed-size `[f32; 8]` arrays, which LLVM turns into SSE2 (the
//!   x86_64 baseline), AVX/AVX2 with `-C target-cpu=native`, or wasm `simd128` when that
//!   target feature is on; no `unsafe`, no heap, no arena workspace (stack only, at most
//!   [`conv::PLANE_WORDS`] + [`conv::PACK_WORDS`] words).
//! - Every kernel falls back to the generic one for shapes it does not cover, and is
//!   tested against it on random shapes (`tests.rs`).

#[cfg(target_arch = "x86_64")]
pub mod avx2;
pub mod bias;
pub mod conv;
pub(crate) mod planes;
#[cfg(target_arch = "x86_64")]
mod strip;
pub mod weight;

#[cfg(test)]
mod tests;
