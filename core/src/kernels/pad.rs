//! Spatial padding of NCHW planes (`torch.nn.functional.pad` on the last two dims).
//!
//! - Every output pixel `(oy, ox)` reads at most one input pixel: `oy - top` and
//!   `ox - left`, mapped by the mode (constant: none outside; reflect: mirrored without
//!   repeating the edge; replicate: clamped to the edge).
//! - Negative pads crop, so crop and slice of the spatial dims are this kernel too.
//! - Backward is the same map in reverse: `gx[src] += gy[dst]`.

use crate::scalar::Scalar;

/// How pixels outside the input are filled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode {
    /// A constant value.
    Constant,
    /// Mirror image around the edge pixel (`reflect`).
    Reflect,
    /// Repeat the edge pixel (`replicate`).
    Replicate,
}

/// Sizes of one pad, validated by the op.
#[derive(Clone, Copy, Debug)]
pub struct PadGeom {
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
    /// Rows added on top (negative crops).
    pub top: isize,
    /// Columns added on the left (negative crops).
    pub left: isize,
    /// Fill rule.
    pub mode: PadMode,
}

/// The input index that output index `o` reads, if any.
#[inline]
pub fn source(o: usize, before: isize, len: usize, mode: PadMode) -> Option<usize> {
    let i = o as isize - before;
    let n = len as isize;
    let j = match mode {
        PadMode::Constant => i,
        PadMode::Replicate => i.clamp(0, n - 1),
        PadMode::Reflect => {
            if n == 1 {
                0
            } else {
                // Period 2(n-1): ... 2 1 | 0 1 2 .. n-1 | n-2 ...
                let p = 2 * (n - 1);
                let m = i.rem_euclid(p);
                if m < n {
                    m
                } else {
                    p - m
                }
            }
        }
    };
    (0..n).contains(&j).then_some(j as usize)
}

/// `y = pad(x)`; `value` fills constant padding.
pub fn pad_forward<S: Scalar>(g: &PadGeom, value: S, x: &[S], y: &mut [S]) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    for p in 0..g.planes {
        let xp = &x[p * ip..][..ip];
        let yp = &mut y[p * op..][..op];
        for oy in 0..g.oh {
            let sy = source(oy, g.top, g.h, g.mode);
            for ox in 0..g.ow {
                let sx = source(ox, g.left, g.w, g.mode);
                yp[oy * g.ow + ox] = match (sy, sx) {
                    (Some(sy), Some(sx)) => xp[sy * g.w + sx],
                    _ => value,
                };
            }
        }
    }
}

/// `gx[src] += gy[dst]` for every output pixel that read an input pixel.
pub fn pad_backward<S: Scalar>(g: &PadGeom, gy: &[S], gx: &mut [S]) {
    if g.oh == 0 || g.ow == 0 {
        // No output, but an input gradient to write (so `Graph::exec` runs this): the
        // loops would count through the planes for nothing.
        return;
    }
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    for p in 0..g.planes {
        let gxp = &mut gx[p * ip..][..ip];
        let gyp = &gy[p * op..][..op];
        for oy in 0..g.oh {
            let Some(sy) = source(oy, g.top, g.h, g.mode) else {
                continue;
            };
            for ox in 0..g.ow {
                if let Some(sx) = source(ox, g.left, g.w, g.mode) {
                    gxp[sy * g.w + sx] += gyp[oy * g.ow + ox];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflect_and_replicate_indices() {
        let r: Vec<_> = (0..9).map(|o| source(o, 3, 4, PadMode::Reflect)).collect();
        let want = [3, 2, 1, 0, 1, 2, 3, 2, 1].map(Some);
        assert_eq!(r, want);
        let c: Vec<_> = (0..6).map(|o| source(o, 1, 3, PadMode::Replicate)).collect();
        assert_eq!(c, [0, 0, 1, 2, 2, 2].map(Some));
        assert_eq!(source(0, 1, 3, PadMode::Constant), None);
        assert_eq!(source(0, -2, 3, PadMode::Constant), Some(2));
    }
}
