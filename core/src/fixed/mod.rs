//! Fixed-point numbers: [`Q16`], a Q16.16 value in an `i32`, its [`Scalar`] impl, its
//! integer math and the saturation flag. (Its kernels live with the other kernels;
//! [`Scalar::Kernels`] names them.)
//!
//! Training in fixed point is integer arithmetic only, so a run is bit-identical on
//! x86_64, wasm32 and Cortex-M (and cheap on cores without an FPU). The rules below are
//! the whole contract; each is tested bit for bit in `tests/tests/fixed_*.rs`.
//!
//! # Format
//! - `Q16(raw)` means the real number `raw / 2^16`: 16 integer bits (with the sign),
//!   16 fraction bits. Range `[-32768, 32768 - 2^-16]`, resolution `2^-16 ≈ 1.53e-5`.
//! - The accumulator of dot products ([`Scalar::Acc`]) is an `i64` in Q32.32: the exact
//!   product of two Q16.16 values, so a sum of products rounds **once**, when it is
//!   brought back with [`Scalar::from_acc`] (as TFLM keeps int32 accumulators for
//!   int8 kernels).
//!
//! # Rounding: half away from zero
//! Every operation that drops fraction bits (multiply, divide, [`Scalar::from_acc`],
//! conversion from `f32`, `exp`, `ln`, `sqrt`, `tanh`, `sigmoid`) rounds to the nearest
//! representable value, ties away from zero: `round(x) = sign(x) * floor(|x| + 1/2)`.
//! This is the rule of TFLM's `SaturatingRoundingDoublingHighMul` /
//! `RoundingDivideByPOT` family; for a right shift by 16 of a 64-bit product `p` it is
//! `(p + 2^15 - (p < 0)) >> 16`.
//!
//! # Saturation
//! - Results outside the range clamp to `i32::MIN` / `i32::MAX`; nothing wraps. So do
//!   accumulator sums (clamped to the `i64` range), division by zero (to the rail of
//!   the numerator's sign, `0 / 0` gives 0) and `ln` of a non-positive value (to the
//!   negative rail).
//! - Every clamp raises a sticky **saturation flag**. [`take_saturated`] reads and
//!   clears it, so a training loop checks once per step: `if fixed::take_saturated()`.
//! - Where the flag lives: the arithmetic operators (`+`, `*`, ...) return only a value,
//!   so the flag cannot travel by return value without changing every kernel. It is
//!   one `bool` per thread with `std` (tests running in parallel do not see each
//!   other's flags) and one static `AtomicBool` without it. Only `load` and `store` are
//!   used, never compare-and-swap, because thumbv6m (Cortex-M0) has no CAS; the
//!   read-then-clear of [`take_saturated`] is therefore not atomic against an interrupt
//!   handler that also computes in `Q16` (a flag raised in between is lost). The fast
//!   path never touches the flag: only a clamp writes it.
//!
//! # Transcendentals without floats
//! `exp`, `ln`, `sqrt`, `tanh` and `sigmoid` are computed with integers only (see
//! [`math`]): range reduction by `ln 2` and a Q2.30 Taylor series for `exp`; a
//! normalisation to `[1, 2)` and an `atanh` series for `ln`; an integer square root;
//! `tanh` and `sigmoid` from `exp` of a non-positive argument, so neither can overflow.
//! Softmax / cross-entropy use them around the row maximum, so every `exp` there is of a
//! value `<= 0`.
//!
//! # Conversions
//! [`Q16::from_f32`] decodes the IEEE-754 bits with integer operations (same result on
//! every target, no float unit needed) and rounds with the rule above; NaN gives 0 and
//! raises the flag, infinities saturate. [`Q16::to_f32`] is exact except that values
//! above `2^24` LSB in magnitude round to 24 bits of mantissa (IEEE round to nearest).
//!
//! # Small updates
//! An SGD update `lr * v` below half an LSB would round to zero every step and the
//! weight would never move. [`Q16`] therefore implements [`Scalar::mul_dithered`] as
//! **stochastic rounding**: the discarded 16 bits are compared with 16 random bits from
//! the deterministic [`Rng`](crate::init::Rng), so the update is unbiased in
//! expectation and the run stays reproducible (the generator's seed is part of the
//! optimizer). [`Sgd`](crate::optim::Sgd) uses it for the momentum decay and the
//! update whenever [`Scalar::DITHER`] is true.
//!
//! Activation gradients vanish the same way inside backward: in W1 the gradient behind
//! the global average pool is about `1 / (batch * 49)` of the loss gradient, a few LSB.
//! **Loss scaling** fixes that: seed `backward_with` with `2^8` instead of 1 and let
//! [`Sgd::with_grad_scale`](crate::optim::Sgd::with_grad_scale) divide the gradients by
//! it again (stochastically rounded, so nothing is lost in expectation).
//!
//! # Convolutions: exact sums, rounded once
//! `Q16`'s convolution kernels ([`Scalar::Kernels`]) take each output as the exact
//! Q32.32 sum of its products, rounded and saturated once (the generic kernels round
//! every product). They pick, per call, the cheapest exact way to sum from the
//! operands' magnitudes: two 32-bit multiplies per product for operands like W1's,
//! three or four for large ones, so they are far cheaper than soft-float `f32` on a
//! Cortex-M0.
//!
//! # Frozen int8 convolutions
//! Frozen layers (weights that never train, for example in flash) can be stored as
//! `i8` with a scale per output channel ([`QConv2dWeights`], made on the host by
//! `quantize_per_channel`, with the `std` feature) and run on `Q16` activations by
//! [`NoGrad::conv2d_q8`](crate::NoGrad::conv2d_q8): a quarter of the weight bytes,
//! and one small exact kernel instead of the Q16 conv family. Each output is
//! `sat(round_half_away(sum(x_raw * q) * mult / 2^shift) + bias_raw)`, integer math
//! only, so the same bits on every target.
//!
//! # Cost
//! [`mul`] builds the 64-bit product from four 16 x 16 multiplies on ARM (Cortex-M0 has
//! no 32 x 32 -> 64 multiply), with results equal bit for bit to the native form.

pub mod math;
pub mod mul;

/// Host tooling: quantizes frozen convolution weights for [`QConv2dWeights`].
#[cfg(feature = "std")]
pub use crate::kernels::conv::q8::quantize::quantize_per_channel;
pub use crate::kernels::conv::q8::{
    QConv2dWeights, QScale, MAX_KERNEL_WIDTH, MAX_SHIFT, MAX_TERMS, MIN_SHIFT,
};

use crate::kernels::resize::{self, InterpMode};
use crate::scalar::Scalar;
use core::fmt;
use core::ops::{Add, AddAssign, Mul, Neg, Sub};

mod flag {
    #[cfg(any(test, feature = "std"))]
    std::thread_local! {
        static SATURATED: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
    }
    #[cfg(any(test, feature = "std"))]
    pub fn set(v: bool) {
        SATURATED.with(|f| f.set(v));
    }
    #[cfg(any(test, feature = "std"))]
    pub fn get() -> bool {
        SATURATED.with(|f| f.get())
    }

    #[cfg(not(any(test, feature = "std")))]
    static SATURATED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
    #[cfg(not(any(test, feature = "std")))]
    pub fn set(v: bool) {
        SATURATED.store(v, core::sync::atomic::Ordering::Relaxed);
    }
    #[cfg(not(any(test, feature = "std")))]
    pub fn get() -> bool {
        SATURATED.load(core::sync::atomic::Ordering::Relaxed)
    }
}

/// Whether any `Q16` operation saturated since the flag was last cleared.
pub fn saturated() -> bool {
    flag::get()
}

/// Returns the saturation flag and clears it (call once per training step).
pub fn take_saturated() -> bool {
    let s = flag::get();
    if s {
        flag::set(false);
    }
    s
}

/// Raises the saturation flag.
#[cold]
#[inline(never)]
pub(crate) fn raise() {
    flag::set(true);
}

/// Clamps a wide value to the `i32` range, raising the flag when it clamps.
#[inline(always)]
pub(crate) fn sat_i32(v: i64) -> i32 {
    // "Fits in i32" is "the high word is the sign of the low word": one compare on a
    // 32-bit core, where two 64-bit range compares cost a dozen instructions.
    let lo = v as i32;
    if lo as i64 == v {
        lo
    } else {
        saturate(v)
    }
}

/// The rare path of [`sat_i32`].
#[cold]
#[inline(never)]
fn saturate(v: i64) -> i32 {
    raise();
    if v > 0 {
        i32::MAX
    } else {
        i32::MIN
    }
}

/// `round(v / 2^shift)`, ties away from zero (`shift` in `1..=62`), for any `v`
/// (no intermediate overflow, so `i64::MAX` accumulators round correctly).
#[inline(always)]
pub(crate) fn round_shift(v: i64, shift: u32) -> i64 {
    let half = 1i64 << (shift - 1);
    let rem = v & ((half << 1) - 1);
    (v >> shift) + (rem > half || (rem == half && v >= 0)) as i64
}

/// A Q16.16 fixed-point number: the real value is `self.0 / 65536`.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Q16(pub i32);

impl Q16 {
    /// Fraction bits.
    pub const FRAC_BITS: u32 = 16;
    /// The raw value of 1.0.
    pub const ONE_RAW: i32 = 1 << 16;
    /// The largest value, `32768 - 2^-16`.
    pub const MAX: Q16 = Q16(i32::MAX);
    /// The smallest value, `-32768`.
    pub const MIN: Q16 = Q16(i32::MIN);

    /// The raw two's complement bits.
    pub const fn raw(self) -> i32 {
        self.0
    }

    /// An integer, saturating.
    pub fn from_int(v: i32) -> Q16 {
        Q16(sat_i32((v as i64) << 16))
    }

    /// Nearest Q16.16 value to `v`, ties away from zero, using only integer operations
    /// on the IEEE-754 bits. NaN gives 0 and infinities saturate (both raise the flag).
    pub fn from_f32(v: f32) -> Q16 {
        let bits = v.to_bits();
        let neg = bits >> 31 != 0;
        let exp = ((bits >> 23) & 0xFF) as i32;
        let frac = bits & 0x7F_FFFF;
        if exp == 0xFF {
            raise();
            return if frac != 0 {
                Q16(0)
            } else if neg {
                Q16::MIN
            } else {
                Q16::MAX
            };
        }
        // |v| = m * 2^(e - 150) (subnormals: e = 1, no implicit bit); raw = |v| * 2^16.
        let (m, e) = if exp == 0 {
            (frac, 1)
        } else {
            (frac | 0x80_0000, exp)
        };
        let shift = e - 134;
        let mag: i64 = if shift >= 0 {
            if shift > 31 {
                i64::MAX
            } else {
                (m as i64) << shift
            }
        } else if shift < -25 {
            0
        } else {
            round_shift(m as i64, (-shift) as u32)
        };
        Q16(sat_i32(if neg { -mag } else { mag }))
    }

    /// Nearest Q16.16 value to `v` (same rule and flags as [`Q16::from_f32`]), for
    /// hosts that hold reals as `f64` (the conformance door, weight files).
    pub fn from_f64(v: f64) -> Q16 {
        let bits = v.to_bits();
        let neg = bits >> 63 != 0;
        let exp = ((bits >> 52) & 0x7FF) as i32;
        let frac = bits & ((1u64 << 52) - 1);
        if exp == 0x7FF {
            raise();
            return if frac != 0 {
                Q16(0)
            } else if neg {
                Q16::MIN
            } else {
                Q16::MAX
            };
        }
        // |v| = m * 2^(e - 1075); raw = |v| * 2^16 = m * 2^(e - 1059).
        let (m, e) = if exp == 0 {
            (frac, 1)
        } else {
            (frac | (1u64 << 52), exp)
        };
        let shift = e - 1059;
        let mag: i64 = if shift > 10 {
            i64::MAX
        } else if shift >= 0 {
            (m as i64) << shift
        } else if shift < -54 {
            0
        } else {
            round_shift(m as i64, (-shift) as u32)
        };
        Q16(sat_i32(if neg { -mag } else { mag }))
    }

    /// The exact real value as `f64`.
    pub fn to_f64(self) -> f64 {
        self.0 as f64 / 65536.0
    }

    /// The real value as `f32` (exact up to 2^24 LSB in magnitude).
    pub fn to_f32(self) -> f32 {
        self.0 as f32 * (1.0 / 65536.0)
    }

    /// Product with stochastic rounding: the 16 discarded bits are rounded up when
    /// they exceed the low 16 bits of `dither` (uniform random bits), so
    /// `E[result] = a * b` exactly and updates far below one LSB still move weights.
    #[inline]
    pub fn mul_stochastic(self, rhs: Q16, dither: u32) -> Q16 {
        let p = mul::wide(self.0, rhs.0);
        Q16(sat_i32((p + (dither & 0xFFFF) as i64) >> 16))
    }
}

impl fmt::Debug for Q16 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Q16({} = {})", self.0, self.to_f32())
    }
}

impl fmt::Display for Q16 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_f32())
    }
}

impl Add for Q16 {
    type Output = Q16;
    #[inline(always)]
    fn add(self, rhs: Q16) -> Q16 {
        match self.0.checked_add(rhs.0) {
            Some(v) => Q16(v),
            None => Q16(sat_i32(self.0 as i64 + rhs.0 as i64)),
        }
    }
}

impl AddAssign for Q16 {
    #[inline(always)]
    fn add_assign(&mut self, rhs: Q16) {
        *self = *self + rhs;
    }
}

impl Sub for Q16 {
    type Output = Q16;
    #[inline(always)]
    fn sub(self, rhs: Q16) -> Q16 {
        match self.0.checked_sub(rhs.0) {
            Some(v) => Q16(v),
            None => Q16(sat_i32(self.0 as i64 - rhs.0 as i64)),
        }
    }
}

impl Neg for Q16 {
    type Output = Q16;
    #[inline(always)]
    fn neg(self) -> Q16 {
        Q16(sat_i32(-(self.0 as i64)))
    }
}

impl Mul for Q16 {
    type Output = Q16;
    #[inline(always)]
    fn mul(self, rhs: Q16) -> Q16 {
        Q16(sat_i32(mul::q16(self.0, rhs.0)))
    }
}

impl Scalar for Q16 {
    const NAME: &'static str = "q16.16";
    const ZERO: Self = Q16(0);
    const ONE: Self = Q16(1 << 16);
    const MIN: Self = Q16(i32::MIN);
    const NON_FINITE: bool = false;
    const RESOLUTION: f32 = 1.0 / 65536.0;
    const DITHER: bool = true;
    type Acc = i64;
    type Kernels = crate::kernels::set::Q16Kernels;

    #[inline(always)]
    fn acc_zero() -> i64 {
        0
    }
    #[inline(always)]
    fn mac(acc: i64, a: Q16, b: Q16) -> i64 {
        let p = mul::wide(a.0, b.0);
        match acc.checked_add(p) {
            Some(v) => v,
            None => {
                raise();
                if p > 0 {
                    i64::MAX
                } else {
                    i64::MIN
                }
            }
        }
    }
    #[inline(always)]
    fn acc_add(acc: i64, a: Q16) -> i64 {
        Self::mac(acc, a, Q16::ONE)
    }
    #[inline(always)]
    fn from_acc(acc: i64) -> Q16 {
        Q16(sat_i32(round_shift(acc, 16)))
    }
    fn acc_mean(acc: i64, n: usize) -> Q16 {
        // The division in the accumulator's 2^-32 units, then one rounding.
        match i64::try_from(n) {
            Ok(n) if n > 0 => Self::from_acc(acc / n),
            _ => Q16(0),
        }
    }
    fn from_f32(v: f32) -> Q16 {
        Q16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        Q16::to_f32(self)
    }
    #[inline(always)]
    fn to_bits(self) -> u32 {
        self.0 as u32
    }
    #[inline(always)]
    fn from_bits(bits: u32) -> Q16 {
        Q16(bits as i32)
    }
    #[inline]
    fn to_half(self) -> u16 {
        let q8 = self.0.saturating_add(128) >> 8;
        q8.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16 as u16
    }
    #[inline]
    fn from_half(h: u16) -> Q16 {
        Q16(i32::from(h as i16) << 8)
    }
    fn div(self, rhs: Q16) -> Q16 {
        math::div(self, rhs)
    }
    fn exp(self) -> Q16 {
        math::exp(self)
    }
    fn ln(self) -> Q16 {
        math::ln(self)
    }
    fn sqrt(self) -> Q16 {
        math::sqrt(self)
    }
    fn tanh(self) -> Q16 {
        math::tanh(self)
    }
    fn sigmoid(self) -> Q16 {
        math::sigmoid(self)
    }
    fn is_finite(self) -> bool {
        true
    }
    #[inline]
    fn mul_dithered(self, rhs: Q16, dither: u32) -> Q16 {
        self.mul_stochastic(rhs, dither)
    }

    fn from_count(n: usize) -> Q16 {
        // Saturates (and raises the flag) beyond 32767, as from_f32 would.
        Q16::from_int(n.min(i32::MAX as usize) as i32)
    }

    // Exact source coordinates: integer arithmetic only (no soft-float on a Cortex-M0),
    // and the two weights sum to exactly one.
    fn resize_taps(o: usize, inp: usize, out: usize, mode: InterpMode) -> (usize, usize, Q16, Q16) {
        let (i0, i1, frac, den) = resize::taps_exact(o, inp, out, mode);
        // round(frac / den * 2^16), half up (frac < den, so it is at most 2^16).
        let w1 = ((frac << 17) + den) / (2 * den);
        (i0, i1, Q16((1 << 16) - w1 as i32), Q16(w1 as i32))
    }
}

#[cfg(test)]
mod tests {
    use super::{take_saturated, Q16};
    use crate::scalar::Scalar;

    /// `from_count` (integers) gives what `from_f32(n as f32)` gave, flag included.
    #[test]
    fn from_count_matches_the_f32_conversion() {
        for n in (0..40_000).chain([65_536, 1 << 24, usize::MAX]) {
            take_saturated();
            let a = Q16::from_count(n);
            let sat_a = take_saturated();
            let b = Q16::from_f32(n as f32);
            let sat_b = take_saturated();
            assert_eq!((a, sat_a), (b, sat_b), "n = {n}");
        }
    }
}
