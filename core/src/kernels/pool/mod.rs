//! Average and adaptive average pooling over NCHW planes, forward and backward, and the
//! pooling geometry (max pooling, with packed winner indices, is in `compact.rs`).
//!
//! - Windows follow PyTorch exactly: a window starts at `o * stride - pad`; average
//!   pooling divides by the padded window clipped to `input + pad`
//!   (`count_include_pad`) or by the valid elements only.
//! - Adaptive pooling window `o` covers `floor(o*in/out) .. ceil((o+1)*in/out)`.

pub mod adaptive_max;
pub mod max;

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

impl PoolGeom {
    /// Output elements x kernel taps, saturating: the work of a pass over the windows.
    pub(crate) fn taps_work(&self) -> u64 {
        let parts = [self.planes, self.oh, self.ow, self.kernel[0], self.kernel[1]];
        parts.iter().fold(1u64, |acc, &p| acc.saturating_mul(p as u64))
    }
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
                // A window of whole rows is one contiguous run (a global pool: the
                // plane), so `f32` sums it in lane-wise chains; else one run per row.
                let (runs, len) = match (x0, x1) {
                    (0, x1) if x1 == g.w => (1, (y1 - y0) * g.w),
                    _ => (y1 - y0, x1 - x0),
                };
                let rows = (0..runs).map(|r| &xp[(y0 + r) * g.w + x0..][..len]);
                let acc = S::fold_runs(rows, S::acc_add);
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
                // A window of whole rows (a global pool: the plane) is one run, long
                // enough to vectorise; else one run per row.
                let (runs, len) = match (x0, x1) {
                    (0, x1) if x1 == g.w => (1, (y1 - y0) * g.w),
                    _ => (y1 - y0, x1 - x0),
                };
                for r in 0..runs {
                    for t in &mut gxp[(y0 + r) * g.w + x0..][..len] {
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

    /// Backward of adaptive average pooling against its definition (each input gets
    /// `gy / size` of every window holding it), for windows of whole rows (one run per
    /// window), of parts of rows, and overlapping ones.
    #[test]
    fn adaptive_avg_pool2d_backward_matches_its_definition() {
        for (oh, ow) in [(1, 1), (3, 1), (2, 1), (3, 2), (6, 4), (1, 3)] {
            let (planes, h, w) = (2, 5, 7);
            let g = PoolGeom {
                planes,
                h,
                w,
                oh,
                ow,
                kernel: [0, 0],
                stride: [0, 0],
                pad: [0, 0],
            };
            let gy: Vec<f32> = (0..planes * oh * ow).map(|i| (i as f32 - 3.0) * 0.25).collect();
            let mut want = vec![0.5f32; planes * h * w];
            for p in 0..planes {
                for (oy, ox) in (0..oh).flat_map(|a| (0..ow).map(move |b| (a, b))) {
                    let ((y0, y1), (x0, x1)) = (adaptive(oy, oh, h), adaptive(ox, ow, w));
                    let share = gy[(p * oh + oy) * ow + ox] / ((y1 - y0) * (x1 - x0)) as f32;
                    for (iy, ix) in (y0..y1).flat_map(|a| (x0..x1).map(move |b| (a, b))) {
                        want[(p * h + iy) * w + ix] += share;
                    }
                }
            }
            let mut got = vec![0.5f32; planes * h * w];
            adaptive_avg_pool2d_backward(&g, &gy, &mut got);
            assert_eq!(got, want, "{oh}x{ow}");
        }
    }
}
