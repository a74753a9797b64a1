//! The three passes of `dw8.rs`, written once over an 8-lane vector type and
//! instantiated twice: portable (`[f32; 8]` arrays) and, on x86_64, with AVX2 + FMA.
//!
//! The invoking module provides `V` (8 lanes), `load`, `store`, `splat` and `fma`; the
//! macro's optional attributes go on every function (the AVX2 instance passes
//! `#[target_feature(enable = "avx2,fma")]`).

/// Defines `forward`, `backward_input` and `backward_weight` over the invoking module's
/// `V`, `load`, `store`, `splat` and `fma`.
macro_rules! dw8_kernels {
    ($(#[$attr:meta])*) => {
        use super::{deinterleave_row, interleave, interleave_row, weight_lanes, Dw, BUF_WORDS, ROW_WORDS};

        /// The 9 per-lane weight vectors of channels `c0..c0 + nl` (flipped for the
        /// transposed convolution).
        $(#[$attr])*
        #[inline]
        fn weights(w: &[f32], c0: usize, nl: usize, flip: bool) -> [V; 9] {
            let lanes = weight_lanes(w, c0, nl, flip);
            let mut wv = [splat(0.0); 9];
            for (v, l) in wv.iter_mut().zip(&lanes) {
                *v = load(l);
            }
            wv
        }

        /// `P` neighbouring outputs of one row: `init + sum_t wv[t] * buf[at + tap]`,
        /// output `p` reading from `at + p * step`; stored to `row[p * 8..]`.
        $(#[$attr])*
        #[inline]
        fn tile<const P: usize>(buf: &[f32], at: usize, step: usize, cols8: usize, wv: &[V; 9], init: V, row: &mut [f32]) {
            let mut acc = [init; P];
            for ky in 0..3 {
                for kx in 0..3 {
                    let wt = wv[ky * 3 + kx];
                    let r = at + ky * cols8 + kx * 8;
                    for (p, a) in acc.iter_mut().enumerate() {
                        *a = fma(wt, load(&buf[r + p * step..]), *a);
                    }
                }
            }
            for (p, a) in acc.iter().enumerate() {
                store(*a, &mut row[p * 8..]);
            }
        }

        /// `out[l][oy][ox] (+)= init + sum_t wv[t] * buf[oy*sy + ky][ox*sx + kx][l]` over
        /// `d.out` planes (`out` starts at the block's first plane).
        $(#[$attr])*
        fn correlate(d: &Dw, buf: &[f32], wv: &[V; 9], init: V, out: &mut [f32], nl: usize, add: bool) {
            let mut row = [0.0f32; ROW_WORDS];
            let [oh, ow] = d.out;
            let (cols8, step) = (d.cols * 8, d.s[1] * 8);
            for oy in 0..oh {
                let base = oy * d.s[0] * cols8;
                let mut ox = 0;
                while ox + 4 <= ow {
                    tile::<4>(buf, base + ox * step, step, cols8, wv, init, &mut row[ox * 8..]);
                    ox += 4;
                }
                while ox < ow {
                    tile::<1>(buf, base + ox * step, step, cols8, wv, init, &mut row[ox * 8..]);
                    ox += 1;
                }
                deinterleave_row(&row, out, oy * ow, oh * ow, ow, nl, add);
            }
        }

        /// `y = conv(x, w) + b`, 8 channels of one sample at a time.
        $(#[$attr])*
        pub(in super::super) fn forward(d: &Dw, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) {
            let mut buf = [0.0f32; BUF_WORDS];
            let (ip, op) = (d.src[0] * d.src[1], d.out[0] * d.out[1]);
            for n in 0..d.n {
                for c0 in (0..d.c).step_by(8) {
                    let nl = (d.c - c0).min(8);
                    let first = n * d.c + c0;
                    interleave(d, &mut buf, &x[first * ip..], nl);
                    let wv = weights(w, c0, nl, false);
                    let mut bl = [0.0f32; 8];
                    if let Some(b) = b {
                        bl[..nl].copy_from_slice(&b[c0..c0 + nl]);
                    }
                    correlate(d, &buf, &wv, load(&bl), &mut y[first * op..], nl, false);
                }
            }
        }

        /// `gx += conv_transpose(gy, w)`: stride 1 as a correlation of the padded `gy`
        /// with the flipped kernel, other strides by scattering into a padded plane.
        $(#[$attr])*
        pub(in super::super) fn backward_input(d: &Dw, gy: &[f32], w: &[f32], gx: &mut [f32]) {
            let mut buf = [0.0f32; BUF_WORDS];
            let mut row = [0.0f32; ROW_WORDS];
            for n in 0..d.n {
                for c0 in (0..d.c).step_by(8) {
                    let nl = (d.c - c0).min(8);
                    let first = n * d.c + c0;
                    if d.gather {
                        let (gp, xp) = (d.src[0] * d.src[1], d.out[0] * d.out[1]);
                        interleave(d, &mut buf, &gy[first * gp..], nl);
                        let wv = weights(w, c0, nl, true);
                        correlate(d, &buf, &wv, splat(0.0), &mut gx[first * xp..], nl, true);
                        continue;
                    }
                    let (xp, gp) = (d.src[0] * d.src[1], d.out[0] * d.out[1]);
                    let wv = weights(w, c0, nl, false);
                    let cols8 = d.cols * 8;
                    buf[..d.rows * cols8].fill(0.0);
                    let gyb = &gy[first * gp..];
                    for oy in 0..d.out[0] {
                        interleave_row(gyb, oy * d.out[1], gp, d.out[1], nl, &mut row);
                        for ox in 0..d.out[1] {
                            let g = load(&row[ox * 8..]);
                            let at = oy * d.s[0] * cols8 + ox * d.s[1] * 8;
                            for ky in 0..3 {
                                for kx in 0..3 {
                                    let p = &mut buf[at + ky * cols8 + kx * 8..][..8];
                                    store(fma(wv[ky * 3 + kx], g, load(p)), p);
                                }
                            }
                        }
                    }
                    let gxb = &mut gx[first * xp..];
                    for r in 0..d.src[0] {
                        let at = (r + d.pad[0]) * cols8 + d.pad[1] * 8;
                        deinterleave_row(&buf[at..], gxb, r * d.src[1], xp, d.src[1], nl, true);
                    }
                }
            }
        }

        /// `gw += correlate(gy, x)`: 9 per-lane sums for 8 channels, over every pixel of
        /// every sample, in registers.
        $(#[$attr])*
        pub(in super::super) fn backward_weight(d: &Dw, gy: &[f32], x: &[f32], gw: &mut [f32]) {
            let mut buf = [0.0f32; BUF_WORDS];
            let mut row = [0.0f32; ROW_WORDS];
            let (ip, op) = (d.src[0] * d.src[1], d.out[0] * d.out[1]);
            let cols8 = d.cols * 8;
            let mut offs = [0usize; 9];
            for (t, o) in offs.iter_mut().enumerate() {
                *o = (t / 3) * cols8 + (t % 3) * 8;
            }
            for c0 in (0..d.c).step_by(8) {
                let nl = (d.c - c0).min(8);
                let mut acc = [splat(0.0); 9];
                for n in 0..d.n {
                    let first = n * d.c + c0;
                    interleave(d, &mut buf, &x[first * ip..], nl);
                    let gyb = &gy[first * op..];
                    for oy in 0..d.out[0] {
                        interleave_row(gyb, oy * d.out[1], op, d.out[1], nl, &mut row);
                        for ox in 0..d.out[1] {
                            let g = load(&row[ox * 8..]);
                            let at = oy * d.s[0] * cols8 + ox * d.s[1] * 8;
                            let src = &buf[at..at + 2 * cols8 + 24];
                            for (a, &o) in acc.iter_mut().zip(&offs) {
                                *a = fma(g, load(&src[o..]), *a);
                            }
                        }
                    }
                }
                let mut sums = [[0.0f32; 8]; 9];
                for (s, a) in sums.iter_mut().zip(&acc) {
                    store(*a, s);
                }
                for l in 0..nl {
                    for (t, s) in sums.iter().enumerate() {
                        gw[(c0 + l) * 9 + t] += s[l];
                    }
                }
            }
        }
    };
}
pub(super) use dw8_kernels;
