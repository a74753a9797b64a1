//! The `f32` elementary functions behind [`Scalar`](crate::Scalar)'s `exp`, `ln`, `sqrt`,
//! `tanh` and `sigmoid` for `f32`.
//!
//! - Default: `libm`, correctly rounded or within an ulp or two, the same on every target.
//! - Feature `micromath`: the fast approximations of the `micromath` crate (small code,
//!   a few multiplies, no tables), for cores without an FPU where `libm` is slow and large.
//!   `tanh` and `sigmoid` are built from its `exp` (it has no `tanh`). Their errors
//!   are bounded, and W1 shown to still train with them, in `tests/tests/micromath.rs`.

#[cfg(feature = "micromath")]
use micromath::F32Ext;

/// e^x.
#[inline]
pub fn exp(x: f32) -> f32 {
    #[cfg(feature = "micromath")]
    return F32Ext::exp(x);
    #[cfg(not(feature = "micromath"))]
    return libm::expf(x);
}

/// Natural logarithm.
#[inline]
pub fn ln(x: f32) -> f32 {
    #[cfg(feature = "micromath")]
    return F32Ext::ln(x);
    #[cfg(not(feature = "micromath"))]
    return libm::logf(x);
}

/// Square root.
#[inline]
pub fn sqrt(x: f32) -> f32 {
    #[cfg(feature = "micromath")]
    return F32Ext::sqrt(x);
    #[cfg(not(feature = "micromath"))]
    return libm::sqrtf(x);
}

/// Hyperbolic tangent.
#[inline]
pub fn tanh(x: f32) -> f32 {
    #[cfg(feature = "micromath")]
    {
        // tanh(|x|) = (1 - e^-2|x|) / (1 + e^-2|x|): exp of a non-positive value cannot
        // overflow.
        let t = exp(-2.0 * x.abs());
        let r = (1.0 - t) / (1.0 + t);
        if x < 0.0 {
            -r
        } else {
            r
        }
    }
    #[cfg(not(feature = "micromath"))]
    return libm::tanhf(x);
}

/// Logistic sigmoid, 1 / (1 + e^-x).
#[inline]
pub fn sigmoid(x: f32) -> f32 {
    // Two branches keep exp's argument non-positive: no overflow for large |x|.
    if x >= 0.0 {
        1.0 / (1.0 + exp(-x))
    } else {
        let e = exp(x);
        e / (1.0 + e)
    }
}
