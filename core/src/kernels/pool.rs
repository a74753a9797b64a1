//! Max, average and adaptive average pooling over NCHW planes, forward and backward.
//!
//! - Windows follow PyTorch exactly: a window starts at `o * stride - pad`; max pooling
//!   pads with -inf, average pooling divides by the padded window clipped to
//!   `input + pad` (`count_include_pad`) or by the valid elements only.
//! - Max pooling saves, per output, the index of the winner inside its input plane
//!   (first maximum wins; NaN propagates, the last NaN of a window wins, as in PyTorch's
//!   CPU kernel), so backward is a scatter.
//! - Adaptive pooling window `o` covers `floor(o*in/out) .. ceil((o+1)*in/out)`.

use crate::scalar::Scalar;

/// Sizes of one pooling, validated by the op.
#[derive(Clone, Copy, Debug)]
pub struct PoolGeom {
    /// Number of planes (batch times channels).
    pub planes: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output height.
    pub oh: usize,
    /// Output width.
    pub ow: usize,
    /// Kernel (rows, columns).
    pub kernel: [usize; 2],
    /// Stride (rows, columns).
    pub stride: [usize; 2],
    /// Padding (rows, columns).
    pub pad: [usize; 2],
}

/// Window rows/columns `[start, end)` clipped to the input, and the padded size.
#[inline]
fn window(o: usize, stride: usize, pad: usize, k: usize, len: usize) -> (usize, usize, usize) {
    let start = (o * stride) as isize - pad as isize;
    let padded_end = (start + k as isize).min((len + pad) as isize);
    let padded = (padded_end - start) as usize;
    let s = start.max(0) as usize;
    let e = (padded_end.min(len as isize)).max(s as isize) as usize;
    (s, e, padded)
}

/// Max pooling: `y` the maxima, `idx` the winners' plane indices as scalar bits.
pub fn max_pool2d_forward<S: Scalar>(g: &PoolGeom, x: &[S], y: &mut [S], idx: &mut [S]) {
    if g.kernel == [2, 2] && g.stride == [2, 2] && g.pad == [0, 0] && 2 * g.oh <= g.h && 2 * g.ow <= g.w {
        return max_pool_2x2(g, x, y, idx);
    }
    max_pool_general(g, x, y, idx)
}

/// Any window: clipped to the input, scanned row by row.
fn max_pool_general<S: Scalar>(g: &PoolGeom, x: &[S], y: &mut [S], idx: &mut [S]) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    for p in 0..g.planes {
        let xp = &x[p * ip..][..ip];
        for oy in 0..g.oh {
            let (y0, y1, _) = window(oy, g.stride[0], g.pad[0], g.kernel[0], g.h);
            for ox in 0..g.ow {
                let (x0, x1, _) = window(ox, g.stride[1], g.pad[1], g.kernel[1], g.w);
                let mut best = S::MIN;
                let mut at = u32::MAX;
                for iy in y0..y1 {
                    for ix in x0..x1 {
                        let v = xp[iy * g.w + ix];
                        // `v != v` only for NaN, which PyTorch propagates.
                        #[allow(clippy::eq_op)]
                        let nan = v.partial_cmp(&v).is_none();
                        if at == u32::MAX || v > best || nan {
                            best = v;
                            at = (iy * g.w + ix) as u32;
                        }
                    }
                }
                y[p * op + oy * g.ow + ox] = best;
                idx[p * op + oy * g.ow + ox] = S::from_bits(at);
            }
        }
    }
}

/// The winner so far against the next element in window order: a larger value wins,
/// and so does a NaN (as PyTorch's CPU kernel: `val > max || isnan(val)`). Written as
/// a select, so the loop has no data-dependent branch to mispredict.
#[inline(always)]
fn pick<S: Scalar>(best: (S, u32), v: S, i: u32) -> (S, u32) {
    let nan = v.partial_cmp(&v).is_none();
    if v > best.0 || nan {
        (v, i)
    } else {
        best
    }
}

/// 2x2 windows with stride 2 and no padding, all inside the input (W1's pools).
fn max_pool_2x2<S: Scalar>(g: &PoolGeom, x: &[S], y: &mut [S], idx: &mut [S]) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    for p in 0..g.planes {
        let xp = &x[p * ip..][..ip];
        for oy in 0..g.oh {
            let r0 = 2 * oy * g.w;
            let (top, bottom) = (&xp[r0..][..2 * g.ow], &xp[r0 + g.w..][..2 * g.ow]);
            let at = p * op + oy * g.ow;
            let (yr, ir) = (&mut y[at..][..g.ow], &mut idx[at..][..g.ow]);
            for (ox, (yv, iv)) in yr.iter_mut().zip(ir.iter_mut()).enumerate() {
                let i = (r0 + 2 * ox) as u32;
                let mut best = (top[2 * ox], i);
                best = pick(best, top[2 * ox + 1], i + 1);
                best = pick(best, bottom[2 * ox], i + g.w as u32);
                best = pick(best, bottom[2 * ox + 1], i + g.w as u32 + 1);
                *yv = best.0;
                *iv = S::from_bits(best.1);
            }
        }
    }
}

/// `gx[winner] += gy`.
pub fn max_pool2d_backward<S: Scalar>(g: &PoolGeom, gy: &[S], idx: &[S], gx: &mut [S]) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    for p in 0..g.planes {
        let gxp = &mut gx[p * ip..][..ip];
        for (&gv, &iv) in gy[p * op..][..op].iter().zip(&idx[p * op..][..op]) {
            if let Some(t) = gxp.get_mut(iv.to_bits() as usize) {
                *t += gv;
            }
        }
    }
}

fn divisor(g: &PoolGeom, oy: usize, ox: usize, include_pad: bool) -> (usize, usize, usize, usize, usize) {
    let (y0, y1, py) = window(oy, g.stride[0], g.pad[0], g.kernel[0], g.h);
    let (x0, x1, px) = window(ox, g.stride[1], g.pad[1], g.kernel[1], g.w);
    let d = if include_pad {
        py * px
    } else {
        (y1 - y0) * (x1 - x0)
    };
    (y0, y1, x0, x1, d.max(1))
}

/// Average pooling.
pub fn avg_pool2d_forward<S: Scalar>(g: &PoolGeom, include_pad: bool, x: &[S], y: &mut [S]) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    for p in 0..g.planes {
        let xp = &x[p * ip..][..ip];
        for oy in 0..g.oh {
            for ox in 0..g.ow {
                let (y0, y1, x0, x1, d) = divisor(g, oy, ox, include_pad);
                let mut acc = S::acc_zero();
                for iy in y0..y1 {
                    for &v in &xp[iy * g.w + x0..iy * g.w + x1] {
                        acc = S::acc_add(acc, v);
                    }
                }
                y[p * op + oy * g.ow + ox] = S::from_acc(acc).div(S::from_count(d));
            }
        }
    }
}

/// `gx[window] += gy / divisor`.
pub fn avg_pool2d_backward<S: Scalar>(g: &PoolGeom, include_pad: bool, gy: &[S], gx: &mut [S]) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    for p in 0..g.planes {
        let gxp = &mut gx[p * ip..][..ip];
        for oy in 0..g.oh {
            for ox in 0..g.ow {
                let (y0, y1, x0, x1, d) = divisor(g, oy, ox, include_pad);
                let share = gy[p * op + oy * g.ow + ox].div(S::from_count(d));
                for iy in y0..y1 {
                    for t in &mut gxp[iy * g.w + x0..iy * g.w + x1] {
                        *t += share;
                    }
                }
            }
        }
    }
}

/// `[floor(o*len/out), ceil((o+1)*len/out))`.
#[inline]
fn adaptive(o: usize, out: usize, len: usize) -> (usize, usize) {
    ((o * len) / out, ((o + 1) * len).div_ceil(out))
}

/// Adaptive average pooling to `oh x ow` (global average pooling is 1x1).
pub fn adaptive_avg_pool2d_forward<S: Scalar>(g: &PoolGeom, x: &[S], y: &mut [S]) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    for p in 0..g.planes {
        let xp = &x[p * ip..][..ip];
        for oy in 0..g.oh {
            let (y0, y1) = adaptive(oy, g.oh, g.h);
            for ox in 0..g.ow {
                let (x0, x1) = adaptive(ox, g.ow, g.w);
                let mut acc = S::acc_zero();
                for iy in y0..y1 {
                    for &v in &xp[iy * g.w + x0..iy * g.w + x1] {
                        acc = S::acc_add(acc, v);
                    }
                }
                let d = S::from_count((y1 - y0) * (x1 - x0));
                y[p * op + oy * g.ow + ox] = S::from_acc(acc).div(d);
            }
        }
    }
}

/// `gx[window] += gy / window size`.
pub fn adaptive_avg_pool2d_backward<S: Scalar>(g: &PoolGeom, gy: &[S], gx: &mut [S]) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    for p in 0..g.planes {
        let gxp = &mut gx[p * ip..][..ip];
        for oy in 0..g.oh {
            let (y0, y1) = adaptive(oy, g.oh, g.h);
            for ox in 0..g.ow {
                let (x0, x1) = adaptive(ox, g.ow, g.w);
                let d = S::from_count((y1 - y0) * (x1 - x0));
                let share = gy[p * op + oy * g.ow + ox].div(d);
                for iy in y0..y1 {
                    for t in &mut gxp[iy * g.w + x0..iy * g.w + x1] {
                        *t += share;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 2x2 fast path against the general loop, with ties, -inf and NaNs.
    #[test]
    fn max_pool_2x2_matches_general() {
        let mut rng = crate::init::Rng::new(11);
        let vals = [0.0f32, 1.0, -1.0, 2.0, f32::NEG_INFINITY, f32::NAN];
        for (h, w) in [(2, 2), (5, 7), (8, 6), (28, 28), (3, 9)] {
            let g = PoolGeom {
                planes: 3,
                h,
                w,
                oh: h / 2,
                ow: w / 2,
                kernel: [2, 2],
                stride: [2, 2],
                pad: [0, 0],
            };
            let x: Vec<f32> = (0..g.planes * h * w)
                .map(|_| vals[rng.below(vals.len())])
                .collect();
            let n = g.planes * g.oh * g.ow;
            let (mut y0, mut i0, mut y1, mut i1) = (vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]);
            max_pool_general(&g, &x, &mut y0, &mut i0);
            max_pool2d_forward(&g, &x, &mut y1, &mut i1);
            for k in 0..n {
                assert_eq!(y0[k].to_bits(), y1[k].to_bits(), "value {k} at {h}x{w}");
                assert_eq!(i0[k].to_bits(), i1[k].to_bits(), "index {k} at {h}x{w}");
            }
        }
    }
}
