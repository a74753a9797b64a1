//! Resizing NCHW planes (`torch.nn.functional.interpolate`, 2-D): nearest and bilinear
//! with `align_corners` true or false, forward and backward.
//!
//! - Source coordinates follow PyTorch's CPU code in `f32`: nearest reads
//!   `min(floor(o * in/out), in-1)`; bilinear maps `o` to `o * (in-1)/(out-1)`
//!   (align_corners) or `(o + 0.5) * in/out - 0.5` clamped at 0, then blends the two
//!   neighbours `i0 = floor(src)` and `i1 = min(i0 + 1, in - 1)`.
//! - Fixed point ([`crate::Q16`]) takes the same coordinates in exact integer
//!   arithmetic instead ([`taps_exact`]): no soft-float code in a fixed-point program
//!   for a Cortex-M0, and its two weights sum to exactly one.
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

/// [`taps`] in exact integer arithmetic, for fixed point (a Cortex-M0 has no FPU, and
/// the `f32` rule would link soft-float code into a fixed-point program): the source
/// coordinate is the fraction it is in exact arithmetic, `num / den`, so output `o`
/// reads `i0` with weight `1 - frac / den` and `i1` with `frac / den`. It differs
/// from [`taps`] only where `f32` rounding crosses an integer (a neighbour) or a
/// weight's last fixed-point bit.
#[inline]
pub fn taps_exact(o: usize, inp: usize, out: usize, mode: InterpMode) -> (usize, usize, u64, u64) {
    let (num, den) = match mode {
        InterpMode::Nearest => {
            let i = (o as u64 * inp as u64 / out.max(1) as u64).min(inp as u64 - 1) as usize;
            return (i, i, 0, 1);
        }
        InterpMode::Bilinear { align_corners: true } if out > 1 => ((o * (inp - 1)) as u64, (out - 1) as u64),
        InterpMode::Bilinear { align_corners: true } => (0, 1),
        // (o + 0.5) * inp / out - 0.5, clamped at 0.
        InterpMode::Bilinear { align_corners: false } => {
            let twice = ((2 * o + 1) * inp) as u64;
            (twice.saturating_sub(out as u64), 2 * out as u64)
        }
    };
    let i0 = ((num / den) as usize).min(inp - 1);
    let i1 = if i0 < inp - 1 { i0 + 1 } else { i0 };
    (i0, i1, num - i0 as u64 * den, den)
}

/// `y = resize(x)`.
pub fn resize_forward<S: Scalar>(g: &ResizeGeom, x: &[S], y: &mut [S]) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    for p in 0..g.planes {
        let xp = &x[p * ip..][..ip];
        let yp = &mut y[p * op..][..op];
        for oy in 0..g.oh {
            let (y0, y1, wy0, wy1) = S::resize_taps(oy, g.h, g.oh, g.mode);
            for ox in 0..g.ow {
                let (x0, x1, wx0, wx1) = S::resize_taps(ox, g.w, g.ow, g.mode);
                let v = if g.mode == InterpMode::Nearest {
                    xp[y0 * g.w + x0]
                } else {
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
            let (y0, y1, wy0, wy1) = S::resize_taps(oy, g.h, g.oh, g.mode);
            for ox in 0..g.ow {
                let gv = gyp[oy * g.ow + ox];
                let (x0, x1, wx0, wx1) = S::resize_taps(ox, g.w, g.ow, g.mode);
                if g.mode == InterpMode::Nearest {
                    gxp[y0 * g.w + x0] += gv;
                    continue;
                }
                gxp[y0 * g.w + x0] += wy0 * wx0 * gv;
                gxp[y0 * g.w + x1] += wy0 * wx1 * gv;
                gxp[y1 * g.w + x0] += wy1 * wx0 * gv;
                gxp[y1 * g.w + x1] += wy1 * wx1 * gv;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixed::Q16;

    /// The exact integer taps that Q16 uses pick PyTorch's `f32` neighbours and
    /// weights within one fixed-point step of them, except where the exact source
    /// coordinate is a whole number that `f32` rounding puts just below (then the
    /// exact rule reads that pixel itself: the next index, with weight 0 beyond it);
    /// and the two weights sum to exactly one.
    #[test]
    fn exact_taps_match_the_f32_rule() {
        let modes = [
            InterpMode::Nearest,
            InterpMode::Bilinear { align_corners: false },
            InterpMode::Bilinear { align_corners: true },
        ];
        let (mut checked, mut shifted) = (0, 0);
        for mode in modes {
            for inp in 1..48 {
                for out in 1..48 {
                    for o in 0..out {
                        let (a0, a1, l) = taps(o, inp, out, mode);
                        let (b0, b1, w0, w1) = Q16::resize_taps(o, inp, out, mode);
                        assert_eq!(w0.raw() + w1.raw(), 1 << 16);
                        checked += 1;
                        if (a0, a1) != (b0, b1) {
                            let frac = taps_exact(o, inp, out, mode).2;
                            let what = format!("{mode:?} {inp}->{out} o={o}: f32 {a0} (l {l}), exact {b0}");
                            assert!(b0 == a0 + 1 && frac == 0 && w1.raw() == 0, "{what}");
                            assert!(mode == InterpMode::Nearest || l > 0.999, "{what}");
                            shifted += 1;
                            continue;
                        }
                        let diff = (w1.raw() - Q16::from_f32(l).raw()).abs();
                        assert!(diff <= 1, "{mode:?} {inp}->{out} o={o}: {} vs {l}", w1.raw());
                    }
                }
            }
        }
        assert!(shifted * 100 < checked, "{shifted} of {checked} taps moved");
        assert!(checked > 100_000);
    }
}
