//! Backward-weight of the M-profile `f32` convolution: `gw += correlate(gy, x)`.
//!
//! - Stride 1 only (strided convolutions use the generic kernel). The input planes are
//!   copied in bands, zero-padded, as in the forward pass (`Band`, `band.rs`), in rows
//!   of `w + pad` words where the padding is within the kernel's reach (a row's right
//!   padding is the next row's left padding); the output gradient of `OB` channels is
//!   copied for the band interleaved, `[position][o]`, with the input's row pitch and
//!   zeros in the padding columns, so that one run of positions covers the whole band
//!   with one pointer for the gradients and one for the inputs (the padding columns
//!   cost `(pitch - ow) / pitch` of the multiply-adds, 1/8 at 7x7 (2/9 with the full
//!   padded pitch), but save all per-row work).
//! - A kernel row whose input row is padding for the first or last output rows (the
//!   top and bottom of the plane) runs over the other rows only: those add zeros.
//! - A register tile is `OB` output channels x one tap group (`KW` taps of a kernel row
//!   that read neighbouring words, or one tap) of one input channel: `OB * KW` sums.
//!   Along the positions it takes `PX` per step: `OB * PX` gradient loads
//!   and `PX` new input loads (the window's other `KW - 1` words are carried over in
//!   registers from the step before) feed `OB * PX * KW` multiply-adds. A last block of
//!   fewer than `OB` channels runs the same tiles on zero gradients for the missing
//!   ones (one-channel tiles cost 1 KB of flash that `finetune` does not have).
//! - The sums cover a band before they are added to `gw`, so their order differs
//!   from the generic kernel's: results agree to rounding.

use super::band::Band;
use super::tile::unroll;
use super::{depthwise, pointwise};
use super::{BUF_WORDS, GY_WORDS, OB};
use crate::kernels::conv::{self as generic, ConvGeom};

/// Gradient words per step of every dot tile (`OB * PX`): the loops walk the gradients
/// as `[f32; STEP]` arrays, without index checks.
const STEP: usize = 16;

/// Defines `fn $name(gy, xr, gw, ostride, valid)`: `gw[o * ostride + kx] += sum over p
/// of gy[p * OB + o] * xr[p + kx]` for the `gy.len() / OB` positions of `gy` and the
/// first `valid` channels `o` (the others are zero padding of a last, partial block).
macro_rules! dot_tile {
    ($name:ident, $ob:literal, $kw:literal, $px:literal,
     os = [$($o:literal),*], ps = [$($p:literal),*], kxs = [$($kx:literal),*],
     carry = [$($c:literal),*]) => {
        #[inline(never)]
        fn $name(gy: &[f32], xr: &[f32], gw: &mut [f32], ostride: usize, valid: usize) {
            const WIN: usize = $px + $kw - 1;
            const _: () = assert!($ob * $px == STEP);
            let n = gy.len() / $ob;
            let mut a = [[0.0f32; $kw]; $ob];
            let xr = &xr[..n + $kw - 1];
            let mut xw = [0.0f32; WIN];
            unroll!([$($c),*], C => { xw[C] = xr[C]; });
            let steps = gy.chunks_exact(STEP);
            let mut gs = steps.remainder();
            let (mut xs, mut full) = (&xr[$kw - 1..], 0);
            for gq in steps {
                // Fixed-size arrays: their lengths are types, no index below is checked.
                let (Ok(gq), Some((xn, rest))) =
                    (<&[f32; STEP]>::try_from(gq), xs.split_first_chunk::<$px>())
                else {
                    break;
                };
                (xs, full) = (rest, full + $px);
                unroll!([$($p),*], P => { xw[$kw - 1 + P] = xn[P]; });
                unroll!([$($p),*], P => {
                    unroll!([$($o),*], O => {
                        let gp = gq[P * $ob + O];
                        unroll!([$($kx),*], KX => { a[O][KX] += gp * xw[P + KX]; });
                    });
                });
                unroll!([$($c),*], C => { xw[C] = xw[C + $px]; });
            }
            while let Some((gp, rest)) = gs.split_first_chunk::<$ob>() {
                let xt = &xr[full..][..$kw];
                (gs, full) = (rest, full + 1);
                unroll!([$($o),*], O => {
                    unroll!([$($kx),*], KX => { a[O][KX] += gp[O] * xt[KX]; });
                });
            }
            unroll!([$($o),*], O => {
                if O < valid {
                    let r = &mut gw[O * ostride..][..$kw];
                    unroll!([$($kx),*], KX => { r[KX] += a[O][KX]; });
                }
            });
        }
    };
}

dot_tile!(
    dots_4_k3,
    4,
    3,
    4,
    os = [0, 1, 2, 3],
    ps = [0, 1, 2, 3],
    kxs = [0, 1, 2],
    carry = [0, 1]
);
dot_tile!(
    dots_4_k1,
    4,
    1,
    4,
    os = [0, 1, 2, 3],
    ps = [0, 1, 2, 3],
    kxs = [0],
    carry = []
);
/// `gw += correlate(gy, x)`, as [`generic::conv2d_backward_weight`].
pub fn conv2d_backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) {
    if !backward_weight_tiled(g, gy, x, gw) {
        generic::conv2d_backward_weight(g, gy, x, gw);
    }
}

/// The tiled backward-weight pass; `false`, with `gw` untouched, for a shape it does
/// not cover (stride above 1, a row wider than the buffers).
pub(crate) fn backward_weight_tiled(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    if pointwise::backward_weight(g, gy, x, gw) || depthwise::backward_weight(g, gy, x, gw) {
        return true;
    }
    let (cin, cout, op, ip) = (g.c_in / g.groups, g.c_out / g.groups, g.oh * g.ow, g.h * g.w);
    let taps = g.kh * g.kw;
    let (hw, k, out) = ([g.h, g.w], [g.kh, g.kw], [g.oh, g.ow]);
    let band = Band::new(hw, g.pad, g.stride, g.dil, k, out, BUF_WORDS - g.pad[1], 1);
    let stride1 = g.stride == [1, 1];
    let Some(band) = band.filter(|b| stride1 && taps > 0 && OB * b.row <= GY_WORDS) else {
        return false;
    };
    // A band's gradient rows are laid out with the input's row pitch, zeros beyond
    // `ow`: then one run of positions covers the whole band, without per-row work.
    let band = band.shared_padding((g.kw - 1) * g.dil[1]);
    let pitch = band.row;
    let band = band.cap_rows(GY_WORDS / (OB * pitch));
    let kw = if g.kw == 3 && g.dil[1] == 1 { 3 } else { 1 };
    // Reads reach `pad` words past the last channel (`Band::shared_padding`).
    let nin = ((BUF_WORDS - g.pad[1]) / band.chan).min(cin);
    let mut buf = [0.0f32; BUF_WORDS];
    let mut gyb = [0.0f32; GY_WORDS];
    for n in 0..g.n {
        for grp in 0..g.groups {
            let mut oy0 = 0;
            while oy0 < g.oh {
                let oy1 = (oy0 + band.band_out).min(g.oh);
                let mut c0 = 0;
                while c0 < cin {
                    let ni = nin.min(cin - c0);
                    let first = (n * g.c_in + grp * cin + c0) * ip;
                    band.fill(&mut buf, &x[first..], ni, oy0);
                    let mut o0 = 0;
                    while o0 < cout {
                        // A last block of fewer channels runs the same tiles on
                        // zero gradients for the missing ones (less code than
                        // one-channel tiles; W1's channel counts are multiples of 4).
                        let valid = (cout - o0).min(OB);
                        let oc = grp * cout + o0;
                        let gyb = &mut gyb[..(oy1 - oy0) * pitch * OB];
                        let gy_at = (n * g.c_out + oc) * op + oy0 * g.ow;
                        fill_gradients(gyb, &gy[gy_at..], op, g.ow, pitch, valid);
                        for ky in 0..g.kh {
                            // Output rows whose input row `oy + ky * dil` is not padding:
                            // the others add zeros, and are skipped.
                            let shift = ky * g.dil[0];
                            let lo = g.pad[0].saturating_sub(shift).max(oy0);
                            let hi = (g.pad[0] + g.h).saturating_sub(shift).min(oy1);
                            if lo >= hi {
                                continue;
                            }
                            let (p0, p1) = ((lo - oy0) * pitch, (hi - 1 - oy0) * pitch + g.ow);
                            let gq = &gyb[p0 * OB..p1 * OB];
                            for i in 0..ni {
                                for kx in (0..g.kw).step_by(kw) {
                                    let off = i * band.chan + band.tap_offset(ky, kx, g.dil) + p0;
                                    let xr = &buf[off..];
                                    let at = ((oc * cin + c0 + i) * taps) + ky * g.kw + kx;
                                    let gw = &mut gw[at..];
                                    let ostride = cin * taps;
                                    if kw == 3 {
                                        dots_4_k3(gq, xr, gw, ostride, valid);
                                    } else {
                                        dots_4_k1(gq, xr, gw, ostride, valid);
                                    }
                                }
                            }
                        }
                        o0 += valid;
                    }
                    c0 += ni;
                }
                oy0 = oy1;
            }
        }
    }
    true
}

/// Copies the gradient planes of `valid` (1..=`OB`) channels (`plane` words apart,
/// from `gy[0..]`) into `gyb` interleaved, `gyb[(r * pitch + ox) * OB + o]`, with zeros
/// for `ox >= ow` and for `o >= valid`. Not inlined: in the driver its loop ran out of
/// registers (13 instructions per 4 words, 9 on its own).
#[inline(never)]
fn fill_gradients(gyb: &mut [f32], gy: &[f32], plane: usize, ow: usize, pitch: usize, valid: usize) {
    for (r, dst) in gyb.chunks_exact_mut(pitch * OB).enumerate() {
        let (data, pad) = dst.split_at_mut(ow * OB);
        if valid == OB {
            let src = |o: usize| &gy[o * plane + r * ow..][..ow];
            let (s0, s1, s2, s3) = (src(0), src(1), src(2), src(3));
            // Zipped iterators: no index is checked in the loop.
            let cells = data.chunks_exact_mut(OB);
            for ((((cell, &a), &b), &c), &d) in cells.zip(s0).zip(s1).zip(s2).zip(s3) {
                if let [w0, w1, w2, w3] = cell {
                    (*w0, *w1, *w2, *w3) = (a, b, c, d);
                }
            }
        } else {
            for (ox, cell) in data.chunks_exact_mut(OB).enumerate() {
                for (o, v) in cell.iter_mut().enumerate() {
                    *v = if o < valid {
                        gy[o * plane + r * ow + ox]
                    } else {
                        0.0
                    };
                }
            }
        }
        pad.fill(0.0);
    }
}
