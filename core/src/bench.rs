//! Kernel entry points for benchmarks and kernel tests. Not a stable API: names and
//! signatures follow the kernels and may change with any release.
//!
//! The ops reach the kernels only through [`Scalar::Kernels`](crate::Scalar::Kernels)
//! (chosen per scalar type and target in one place); this module exposes those sets and
//! the kernels behind them, so that a bench can time each specialisation against the
//! generic reference.
//!
//! ```
//! use torchlet::bench::{ConvGeom, KernelSet};
//! use torchlet::Scalar;
//!
//! let g = ConvGeom { n: 1, c_in: 1, h: 3, w: 3, c_out: 1, kh: 3, kw: 3, oh: 1, ow: 1,
//!                    stride: [1, 1], pad: [0, 0], dil: [1, 1], groups: 1 };
//! let (x, w) = ([1.0f32; 9], [2.0f32; 9]);
//! let mut y = [0.0f32; 1];
//! <f32 as Scalar>::Kernels::conv2d_forward(&g, &x, &w, None, &mut y);
//! assert_eq!(y, [18.0]);
//! ```

pub use crate::kernels::conv::ConvGeom;
#[cfg(any(test, all(target_arch = "arm", target_abi = "eabihf")))]
pub use crate::kernels::set::F32CortexM;
#[cfg(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "wasm32",
    target_arch = "aarch64"
))]
pub use crate::kernels::set::F32Tiles;
pub use crate::kernels::set::{F32Generic, KernelSet, Q16Kernels, Reference, F32};

/// The generic reference convolutions, for any [`Scalar`](crate::Scalar) (what
/// [`Reference`] runs).
pub mod reference {
    pub use crate::kernels::conv::{
        conv2d_backward_bias, conv2d_backward_input, conv2d_backward_weight, conv2d_forward,
    };
}

/// The register-tiled `f32` convolutions of hosts and wasm without the run-time AVX2
/// dispatch (on x86_64, [`F32`] tries the AVX2 + FMA kernels first).
#[cfg(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "wasm32",
    target_arch = "aarch64"
))]
pub mod portable {
    pub use crate::kernels::conv::fast_f32::conv::{
        conv2d_backward_input_portable, conv2d_backward_weight_portable, conv2d_forward_portable,
    };
}

/// Whether this CPU runs the AVX2 + FMA convolutions (asks `cpuid` once).
#[cfg(target_arch = "x86_64")]
pub fn avx2_available() -> bool {
    crate::kernels::conv::fast_f32::avx2::available()
}

/// Whether this CPU also runs the AVX-512F paths (Winograd's products, 1x1
/// convolutions; asks `cpuid` once).
#[cfg(target_arch = "x86_64")]
pub fn avx512_available() -> bool {
    crate::kernels::conv::fast_f32::avx512::available()
}
