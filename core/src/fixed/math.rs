//! Integer-only `div`, `exp`, `ln`, `sqrt`, `tanh` and `sigmoid` for [`Q16`].
//!
//! - Internal precision is Q2.30 in `u64`/`i64` (products of two Q2.30 values fit in
//!   63 bits), so each function rounds once more when it returns to Q16.16.
//! - `exp(x)`: `x = k ln2 + r` with `0 <= r < ln 2`; `e^r` by a 13-term Horner Taylor
//!   series in Q2.30; then a shift by `k`. Above `ln(32768)` it saturates (flag), below
//!   about `-11.1` the result is 0.
//! - `ln(x)`: `x = m 2^p` with `m` in `[1, 2)`; `ln m = 2 atanh((m-1)/(m+1))` by its odd
//!   series (ratio `<= 1/9` per term, 14 terms); plus `p ln2`. `ln(x <= 0)` saturates
//!   to the negative rail (flag).
//! - `sqrt`: the integer square root of `raw << 16`, rounded to nearest.
//! - `tanh` and `sigmoid` only ever take `exp` of a non-positive value, so they never
//!   saturate and never raise the flag.
//!
//! Errors against `libm` (f64) are bounded in `tests/tests/fixed_math.rs`.

use super::{raise, round_shift, sat_i32, Q16};

/// 1.0 in Q2.30.
const ONE30: i64 = 1 << 30;
/// ln 2 in Q2.30 (0.693147180559945 * 2^30, rounded).
const LN2_30: i64 = 744_261_118;
/// ln 2 in Q32.32 (rounded), for range reduction of Q16.16 inputs.
const LN2_32: i64 = 2_977_044_472;

/// `a / b` rounded half away from zero; `x / 0` saturates to the rail of `x`'s sign
/// (flag), `0 / 0` is 0.
pub fn div(a: Q16, b: Q16) -> Q16 {
    if b.0 == 0 {
        if a.0 == 0 {
            return Q16(0);
        }
        raise();
        return if a.0 > 0 { Q16::MAX } else { Q16::MIN };
    }
    let n = (a.0 as i64).unsigned_abs() << 16;
    let d = (b.0 as i64).unsigned_abs();
    let q = ((n << 1) + d) / (d << 1);
    let neg = (a.0 < 0) != (b.0 < 0);
    Q16(sat_i32(if neg { -(q as i64) } else { q as i64 }))
}

/// `e^r` for `0 <= r < ln 2` (both Q2.30), result in Q2.30 (`[1, 2)`).
fn exp_reduced(r: i64) -> i64 {
    let mut e = ONE30;
    for n in (1..=13i64).rev() {
        e = ONE30 + round_shift(r * e, 30) / n;
    }
    e
}

/// `e^x` as `(mantissa Q2.30 in [1, 2), k)` with `e^x = mantissa * 2^k`.
fn exp_parts(x: Q16) -> (i64, i64) {
    let xq = (x.0 as i64) << 16; // Q32.32
    let k = xq.div_euclid(LN2_32);
    let r32 = xq - k * LN2_32; // in [0, ln2) as Q32.32
    (exp_reduced(round_shift(r32, 2)), k)
}

/// Scales a Q2.30 mantissa by `2^k` into Q16.16 (rounded, saturating).
fn scale_to_q16(m: i64, k: i64) -> i32 {
    let shift = 14 - k; // Q2.30 -> Q16.16 is a right shift by 14
    if shift <= 0 {
        if -shift >= 32 {
            return sat_i32(i64::MAX);
        }
        sat_i32(m << -shift)
    } else if shift >= 62 {
        0
    } else {
        sat_i32(round_shift(m, shift as u32))
    }
}

/// e^x, saturating above `ln 32768`.
pub fn exp(x: Q16) -> Q16 {
    let (m, k) = exp_parts(x);
    Q16(scale_to_q16(m, k))
}

/// `e^x` in Q2.30 for `x <= 0` (so the result is in `(0, 1]`), never saturating.
fn exp_nonpos_30(x: Q16) -> i64 {
    let (m, k) = exp_parts(x);
    if k <= -62 {
        0
    } else if k >= 0 {
        m
    } else {
        round_shift(m, (-k) as u32)
    }
}

/// Natural logarithm; `ln(x <= 0)` saturates to the negative rail.
pub fn ln(x: Q16) -> Q16 {
    if x.0 <= 0 {
        raise();
        return Q16::MIN;
    }
    let v = x.0 as i64;
    let p = 63 - v.leading_zeros() as i64; // 0..=30: v = m * 2^p, m in [1, 2)
    let m = v << (30 - p); // Q2.30
    let z = ((m - ONE30) << 30) / (m + ONE30); // Q2.30, in [0, 1/3)
    let z2 = round_shift(z * z, 30);
    let (mut term, mut s) = (z, 0i64);
    for j in 0..14i64 {
        s += term / (2 * j + 1);
        term = round_shift(term * z2, 30);
    }
    let ln30 = 2 * s + (p - 16) * LN2_30;
    Q16(sat_i32(round_shift(ln30, 14)))
}

/// Square root, rounded to nearest; `sqrt(x < 0)` is 0 (flag).
pub fn sqrt(x: Q16) -> Q16 {
    if x.0 < 0 {
        raise();
        return Q16(0);
    }
    let n = (x.0 as u64) << 16;
    // Bit-by-bit integer square root (floor).
    let (mut rem, mut root, mut bit) = (n, 0u64, 1u64 << 46);
    while bit > 0 {
        if rem >= root + bit {
            rem -= root + bit;
            root = (root >> 1) + bit;
        } else {
            root >>= 1;
        }
        bit >>= 2;
    }
    // n - root^2 = rem; round up when n > root^2 + root (i.e. n >= (root + 1/2)^2).
    if rem > root {
        root += 1;
    }
    Q16(root as i32)
}

/// `num30 / den30` as Q16.16, rounded half away from zero (`den30 > 0`, `num30 >= 0`).
fn ratio_q16(num30: i64, den30: i64) -> i32 {
    sat_i32(((num30 << 17) + den30) / (den30 << 1))
}

/// Hyperbolic tangent: `sign(x) (1 - e) / (1 + e)` with `e = e^(-2|x|)`.
pub fn tanh(x: Q16) -> Q16 {
    let a = (x.0 as i64).abs();
    let two_a = Q16(a.saturating_mul(2).min(i32::MAX as i64) as i32);
    let e = exp_nonpos_30(Q16(-two_a.0));
    let t = ratio_q16(ONE30 - e, ONE30 + e);
    Q16(if x.0 < 0 { -t } else { t })
}

/// Logistic sigmoid: `1 / (1 + e^-x)` for `x >= 0`, `e^x / (1 + e^x)` below.
pub fn sigmoid(x: Q16) -> Q16 {
    if x.0 >= 0 {
        let e = exp_nonpos_30(Q16(-x.0));
        Q16(ratio_q16(ONE30, ONE30 + e))
    } else {
        let e = exp_nonpos_30(x);
        Q16(ratio_q16(e, ONE30 + e))
    }
}
