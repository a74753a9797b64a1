//! The weight gradient (`gw += correlate(gy, x)`) in the two-multiply form, column
//! stride 1, with the output gradient split once instead of once per tap.
//!
//! - Each weight's sum runs over every output pixel, so the generic loop
//!   (`backward_weight_with`) splits each `gy` value `kh * kw * c_in / groups` times.
//!   Here `gy` is split into a stack buffer of `(gy >> 8, gy & 0xFF)` pairs and a
//!   product costs two loads, two multiplies and two adds: `x * gy = x * gh * 2^8 +
//!   x * gl`, the same two `i32` sums as [`Split8`](super::dot::Split8) with `gy`
//!   split, under the same flush bound ([`Plan`](super::dot::Plan)).
//! - The rows of one chunk are summed in one call ([`rows_w8`]), so the call and loop
//!   setup are paid per plane, not per (short) row.
//! - Three buffer layouts ([`Layout`]), from the most to the least compact plane:
//!   - `Masked`: per distinct column window of the taps, a copy of the output
//!     channel's `gy` planes at the `x` row stride with the columns outside the window
//!     zeroed; every tap is then one contiguous dot product over all its rows (the
//!     zeros add nothing and stand for the row wrap-around). W1's 7x7 third layer.
//!   - `Whole`: one copy of the planes at the `x` row stride (the gap zeroed): the taps
//!     whose every column is valid are contiguous, the others go row by row.
//!   - `Chunked`: planes larger than the buffer are split a chunk of rows at a time,
//!     once for a group of up to [`TAPS`] taps whose `i64` totals sit on the stack
//!     (with one input channel, W1's first layer, every tap of the channel).

use super::finish;
use crate::fixed::Q16;
use crate::kernels::conv::ConvGeom;

/// Split `gy` values the stack buffer holds (256 pairs, 2 KiB): a batch-1 `gy` plane up
/// to 16x16, or chunks of rows up to 256 wide.
pub(super) const GBUF: usize = 256;

/// Taps per group of the chunked layout (their `i64` totals: 288 bytes of stack).
const TAPS: usize = 36;

/// Distinct column windows the masked layout holds.
const MASKS: usize = 4;

/// How [`backward_weight_w8`] lays out the split `gy` (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Layout {
    /// One masked copy per distinct column window (this many), all taps contiguous.
    Masked(usize),
    /// One copy of all planes per output channel.
    Whole,
    /// Row chunks, split once per group of taps.
    Chunked,
}

/// The output columns `ox0..ox1` whose input column `ox + kx * dx - px` is in `0..w`
/// (column stride 1).
fn cols_of(g: &ConvGeom, kx: usize) -> (usize, usize) {
    let (dx, px) = (g.dil[1], g.pad[1]);
    let ox0 = px.saturating_sub(kx * dx).min(g.ow);
    let ox1 = (g.w + px).saturating_sub(kx * dx).clamp(ox0, g.ow);
    (ox0, ox1)
}

/// The distinct column windows of the taps: `wins[..len]`, and tap column `kx`'s
/// index among them, `of[kx]`.
struct Windows {
    wins: [(usize, usize); MASKS],
    of: [usize; 16],
    len: usize,
}

/// The [`Windows`] of `g`, or `None` when there are more than [`MASKS`] (or more
/// than 16 tap columns).
fn windows(g: &ConvGeom) -> Option<Windows> {
    let mut w = Windows {
        wins: [(0, 0); MASKS],
        of: [0; 16],
        len: 0,
    };
    if g.kw > w.of.len() {
        return None;
    }
    for (kx, at) in w.of.iter_mut().enumerate().take(g.kw) {
        let c = cols_of(g, kx);
        *at = match w.wins[..w.len].iter().position(|&v| v == c) {
            Some(i) => i,
            None if w.len < MASKS => {
                w.wins[w.len] = c;
                w.len += 1;
                w.len - 1
            }
            None => return None,
        };
    }
    Some(w)
}

/// The layout for geometry `g` (column stride 1, `g.ow <= GBUF`).
pub(super) fn layout(g: &ConvGeom) -> Layout {
    let xs = g.stride[0] * g.w;
    let st = if g.ow <= xs { xs } else { g.ow };
    let planes = g.n * g.oh * st;
    match windows(g) {
        Some(w) if st == xs && w.len * planes <= GBUF => Layout::Masked(w.len),
        _ if planes <= GBUF => Layout::Whole,
        _ => Layout::Chunked,
    }
}

/// `gw += correlate(gy, x)` with `gy` split, column stride 1, `g.ow <= GBUF`; the sums
/// are flushed into an `i64` every `rows_per_flush` output rows.
pub(super) fn backward_weight_w8(g: &ConvGeom, gy: &[Q16], x: &[Q16], gw: &mut [Q16], rows_per_flush: usize) {
    if g.n * g.oh * g.ow == 0 {
        return; // no products: every weight keeps its value
    }
    match layout(g) {
        Layout::Chunked => chunked(g, gy, x, gw, rows_per_flush),
        lay => whole(g, gy, x, gw, rows_per_flush, lay),
    }
}

/// The `Masked` and `Whole` layouts: the planes of an output channel split once, rows
/// at the `x` row stride when they fit in it (the gap zeroed).
fn whole(g: &ConvGeom, gy: &[Q16], x: &[Q16], gw: &mut [Q16], rows_per_flush: usize, lay: Layout) {
    let (ip, op, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let ([sy, _], [dy, dx], [py, px]) = (g.stride, g.dil, g.pad);
    let chunk = rows_per_flush.max(1);
    let xs = sy * g.w;
    let st = if g.ow <= xs { xs } else { g.ow };
    let size = g.n * g.oh * st;
    // Masked: copy `m` keeps the columns of window `wins[m]`; otherwise one copy, all.
    let (wins, of, copies) = match (lay, windows(g)) {
        (Layout::Masked(_), Some(w)) => (w.wins, w.of, w.len),
        _ => ([(0, g.ow); MASKS], [0; 16], 1),
    };
    let masked = matches!(lay, Layout::Masked(_));
    let mut buf = [(0i32, 0i32); GBUF];
    for oc in 0..g.c_out {
        let grp = oc / cout_g;
        for (copy, &(c0, c1)) in buf.chunks_exact_mut(size).zip(&wins[..copies]) {
            let planes = gy.chunks_exact(op).skip(oc).step_by(g.c_out).take(g.n);
            for (dst, gyp) in copy.chunks_exact_mut(g.oh * st).zip(planes) {
                for (d, r) in dst.chunks_exact_mut(st).zip(gyp.chunks_exact(g.ow)) {
                    d.fill((0, 0));
                    split_into(&mut d[c0..c1], &r[c0..c1]);
                }
            }
        }
        for ky in 0..g.kh {
            let (oy0, oy1) = crate::kernels::valid_range(g.oh, g.h, sy, py, ky * dy);
            for icg in 0..cin_g {
                for kx in 0..g.kw {
                    let (ox0, ox1) = cols_of(g, kx);
                    if oy0 >= oy1 || ox0 >= ox1 {
                        continue;
                    }
                    let cols = ox1 - ox0;
                    let col = ox0 + kx * dx - px;
                    let copy = &buf[if masked { of[kx] * size } else { 0 }..][..size];
                    let contiguous = masked || (st == xs && cols == g.ow);
                    let mut total = 0i64;
                    for n in 0..g.n {
                        let xp = &x[(n * g.c_in + grp * cin_g + icg) * ip..][..ip];
                        for r0 in (oy0..oy1).step_by(chunk) {
                            let rows = chunk.min(oy1 - r0);
                            let xr = (&xp[(r0 * sy + ky * dy - py) * g.w + col..], xs);
                            let gs = (&copy[n * g.oh * st + r0 * st + ox0..], st);
                            let (m, l) = if contiguous {
                                rows_w8(gs, xr, 1, (rows - 1) * st + cols)
                            } else {
                                rows_w8(gs, xr, rows, cols)
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

/// The `Chunked` layout: for each output channel and group of up to [`TAPS`] taps
/// (input channel, row, column), each chunk of `gy` rows is split once and summed
/// into every tap of the group.
fn chunked(g: &ConvGeom, gy: &[Q16], x: &[Q16], gw: &mut [Q16], rows_per_flush: usize) {
    let (ip, op, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let ([sy, _], [dy, dx], [py, px]) = (g.stride, g.dil, g.pad);
    let xs = sy * g.w;
    let st = if g.ow <= xs { xs } else { g.ow };
    // Rows per chunk: within the flush bound (one call per tap and chunk) and the buffer.
    let chunk = rows_per_flush.min(GBUF / st.max(1)).max(1);
    let mut buf = [(0i32, 0i32); GBUF];
    let mut totals = [0i64; TAPS];
    for oc in 0..g.c_out {
        let grp = oc / cout_g;
        for t0 in (0..cin_g * taps).step_by(TAPS) {
            let group = TAPS.min(cin_g * taps - t0);
            let totals = &mut totals[..group];
            totals.fill(0);
            for n in 0..g.n {
                let gyp = &gy[(n * g.c_out + oc) * op..][..op];
                for r0 in (0..g.oh).step_by(chunk) {
                    let r1 = (r0 + chunk).min(g.oh);
                    let part = &mut buf[..(r1 - r0) * st];
                    for (d, r) in part
                        .chunks_exact_mut(st)
                        .zip(gyp[r0 * g.ow..r1 * g.ow].chunks_exact(g.ow))
                    {
                        let (row, gap) = d.split_at_mut(g.ow);
                        split_into(row, r);
                        gap.fill((0, 0));
                    }
                    // Tap t0 + i is (icg, ky, kx), counted (no division on the M0).
                    let (mut icg, mut ky, mut kx) = (t0 / taps, t0 % taps / g.kw, t0 % g.kw);
                    for total in totals.iter_mut() {
                        let (icg, ky, kx) = next_tap(&mut icg, &mut ky, &mut kx, g);
                        let (oy0, oy1) = crate::kernels::valid_range(g.oh, g.h, sy, py, ky * dy);
                        let (a, b) = (oy0.max(r0), oy1.min(r1));
                        let (ox0, ox1) = cols_of(g, kx);
                        if a >= b || ox0 >= ox1 {
                            continue;
                        }
                        let (rows, cols) = (b - a, ox1 - ox0);
                        let xp = &x[(n * g.c_in + grp * cin_g + icg) * ip..][..ip];
                        let xr = (&xp[(a * sy + ky * dy - py) * g.w + ox0 + kx * dx - px..], xs);
                        let gs = (&part[(a - r0) * st + ox0..], st);
                        let (m, l) = if st == xs && cols == g.ow {
                            rows_w8(gs, xr, 1, (rows - 1) * st + cols)
                        } else {
                            rows_w8(gs, xr, rows, cols)
                        };
                        *total += ((m as i64) << 8) + l as i64;
                    }
                }
            }
            let gws = &mut gw[oc * cin_g * taps + t0..][..group];
            for (gv, &total) in gws.iter_mut().zip(totals.iter()) {
                *gv = finish(gv.0, total);
            }
        }
    }
}

/// The tap `(icg, ky, kx)`, and steps the counters to the next one (row-major).
#[inline(always)]
fn next_tap(icg: &mut usize, ky: &mut usize, kx: &mut usize, g: &ConvGeom) -> (usize, usize, usize) {
    let tap = (*icg, *ky, *kx);
    *kx += 1;
    if *kx == g.kw {
        *kx = 0;
        *ky += 1;
        if *ky == g.kh {
            *ky = 0;
            *icg += 1;
        }
    }
    tap
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::test_shapes::geom;

    /// W1's 3x3 convolution (padding 1) on a `side x side` input, batch `n`.
    fn w1(n: usize, c_in: usize, side: usize) -> ConvGeom {
        geom(n, c_in, 2 * c_in, [side, side], [3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap()
    }

    #[test]
    fn w1_layers_take_the_intended_layouts() {
        // 7x7 (third layer): three masked copies (147 pairs), every tap contiguous.
        assert_eq!(layout(&w1(1, 16, 7)), Layout::Masked(3));
        // 14x14 (second layer): one copy; 28x28 (first) and batch 32: row chunks.
        assert_eq!(layout(&w1(1, 8, 14)), Layout::Whole);
        assert_eq!(layout(&w1(1, 1, 28)), Layout::Chunked);
        assert_eq!(layout(&w1(32, 16, 7)), Layout::Chunked);
        // No padding: every tap has all columns, one window, one copy.
        let mut g = w1(1, 8, 10);
        (g.pad, g.oh, g.ow) = ([0, 0], 8, 8);
        assert_eq!(layout(&g), Layout::Masked(1));
    }
}
