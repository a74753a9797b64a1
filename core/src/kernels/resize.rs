//! Resizing NCHW planes (`torch.nn.functional.interpolate`, 2-D): nearest and bilinear
//! with `align_corners` true or false, forward and backward.
//!
//! - Source coordinates follow PyTorch's CPU code in `f32`: nearest reads
//!   `min(floor(o * in/out), in-1)`; bilinear maps `o` to `o * (in-1)/(out-1)`
//!   (align_corners) or `(o + 0.5) * in/out - 0.5` clamped at 0, then blends the two
//!   neighbours `i0 = floor(src)` and `i1 = min(i0 + 1, in - 1)`.
//! - Backward scatters each output gradient to the pixels it was read from, with the
//!   same weights.

use crate::scalar::Scalar;

/// Interpolation rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterpMode {
    /// Nearest neighbour (PyTorch's `nearest`, not `nearest-exact`).
    Nearest,
    /// Bilinear; `align_corners` as in PyTorch.
    Bilinear {
        /// Map corner pixel centres onto each other.
        align_corners: bool,
    },
}

/// Sizes of one resize, validated by the op.
#[derive(Clone, Copy, Debug)]
pub struct ResizeGeom {
    /// Batch times channels.
    pub planes: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output height.
    pub oh: usize,
    /// Output width.
    pub ow: usize,
    /// Interpolation rule.
    pub mode: InterpMode,
}

/// Output index `o` reads input `i0` with weight `1 - l` and `i1` with weight `l`.
#[inline]
pub fn taps(o: usize, inp: usize, out: usize, mode: InterpMode) -> (usize, usize, f32) {
    match mode {
        InterpMode::Nearest => {
            let i = if out == inp {
                o
            } else if out == 2 * inp {
                o >> 1
            } else {
                let scale = inp as f32 / out as f32;
                libm::floorf(o as f32 * scale) as usize
            };
            let i = i.min(inp - 1);
            (i, i, 0.0)
        }
        InterpMode::Bilinear { align_corners } => {
            let src = if align_corners {
                if out > 1 {
                    (inp - 1) as f32 / (out - 1) as f32 * o as f32
                } else {
                    0.0
                }
            } else {
                let scale = inp as f32 / out as f32;
                let s = scale * (o as f32 + 0.5) - 0.5;
                if s < 0.0 {
                    0.0
                } else {
                    s
                }
            };
            let i0 = (src as usize).min(inp - 1);
            let i1 = if i0 < inp - 1 { i0 + 1 } else { i0 };
            (i0, i1, src - i0 as f32)
        }
    }
}

/// `y = resize(x)`.
pub fn resize_forward<S: Scalar>(g: &ResizeGeom, x: &[S], y: &mut [S]) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    for p in 0..g.planes {
        let xp = &x[p * ip..][..ip];
        let yp = &mut y[p * op..][..op];
        for oy in 0..g.oh {
            let (y0, y1, ly) = taps(oy, g.h, g.oh, g.mode);
            let (wy0, wy1) = (S::from_f32(1.0 - ly), S::from_f32(ly));
            for ox in 0..g.ow {
                let (x0, x1, lx) = taps(ox, g.w, g.ow, g.mode);
                let v = if g.mode == InterpMode::Nearest {
                    xp[y0 * g.w + x0]
                } else {
                    let (wx0, wx1) = (S::from_f32(1.0 - lx), S::from_f32(lx));
                    wy0 * (wx0 * xp[y0 * g.w + x0] + wx1 * xp[y0 * g.w + x1])
                        + wy1 * (wx0 * xp[y1 * g.w + x0] + wx1 * xp[y1 * g.w + x1])
                };
                yp[oy * g.ow + ox] = v;
            }
        }
    }
}

/// `gx[taps] += weight * gy`.
pub fn resize_backward<S: Scalar>(g: &ResizeGeom, gy: &[S], gx: &mut [S]) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    for p in 0..g.planes {
        let gxp = &mut gx[p * ip..][..ip];
        let gyp = &gy[p * op..][..op];
        for oy in 0..g.oh {
            let (y0, y1, ly) = taps(oy, g.h, g.oh, g.mode);
            let (wy0, wy1) = (S::from_f32(1.0 - ly), S::from_f32(ly));
            for ox in 0..g.ow {
                let gv = gyp[oy * g.ow + ox];
                let (x0, x1, lx) = taps(ox, g.w, g.ow, g.mode);
                if g.mode == InterpMode::Nearest {
                    gxp[y0 * g.w + x0] += gv;
                    continue;
                }
                let (wx0, wx1) = (S::from_f32(1.0 - lx), S::from_f32(lx));
                gxp[y0 * g.w + x0] += wy0 * wx0 * gv;
                gxp[y0 * g.w + x1] += wy0 * wx1 * gv;
                gxp[y1 * g.w + x0] += wy1 * wx0 * gv;
                gxp[y1 * g.w + x1] += wy1 * wx1 * gv;
            }
        }
    }
}
