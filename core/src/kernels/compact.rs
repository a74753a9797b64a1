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
    if is_2x2(g) {
        return max_pool_2x2_packed(g, x, y, idx);
    }
    max_pool_general_packed(g, x, y, idx)
}

/// 2x2 windows, stride 2, no padding, every window inside the input (W1's pools): the
/// common case gets a loop without window clipping, division or per-element branches
/// (the general loop costs about 4x more per output in wasm).
fn is_2x2(g: &PoolGeom) -> bool {
    g.kernel == [2, 2]
        && g.stride == [2, 2]
        && g.pad == [0, 0]
        && g.ow > 0
        && 2 * g.oh <= g.h
        && 2 * g.ow <= g.w
}

/// The running winner `(value, position)` against the next element in window order:
/// a larger value or a NaN takes over, unless the winner is already a NaN (the
/// general loop stops at the first NaN).
#[inline(always)]
fn take<S: Scalar>(best: (S, u32), v: S, at: u32) -> (S, u32) {
    #[allow(clippy::eq_op)]
    let best_nan = best.0.partial_cmp(&best.0).is_none();
    let nan = v.partial_cmp(&v).is_none();
    if !best_nan && (v > best.0 || nan) {
        (v, at)
    } else {
        best
    }
}

/// [`max_pool2d_forward_packed`] for [`is_2x2`] geometries: one byte per position,
/// four positions per word, counted across planes exactly as the general loop does.
fn max_pool_2x2_packed<S: Scalar>(g: &PoolGeom, x: &[S], y: &mut [S], idx: &mut [S]) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    let keep = !idx.is_empty();
    let (mut word, mut k) = (0u32, 0usize);
    for p in 0..g.planes {
        let xp = &x[p * ip..][..ip];
        for oy in 0..g.oh {
            let r0 = 2 * oy * g.w;
            let (top, bottom) = (&xp[r0..][..2 * g.ow], &xp[r0 + g.w..][..2 * g.ow]);
            let yr = &mut y[p * op + oy * g.ow..][..g.ow];
            for (ox, yv) in yr.iter_mut().enumerate() {
                let mut best = (top[2 * ox], 0);
                best = take(best, top[2 * ox + 1], 1);
                best = take(best, bottom[2 * ox], 2);
                best = take(best, bottom[2 * ox + 1], 3);
                *yv = best.0;
                if keep {
                    word |= best.1 << (8 * (k % 4));
                    if k % 4 == 3 {
                        idx[k / 4] = S::from_bits(word);
                        word = 0;
                    }
                    k += 1;
                }
            }
        }
    }
    if keep && k % 4 != 0 {
        idx[k / 4] = S::from_bits(word);
    }
}

/// Any window: clipped to the input, positions packed per [`argmax_bytes`].
fn max_pool_general_packed<S: Scalar>(g: &PoolGeom, x: &[S], y: &mut [S], idx: &mut [S]) {
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
    if is_2x2(g) {
        let mut k = 0usize;
        for p in 0..g.planes {
            let gxp = &mut gx[p * ip..][..ip];
            for (oy, gyr) in gy[p * op..][..op].chunks_exact(g.ow).enumerate() {
                for (ox, &gv) in gyr.iter().enumerate() {
                    let at = (idx[k / 4].to_bits() >> (8 * (k % 4))) as usize & 3;
                    k += 1;
                    gxp[(2 * oy + at / 2) * g.w + 2 * ox + at % 2] += gv;
                }
            }
        }
        return;
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn geom(planes: usize, h: usize, w: usize) -> PoolGeom {
        PoolGeom {
            planes,
            h,
            w,
            oh: h / 2,
            ow: w / 2,
            kernel: [2, 2],
            stride: [2, 2],
            pad: [0, 0],
        }
    }

    /// Values from a few levels (many ties), some NaNs and infinities.
    fn input(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                match s >> 27 {
                    0 => f32::NAN,
                    1 => f32::NEG_INFINITY,
                    r => (r % 5) as f32 - 2.0,
                }
            })
            .collect()
    }

    #[test]
    fn max_pool_2x2_fast_path_matches_the_general_loop() {
        for (i, &(planes, h, w)) in [(1, 2, 2), (3, 5, 7), (2, 28, 28), (5, 9, 4), (7, 3, 11)]
            .iter()
            .enumerate()
        {
            let g = geom(planes, h, w);
            assert!(is_2x2(&g));
            let x = input(planes * h * w, i as u32 + 1);
            let n = planes * g.oh * g.ow;
            let words = argmax_words(n, 4);
            let (mut y0, mut i0) = (vec![0.0f32; n], vec![0.0f32; words]);
            let (mut y1, mut i1) = (vec![0.0f32; n], vec![0.0f32; words]);
            max_pool_general_packed(&g, &x, &mut y0, &mut i0);
            max_pool2d_forward_packed(&g, &x, &mut y1, &mut i1);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&y0), bits(&y1), "values, case {i}");
            assert_eq!(bits(&i0), bits(&i1), "positions, case {i}");
            // Backward: every output gradient lands on its recorded winner.
            let gy: Vec<f32> = (0..n).map(|k| k as f32 + 1.0).collect();
            let mut gx = vec![0.5f32; planes * h * w];
            max_pool2d_backward_packed(&g, &gy, &i1, &mut gx);
            let mut want = vec![0.5f32; planes * h * w];
            for (k, &gv) in gy.iter().enumerate() {
                let at = (i0[k / 4].to_bits() >> (8 * (k % 4))) as usize & 0xff;
                let (p, o) = (k / (g.oh * g.ow), k % (g.oh * g.ow));
                let (oy, ox) = (o / g.ow, o % g.ow);
                want[p * h * w + (2 * oy + at / 2) * w + 2 * ox + at % 2] += gv;
            }
            assert_eq!(gx, want, "gradients, case {i}");
        }
    }

    #[test]
    fn max_pool_2x2_first_maximum_and_first_nan_win() {
        let g = geom(1, 2, 8);
        let nan = f32::NAN;
        let x = [
            1.0, 3.0, 2.0, nan, nan, 5.0, 0.0, 0.0, 3.0, 3.0, nan, 9.0, nan, 1.0, -1.0, 0.0,
        ];
        let (mut y, mut idx) = ([0.0f32; 4], [0.0f32; 1]);
        max_pool2d_forward_packed(&g, &x, &mut y, &mut idx);
        assert_eq!(y[0], 3.0);
        assert!(y[1].is_nan() && y[2].is_nan());
        assert_eq!(y[3], 0.0);
        // Positions: 3.0 at 1 (not the tie at 3); the NaN at 1; the NaN at 0; 0.0 at 0.
        assert_eq!(idx[0].to_bits(), 1 | 1 << 8);
    }
}
