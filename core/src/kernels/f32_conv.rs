//! The convolution kernels `f32` uses, chosen once per build here so that the
//! `Scalar` hooks in `scalar.rs` need no conditions of their own:
//!
//! - register-tiled kernels on hosts and wasm ([`super::fast_f32`], SIMD lanes);
//! - on Cortex-M with an FPU ([`super::m_f32`], scalar FPU tiles sized for its 32
//!   registers and small stacks; hard-float ABI targets only: on the soft-float M0 they
//!   measured slower than the generic kernels in backward, 314 against 244
//!   instructions per MAC);
//! - everywhere else, and on every target with the `small-kernels` feature (the
//!   smallest code), the plain generic kernels of [`super::conv`] (for the bias
//!   gradient, the hook's generic default).

#[cfg(all(
    not(feature = "small-kernels"),
    any(
        target_arch = "x86_64",
        target_arch = "x86",
        target_arch = "wasm32",
        target_arch = "aarch64"
    )
))]
pub use super::fast_f32::conv::{conv2d_backward_input, conv2d_backward_weight, conv2d_forward};

#[cfg(all(not(feature = "small-kernels"), target_arch = "arm", target_abi = "eabihf"))]
pub use super::m_f32::{conv2d_backward_input, conv2d_backward_weight, conv2d_forward};

#[cfg(not(all(
    not(feature = "small-kernels"),
    any(
        target_arch = "x86_64",
        target_arch = "x86",
        target_arch = "wasm32",
        target_arch = "aarch64",
        all(target_arch = "arm", target_abi = "eabihf")
    )
)))]
pub use super::conv::{conv2d_backward_input, conv2d_backward_weight, conv2d_forward};

/// Bias gradient: eight partial sums instead of one serial chain of additions (plain
/// Rust that vectorises on every target). With `small-kernels` the `Scalar` hook keeps
/// its generic default instead.
#[cfg(not(feature = "small-kernels"))]
pub use super::fast_f32::bias::conv2d_backward_bias;
