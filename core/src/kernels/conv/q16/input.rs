//! The input gradient (`gx += conv_transpose(gy, w)`) in its three loop shapes:
//! weight-stationary rows for the two-multiply form, tap tables, and per-pixel gathers
//! (stride 1 and any stride).

use super::dot::{Dot, SplitW8};
use super::{bands, dot_row_rev, dot_table, finish, rows3, TABLE};
use crate::fixed::Q16;
use crate::kernels::conv::ConvGeom;
use rows3::InputTable;

/// Row segments up to this long take [`rows3::corr3_planes_padded`] (their borders are
/// a large share of the work); longer ones the checked border loop.
const SHORT: usize = 16;

/// Whether a row segment of `len` sums takes [`rows3::corr3_planes_padded`].
pub(super) fn takes_padded(len: usize) -> bool {
    len <= SHORT
}

/// Columns of one stack tile of [`rows_plane_w8`] (and of the forward rows).
pub(super) const COLS: usize = 32;

/// The stride-1 input gradient with [`SplitW8`] sums, weight-stationary: for every
/// (output channel, tap) the weight is split once and a whole row segment of input
/// pixels is updated (their `i32` sums sit in a stack tile, flushed into `i64` totals
/// every `seg` taps), so the border pixels cost no per-pixel tap search.
pub(super) fn backward_input_rows_w8(g: &ConvGeom, gy: &[Q16], w: &[Q16], gx: &mut [Q16], seg: usize) {
    let (ip, op, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    for n in 0..g.n {
        for ic in 0..g.c_in {
            let (grp, icg) = (ic / cin_g, ic % cin_g);
            let gys = &gy[(n * g.c_out + grp * cout_g) * op..][..cout_g * op];
            let wk = &w[(grp * cout_g * cin_g + icg) * taps..];
            let gxp = &mut gx[(n * g.c_in + ic) * ip..][..ip];
            rows_plane_w8(g, gys, wk, gxp, seg);
        }
    }
}

/// The stride-1 input gradient for three-column windows (column dilation 1) with
/// [`SplitW8`] sums: each row segment of an input-gradient plane gets all taps of a
/// chunk of output channels from one [`rows3::corr3_planes`] call (the flipped
/// correlation: weights in reverse column order), the chunk's split weights in a
/// stack table built once per plane (when the chunk is all of them).
pub(super) fn backward_input_rows3(g: &ConvGeom, gy: &[Q16], w: &[Q16], gx: &mut [Q16], seg: usize) {
    let (ip, op, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let ([dy, _], [py, px]) = (g.dil, g.pad);
    let per = (seg / taps).clamp(1, InputTable::channels(g.kh));
    let mut table = InputTable::new();
    let (mut acc, mut tot) = ([(0i32, 0i32); COLS], [0i64; COLS]);
    for ic in 0..g.c_in {
        let (grp, icg) = (ic / cin_g, ic % cin_g);
        // Weights of (output channel j of the group, this input channel).
        let wk = &w[(grp * cout_g * cin_g + icg) * taps..];
        for n in 0..g.n {
            let gys = &gy[(n * g.c_out + grp * cout_g) * op..][..cout_g * op];
            let gxp = &mut gx[(n * g.c_in + ic) * ip..][..ip];
            for iy in 0..g.h {
                let kys = out_taps(iy, py, dy, g.kh, g.oh);
                let mut c0 = 0;
                while c0 < g.w {
                    let c1 = (c0 + COLS).min(g.w);
                    let (acc, tot) = (&mut acc[..c1 - c0], &mut tot[..c1 - c0]);
                    tot.fill(0);
                    // (`while`, not `step_by`, whose length is a division on the M0.)
                    let mut j0 = 0;
                    while j0 < cout_g {
                        let chans = per.min(cout_g - j0);
                        let weight = |c: usize, ky: usize, k: usize| wk[c * cin_g * taps + ky * 3 + 2 - k];
                        let wt = table.get((ic, j0, chans, cout_g), g.kh, weight);
                        // Output column ix + px - kx = start + (ix - c0) + k - lead, k = 2 - kx.
                        let planes = rows3::Planes {
                            src: &gys[j0 * op..][..chans * op],
                            plane: op,
                            row_len: g.ow,
                            start: (c0 + px).saturating_sub(2).min(g.ow),
                            lead: 2usize.saturating_sub(c0 + px),
                            row: |ky| (iy + py - ky * dy) * g.ow,
                        };
                        if takes_padded(acc.len()) {
                            rows3::corr3_planes_padded(acc, &planes, kys, g.kh, wt);
                        } else {
                            rows3::corr3_planes(acc, &planes, kys, g.kh, wt);
                        }
                        flush_w8(tot, acc);
                        j0 += chans;
                    }
                    for (gv, t) in gxp[iy * g.w + c0..iy * g.w + c1].iter_mut().zip(tot.iter()) {
                        *gv = finish(gv.0, *t);
                    }
                    c0 = c1;
                }
            }
        }
    }
}

#[inline(never)]
fn rows_plane_w8(g: &ConvGeom, gys: &[Q16], wk: &[Q16], gxp: &mut [Q16], seg: usize) {
    let (op, taps) = (g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let ([dy, dx], [py, px]) = (g.dil, g.pad);
    let seg = seg.max(1);
    let (mut acc, mut tot) = ([(0i32, 0i32); COLS], [0i64; COLS]);
    for iy in 0..g.h {
        let (ky0, ky1) = out_taps(iy, py, dy, g.kh, g.oh);
        let mut c0 = 0;
        while c0 < g.w {
            let c1 = (c0 + COLS).min(g.w);
            let n = c1 - c0;
            let (acc, tot) = (&mut acc[..n], &mut tot[..n]);
            acc.fill((0, 0));
            tot.fill(0);
            let mut pending = 0;
            for j in 0..cout_g {
                let wc = &wk[j * cin_g * taps..][..taps];
                for ky in ky0..ky1 {
                    let gr = &gys[j * op + (iy + py - ky * dy) * g.ow..][..g.ow];
                    for kx in 0..g.kw {
                        // Pixels ix with output column ix + px - kx * dx in 0..ow.
                        let shift = kx * dx;
                        let a = c0.max(shift.saturating_sub(px));
                        let b = c1.min((g.ow + shift).saturating_sub(px));
                        if a < b {
                            let (wh, wl) = SplitW8::tap(wc[ky * g.kw + kx].0);
                            let src = &gr[a + px - shift..];
                            axpy_w8(&mut acc[a - c0..b - c0], src, wh, wl);
                        }
                    }
                }
                pending += (ky1 - ky0) * g.kw;
                if pending + (ky1 - ky0) * g.kw > seg {
                    flush_w8(tot, acc);
                    pending = 0;
                }
            }
            flush_w8(tot, acc);
            for (gv, t) in gxp[iy * g.w + c0..iy * g.w + c1].iter_mut().zip(tot.iter()) {
                *gv = finish(gv.0, *t);
            }
            c0 = c1;
        }
    }
}

/// `tot[i] += m * 2^8 + l` for each pair `(m, l)`, and clears the pairs.
pub(super) fn flush_w8(tot: &mut [i64], acc: &mut [(i32, i32)]) {
    for (t, a) in tot.iter_mut().zip(acc.iter_mut()) {
        *t += ((a.0 as i64) << 8) + a.1 as i64;
        *a = (0, 0);
    }
}

/// `acc[i] += (g[i] * wh, g[i] * wl)`: one split weight's products over a row of
/// pixels, in a function of its own so that the loop has the M0's low registers.
#[inline(never)]
pub(super) fn axpy_w8(acc: &mut [(i32, i32)], g: &[Q16], wh: i32, wl: i32) {
    for (a, gv) in acc.iter_mut().zip(g) {
        a.0 = a.0.wrapping_add(gv.0.wrapping_mul(wh));
        a.1 = a.1.wrapping_add(gv.0.wrapping_mul(wl));
    }
}

/// The stride-1 input gradient with tap tables, plane by plane.
pub(super) fn backward_input_table<D: Dot>(g: &ConvGeom, gy: &[Q16], w: &[Q16], gx: &mut [Q16], seg: usize) {
    let (ip, op, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    for n in 0..g.n {
        for ic in 0..g.c_in {
            let (grp, icg) = (ic / cin_g, ic % cin_g);
            let gys = &gy[(n * g.c_out + grp * cout_g) * op..][..cout_g * op];
            let wk = &w[(grp * cout_g * cin_g + icg) * taps..];
            let gxp = &mut gx[(n * g.c_in + ic) * ip..][..ip];
            gather_plane_table::<D>(g, gys, wk, gxp, seg);
        }
    }
}

/// The taps `k` in `0..k_len` whose output coordinate `(at + pad - k * dil) / stride`
/// is whole and lies in `0..out_len` (stride 1: a contiguous range).
#[inline(always)]
fn out_taps(at: usize, pad: usize, dil: usize, k_len: usize, out_len: usize) -> (usize, usize) {
    // Valid: k * dil <= at + pad and at + pad - k * dil < out_len.
    let top = at + pad;
    let mut k0 = 0;
    while k0 < k_len && top >= out_len + k0 * dil {
        k0 += 1;
    }
    let mut k1 = k_len;
    while k1 > k0 && (k1 - 1) * dil > top {
        k1 -= 1;
    }
    (k0, k1)
}

pub(super) fn backward_input_with<D: Dot>(
    g: &ConvGeom,
    gy: &[Q16],
    w: &[Q16],
    gx: &mut [Q16],
    chans_per_flush: usize,
) {
    let (ip, op, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let cpf = chans_per_flush.clamp(1, cout_g.max(1));
    for n in 0..g.n {
        for ic in 0..g.c_in {
            let (grp, icg) = (ic / cin_g, ic % cin_g);
            let gys = &gy[(n * g.c_out + grp * cout_g) * op..][..cout_g * op];
            // Weights of (output channel j of the group, this input channel): from
            // `j * cin_g * taps` on.
            let wk = &w[(grp * cout_g * cin_g + icg) * taps..];
            let gxp = &mut gx[(n * g.c_in + ic) * ip..][..ip];
            if g.stride == [1, 1] {
                gather_plane_s1::<D>(g, gys, wk, gxp, cpf);
            } else {
                gather_plane_strided::<D>(g, gys, wk, gxp, cpf);
            }
        }
    }
}

/// One input-gradient plane, stride 1, with tap tables built once per region of
/// input pixels that share a tap window.
#[inline(never)]
fn gather_plane_table<D: Dot>(g: &ConvGeom, gys: &[Q16], wk: &[Q16], gxp: &mut [Q16], seg: usize) {
    let (op, taps) = (g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let ([dy, dx], [py, px]) = (g.dil, g.pad);
    let mut table = [(0u32, D::NO_TAP); TABLE];
    bands(
        g.h,
        |iy| out_taps(iy, py, dy, g.kh, g.oh),
        |iy0, iy1, ky0, ky1| {
            bands(
                g.w,
                |ix| out_taps(ix, px, dx, g.kw, g.ow),
                |ix0, ix1, kx0, kx1| {
                    if ky0 == ky1 || kx0 == kx1 {
                        return;
                    }
                    // Offsets from output (iy + py - (ky1-1) dy, ix + px - (kx1-1) dx) of channel 0.
                    let mut len = 0;
                    for j in 0..cout_g {
                        for ky in ky0..ky1 {
                            for kx in kx0..kx1 {
                                let off = j * op + (ky1 - 1 - ky) * dy * g.ow + (kx1 - 1 - kx) * dx;
                                table[len] = (off as u32, D::tap(wk[j * cin_g * taps + ky * g.kw + kx].0));
                                len += 1;
                            }
                        }
                    }
                    let seg = seg.max(1);
                    for iy in iy0..iy1 {
                        let gxr = &mut gxp[iy * g.w..][ix0..ix1];
                        for (ix, gxv) in (ix0..ix1).zip(gxr.iter_mut()) {
                            let base = (iy + py - (ky1 - 1) * dy) * g.ow + ix + px - (kx1 - 1) * dx;
                            let mut acc = D::zero();
                            dot_table(&mut acc, &gys[base..], &table[..len], seg);
                            *gxv = finish(gxv.0, acc.total());
                        }
                    }
                },
            );
        },
    );
}

/// One input-gradient plane, stride 1: every tap range is contiguous.
#[inline(never)]
fn gather_plane_s1<D: Dot>(g: &ConvGeom, gys: &[Q16], wk: &[Q16], gxp: &mut [Q16], cpf: usize) {
    let (op, taps) = (g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let ([dy, dx], [py, px]) = (g.dil, g.pad);
    let (row_step, wc_step) = (dy * g.ow, cin_g * taps);
    for iy in 0..g.h {
        let (ky0, ky1) = out_taps(iy, py, dy, g.kh, g.oh);
        let gxr = &mut gxp[iy * g.w..][..g.w];
        for (ix, gxv) in gxr.iter_mut().enumerate() {
            let (kx0, kx1) = out_taps(ix, px, dx, g.kw, g.ow);
            if kx0 == kx1 || ky0 == ky1 {
                continue;
            }
            // Output rows iy + py - ky * dy and columns ix + px - kx * dx, walked with
            // ky and kx descending so that both ascend.
            let first = (iy + py - (ky1 - 1) * dy) * g.ow + ix + px - (kx1 - 1) * dx;
            let mut acc = D::zero();
            let mut j = 0;
            while j < cout_g {
                let end = (j + cpf).min(cout_g);
                while j < end {
                    let mut gi = j * op + first;
                    let mut wi = j * wc_step + (ky1 - 1) * g.kw;
                    for _ in ky0..ky1 {
                        dot_row_rev(&mut acc, &gys[gi..], &wk[wi + kx0..wi + kx1], dx);
                        gi += row_step;
                        wi = wi.wrapping_sub(g.kw);
                    }
                    j += 1;
                }
                acc.flush();
            }
            *gxv = finish(gxv.0, acc.total());
        }
    }
}

/// One input-gradient plane, any stride: taps whose output coordinate is not whole
/// are skipped one by one (slower; W1 has stride 1 everywhere).
#[inline(never)]
fn gather_plane_strided<D: Dot>(g: &ConvGeom, gys: &[Q16], wk: &[Q16], gxp: &mut [Q16], cpf: usize) {
    let (op, taps) = (g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let ([sy, sx], [dy, dx], [py, px]) = (g.stride, g.dil, g.pad);
    for iy in 0..g.h {
        let (ky0, ky1) = out_taps(iy, py, dy, g.kh, g.oh * sy);
        let gxr = &mut gxp[iy * g.w..][..g.w];
        for (ix, gxv) in gxr.iter_mut().enumerate() {
            let (kx0, kx1) = out_taps(ix, px, dx, g.kw, g.ow * sx);
            let mut acc = D::zero();
            for j0 in (0..cout_g).step_by(cpf) {
                for j in j0..(j0 + cpf).min(cout_g) {
                    let gyp = &gys[j * op..][..op];
                    let wc = &wk[j * cin_g * taps..][..taps];
                    for ky in ky0..ky1 {
                        let ty = iy + py - ky * dy;
                        if ty % sy != 0 {
                            continue;
                        }
                        let gr = &gyp[(ty / sy) * g.ow..][..g.ow];
                        for kx in kx0..kx1 {
                            let tx = ix + px - kx * dx;
                            if tx % sx == 0 {
                                acc.mac(gr[tx / sx].0, wc[ky * g.kw + kx].0);
                            }
                        }
                    }
                }
                acc.flush();
            }
            *gxv = finish(gxv.0, acc.total());
        }
    }
}
