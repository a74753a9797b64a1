//! Frozen int8 convolutions for `Q16` graphs: weights stored as `i8` with a scale per
//! output channel (as TFLite Micro and CMSIS-NN store them), run by one small exact
//! integer kernel.
//!
//! - Why: a frozen layer in flash takes a quarter of the bytes of its Q16.16 weights,
//!   and a program that runs its frozen convolutions only through this kernel links one
//!   compact loop nest instead of the exact Q16 conv kernel family.
//! - Scale: output channel `co`'s weights are `q * s_co` with `s_co = mult / 2^shift`
//!   ([`QScale`]: a 16-bit multiplier and a shift in `16..=62`), so the device needs no
//!   float; a multiplier normalised to `[2^15, 2^16)` keeps 16 significant bits, far
//!   finer than the `1/127` steps of the weights themselves.
//! - The result, for every output, is defined by one formula (integer math, so the same
//!   bits on every target):
//!   `y = sat_i32(round_half_away(S * mult_co / 2^shift_co) + bias_raw_co)`, with
//!   `S = sum(x_raw * q)` the exact sum over the window's valid taps (padding adds 0)
//!   and `bias_raw` 0 without a bias. A clamp raises the saturation flag
//!   ([`take_saturated`](crate::fixed::take_saturated)).
//! - Exact for any input: `x_raw = xh * 2^16 + xl` (`xh` signed, `xl` in `0..2^16`);
//!   `xh * q` and `xl * q` each fit 23 bits, so two `i32` sums take at least 256
//!   products without overflow. They are flushed into two `i64` sums every
//!   `256 / kw` kernel rows, which is why [`QConv2dWeights::new`] bounds the kernel
//!   width to 256 and the products per output to `2^20` (then no `i64` can overflow).
//!   Two 32-bit multiplies per product, the cost of the Q16 kernels' fast form.
//! - Requantisation without 128-bit math: the sum is `s1 * 2^16 + f0` (`0 <= f0 <
//!   2^16`), so `S * mult = c * 2^16 + f` with `c = s1 * mult + (f0 * mult >> 16)` and
//!   `f = f0 * mult & 0xFFFF`; the half-away rounding then needs one `i64` multiply and
//!   one variable `i64` shift per output.
//! - Loop nest: per output pixel, the valid taps of its window are found once (no
//!   branch per tap, no division when the dilation is 1), then every channel's kernel
//!   rows are summed as two slices zipped together. No scratch memory at all (the
//!   Cortex-M0 program has none to spare) and no per-shape variants.

// Host tooling (f64 math the device never runs), behind `std`.
#[cfg(feature = "std")]
pub mod quantize;

use crate::error::{Error, Result};
use crate::fixed::{sat_i32, Q16};
use crate::kernels::conv::ConvGeom;

const OP: &str = "QConv2dWeights";

/// Largest kernel width: the `i32` partial sums take up to 256 products.
pub const MAX_KERNEL_WIDTH: usize = 256;
/// Largest number of products per output (`in_channels / groups * kh * kw`): keeps the
/// `i64` sums and their product with the multiplier below `2^63`.
pub const MAX_TERMS: usize = 1 << 20;
/// Smallest [`QScale::shift`].
pub const MIN_SHIFT: u8 = 16;
/// Largest [`QScale::shift`].
pub const MAX_SHIFT: u8 = 62;

/// The real value of one step of an output channel's int8 weights: `mult / 2^shift`
/// (so a weight `q` means `q * mult / 2^shift`). `shift` must lie in
/// [`MIN_SHIFT`]`..=`[`MAX_SHIFT`], checked by [`QConv2dWeights::new`]; that covers
/// scales from `2^-62` to just under 1 (weights up to about 127 in magnitude).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct QScale {
    /// Multiplier; `quantize_per_channel`
    /// normalises it to `[2^15, 2^16)` (16 significant bits), 0 for an all-zero channel.
    pub mult: u16,
    /// Right shift.
    pub shift: u8,
}

impl QScale {
    /// The scale as a real number (host-side checks; the device never needs it).
    pub fn to_f64(self) -> f64 {
        self.mult as f64 / (1u64 << self.shift) as f64
    }
}

/// Frozen weights of a 2-D convolution, quantized per output channel: `weights`
/// `[out, in/groups, kh, kw]` as `i8`, one [`QScale`] per output channel and an
/// optional Q16 bias `[out]`. Borrowed, never copied, so a `static` in flash stays in
/// flash. [`QConv2dWeights::new`] is a `const fn`, so a `static` built with it is
/// validated when the program compiles:
///
/// ```
/// use torchlet::fixed::{QConv2dWeights, QScale};
/// static Q: [i8; 2] = [127, -64];
/// static S: [QScale; 2] = [QScale { mult: 32768, shift: 22 }; 2];
/// static W: QConv2dWeights<'static> = match QConv2dWeights::new([2, 1, 1, 1], &Q, &S, None) {
///     Ok(w) => w,
///     Err(_) => panic!("bad frozen weights"),
/// };
/// assert_eq!(W.dims(), [2, 1, 1, 1]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct QConv2dWeights<'a> {
    dims: [usize; 4],
    weights: &'a [i8],
    scales: &'a [QScale],
    bias: Option<&'a [Q16]>,
}

impl<'a> QConv2dWeights<'a> {
    /// Checks the lengths against `dims = [out, in/groups, kh, kw]`: no zero
    /// dimension ([`Error::ShapeMismatch`]), `kw` at most [`MAX_KERNEL_WIDTH`] and
    /// `in/groups * kh * kw` at most [`MAX_TERMS`] ([`Error::InvalidParam`]),
    /// `weights.len() == out * in/groups * kh * kw`, one scale and (if any) one bias
    /// value per output channel ([`Error::ShapeMismatch`]), every shift in
    /// [`MIN_SHIFT`]`..=`[`MAX_SHIFT`] ([`Error::InvalidParam`]).
    pub const fn new(
        dims: [usize; 4],
        weights: &'a [i8],
        scales: &'a [QScale],
        bias: Option<&'a [Q16]>,
    ) -> Result<Self> {
        let [cout, cin_g, kh, kw] = dims;
        if cout == 0 || cin_g == 0 || kh == 0 || kw == 0 {
            return Err(Error::ShapeMismatch {
                op: OP,
                what: "weight has a dimension of size {found}, expected at least {expected}",
                expected: 1,
                found: 0,
            });
        }
        if kw > MAX_KERNEL_WIDTH {
            return Err(Error::InvalidParam {
                op: OP,
                what: "kernel width above 256",
                value: kw as i64,
            });
        }
        let terms = match cin_g.checked_mul(kh) {
            Some(v) => v.checked_mul(kw),
            None => None,
        };
        let terms = match terms {
            Some(t) if t <= MAX_TERMS => t,
            _ => {
                return Err(Error::InvalidParam {
                    op: OP,
                    what: "products per output (in/groups * kh * kw) above 2^20; in/groups",
                    value: cin_g as i64,
                })
            }
        };
        let Some(len) = cout.checked_mul(terms) else {
            return Err(Error::Overflow { op: OP });
        };
        if weights.len() != len {
            return Err(mismatch(
                "weights have {found} values, the shape (out, in/groups, kh, kw) holds {expected}",
                len,
                weights.len(),
            ));
        }
        if scales.len() != cout {
            return Err(mismatch(
                "{found} scales for {expected} output channels",
                cout,
                scales.len(),
            ));
        }
        if let Some(b) = bias {
            if b.len() != cout {
                return Err(mismatch(
                    "bias has {found} values, the layer has {expected} output channels",
                    cout,
                    b.len(),
                ));
            }
        }
        let mut i = 0;
        while i < scales.len() {
            let s = scales[i].shift;
            if s < MIN_SHIFT || s > MAX_SHIFT {
                return Err(Error::InvalidParam {
                    op: OP,
                    what: "scale shift outside 16..=62",
                    value: s as i64,
                });
            }
            i += 1;
        }
        Ok(QConv2dWeights {
            dims,
            weights,
            scales,
            bias,
        })
    }

    /// `[out, in/groups, kh, kw]`.
    pub const fn dims(&self) -> [usize; 4] {
        self.dims
    }

    /// The int8 weights, `[out, in/groups, kh, kw]` row-major.
    pub const fn weights(&self) -> &'a [i8] {
        self.weights
    }

    /// One scale per output channel.
    pub const fn scales(&self) -> &'a [QScale] {
        self.scales
    }

    /// The Q16 bias, one value per output channel.
    pub const fn bias(&self) -> Option<&'a [Q16]> {
        self.bias
    }
}

const fn mismatch(what: &'static str, expected: usize, found: usize) -> Error {
    Error::ShapeMismatch {
        op: OP,
        what,
        expected,
        found,
    }
}

/// The taps `k0..k1` of a window at output `o` whose input coordinate
/// `o * stride + k * dil - pad` lies in `0..len`.
#[inline(always)]
fn taps(o: usize, stride: usize, pad: usize, dil: usize, k: usize, len: usize) -> (usize, usize) {
    // Dilation 1 (the usual case) skips the divisions: no `__aeabi_uidiv` per pixel.
    let ceil_div = |a: usize| if dil == 1 { a } else { a.div_ceil(dil) };
    let at = o * stride;
    let k1 = if len + pad > at {
        k.min(ceil_div(len + pad - at))
    } else {
        0
    };
    (ceil_div(pad.saturating_sub(at)).min(k1), k1)
}

/// `sat_i32(round_half_away((sh * 2^16 + sl) * mult / 2^shift) + bias)` for the two
/// exact partial sums (`|sh|, |sl| < 2^44`), raising the flag when it clamps. One
/// 64-bit multiply and one variable 64-bit shift (both library calls on thumbv6m).
#[inline(never)]
fn requantize(sh: i64, sl: i64, s: QScale, bias: i32) -> i32 {
    let m = s.mult as u32;
    // The sum is `s1 * 2^16 + f0` with `0 <= f0 < 2^16`, so the product with `mult`
    // is `c * 2^16 + f` with `0 <= f < 2^16`: negative iff `c` is.
    let (s1, f0) = (sh + (sl >> 16), (sl & 0xFFFF) as u32);
    let p0 = f0 * m;
    let c = s1 * m as i64 + (p0 >> 16) as i64;
    let (f, neg) = (p0 & 0xFFFF, c < 0);
    // `floor((v + 2^(shift-1) - neg) / 2^shift)` is half away from zero; with
    // `v = c * 2^16 + f` it reduces to operations on `c` alone.
    let r = match s.shift - 16 {
        0 => c + ((f + 0x8000 - neg as u32) >> 16) as i64,
        t => (((c - (f == 0 && neg) as i64) >> (t - 1)) + 1) >> 1,
    };
    sat_i32(r + bias as i64)
}

/// `y = conv(x, q8 weights) + bias` under the formula of the module doc. `g` must
/// match `w`'s dims and the slice lengths (the op validated them: only `debug_assert`
/// here). One loop nest for every stride, padding, dilation and group count.
pub fn conv2d_q8(g: &ConvGeom, x: &[Q16], w: &QConv2dWeights<'_>, y: &mut [Q16]) {
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let (plane, kwin) = (g.h * g.w, g.kh * g.kw);
    debug_assert_eq!(w.dims, [g.c_out, cin_g, g.kh, g.kw]);
    debug_assert_eq!(x.len(), g.n * g.c_in * plane);
    debug_assert_eq!(y.len(), g.n * g.c_out * g.oh * g.ow);
    let rows_per_flush = MAX_KERNEL_WIDTH / g.kw;
    let mut out = y.iter_mut();
    for n in 0..g.n {
        for co in 0..g.c_out {
            let xg = &x[(n * g.c_in + co / cout_g * cin_g) * plane..];
            let wc = &w.weights[co * cin_g * kwin..(co + 1) * cin_g * kwin];
            let bias = match w.bias {
                Some(b) => b[co].0,
                None => 0,
            };
            for oy in 0..g.oh {
                let (ky0, ky1) = taps(oy, g.stride[0], g.pad[0], g.dil[0], g.kh, g.h);
                let nky = ky1 - ky0;
                // Index step from one kernel row to the next (additions, no multiplies).
                let row_x = g.dil[0] * g.w;
                for ox in 0..g.ow {
                    let (kx0, kx1) = taps(ox, g.stride[1], g.pad[1], g.dil[1], g.kw, g.w);
                    let (mut sh, mut sl) = (0i64, 0i64);
                    let (mut h32, mut l32, mut rows) = (0i32, 0i32, rows_per_flush);
                    if nky > 0 && kx1 > kx0 {
                        let iy0 = oy * g.stride[0] + ky0 * g.dil[0] - g.pad[0];
                        let ix0 = ox * g.stride[1] + kx0 * g.dil[1] - g.pad[1];
                        let (mut xc, mut wcb, nkx) = (iy0 * g.w + ix0, ky0 * g.kw + kx0, kx1 - kx0);
                        for _ in 0..cin_g {
                            let (mut xi, mut wi) = (xc, wcb);
                            for _ in 0..nky {
                                let (xr, wr) = (&xg[xi..], &wc[wi..wi + nkx]);
                                let mut mac = |v: Q16, q: i8| {
                                    h32 += (v.0 >> 16) * q as i32;
                                    l32 += (v.0 & 0xFFFF) * q as i32;
                                };
                                // Dilation 1 as a zip of two slices: no bounds check.
                                if g.dil[1] == 1 {
                                    wr.iter().zip(xr).for_each(|(&q, &v)| mac(v, q));
                                } else {
                                    let mut i = 0;
                                    for &q in wr {
                                        mac(xr[i], q);
                                        i += g.dil[1];
                                    }
                                }
                                rows -= 1;
                                if rows == 0 {
                                    (sh, sl) = (sh + h32 as i64, sl + l32 as i64);
                                    (h32, l32, rows) = (0, 0, rows_per_flush);
                                }
                                (xi, wi) = (xi + row_x, wi + g.kw);
                            }
                            (xc, wcb) = (xc + plane, wcb + kwin);
                        }
                    }
                    let (sh, sl) = (sh + h32 as i64, sl + l32 as i64);
                    if let Some(o) = out.next() {
                        *o = Q16(requantize(sh, sl, w.scales[co], bias));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `round_half_away(v / 2^shift)` on i128.
    fn reference(s: i128, sc: QScale, bias: i32) -> i128 {
        let p = s * sc.mult as i128;
        let d = 1i128 << sc.shift;
        let a = (p.abs() + d / 2) / d;
        (if p < 0 { -a } else { a }) + bias as i128
    }

    #[test]
    fn requantize_matches_i128_including_ties_and_extremes() {
        let sums: [i128; 12] = [
            0,
            1,
            -1,
            0x8000,
            -0x8000,
            (1 << 21) + (1 << 20),
            -(1 << 21) - (1 << 20),
            i32::MAX as i128 * 127 * 144,
            i32::MIN as i128 * 127 * 144,
            i32::MIN as i128 * -128 * (1 << 20),
            123_456_789_012,
            -987_654_321_098,
        ];
        for &s in &sums {
            for shift in [16u8, 17, 20, 23, 31, 40, 47, 62] {
                for mult in [0u16, 1, 32768, 40000, 65535] {
                    for bias in [0, 5, -7, i32::MAX, i32::MIN] {
                        let sc = QScale { mult, shift };
                        let want = reference(s, sc, bias);
                        let clamped = want.clamp(i32::MIN as i128, i32::MAX as i128);
                        // The same sum split as the kernel may hold it: the low sum
                        // anywhere in +-2^43, not only in 0..2^16.
                        for k in [0i128, 1 << 26, -(1 << 26), 1 << 27] {
                            let (sh, sl) = (((s >> 16) - k) as i64, ((s & 0xFFFF) + (k << 16)) as i64);
                            crate::fixed::take_saturated();
                            let got = requantize(sh, sl, sc, bias);
                            assert_eq!(
                                got as i128, clamped,
                                "s {s} k {k} mult {mult} shift {shift} bias {bias}"
                            );
                            assert_eq!(crate::fixed::take_saturated(), clamped != want);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn taps_match_brute_force() {
        for len in 1..7 {
            for (stride, pad, dil, k) in [
                (1, 0, 1, 3),
                (2, 1, 1, 3),
                (1, 2, 2, 3),
                (3, 4, 1, 2),
                (1, 5, 1, 1),
            ] {
                for o in 0..8 {
                    let valid: Vec<usize> = (0..k)
                        .filter(|&kk| {
                            let i = (o * stride + kk * dil) as isize - pad as isize;
                            i >= 0 && (i as usize) < len
                        })
                        .collect();
                    let (k0, k1) = taps(o, stride, pad, dil, k, len);
                    assert_eq!(
                        (k0..k1).collect::<Vec<_>>(),
                        valid,
                        "len {len} o {o} s {stride} p {pad} d {dil}"
                    );
                }
            }
        }
    }
}
