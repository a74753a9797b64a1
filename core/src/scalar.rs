//! The number type every op, kernel and optimizer is generic over.
//!
//! - `f32` is the reference implementation.
//! - A fixed-point type implements the same trait with integer arithmetic, so the same
//!   kernels train bit-identically on every target.
//! - `Acc` is the accumulator of dot products: `f32` for `f32`, a wider integer for
//!   fixed point, so long sums do not round at every term.
//! - `to_bits`/`from_bits` let the arena store small integers (max-pool indices, class
//!   targets) in scalar words without `unsafe`.
//! - The trait is arithmetic only; which kernels a type runs (the generic reference or
//!   specialised ones) is its [`Scalar::Kernels`] set, chosen in `kernels/set.rs`.

use crate::kernels::resize::{self, InterpMode};
use crate::kernels::KernelSet;
use core::fmt::Debug;
use core::ops::{Add, AddAssign, Mul, Neg, Sub};

/// A scalar the engine can compute in.
pub trait Scalar:
    Copy
    + Default
    + Debug
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + 'static
{
    /// The name used by the conformance runner and the weights format (`"f32"`).
    const NAME: &'static str;
    /// Additive identity.
    const ZERO: Self;
    /// Multiplicative identity.
    const ONE: Self;
    /// The most negative value (the padding value of max pooling).
    const MIN: Self;

    /// Accumulator for sums of products.
    type Acc: Copy;
    /// An empty sum.
    fn acc_zero() -> Self::Acc;
    /// `acc + a * b`.
    fn mac(acc: Self::Acc, a: Self, b: Self) -> Self::Acc;
    /// `acc + a`.
    fn acc_add(acc: Self::Acc, a: Self) -> Self::Acc;
    /// The sum, rounded back to a scalar.
    fn from_acc(acc: Self::Acc) -> Self;
    /// `f` folded over every value of `runs` from [`Scalar::acc_zero`]: the long sums
    /// of the normalisations. The order of the additions is the type's: one chain
    /// here (exact for fixed point), lane-wise chains for `f32` where the target has SIMD
    /// lanes (`kernels/lanes.rs`).
    #[inline(always)]
    fn fold_runs<'a>(
        runs: impl Iterator<Item = &'a [Self]>,
        f: impl Fn(Self::Acc, Self) -> Self::Acc,
    ) -> Self::Acc
    where
        Self: 'a,
    {
        runs.fold(Self::acc_zero(), |acc, r| r.iter().fold(acc, |a, &v| f(a, v)))
    }
    /// Two sums folded over pairs of equally long runs, as [`Scalar::fold_runs`].
    #[inline(always)]
    fn fold_run_pairs<'a>(
        runs: impl Iterator<Item = (&'a [Self], &'a [Self])>,
        f: impl Fn([Self::Acc; 2], Self, Self) -> [Self::Acc; 2],
    ) -> [Self::Acc; 2]
    where
        Self: 'a,
    {
        let zero = [Self::acc_zero(); 2];
        runs.fold(zero, |acc, (x, y)| {
            x.iter().zip(y).fold(acc, |a, (&u, &v)| f(a, u, v))
        })
    }

    /// Conversion from a real number with the type's rounding rule.
    fn from_f32(v: f32) -> Self;
    /// Conversion to a real number (exact for `f32`).
    fn to_f32(self) -> f32;
    /// Raw bits, for storing indices in scalar words.
    fn to_bits(self) -> u32;
    /// Inverse of [`Scalar::to_bits`].
    fn from_bits(bits: u32) -> Self;
    /// The value in 16 bits, for saves that trade precision for memory
    /// ([`Graph::set_compact_saves`](crate::Graph::set_compact_saves)): by default
    /// bfloat16 (the real value rounded to nearest even); fixed point keeps Q8.8.
    #[inline]
    fn to_half(self) -> u16 {
        let v = self.to_f32();
        let b = v.to_bits();
        if v.is_nan() {
            // Keep it a (quiet) NaN: the high half alone could read as infinity.
            return (b >> 16) as u16 | 0x40;
        }
        (b.wrapping_add(0x7fff + (b >> 16 & 1)) >> 16) as u16
    }
    /// The value of 16 bits made by [`Scalar::to_half`].
    #[inline]
    fn from_half(h: u16) -> Self {
        Self::from_f32(f32::from_bits(u32::from(h) << 16))
    }

    /// `self / rhs`.
    fn div(self, rhs: Self) -> Self;
    /// e^self.
    fn exp(self) -> Self;
    /// Natural logarithm.
    fn ln(self) -> Self;
    /// Square root.
    fn sqrt(self) -> Self;
    /// Hyperbolic tangent.
    fn tanh(self) -> Self;
    /// Logistic sigmoid, 1 / (1 + e^-self).
    fn sigmoid(self) -> Self;
    /// Whether the value is finite (always true for fixed point).
    fn is_finite(self) -> bool;
    /// Whether the type has values that are not finite (NaN, infinities). Fixed point
    /// saturates instead, so the engine's finiteness checks compile to nothing for it.
    const NON_FINITE: bool = true;
    /// The smallest positive value the type tells apart from zero, as a real number
    /// (`2^-16` for Q16.16): constants such as Adam's `eps` are raised to it, so that
    /// they never round to zero. The default is `f32`'s smallest normal value.
    const RESOLUTION: f32 = f32::MIN_POSITIVE;

    /// Whether [`Scalar::mul_dithered`] rounds stochastically (fixed point), so the
    /// optimizers draw random bits for it only when they matter.
    const DITHER: bool = false;
    /// `self * rhs`, where a type may use `dither` (uniform random bits) to round
    /// stochastically so that products below one unit in the last place do not vanish
    /// (SGD updates in fixed point). The default ignores `dither`.
    #[inline(always)]
    fn mul_dithered(self, rhs: Self, dither: u32) -> Self {
        let _ = dither;
        self * rhs
    }

    /// The kernels the ops run for this type (see [`KernelSet`]; the generic reference
    /// kernels are [`Reference`](crate::bench::Reference)).
    type Kernels: KernelSet<Self>;

    /// A count (a batch size, a pooling window's area) as a value, to divide by.
    /// Fixed point overrides it with integer arithmetic (no soft-float conversion).
    #[inline]
    fn from_count(n: usize) -> Self {
        Self::from_f32(n as f32)
    }
    /// The mean of `n` accumulated terms, `acc / n` (0 when `n` is 0), divided before
    /// rounding back to a scalar: a normalisation's mean of thousands of values does
    /// not saturate fixed point on the way, as `from_acc(acc) / n` would.
    #[inline]
    fn acc_mean(acc: Self::Acc, n: usize) -> Self {
        match n {
            0 => Self::ZERO,
            _ => Self::from_acc(acc).div(Self::from_count(n)),
        }
    }
    /// Source pixels and blend weights of resize output `o` (the rule of
    /// `kernels/resize.rs`): `(i0, i1, w0, w1)`, the output reads `w0 * x[i0] + w1 * x[i1]`.
    #[inline]
    fn resize_taps(o: usize, inp: usize, out: usize, mode: InterpMode) -> (usize, usize, Self, Self) {
        let (i0, i1, l) = resize::taps(o, inp, out, mode);
        (i0, i1, Self::from_f32(1.0 - l), Self::from_f32(l))
    }
}

impl Scalar for f32 {
    const NAME: &'static str = "f32";
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    const MIN: Self = f32::NEG_INFINITY;
    type Acc = f32;
    type Kernels = crate::kernels::set::F32;

    #[inline(always)]
    fn acc_zero() -> f32 {
        0.0
    }
    #[inline(always)]
    fn mac(acc: f32, a: f32, b: f32) -> f32 {
        acc + a * b
    }
    #[inline(always)]
    fn acc_add(acc: f32, a: f32) -> f32 {
        acc + a
    }
    #[inline(always)]
    fn from_acc(acc: f32) -> f32 {
        acc
    }
    // Lane-wise chains where there are SIMD lanes; Cortex-M keeps the default single
    // chain (no lanes to fill, and the flash it would cost).
    #[cfg(not(target_arch = "arm"))]
    #[inline(always)]
    fn fold_runs<'a>(runs: impl Iterator<Item = &'a [f32]>, f: impl Fn(f32, f32) -> f32) -> f32 {
        crate::kernels::lanes::fold_runs(runs, f)
    }
    #[cfg(not(target_arch = "arm"))]
    #[inline(always)]
    fn fold_run_pairs<'a>(
        runs: impl Iterator<Item = (&'a [f32], &'a [f32])>,
        f: impl Fn([f32; 2], f32, f32) -> [f32; 2],
    ) -> [f32; 2] {
        crate::kernels::lanes::fold_run_pairs(runs, f)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> f32 {
        v
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn to_bits(self) -> u32 {
        f32::to_bits(self)
    }
    #[inline(always)]
    fn from_bits(bits: u32) -> f32 {
        f32::from_bits(bits)
    }
    #[inline(always)]
    fn div(self, rhs: f32) -> f32 {
        self / rhs
    }
    // libm, or micromath's approximations with the `micromath` feature: see `fmath`.
    fn exp(self) -> f32 {
        crate::fmath::exp(self)
    }
    fn ln(self) -> f32 {
        crate::fmath::ln(self)
    }
    fn sqrt(self) -> f32 {
        crate::fmath::sqrt(self)
    }
    fn tanh(self) -> f32 {
        crate::fmath::tanh(self)
    }
    fn sigmoid(self) -> f32 {
        crate::fmath::sigmoid(self)
    }
    fn is_finite(self) -> bool {
        f32::is_finite(self)
    }
}
