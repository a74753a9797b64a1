//! Compact saved values for backward: what an op keeps between forward and backward
//! is often far smaller than a whole activation.
//!
//! - ReLU keeps one bit per element (was the input positive?), 16 bits per scalar
//!   word: the bits sit in the low half, so an `f32` word never holds a NaN pattern.
//! - Max pooling keeps the winner's position inside its window as one byte when the
//!   window has at most 127 taps (4 per word, every byte below 0x80, so again never a
//!   NaN pattern), else as 16 bits (2 per word, window at most 32,767 taps), else a
//!   whole word.

use super::pool::PoolGeom;
use crate::scalar::Scalar;

/// Mask bits per scalar word.
pub const MASK_BITS: usize = 16;

/// Words of a ReLU mask for `n` elements.
pub fn mask_words(n: usize) -> usize {
    n.div_ceil(MASK_BITS)
}

/// `x = max(x, 0)` in place, recording `x > 0` in `mask` (empty: no mask kept).
pub fn relu_inplace_masked<S: Scalar>(x: &mut [S], mask: &mut [S]) {
    if mask.is_empty() {
        for v in x.iter_mut() {
            // NaN and non-positive values become 0, as in `relu`.
            if (*v).partial_cmp(&S::ZERO) != Some(core::cmp::Ordering::Greater) {
                *v = S::ZERO;
            }
        }
        return;
    }
    for (chunk, m) in x.chunks_mut(MASK_BITS).zip(mask.iter_mut()) {
        let mut bits = 0u32;
        for (j, v) in chunk.iter_mut().enumerate() {
            if *v > S::ZERO {
                bits |= 1 << j;
            } else {
                *v = S::ZERO;
            }
        }
        *m = S::from_bits(bits);
    }
}

/// `gx += gy` where the mask bit is set.
pub fn relu_masked_backward<S: Scalar>(gy: &[S], mask: &[S], gx: &mut [S]) {
    for ((gxc, gyc), m) in gx.chunks_mut(MASK_BITS).zip(gy.chunks(MASK_BITS)).zip(mask) {
        let bits = m.to_bits();
        for (j, (d, &g)) in gxc.iter_mut().zip(gyc).enumerate() {
            if bits >> j & 1 == 1 {
                *d += g;
            }
        }
    }
}

/// `g = 0` where the mask bit is clear (the gradient handed to the input in place).
pub fn relu_mask_in_place<S: Scalar>(g: &mut [S], mask: &[S]) {
    for (gc, m) in g.chunks_mut(MASK_BITS).zip(mask) {
        let bits = m.to_bits();
        for (j, v) in gc.iter_mut().enumerate() {
            if bits >> j & 1 == 0 {
                *v = S::ZERO;
            }
        }
    }
}

/// Bytes per saved max-pool position for a window of `taps` elements.
pub fn argmax_bytes(taps: usize) -> usize {
    if taps <= 127 {
        1
    } else if taps <= 32767 {
        2
    } else {
        4
    }
}

/// Words holding `n` positions of windows of `taps` elements.
pub fn argmax_words(n: usize, taps: usize) -> usize {
    let per = 4 / argmax_bytes(taps);
    n.div_ceil(per)
}

/// Window start `o * stride - pad` (may be negative) of output index `o`.
#[inline]
fn start(o: usize, stride: usize, pad: usize) -> isize {
    (o * stride) as isize - pad as isize
}

/// Max pooling (PyTorch's rules: first maximum wins, NaN propagates); when `idx` is
/// not empty it receives each winner's window position, packed.
pub fn max_pool2d_forward_packed<S: Scalar>(g: &PoolGeom, x: &[S], y: &mut [S], idx: &mut [S]) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    let bytes = argmax_bytes(g.kernel[0] * g.kernel[1]);
    let per = 4 / bytes;
    let (mut word, mut fill, mut out_w) = (0u32, 0usize, 0usize);
    for p in 0..g.planes {
        let xp = &x[p * ip..][..ip];
        for oy in 0..g.oh {
            let sy = start(oy, g.stride[0], g.pad[0]);
            for ox in 0..g.ow {
                let sx = start(ox, g.stride[1], g.pad[1]);
                let mut best = S::MIN;
                let mut at = u32::MAX;
                'win: for ky in 0..g.kernel[0] {
                    let iy = sy + ky as isize;
                    if iy < 0 || iy >= g.h as isize {
                        continue;
                    }
                    for kx in 0..g.kernel[1] {
                        let ix = sx + kx as isize;
                        if ix < 0 || ix >= g.w as isize {
                            continue;
                        }
                        let v = xp[iy as usize * g.w + ix as usize];
                        #[allow(clippy::eq_op)]
                        let nan = v.partial_cmp(&v).is_none();
                        if at == u32::MAX || v > best || nan {
                            best = v;
                            at = (ky * g.kernel[1] + kx) as u32;
                            if nan {
                                break 'win;
                            }
                        }
                    }
                }
                y[p * op + oy * g.ow + ox] = best;
                if !idx.is_empty() {
                    word |= at << (8 * bytes * fill);
                    fill += 1;
                    if fill == per {
                        idx[out_w] = S::from_bits(word);
                        out_w += 1;
                        word = 0;
                        fill = 0;
                    }
                }
            }
        }
    }
    if fill > 0 && !idx.is_empty() {
        idx[out_w] = S::from_bits(word);
    }
}

/// `gx[winner] += gy`, decoding the packed positions.
pub fn max_pool2d_backward_packed<S: Scalar>(g: &PoolGeom, gy: &[S], idx: &[S], gx: &mut [S]) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    let bytes = argmax_bytes(g.kernel[0] * g.kernel[1]);
    let per = 4 / bytes;
    let mask = if bytes == 4 {
        u32::MAX
    } else {
        (1u32 << (8 * bytes)) - 1
    };
    let mut k = 0usize;
    for p in 0..g.planes {
        let gxp = &mut gx[p * ip..][..ip];
        for oy in 0..g.oh {
            let sy = start(oy, g.stride[0], g.pad[0]);
            for ox in 0..g.ow {
                let sx = start(ox, g.stride[1], g.pad[1]);
                let word = idx[k / per].to_bits();
                let at = (word >> (8 * bytes * (k % per))) & mask;
                k += 1;
                let (ky, kx) = (at as usize / g.kernel[1], at as usize % g.kernel[1]);
                let (iy, ix) = (sy + ky as isize, sx + kx as isize);
                if iy >= 0 && ix >= 0 && (iy as usize) < g.h && (ix as usize) < g.w {
                    gxp[iy as usize * g.w + ix as usize] += gy[p * op + oy * g.ow + ox];
                }
            }
        }
    }
}
