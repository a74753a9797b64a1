//! Pure math on slices: no arena, no tape, no errors. Not public API (benches reach
//! the kernels through [`crate::bench`]).
//!
//! - Callers (the ops) validate every size first, so kernels only `debug_assert!`.
//! - One folder or file per kernel family, holding the plain reference kernel (generic
//!   over [`Scalar`], inner loops over contiguous rows so that they vectorise) and its
//!   specialisations side by side: `conv/` (reference, f32 tiles for hosts and wasm
//!   with AVX2, f32 tiles for Cortex-M, the exact Q16 kernels, the frozen int8 kernel,
//!   the f32 bias gradient), `pool/` (average and adaptive; max with packed positions),
//!   `linear`, `pad`, `resize`, `elementwise`, `broadcast` (two operands of
//!   shapes that broadcast), `compact` (ReLU with a bit mask), `half_saves`
//!   (normalised values kept in 16 bits).
//! - Which specialisation a scalar type runs is chosen in one place, `set.rs`.

pub mod activation;
pub mod broadcast;
pub mod compact;
pub mod conv;
pub mod elementwise;
pub mod half_saves;
#[cfg(any(test, not(target_arch = "arm")))]
pub mod lanes;
pub mod layout;
pub mod linear;
pub mod norm;
pub mod pad;
pub mod pool;
pub mod resize;
pub mod set;
pub mod softmax;
pub use set::KernelSet;
#[cfg(test)]
pub(crate) mod test_shapes;

use crate::scalar::Scalar;

/// `y[i] += a * x[i * stride]` for every `i` of `y`.
#[inline(always)]
pub(crate) fn axpy_strided<S: Scalar>(y: &mut [S], a: S, x: &[S], stride: usize) {
    if stride == 1 {
        for (yv, &xv) in y.iter_mut().zip(x) {
            *yv += a * xv;
        }
    } else {
        for (yv, &xv) in y.iter_mut().zip(x.iter().step_by(stride)) {
            *yv += a * xv;
        }
    }
}

/// `x[i * stride] += a * y[i]` for every `i` of `y` (the scatter of axpy).
#[inline(always)]
pub(crate) fn axpy_scatter<S: Scalar>(x: &mut [S], a: S, y: &[S], stride: usize) {
    if stride == 1 {
        for (xv, &yv) in x.iter_mut().zip(y) {
            *xv += a * yv;
        }
    } else {
        for (xv, &yv) in x.iter_mut().step_by(stride).zip(y) {
            *xv += a * yv;
        }
    }
}

/// `acc + sum_i y[i] * x[i * stride]`, accumulated in the wide accumulator.
#[inline(always)]
pub(crate) fn dot_strided<S: Scalar>(mut acc: S::Acc, y: &[S], x: &[S], stride: usize) -> S::Acc {
    if stride == 1 {
        for (&yv, &xv) in y.iter().zip(x) {
            acc = S::mac(acc, yv, xv);
        }
    } else {
        for (&yv, &xv) in y.iter().zip(x.iter().step_by(stride)) {
            acc = S::mac(acc, yv, xv);
        }
    }
    acc
}

/// The outputs `o` in `0..out_len` whose input index `o * stride + offset - pad` lies in
/// `0..in_len`, as a half-open range (empty when there are none).
#[inline]
pub(crate) fn valid_range(
    out_len: usize,
    in_len: usize,
    stride: usize,
    pad: usize,
    offset: usize,
) -> (usize, usize) {
    // In unsigned arithmetic that cannot overflow: `o * s + offset >= pad` from `lo`,
    // `o * s + offset < in_len + pad` below `hi`.
    let s = stride.max(1);
    let lo = pad.saturating_sub(offset).div_ceil(s).min(out_len);
    let hi = in_len.saturating_add(pad).saturating_sub(offset).div_ceil(s);
    let hi = hi.min(out_len).max(lo);
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::valid_range;

    #[test]
    fn valid_range_matches_brute_force() {
        for in_len in 1..8 {
            for stride in 1..4 {
                for pad in 0..3 {
                    for offset in 0..6 {
                        let out_len = 9;
                        let brute: Vec<usize> = (0..out_len)
                            .filter(|&o| {
                                let i = (o * stride + offset) as isize - pad as isize;
                                i >= 0 && i < in_len as isize
                            })
                            .collect();
                        let (lo, hi) = valid_range(out_len, in_len, stride, pad, offset);
                        assert_eq!((lo..hi).collect::<Vec<_>>(), brute);
                    }
                }
            }
        }
    }
}
