//! The weight gradient (`gw += correlate(gy, x)`) in the two-multiply form, column
//! stride 1, with the output gradient split once instead of once per tap.
//!
//! - Each weight's sum runs over every output pixel, so the generic loop
//!   (`backward_weight_with`) splits each `gy` value `kh * kw * c_in / groups` times.
//!   Here the `gy` planes of an output channel are split once into a stack buffer of
//!   `(gy >> 8, gy & 0xFF)` pairs (when they fit; otherwise a row chunk at a time), and a
//!   product costs two loads, two multiplies and two adds: `x * gy = x * gh * 2^8 +
//!   x * gl`, the same two `i32` sums as [`Split8`](super::super::dot::Split8) with `gy`
//!   split, under the same flush bound ([`Plan`](super::super::dot::Plan)).
//! - The rows of one chunk are summed in one call ([`rows_w8`]), so the call and loop
//!   setup are paid per plane, not per (short) row.

use super::super::Q16;
use super::finish;
use crate::kernels::conv::ConvGeom;

/// Split `gy` values the stack buffer holds (256 pairs, 2 KiB): a batch-1 `gy` plane up
/// to 16x16, or chunks of rows up to 256 wide.
pub(super) const GBUF: usize = 256;

/// `gw += correlate(gy, x)` with `gy` split, column stride 1, `g.ow <= GBUF`; the sums
/// are flushed into an `i64` every `rows_per_flush` output rows.
pub(super) fn backward_weight_w8(g: &ConvGeom, gy: &[Q16], x: &[Q16], gw: &mut [Q16], rows_per_flush: usize) {
    let (ip, op, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let ([sy, _], [dy, dx], [py, px]) = (g.stride, g.dil, g.pad);
    // Rows per call: within the flush bound and the buffer.
    let chunk = rows_per_flush.min(GBUF / g.ow.max(1)).max(1);
    // When all `gy` planes of an output channel fit, they are split once per channel,
    // rows `st` apart: the `x` row stride when the rows fit in it (the gap zeroed), so
    // that a tap whose every column is valid is one contiguous dot product over all its
    // rows (the zeros add nothing), with no per-row loop.
    let xs = sy * g.w;
    let st = if g.ow <= xs { xs } else { g.ow };
    let whole = g.n * g.oh * st <= GBUF;
    let mut buf = [(0i32, 0i32); GBUF];
    for oc in 0..g.c_out {
        let grp = oc / cout_g;
        if whole {
            let planes = gy.chunks_exact(op).skip(oc).step_by(g.c_out).take(g.n);
            for (dst, gyp) in buf.chunks_exact_mut(g.oh * st).zip(planes) {
                for (d, r) in dst.chunks_exact_mut(st).zip(gyp.chunks_exact(g.ow)) {
                    let (row, gap) = d.split_at_mut(g.ow);
                    split_into(row, r);
                    gap.fill((0, 0));
                }
            }
        }
        for ky in 0..g.kh {
            let (oy0, oy1) = crate::kernels::valid_range(g.oh, g.h, sy, py, ky * dy);
            for icg in 0..cin_g {
                for kx in 0..g.kw {
                    // Stride 1: outputs ox with ox + kx * dx - px in 0..w.
                    let ox0 = px.saturating_sub(kx * dx).min(g.ow);
                    let ox1 = (g.w + px).saturating_sub(kx * dx).clamp(ox0, g.ow);
                    if oy0 >= oy1 || ox0 >= ox1 {
                        continue;
                    }
                    let cols = ox1 - ox0;
                    let col = ox0 + kx * dx - px;
                    let mut total = 0i64;
                    for n in 0..g.n {
                        let gyp = &gy[(n * g.c_out + oc) * op..][..op];
                        let xp = &x[(n * g.c_in + grp * cin_g + icg) * ip..][..ip];
                        for r0 in (oy0..oy1).step_by(chunk) {
                            let rows = chunk.min(oy1 - r0);
                            let xr = (&xp[(r0 * sy + ky * dy - py) * g.w + col..], xs);
                            let at = n * g.oh * st + r0 * st + ox0;
                            let (m, l) = if whole && st == xs && cols == g.ow {
                                rows_w8((&buf[at..], st), xr, 1, (rows - 1) * st + cols)
                            } else if whole {
                                rows_w8((&buf[at..], st), xr, rows, cols)
                            } else {
                                let part = &mut buf[..rows * cols];
                                for (dst, r) in part.chunks_exact_mut(cols).zip(r0..) {
                                    split_into(dst, &gyp[r * g.ow + ox0..][..cols]);
                                }
                                rows_w8((part, cols), xr, rows, cols)
                            };
                            total += ((m as i64) << 8) + l as i64;
                        }
                    }
                    let gv = &mut gw[(oc * cin_g + icg) * taps + ky * g.kw + kx];
                    *gv = finish(gv.0, total);
                }
            }
        }
    }
}

/// `dst[i] = (src[i] >> 8, src[i] & 0xFF)`.
fn split_into(dst: &mut [(i32, i32)], src: &[Q16]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = (s.0 >> 8, s.0 & 0xFF);
    }
}

/// `(sum x * gh, sum x * gl)` over `rows` rows of `cols` values (the split `gy` rows
/// `gs` pairs apart, the `x` rows `xs` values apart).
#[inline(never)]
fn rows_w8(
    (g, gs): (&[(i32, i32)], usize),
    (x, xs): (&[Q16], usize),
    rows: usize,
    cols: usize,
) -> (i32, i32) {
    let (mut m, mut l) = (0i32, 0i32);
    for r in 0..rows {
        let (gr, xr) = (&g[r * gs..][..cols], &x[r * xs..][..cols]);
        // Two columns per step (the M0 then keeps both sums in registers).
        let mut pairs = gr.chunks_exact(2).zip(xr.chunks_exact(2));
        for (gp, xp) in &mut pairs {
            let (x0, x1) = (xp[0].0, xp[1].0);
            m = m
                .wrapping_add(x0.wrapping_mul(gp[0].0))
                .wrapping_add(x1.wrapping_mul(gp[1].0));
            l = l
                .wrapping_add(x0.wrapping_mul(gp[0].1))
                .wrapping_add(x1.wrapping_mul(gp[1].1));
        }
        if cols % 2 == 1 {
            let ((gh, gl), xv) = (gr[cols - 1], xr[cols - 1].0);
            m = m.wrapping_add(xv.wrapping_mul(gh));
            l = l.wrapping_add(xv.wrapping_mul(gl));
        }
    }
    (m, l)
}
