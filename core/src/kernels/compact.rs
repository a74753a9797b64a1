//! ReLU with a compact saved mask: what it keeps between forward and backward is one
//! bit per element (was the input positive?), 16 bits per scalar word, far smaller than
//! the activation. The bits sit in the low half, so an `f32` word never holds a NaN
//! pattern. (Max pooling's packed positions are in `pool/max.rs`.)

use crate::scalar::Scalar;

/// Mask bits per scalar word.
pub const MASK_BITS: usize = 16;

/// Words of a ReLU mask for `n` elements.
pub fn mask_words(n: usize) -> usize {
    n.div_ceil(MASK_BITS)
}

/// `x = max(x, 0)` in place, recording `x > 0` in `mask` (empty: no mask kept).
/// Written with selects and shifts only, so the loops vectorise (no branch per element).
pub fn relu_inplace_masked<S: Scalar>(x: &mut [S], mask: &mut [S]) {
    if mask.is_empty() {
        for v in x.iter_mut() {
            // Negative values become 0 and NaN stays, as in `relu`.
            *v = if *v < S::ZERO { S::ZERO } else { *v };
        }
        return;
    }
    for (chunk, m) in x.chunks_mut(MASK_BITS).zip(mask.iter_mut()) {
        let mut bits = 0u32;
        for (j, v) in chunk.iter_mut().enumerate() {
            // The bit is set where the gradient passes (PyTorch's `!(y <= 0)`, so NaN too).
            #[allow(clippy::neg_cmp_op_on_partial_ord)]
            let pos = !(*v <= S::ZERO);
            bits |= (pos as u32) << j;
            *v = if pos { *v } else { S::ZERO };
        }
        *m = S::from_bits(bits);
    }
}

/// Sets `mask`'s bit `j` where `pass(x[j])` (relu6's `0 < x < 6`); an empty `mask`
/// keeps nothing.
pub fn band_mask<S: Scalar>(x: &[S], mask: &mut [S], pass: impl Fn(S) -> bool) {
    for (chunk, m) in x.chunks(MASK_BITS).zip(mask.iter_mut()) {
        let bits = chunk
            .iter()
            .enumerate()
            .fold(0u32, |b, (j, &v)| b | (pass(v) as u32) << j);
        *m = S::from_bits(bits);
    }
}

/// `gx += gy` where the mask bit is set.
pub fn relu_masked_backward<S: Scalar>(gy: &[S], mask: &[S], gx: &mut [S]) {
    for ((gxc, gyc), m) in gx.chunks_mut(MASK_BITS).zip(gy.chunks(MASK_BITS)).zip(mask) {
        let bits = m.to_bits();
        for (j, (d, &g)) in gxc.iter_mut().zip(gyc).enumerate() {
            *d += if bits >> j & 1 == 1 { g } else { S::ZERO };
        }
    }
}

/// `g = 0` where the mask bit is clear (the gradient handed to the input in place).
pub fn relu_mask_in_place<S: Scalar>(g: &mut [S], mask: &[S]) {
    for (gc, m) in g.chunks_mut(MASK_BITS).zip(mask) {
        let bits = m.to_bits();
        for (j, v) in gc.iter_mut().enumerate() {
            *v = if bits >> j & 1 == 1 { *v } else { S::ZERO };
        }
    }
}
