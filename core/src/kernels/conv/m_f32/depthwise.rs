//! Backward-weight of 3x3 convolutions with one output channel per group (depthwise,
//! MobileNet's), stride and dilation 1: all 9 sums of a kernel in registers.
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
