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
    // e^-|x| keeps exp's argument non-positive (no overflow for large |x|); the two
    // results are selected, not branched to, so a loop over a slice vectorises.
    let e = exp_nonpositive(-f32::from_bits(x.to_bits() & 0x7fff_ffff));
    let d = 1.0 + e;
    if x >= 0.0 {
        1.0 / d
    } else {
        e / d
    }
}

/// e^x for x <= 0 (the sigmoid's argument) in straight-line code, which the compiler
/// vectorises over a slice where a call to libm's `expf` per element does not (SiLU and
/// squeeze-and-excitation run a sigmoid over every activation): Cephes' `expf`, range
/// reduction by ln 2 in two parts and a degree-5 polynomial, within a few ulp of `expf`;
/// 0 below -87.3 (where `expf` is subnormal), NaN kept. With `micromath`, its `exp`.
#[inline(always)]
fn exp_nonpositive(x: f32) -> f32 {
    #[cfg(feature = "micromath")]
    return exp(x);
    #[cfg(not(feature = "micromath"))]
    {
        const LOW: f32 = -87.33;
        // 1.5 * 2^23: adding and subtracting it rounds to the nearest integer.
        const ROUND: f32 = 12_582_912.0;
        let xc = if x < LOW { LOW } else { x };
        let n = (xc * core::f32::consts::LOG2_E + ROUND) - ROUND;
        let r = (xc - n * 0.693_359_4) - n * -2.121_944_4e-4;
        let p = 1.987_569_2e-4_f32;
        let p = p * r + 1.398_199_9e-3;
        let p = p * r + 8.333_452e-3;
        let p = p * r + 4.166_579_6e-2;
        let p = p * r + 1.666_666_5e-1;
        let p = p * r + 0.5;
        let y = p * r * r + r + 1.0;
        // 2^n, n in -126..=0 here (a NaN's n casts to 0).
        let scale = f32::from_bits(((n as i32 + 127).max(1) as u32) << 23);
        if x < LOW {
            0.0
        } else {
            y * scale
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_sigmoid_is_within_a_few_ulp_of_libm() {
        let mut worst = 0.0f64;
        let mut x = -100.0f32;
        while x <= 100.0 {
            let want = if x >= 0.0 {
                1.0 / (1.0 + libm::exp(-x as f64))
            } else {
                let e = libm::exp(x as f64);
                e / (1.0 + e)
            };
            let got = super::sigmoid(x) as f64;
            if want > 1e-30 {
                worst = worst.max(((got - want) / want).abs());
            }
            x += 0.0037;
        }
        assert!(worst < 4e-7, "relative error {worst}");
        assert!(super::sigmoid(f32::NAN).is_nan());
        assert_eq!(super::sigmoid(f32::INFINITY), 1.0);
        assert_eq!(super::sigmoid(f32::NEG_INFINITY), 0.0);
        assert_eq!(super::sigmoid(0.0), 0.5);
    }
}
