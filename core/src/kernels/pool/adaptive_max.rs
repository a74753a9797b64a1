//! Adaptive max pooling over NCHW planes: window `o` covers
//! `floor(o*in/out) .. ceil((o+1)*in/out)`; the first maximum wins and NaN propagates
//! (the first NaN of a window wins). The winner's position in its plane is saved.

use super::PoolGeom;
use crate::scalar::Scalar;

fn bounds(o: usize, inp: usize, out: usize) -> (usize, usize) {
    (o * inp / out, ((o + 1) * inp).div_ceil(out))
}

/// `y` = the window maxima; `idx[k]` = the winner's index in its plane (as bits).
pub fn adaptive_max_pool2d_forward<S: Scalar>(g: &PoolGeom, x: &[S], y: &mut [S], idx: &mut [S]) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    for p in 0..g.planes {
        let xp = &x[p * ip..][..ip];
        for oy in 0..g.oh {
            let (y0, y1) = bounds(oy, g.h, g.oh);
            for ox in 0..g.ow {
                let (x0, x1) = bounds(ox, g.w, g.ow);
                let mut best = (xp[y0 * g.w + x0], y0 * g.w + x0);
                'win: for iy in y0..y1 {
                    for ix in x0..x1 {
                        let at = iy * g.w + ix;
                        let v = xp[at];
                        #[allow(clippy::eq_op)]
                        let nan = v != v;
                        if nan {
                            best = (v, at);
                            break 'win;
                        }
                        if v > best.0 {
                            best = (v, at);
                        }
                    }
                }
                let k = p * op + oy * g.ow + ox;
                y[k] = best.0;
                if let Some(s) = idx.get_mut(k) {
                    *s = S::from_bits(best.1 as u32);
                }
            }
        }
    }
}

/// `gx[winner] += gy` for every output.
pub fn adaptive_max_pool2d_backward<S: Scalar>(g: &PoolGeom, gy: &[S], idx: &[S], gx: &mut [S]) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    for (k, (&gv, i)) in gy.iter().zip(idx).enumerate() {
        gx[(k / op) * ip + i.to_bits() as usize] += gv;
    }
}
