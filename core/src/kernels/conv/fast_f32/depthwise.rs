//! Strided depthwise convolutions (one input and one output channel per group) on small
//! planes: forward, backward-input, backward-weight.
//!
//! - The tile engines of `conv.rs`/`strip.rs` work on 8-wide rows of `OB` output
//!   channels; a depthwise layer has one output channel per group and, strided, rows of
//!   only a few outputs (W2: 7 and 4), so most of their lanes and set-up are wasted.
//! - Here each plane is copied once, zero-padded, into a stack buffer with slack after
//!   it, so the inner loops have no border branches: forward and backward-weight work on
//!   8 outputs of a row at a time in register arrays, the column stride a constant.
//! - Only strided shapes (stride-1 depthwise is the strip kernels' work) with a column
//!   stride of at most 3, at most [`MAX_TAPS`] taps and a padded plane that fits
//!   [`PAD_WORDS`]; the entry points answer `false` (nothing written) for anything else.

use super::conv::{load, store};
use crate::kernels::conv::ConvGeom;

/// Words of the stack buffer holding one zero-padded plane (16 KiB).
pub const PAD_WORDS: usize = 4096;
/// Kernel taps handled (5x5).
pub const MAX_TAPS: usize = 25;

/// Padded plane size `[rows, cols]` when the shape is one this module takes.
fn padded(g: &ConvGeom) -> Option<[usize; 2]> {
    let depthwise = g.groups == g.c_in && g.c_out == g.c_in;
    let strided = g.stride != [1, 1] && g.stride[1] <= 3;
    let size = [g.h + 2 * g.pad[0], g.w + 2 * g.pad[1]];
    // Slack after the plane: the last 8-wide chunk of a row reads up to `8 * sx` words on.
    let fits = size[0]
        .checked_mul(size[1])
        .is_some_and(|s| s + 8 * g.stride[1] <= PAD_WORDS);
    let ok = depthwise && strided && fits && g.kh * g.kw <= MAX_TAPS;
    let nonempty = g.n > 0 && g.h > 0 && g.w > 0 && g.oh > 0 && g.ow > 0;
    let ok = ok && nonempty;
    ok.then_some(size)
}

/// Copies one `h x w` plane into `buf` (`rows x cols`), zero-padded.
fn fill(g: &ConvGeom, cols: usize, buf: &mut [f32], src: &[f32]) {
    buf.fill(0.0);
    for (r, s) in src.chunks_exact(g.w).enumerate() {
        buf[(r + g.pad[0]) * cols + g.pad[1]..][..g.w].copy_from_slice(s);
    }
}

/// `y = conv(x, w) + b` for a strided depthwise convolution; `false` for other shapes.
pub fn conv2d_forward(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) -> bool {
    match g.stride[1] {
        1 => forward::<1>(g, x, w, b, y),
        2 => forward::<2>(g, x, w, b, y),
        3 => forward::<3>(g, x, w, b, y),
        _ => false,
    }
}

/// [`conv2d_forward`] with column stride `SX`: each output row is computed 8 outputs at
/// a time in a register array, over every tap.
fn forward<const SX: usize>(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) -> bool {
    let Some([rows, cols]) = padded(g) else {
        return false;
    };
    let (ip, op, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let mut buf = [0.0f32; PAD_WORDS];
    for (k, (xp, yp)) in x.chunks_exact(ip).zip(y.chunks_exact_mut(op)).enumerate() {
        let c = k % g.c_in;
        fill(g, cols, &mut buf[..rows * cols], xp);
        let wk = &w[c * taps..][..taps];
        let bias = b.map_or(0.0, |b| b[c]);
        for (oy, yr) in yp.chunks_exact_mut(g.ow).enumerate() {
            for (j, yc) in yr.chunks_mut(8).enumerate() {
                let mut acc = [bias; 8];
                for ky in 0..g.kh {
                    let r = (oy * g.stride[0] + ky * g.dil[0]) * cols + j * 8 * SX;
                    for kx in 0..g.kw {
                        let wv = wk[ky * g.kw + kx];
                        let s = &buf[r + kx * g.dil[1]..][..8 * SX];
                        for l in 0..8 {
                            acc[l] += wv * s[l * SX];
                        }
                    }
                }
                store(yc, &acc);
            }
        }
    }
    true
}

/// `gx += conv_transpose(gy, w)` for a strided depthwise convolution; `false` for other
/// shapes. The gradient is scattered into a zero-padded plane (8 outputs of a row at
/// a time, over every tap), whose interior is then added to `gx`.
pub fn conv2d_backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
    match g.stride[1] {
        1 => backward_input::<1>(g, gy, w, gx),
        2 => backward_input::<2>(g, gy, w, gx),
        3 => backward_input::<3>(g, gy, w, gx),
        _ => false,
    }
}

/// [`conv2d_backward_input`] with column stride `SX`.
fn backward_input<const SX: usize>(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
    let Some([rows, cols]) = padded(g) else {
        return false;
    };
    let (ip, op, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let mut buf = [0.0f32; PAD_WORDS];
    for (k, (gxp, gyp)) in gx.chunks_exact_mut(ip).zip(gy.chunks_exact(op)).enumerate() {
        let wk = &w[k % g.c_in * taps..][..taps];
        // The slack after the plane takes the scattered zeros of the last chunk's lanes.
        buf[..rows * cols + 8 * SX].fill(0.0);
        for (oy, gyr) in gyp.chunks_exact(g.ow).enumerate() {
            for (j, gc) in gyr.chunks(8).enumerate() {
                let mut gv = [0.0f32; 8];
                load(&mut gv, gc);
                for ky in 0..g.kh {
                    let r = (oy * g.stride[0] + ky * g.dil[0]) * cols + j * 8 * SX;
                    for kx in 0..g.kw {
                        let wv = wk[ky * g.kw + kx];
                        let d = &mut buf[r + kx * g.dil[1]..][..8 * SX];
                        for l in 0..8 {
                            d[l * SX] += wv * gv[l];
                        }
                    }
                }
            }
        }
        for (r, gxr) in gxp.chunks_exact_mut(g.w).enumerate() {
            let src = &buf[(r + g.pad[0]) * cols + g.pad[1]..][..g.w];
            for (d, &v) in gxr.iter_mut().zip(src) {
                *d += v;
            }
        }
    }
    true
}

/// `gw += correlate(gy, x)` for a strided depthwise convolution; `false` for other
/// shapes.
pub fn conv2d_backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    match g.stride[1] {
        1 => backward_weight::<1>(g, gy, x, gw),
        2 => backward_weight::<2>(g, gy, x, gw),
        3 => backward_weight::<3>(g, gy, x, gw),
        _ => false,
    }
}

/// [`conv2d_backward_weight`] with column stride `SX`: each tap keeps 8 lane-wise
/// partial sums over a channel's planes, summed once per channel.
fn backward_weight<const SX: usize>(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    let Some([rows, cols]) = padded(g) else {
        return false;
    };
    let (ip, op, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let mut buf = [0.0f32; PAD_WORDS];
    let mut lanes = [[0.0f32; 8]; MAX_TAPS];
    for (c, gwk) in gw.chunks_exact_mut(taps).enumerate().take(g.c_in) {
        lanes[..taps].iter_mut().for_each(|l| *l = [0.0; 8]);
        for n in 0..g.n {
            let plane = n * g.c_in + c;
            fill(g, cols, &mut buf[..rows * cols], &x[plane * ip..][..ip]);
            let gyp = &gy[plane * op..][..op];
            for (oy, gyr) in gyp.chunks_exact(g.ow).enumerate() {
                for (j, gc) in gyr.chunks(8).enumerate() {
                    let mut gv = [0.0f32; 8];
                    load(&mut gv, gc);
                    for ky in 0..g.kh {
                        let r = (oy * g.stride[0] + ky * g.dil[0]) * cols + j * 8 * SX;
                        for kx in 0..g.kw {
                            let acc = &mut lanes[ky * g.kw + kx];
                            let s = &buf[r + kx * g.dil[1]..][..8 * SX];
                            for l in 0..8 {
                                acc[l] += gv[l] * s[l * SX];
                            }
                        }
                    }
                }
            }
        }
        for (v, l) in gwk.iter_mut().zip(&lanes) {
            *v += l.iter().sum::<f32>();
        }
    }
    true
}
