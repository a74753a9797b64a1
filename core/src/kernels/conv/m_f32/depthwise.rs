//! Depthwise 3x3 convolutions (MobileNet's), stride and dilation 1, on tiles sized for
//! one channel.
//!
//! - Forward and backward-input (one input and one output channel per group): the
//!   band of a plane is copied zero-padded (`band.rs`), and `micro_dw::dw3x3_rows2`
//!   holds the 9 weights and 2 rows x 4 outputs in registers (4 windows of 6 inputs per
//!   72 multiply-adds). The forward pass adds in the generic kernel's order (equal
//!   results); backward-input is the correlation of the padded output gradient with
//!   the flipped kernel (results agree to rounding).
//!
//! Backward-weight (one output channel per group, any inputs per group): all 9 sums
//! of a kernel in registers.
//!
//! - The general tiles (`weight.rs`) hold 4 output channels x one kernel row; with one
//!   channel per group they would spend 3 of 4 multiply-adds on zeros. Here one run
//!   over a band's positions feeds all 9 taps (`micro::dots1_k3x3`): 4 gradient words
//!   and 3 windows of 6 inputs per 36 multiply-adds.
//! - The band of input planes is copied as in `weight.rs` (zero padding, rows of
//!   `w + pad` words where the padding is within the kernel's reach); the output
//!   gradient of the group's channel is copied with the same row pitch, zeros past
//!   `ow`, so one run covers the band.
//! - Sums cover a band before they are added to `gw`: results agree with the generic
//!   kernel to rounding.

use super::band::{copy_row, Band};
use super::micro::dots1_k3x3;
use super::micro_dw::dw3x3_rows2;
use super::{BUF_WORDS, GY_WORDS};
use crate::kernels::conv::ConvGeom;

/// The pass; `false`, with `gw` untouched, for a shape it does not cover (not a 3x3
/// kernel with one output channel per group, stride and dilation 1, or a row wider
/// than the buffers).
pub(crate) fn backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    let (cin, cout, op, ip) = (g.c_in / g.groups, g.c_out / g.groups, g.oh * g.ow, g.h * g.w);
    let shape = [g.kh, g.kw] == [3, 3] && g.stride == [1, 1] && g.dil == [1, 1];
    if !shape || cout != 1 || cin == 0 {
        return false;
    }
    let (hw, k, out) = ([g.h, g.w], [3, 3], [g.oh, g.ow]);
    let Some(band) = Band::new(hw, g.pad, g.stride, g.dil, k, out, BUF_WORDS - g.pad[1], 1) else {
        return false;
    };
    let band = band.shared_padding(2);
    let pitch = band.row;
    if pitch > GY_WORDS {
        return false;
    }
    let band = band.cap_rows(GY_WORDS / pitch);
    // Reads reach `pad` words past the last channel (`Band::shared_padding`).
    let nin = ((BUF_WORDS - g.pad[1]) / band.chan).min(cin);
    let mut buf = [0.0f32; BUF_WORDS];
    let mut gyb = [0.0f32; GY_WORDS];
    for n in 0..g.n {
        for grp in 0..g.groups {
            let gyp = &gy[(n * g.c_out + grp) * op..][..op];
            let mut oy0 = 0;
            while oy0 < g.oh {
                let oy1 = (oy0 + band.band_out).min(g.oh);
                // The gradient rows with the band's pitch, zeros past `ow`.
                for (r, row) in gyb[..(oy1 - oy0) * pitch].chunks_exact_mut(pitch).enumerate() {
                    let (data, pad) = row.split_at_mut(g.ow);
                    copy_row(data, &gyp[(oy0 + r) * g.ow..][..g.ow]);
                    pad.fill(0.0);
                }
                let len = (oy1 - oy0 - 1) * pitch + g.ow;
                let steps = len / 4;
                let mut c0 = 0;
                while c0 < cin {
                    let ni = nin.min(cin - c0);
                    band.fill(&mut buf, &x[(n * g.c_in + grp * cin + c0) * ip..], ni, oy0);
                    for i in 0..ni {
                        let xb = &buf[i * band.chan..];
                        let mut acc = [0.0f32; 9];
                        dots1_k3x3(&mut acc, &gyb, xb, pitch, steps);
                        for p in 4 * steps..len {
                            for (t, a) in acc.iter_mut().enumerate() {
                                *a += gyb[p] * xb[(t / 3) * pitch + p + t % 3];
                            }
                        }
                        let at = (grp * cin + c0 + i) * 9;
                        for (d, a) in gw[at..][..9].iter_mut().zip(acc) {
                            *d += a;
                        }
                    }
                    c0 += ni;
                }
                oy0 = oy1;
            }
        }
    }
    true
}

/// Whether forward and backward-input run here: 3x3 kernels, stride and dilation 1,
/// one input and one output channel per group.
fn depthwise_3x3(g: &ConvGeom) -> bool {
    let one = g.c_in == g.groups && g.c_out == g.groups;
    [g.kh, g.kw] == [3, 3] && g.stride == [1, 1] && g.dil == [1, 1] && one
}

/// The forward pass (same additions in the same order as the generic kernel); `false`,
/// with `y` untouched, for a shape it does not cover.
pub(crate) fn forward(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) -> bool {
    let dims = ([g.h, g.w], [g.oh, g.ow]);
    depthwise_3x3(g) && run(g, x, dims, g.pad, (w, false), Some(b), y)
}

/// The backward-input pass (the correlation of the output gradient, padded by
/// `2 - pad`, with the flipped kernel); `false`, with `gx` untouched, for a shape it
/// does not cover (also padding beyond 2).
pub(crate) fn backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
    let dims = ([g.oh, g.ow], [g.h, g.w]);
    let covered = depthwise_3x3(g) && g.pad[0] <= 2 && g.pad[1] <= 2;
    covered && run(g, gy, dims, [2 - g.pad[0], 2 - g.pad[1]], (w, true), None, gx)
}

/// `out (+)= correlate(src, w')` per channel, `w'` the 3x3 weights of the channel in
/// `w`, `flip`ped (taps in reverse order) or not; `bias = Some(b)` overwrites `out`
/// with `b + correlation`. Rows in pairs on
/// `dw3x3_rows2`; a row's last partial tile and a band's odd last row go through a
/// tile on the stack. `false`, touching nothing, when a band does not fit.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn run(
    g: &ConvGeom,
    src: &[f32],
    (sdim, odim): ([usize; 2], [usize; 2]),
    pad: [usize; 2],
    (w, flip): (&[f32], bool),
    bias: Option<Option<&[f32]>>,
    out: &mut [f32],
) -> bool {
    // Half the buffer: an odd last row reads one row past the band (into the other half).
    let Some(band) = Band::new(sdim, pad, [1, 1], [1, 1], [3, 3], odim, BUF_WORDS / 2, 4) else {
        return false;
    };
    let band = if band.band_out < odim[0] && band.band_out > 1 {
        band.cap_rows(band.band_out & !1)
    } else {
        band
    };
    let (sp, ow, pitch) = (sdim[0] * sdim[1], odim[1], band.row);
    let op = odim[0] * ow;
    let (full, rest) = (ow / 4, ow % 4);
    let mut buf = [0.0f32; BUF_WORDS];
    for n in 0..g.n {
        for c in 0..g.groups {
            let wk: [f32; 9] = core::array::from_fn(|t| w[c * 9 + if flip { 8 - t } else { t }]);
            let init = bias.map(|b| [b.map_or(0.0, |b| b[c]); 8]);
            let at = n * g.groups + c;
            let (plane, outp) = (&src[at * sp..][..sp], &mut out[at * op..][..op]);
            let mut oy0 = 0;
            while oy0 < odim[0] {
                let oy1 = (oy0 + band.band_out).min(odim[0]);
                band.fill(&mut buf, plane, 1, oy0);
                for oy in (oy0..oy1).step_by(2) {
                    let xb = &buf[(oy - oy0) * pitch..];
                    let rows = (oy1 - oy).min(2);
                    if rows == 2 && ow >= 4 {
                        // Whole tiles straight into `out`, then a last partial tile as the
                        // whole tile ending at the row's end: its columns that the tiles
                        // before wrote are written again with the same values (when
                        // adding, from the values saved before).
                        let last = oy * ow + ow - 4;
                        let saved: Option<[f32; 8]> = (init.is_none() && rest > 0)
                            .then(|| core::array::from_fn(|i| outp[last + (i / 4) * ow + i % 4]));
                        dw3x3_rows2(&mut outp[oy * ow..], ow, init.as_ref(), &wk, xb, pitch, full);
                        if rest > 0 {
                            let start = init.or(saved);
                            dw3x3_rows2(
                                &mut outp[last..],
                                ow,
                                start.as_ref(),
                                &wk,
                                &xb[ow - 4..],
                                pitch,
                                1,
                            );
                        }
                        continue;
                    }
                    // A single row, or rows narrower than a tile: through a tile on the
                    // stack.
                    for t in 0..ow.div_ceil(4) {
                        let (cols, at) = ((ow - 4 * t).min(4), oy * ow + 4 * t);
                        let mut tile = [0.0f32; 8];
                        let valid = |i: usize| i / 4 < rows && i % 4 < cols;
                        if init.is_none() {
                            for (i, v) in tile.iter_mut().enumerate().filter(|(i, _)| valid(*i)) {
                                *v = outp[at + (i / 4) * ow + i % 4];
                            }
                        }
                        dw3x3_rows2(&mut tile, 4, init.as_ref(), &wk, &xb[4 * t..], pitch, 1);
                        for (i, &v) in tile.iter().enumerate().filter(|(i, _)| valid(*i)) {
                            outp[at + (i / 4) * ow + i % 4] = v;
                        }
                    }
                }
                oy0 = oy1;
            }
        }
    }
    true
}
