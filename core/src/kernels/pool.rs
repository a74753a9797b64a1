//! Max, average and adaptive average pooling over NCHW planes, forward and backward.
//!
//! - Windows follow PyTorch exactly: a window starts at `o * stride - pad`; max pooling
//!   pads with -inf, average pooling divides by the padded window clipped to
//!   `input + pad` (`count_include_pad`) or by the valid elements only.
//! - Max pooling saves, per output, the index of the winner inside its input plane
//!   (first maximum wins, NaN propagates), so backward is a scatter.
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
                            if nan {
                                break;
                            }
                        }
                    }
                }
                y[p * op + oy * g.ow + ox] = best;
                idx[p * op + oy * g.ow + ox] = S::from_bits(at);
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
                y[p * op + oy * g.ow + ox] = S::from_acc(acc).div(S::from_f32(d as f32));
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
                let share = gy[p * op + oy * g.ow + ox].div(S::from_f32(d as f32));
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
                let d = S::from_f32(((y1 - y0) * (x1 - x0)) as f32);
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
                let d = S::from_f32(((y1 - y0) * (x1 - x0)) as f32);
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
