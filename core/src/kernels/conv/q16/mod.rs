//! Q16.16 convolution kernels: every output is the **exact** sum of its products
//! (Q32.32), rounded (half away from zero) and saturated **once**.
//!
//! The generic kernels (`kernels::conv`) round and saturate every product through the
//! `Scalar` operators, which is costly on a Cortex-M0 (no FPU, no 32 x 32 -> 64
//! multiply). These kernels are exact and cheaper (the sum forms are in `dot.rs`):
//!
//! - **Two 32-bit multiplies per product** when the operands allow it: with
//!   `x = xh * 2^8 + xl` (`xl` in `[0, 2^8)`), `x * w = xh * w * 2^8 + xl * w`, two `i32`
//!   sums. Otherwise **three** (16-bit halves: `x * w = (xh * w + xl * wh) * 2^16 +
//!   xl * wl`, the last sum in a `u64`), and near the rails a saturating `i64` sum of
//!   four-multiply products.
//! - **Overflow is ruled out before the loops, not checked in them.** Each call scans its
//!   operands once for their largest magnitudes, bounds every term of the `i32` sums,
//!   and flushes them into an `i64` total often enough that they cannot overflow. All
//!   forms give the same exact integers, so the choice never changes a result and all
//!   targets stay bit-identical.
//! - **Loop shapes** (chosen in `conv/path.rs`). In the two-multiply form, forward
//!   (column stride 1) and backward-input (stride 1) update a row of up to 32 outputs at
//!   a time, their sums in a stack tile: for 3-column windows (W1's 3x3) with the row
//!   kernels of `conv/rows3.rs` (split weights in a small stack table, three kernel
//!   rows, nine products per pixel, per pass, interior pixels without bounds checks),
//!   otherwise one split weight per pass. Backward-weight (column stride 1) splits each
//!   `gy` plane once into a stack buffer and sums a tap over all its rows in one call
//!   (`conv/weight.rs`). Otherwise the loops gather one output at a time
//!   (backward-input with tap tables when the stride is 1, a per-tap divisibility check
//!   when not) and backward-weight is one dot product per tap, row by row. Hot loops sit
//!   in small functions of their own, so that on a Cortex-M0 they have its eight low
//!   registers to themselves.
//! - **Hosts** (every `target_arch` but `"arm"`): `conv/native.rs` takes the same exact
//!   sums as `i64` (or, under `2^53`, `f64`) sums of whole products, in loops LLVM
//!   vectorises; it hands a call back to these kernels when the sums could overflow or
//!   the planes do not fit its stack buffers.
//! - Rounding and saturation happen once per output: the sticky saturation flag is
//!   raised there (or when the `i64` total saturates in the wide form).

use crate::fixed::{round_shift, sat_i32, Q16};
use crate::kernels::conv::ConvGeom;
use dot::{Dot, Fast16, Plan, Split8, SplitW8, WideDot};

mod dot;
mod input;
#[cfg(not(target_arch = "arm"))]
mod native;
mod path;
mod rows3;
use path::Path;
mod weight;
use input::{
    axpy_w8, backward_input_rows3, backward_input_rows_w8, backward_input_table, backward_input_with,
    flush_w8, COLS,
};
use rows3::ForwardTable;

/// `round(total / 2^16)` added to `base`, saturated.
#[inline(always)]
fn finish(base: i32, total: i64) -> Q16 {
    Q16(sat_i32(base as i64 + round_shift(total, 16)))
}

/// The taps `k` in `0..k_len` whose input coordinate `at + k * dil - pad` lies in
/// `0..len`, as a half-open range (contiguous; no division, the borders are short).
#[inline(always)]
fn taps_in(at: usize, pad: usize, dil: usize, k_len: usize, len: usize) -> (usize, usize) {
    let mut k0 = 0;
    while k0 < k_len && at + k0 * dil < pad {
        k0 += 1;
    }
    let mut k1 = k_len;
    while k1 > k0 && at + (k1 - 1) * dil >= len + pad {
        k1 -= 1;
    }
    (k0, k1)
}

/// `acc += sum_k x[k * step] * w[k]` over `w` (three taps unrolled).
#[inline(always)]
fn dot_row<D: Dot>(acc: &mut D, x: &[Q16], w: &[Q16], step: usize) {
    if step == 1 {
        match (w, x) {
            ([w0, w1, w2], [x0, x1, x2, ..]) => {
                acc.mac(x0.0, w0.0);
                acc.mac(x1.0, w1.0);
                acc.mac(x2.0, w2.0);
            }
            ([w0, w1], [x0, x1, ..]) => {
                acc.mac(x0.0, w0.0);
                acc.mac(x1.0, w1.0);
            }
            ([w0], [x0, ..]) => acc.mac(x0.0, w0.0),
            _ => {
                for (xv, wv) in x.iter().zip(w) {
                    acc.mac(xv.0, wv.0);
                }
            }
        }
    } else {
        for (xv, wv) in x.iter().step_by(step).zip(w) {
            acc.mac(xv.0, wv.0);
        }
    }
}

/// `acc += sum_k x[k * step] * w[w.len() - 1 - k]` (three taps unrolled).
#[inline(always)]
fn dot_row_rev<D: Dot>(acc: &mut D, x: &[Q16], w: &[Q16], step: usize) {
    if step == 1 {
        match (w, x) {
            ([w0, w1, w2], [x0, x1, x2, ..]) => {
                acc.mac(x0.0, w2.0);
                acc.mac(x1.0, w1.0);
                acc.mac(x2.0, w0.0);
            }
            ([w0, w1], [x0, x1, ..]) => {
                acc.mac(x0.0, w1.0);
                acc.mac(x1.0, w0.0);
            }
            ([w0], [x0, ..]) => acc.mac(x0.0, w0.0),
            _ => {
                for (xv, wv) in x.iter().zip(w.iter().rev()) {
                    acc.mac(xv.0, wv.0);
                }
            }
        }
    } else {
        for (xv, wv) in x.iter().step_by(step).zip(w.iter().rev()) {
            acc.mac(xv.0, wv.0);
        }
    }
}

/// Entries of a tap table: the taps of one window, as (index offset in the source
/// planes, weight). 160 entries (1,280 bytes of stack) hold every window of W1's
/// forward passes and of its first two backward-input passes; larger windows use the
/// row loops.
const TABLE: usize = 160;

/// Calls `f(start, end, k0, k1)` for each run of consecutive coordinates in `0..len`
/// whose tap window `window(o) = (k0, k1)` is the same (at most `2 * (k - 1) + 1` runs).
#[inline(always)]
fn bands(
    len: usize,
    window: impl Fn(usize) -> (usize, usize),
    mut f: impl FnMut(usize, usize, usize, usize),
) {
    let mut o = 0;
    while o < len {
        let w = window(o);
        let mut e = o + 1;
        while e < len && window(e) == w {
            e += 1;
        }
        f(o, e, w.0, w.1);
        o = e;
    }
}

/// `acc += sum src[off] * w` over the table, flushed every `seg` entries.
#[inline(always)]
fn dot_table<D: Dot>(acc: &mut D, src: &[Q16], table: &[(u32, D::Tap)], seg: usize) {
    let mut rest = table;
    while !rest.is_empty() {
        let (part, tail) = rest.split_at(seg.min(rest.len()));
        acc.mac_table(src, part);
        acc.flush();
        rest = tail;
    }
}

/// `y = conv(x, w) + b`, exact sums rounded once.
pub fn conv2d_forward(g: &ConvGeom, x: &[Q16], w: &[Q16], b: Option<&[Q16]>, y: &mut [Q16]) {
    #[cfg(not(target_arch = "arm"))]
    if native::forward(g, x, w, b, y) {
        return;
    }
    forward_split(g, x, w, b, y)
}

/// [`conv2d_forward`] with the split (Cortex-M) sums.
fn forward_split(g: &ConvGeom, x: &[Q16], w: &[Q16], b: Option<&[Q16]>, y: &mut [Q16]) {
    match path::forward(g, x, w) {
        Path::Rows3(seg) => forward_rows3(g, x, w, b, y, seg),
        Path::RowsW8(seg) => forward_rows_w8(g, x, w, b, y, seg),
        Path::General(Plan::Split8(units)) => forward_with::<Split8>(g, x, w, b, y, units),
        Path::General(Plan::Fast16(units)) => forward_with::<Fast16>(g, x, w, b, y, units),
        _ => forward_with::<WideDot>(g, x, w, b, y, g.c_in / g.groups),
    }
}

/// The forward pass for three-column windows (column stride and dilation 1) with
/// [`SplitW8`] sums: each output row segment gets all taps of a chunk of input
/// channels from one [`rows3::corr3_planes`] call, with the chunk's split weights in a
/// stack table built once per output channel (when the chunk is all of them).
fn forward_rows3(g: &ConvGeom, x: &[Q16], w: &[Q16], b: Option<&[Q16]>, y: &mut [Q16], seg: usize) {
    let (ip, op, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let ([sy, _], [dy, _], [py, px]) = (g.stride, g.dil, g.pad);
    // Channels per flush: their taps fit the flush bound; per chunk: also the table's.
    let per_flush = (seg / taps).max(1);
    let per = per_flush.min(ForwardTable::channels(g.kh));
    let mut table = ForwardTable::new();
    let (mut acc, mut tot) = ([(0i32, 0i32); COLS], [0i64; COLS]);
    for n in 0..g.n {
        for oc in 0..g.c_out {
            let grp = oc / cout_g;
            let xs = &x[(n * g.c_in + grp * cin_g) * ip..][..cin_g * ip];
            let wk = &w[oc * cin_g * taps..][..cin_g * taps];
            let bias = b.map_or(0, |b| b[oc].0);
            let yp = &mut y[(n * g.c_out + oc) * op..][..op];
            // Small planes: whole output rows share the tile (`band` rows), so each
            // chunk's weights are split once per band instead of once per row.
            let band = if g.ow <= COLS { COLS / g.ow.max(1) } else { 1 };
            let mut oy0 = 0;
            while oy0 < g.oh {
                let oy1 = (oy0 + band).min(g.oh);
                let mut c0 = 0;
                while c0 < g.ow {
                    let c1 = (c0 + COLS).min(g.ow);
                    let nc = c1 - c0;
                    let (acc, tot) = (&mut acc[..(oy1 - oy0) * nc], &mut tot[..(oy1 - oy0) * nc]);
                    tot.fill(0);
                    // Channels summed in `acc` since its last flush.
                    let mut pending = 0;
                    // (`while`, not `step_by`, whose length is a division on the M0.)
                    let mut ic0 = 0;
                    while ic0 < cin_g {
                        let chans = per.min(cin_g - ic0);
                        if pending + chans > per_flush {
                            flush_w8(tot, acc);
                            pending = 0;
                        }
                        pending += chans;
                        let weight = |c: usize, ky: usize, k: usize| wk[c * taps + ky * 3 + k];
                        let wt = table.get((oc, ic0, chans, cin_g), g.kh, weight);
                        for oy in oy0..oy1 {
                            // (Slicing, not `chunks_exact_mut`: no division on the M0.)
                            let acc = &mut acc[(oy - oy0) * nc..][..nc];
                            // Source column ox + k - px = start + (ox - c0) + k - lead.
                            let planes = rows3::Planes {
                                src: &xs[ic0 * ip..][..chans * ip],
                                plane: ip,
                                row_len: g.w,
                                start: c0.saturating_sub(px).min(g.w),
                                lead: px.saturating_sub(c0),
                                row: |ky| (oy * sy + ky * dy - py) * g.w,
                            };
                            let kys = taps_in(oy * sy, py, dy, g.kh, g.h);
                            rows3::corr3_planes(acc, &planes, kys, g.kh, wt);
                        }
                        ic0 += chans;
                    }
                    flush_w8(tot, acc);
                    // One row segment, or whole rows (c0 = 0, nc = ow): contiguous in y.
                    for (yv, t) in yp[oy0 * g.ow + c0..][..tot.len()].iter_mut().zip(tot.iter()) {
                        *yv = finish(bias, *t);
                    }
                    c0 = c1;
                }
                oy0 = oy1;
            }
        }
    }
}

/// The forward pass with [`SplitW8`] sums, weight-stationary (column stride 1): for every
/// (input channel, tap) the weight is split once and a row segment of outputs is
/// updated, their `i32` sums in stack tiles flushed into `i64` totals every `seg` taps.
fn forward_rows_w8(g: &ConvGeom, x: &[Q16], w: &[Q16], b: Option<&[Q16]>, y: &mut [Q16], seg: usize) {
    let (ip, op, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let ([sy, _], [dy, dx], [py, px]) = (g.stride, g.dil, g.pad);
    let (mut acc, mut tot) = ([(0i32, 0i32); COLS], [0i64; COLS]);
    for n in 0..g.n {
        for oc in 0..g.c_out {
            let grp = oc / cout_g;
            let xs = &x[(n * g.c_in + grp * cin_g) * ip..][..cin_g * ip];
            let wk = &w[oc * cin_g * taps..][..cin_g * taps];
            let bias = b.map_or(0, |b| b[oc].0);
            let yp = &mut y[(n * g.c_out + oc) * op..][..op];
            for oy in 0..g.oh {
                let (ky0, ky1) = taps_in(oy * sy, py, dy, g.kh, g.h);
                let mut c0 = 0;
                while c0 < g.ow {
                    let c1 = (c0 + COLS).min(g.ow);
                    let nc = c1 - c0;
                    let (acc, tot) = (&mut acc[..nc], &mut tot[..nc]);
                    tot.fill(0);
                    let mut pending = 0;
                    for ic in 0..cin_g {
                        let wc = &wk[ic * taps..][..taps];
                        for ky in ky0..ky1 {
                            let xr = &xs[ic * ip + (oy * sy + ky * dy - py) * g.w..][..g.w];
                            for kx in 0..g.kw {
                                // Outputs ox with input column ox + kx * dx - px in 0..w.
                                let shift = kx * dx;
                                let a = c0.max(px.saturating_sub(shift));
                                let e = c1.min((g.w + px).saturating_sub(shift));
                                if a < e {
                                    let (wh, wl) = SplitW8::tap(wc[ky * g.kw + kx].0);
                                    let src = &xr[a + shift - px..];
                                    axpy_w8(&mut acc[a - c0..e - c0], src, wh, wl);
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
                    for (yv, t) in yp[oy * g.ow + c0..oy * g.ow + c1].iter_mut().zip(tot.iter()) {
                        *yv = finish(bias, *t);
                    }
                    c0 = c1;
                }
            }
        }
    }
}

#[inline(never)]
fn forward_with<D: Dot>(
    g: &ConvGeom,
    x: &[Q16],
    w: &[Q16],
    b: Option<&[Q16]>,
    y: &mut [Q16],
    chans_per_flush: usize,
) {
    let (ip, op, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let ([sy, sx], [dy, dx], [py, px]) = (g.stride, g.dil, g.pad);
    let cpf = chans_per_flush.clamp(1, cin_g.max(1));
    for n in 0..g.n {
        for oc in 0..g.c_out {
            let grp = oc / cout_g;
            let xs = &x[(n * g.c_in + grp * cin_g) * ip..][..cin_g * ip];
            let wk = &w[oc * cin_g * taps..][..cin_g * taps];
            let bias = b.map_or(0, |b| b[oc].0);
            let yp = &mut y[(n * g.c_out + oc) * op..][..op];
            for oy in 0..g.oh {
                let (ky0, ky1) = taps_in(oy * sy, py, dy, g.kh, g.h);
                let yr = &mut yp[oy * g.ow..][..g.ow];
                for (ox, yv) in yr.iter_mut().enumerate() {
                    let (kx0, kx1) = taps_in(ox * sx, px, dx, g.kw, g.w);
                    let mut acc = D::zero();
                    if kx0 == kx1 || ky0 == ky1 {
                        *yv = finish(bias, 0);
                        continue;
                    }
                    let col = ox * sx + kx0 * dx - px;
                    for c0 in (0..cin_g).step_by(cpf) {
                        for ic in c0..(c0 + cpf).min(cin_g) {
                            let xp = &xs[ic * ip..][..ip];
                            let wc = &wk[ic * taps..][..taps];
                            for ky in ky0..ky1 {
                                let row = (oy * sy + ky * dy - py) * g.w;
                                dot_row(&mut acc, &xp[row + col..], &wc[ky * g.kw..][kx0..kx1], dx);
                            }
                        }
                        acc.flush();
                    }
                    *yv = finish(bias, acc.total());
                }
            }
        }
    }
}

/// `gx += conv_transpose(gy, w)`, exact sums rounded once per input element.
pub fn conv2d_backward_input(g: &ConvGeom, gy: &[Q16], w: &[Q16], gx: &mut [Q16]) {
    #[cfg(not(target_arch = "arm"))]
    if native::backward_input(g, gy, w, gx) {
        return;
    }
    backward_input_split(g, gy, w, gx)
}

/// [`conv2d_backward_input`] with the split (Cortex-M) sums.
fn backward_input_split(g: &ConvGeom, gy: &[Q16], w: &[Q16], gx: &mut [Q16]) {
    let cout_g = g.c_out / g.groups;
    match path::backward_input(g, gy, w) {
        Path::Rows3(seg) => backward_input_rows3(g, gy, w, gx, seg),
        Path::RowsW8(seg) => backward_input_rows_w8(g, gy, w, gx, seg),
        Path::Table(Plan::Split8(seg)) => backward_input_table::<SplitW8>(g, gy, w, gx, seg),
        Path::Table(Plan::Fast16(seg)) => backward_input_table::<Fast16>(g, gy, w, gx, seg),
        Path::General(Plan::Split8(units)) => backward_input_with::<Split8>(g, gy, w, gx, units),
        Path::General(Plan::Fast16(units)) => backward_input_with::<Fast16>(g, gy, w, gx, units),
        _ => backward_input_with::<WideDot>(g, gy, w, gx, cout_g),
    }
}

/// `gw += correlate(gy, x)`, exact sums rounded once per weight.
pub fn conv2d_backward_weight(g: &ConvGeom, gy: &[Q16], x: &[Q16], gw: &mut [Q16]) {
    #[cfg(not(target_arch = "arm"))]
    if native::backward_weight(g, gy, x, gw) {
        return;
    }
    backward_weight_split(g, gy, x, gw)
}

/// [`conv2d_backward_weight`] with the split (Cortex-M) sums.
fn backward_weight_split(g: &ConvGeom, gy: &[Q16], x: &[Q16], gw: &mut [Q16]) {
    match path::backward_weight(g, gy, x) {
        Path::SplitGy(rows) => weight::backward_weight_w8(g, gy, x, gw, rows),
        Path::General(Plan::Split8(units)) => backward_weight_with::<Split8>(g, gy, x, gw, units),
        Path::General(Plan::Fast16(units)) => backward_weight_with::<Fast16>(g, gy, x, gw, units),
        _ => backward_weight_with::<WideDot>(g, gy, x, gw, g.oh),
    }
}

#[inline(never)]
fn backward_weight_with<D: Dot>(g: &ConvGeom, gy: &[Q16], x: &[Q16], gw: &mut [Q16], rows_per_flush: usize) {
    let (ip, op, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let ([sy, sx], [dy, dx], [py, px]) = (g.stride, g.dil, g.pad);
    let rpf = rows_per_flush.clamp(1, g.oh.max(1));
    // Tap loops outermost: the valid output ranges (divisions) are computed once per tap.
    for ky in 0..g.kh {
        let (oy0, oy1) = crate::kernels::valid_range(g.oh, g.h, sy, py, ky * dy);
        for kx in 0..g.kw {
            let (ox0, ox1) = crate::kernels::valid_range(g.ow, g.w, sx, px, kx * dx);
            if oy0 >= oy1 || ox0 >= ox1 {
                continue;
            }
            let col = ox0 * sx + kx * dx - px;
            for oc in 0..g.c_out {
                let grp = oc / cout_g;
                for icg in 0..cin_g {
                    let mut acc = D::zero();
                    for n in 0..g.n {
                        let gyp = &gy[(n * g.c_out + oc) * op..][..op];
                        let xp = &x[(n * g.c_in + grp * cin_g + icg) * ip..][..ip];
                        for r0 in (oy0..oy1).step_by(rpf) {
                            for oy in r0..(r0 + rpf).min(oy1) {
                                let gr = &gyp[oy * g.ow + ox0..oy * g.ow + ox1];
                                let xr = &xp[(oy * sy + ky * dy - py) * g.w + col..];
                                if sx == 1 {
                                    acc.mac_row(gr, xr);
                                } else {
                                    for (gv, xv) in gr.iter().zip(xr.iter().step_by(sx)) {
                                        acc.mac(gv.0, xv.0);
                                    }
                                }
                            }
                            acc.flush();
                        }
                    }
                    let gv = &mut gw[(oc * cin_g + icg) * taps + ky * g.kw + kx];
                    *gv = finish(gv.0, acc.total());
                }
            }
        }
    }
}
