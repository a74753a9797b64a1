//! Backward-weight of the tiled `f32` convolution: `gw += correlate(gy, x)`.
//!
//! - The input planes are copied zero-padded and phase-split (`Planes`) as in the
//!   forward pass; `WB` output-gradient planes are copied with rows zero-extended to
//!   whole 8-word chunks, so every load is a full, unmasked one.
//! - A register tile is `WB` output channels x `T` taps of one input channel, each an
//!   `L`-lane partial sum over the whole output plane: per step, `WB` gradient loads and
//!   `T` input loads feed `WB * T` lane-wise multiply-adds; the lanes are summed once per
//!   plane.
//! - `L` is 8 with AVX (the 12 accumulators fit the 16 ymm registers) and 4 otherwise
//!   (SSE2, simd128, and scalar targets).
//! - The inner loop is written on plain slices (not nested arrays built with
//!   `from_fn`), which LLVM's vectoriser maps to whole-register operations; the
//!   nested-array form is much slower with SSE2 because of lane shuffles.

use super::conv::{chunk, offsets, MAX_TAPS, OB, PLANE_WORDS};
use super::planes::Planes;
use crate::kernels::conv::{self as generic, ConvGeom};

/// Words of the stack buffer holding zero-extended output-gradient rows (16 KiB).
pub const GY_WORDS: usize = 4096;
/// Taps per register tile.
const TB: usize = 3;
/// Output channels per register tile (4 is faster than 2 even with SSE2's 16
/// registers).
const WB: usize = OB;
/// Lanes of one partial sum.
const L: usize = if cfg!(target_feature = "avx") { 8 } else { 4 };

/// `gw += correlate(gy, x)`, as [`generic::conv2d_backward_weight`]; AVX2 + FMA when
/// available (x86_64, asked at run time) and the shape suits it.
pub fn conv2d_backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) {
    if super::dw8::DISPATCH && super::dw8::conv2d_backward_weight(g, gy, x, gw)
        || super::depthwise::conv2d_backward_weight(g, gy, x, gw)
    {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if super::avx2::conv2d_backward_weight(g, gy, x, gw) {
        return;
    }
    conv2d_backward_weight_portable(g, gy, x, gw)
}

/// The portable tiled backward-weight kernel.
pub fn conv2d_backward_weight_portable(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) {
    let Some(planes) = Planes::new([g.h, g.w], g.pad, g.stride, g.dil, [g.kh, g.kw], [g.oh, g.ow]) else {
        return generic::conv2d_backward_weight(g, gy, x, gw);
    };
    let mut offs = [0usize; MAX_TAPS];
    let Some(taps) = offsets(&planes, [g.kh, g.kw], g.dil, &mut offs) else {
        return generic::conv2d_backward_weight(g, gy, x, gw);
    };
    let gy_row = g.ow.div_ceil(8) * 8;
    let gy_plane = g.oh * gy_row;
    let Some(chunk) = chunk(planes.chan, 0, g.c_in / g.groups) else {
        return generic::conv2d_backward_weight(g, gy, x, gw);
    };
    if gy_plane > GY_WORDS {
        return generic::conv2d_backward_weight(g, gy, x, gw);
    }
    let (cin, cout, op, ip) = (g.c_in / g.groups, g.c_out / g.groups, g.oh * g.ow, g.h * g.w);
    let d = Dots {
        rows: g.oh,
        x_row: g.stride[0] * planes.row,
        gy_row,
        gy_plane,
    };
    let mut buf = [0.0f32; PLANE_WORDS];
    let mut gyb = [0.0f32; GY_WORDS];
    for n in 0..g.n {
        for grp in 0..g.groups {
            let mut c0 = 0;
            while c0 < cin {
                let nin = chunk.min(cin - c0);
                planes.fill(&mut buf, &x[(n * g.c_in + grp * cin + c0) * ip..], nin);
                let mut o0 = 0;
                while o0 < cout {
                    let b = if cout - o0 >= WB && WB * gy_plane <= GY_WORDS {
                        WB
                    } else {
                        1
                    };
                    let oc = grp * cout + o0;
                    let src = &gy[(n * g.c_out + oc) * op..][..b * op];
                    for (dst, row) in gyb.chunks_exact_mut(gy_row).zip(src.chunks_exact(g.ow)) {
                        dst[..g.ow].copy_from_slice(row);
                        dst[g.ow..].fill(0.0);
                    }
                    for i in 0..nin {
                        let xs = &buf[i * planes.chan..][..planes.chan];
                        let mut t0 = 0;
                        while t0 < taps {
                            let tb = if taps - t0 >= TB { TB } else { 1 };
                            let mut sums = [[0.0f32; TB]; WB];
                            match (b, tb) {
                                (WB, TB) => d.run::<WB, TB>(xs, &offs[t0..], &gyb, &mut sums),
                                (WB, _) => d.run::<WB, 1>(xs, &offs[t0..], &gyb, &mut sums),
                                (_, TB) => d.run::<1, TB>(xs, &offs[t0..], &gyb, &mut sums),
                                _ => d.run::<1, 1>(xs, &offs[t0..], &gyb, &mut sums),
                            }
                            for (o, row) in sums[..b].iter().enumerate() {
                                let at = ((oc + o) * cin + c0 + i) * taps + t0;
                                for (dst, s) in gw[at..][..tb].iter_mut().zip(row) {
                                    *dst += s;
                                }
                            }
                            t0 += tb;
                        }
                    }
                    o0 += b;
                }
                c0 += nin;
            }
        }
    }
}

/// Dot products of `B` zero-extended output-gradient planes with `T` shifted copies of
/// one padded input plane.
struct Dots {
    rows: usize,
    x_row: usize,
    gy_row: usize,
    gy_plane: usize,
}

impl Dots {
    #[inline(always)]
    fn run<const B: usize, const T: usize>(
        &self,
        xs: &[f32],
        offs: &[usize],
        gyb: &[f32],
        sums: &mut [[f32; TB]; WB],
    ) {
        let offs: [usize; T] = core::array::from_fn(|t| offs[t]);
        let mut acc = [[[0.0f32; L]; T]; B];
        for oy in 0..self.rows {
            let (xrow, grow) = (oy * self.x_row, oy * self.gy_row);
            let mut c = 0;
            while c < self.gy_row {
                for (t, &off) in offs.iter().enumerate() {
                    let xt = &xs[xrow + off + c..][..L];
                    for (o, ao) in acc.iter_mut().enumerate() {
                        let gv = &gyb[o * self.gy_plane + grow + c..][..L];
                        let a = &mut ao[t];
                        for l in 0..L {
                            a[l] += gv[l] * xt[l];
                        }
                    }
                }
                c += L;
            }
        }
        for (srow, ao) in sums.iter_mut().zip(&acc) {
            for (s, a) in srow.iter_mut().zip(ao) {
                *s = a.iter().sum();
            }
        }
    }
}
