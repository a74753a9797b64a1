//! Forward and backward-input of the M-profile `f32` convolution, on one driver.
//!
//! - The driver computes `out (+)= correlate(src, w')` per sample and group: it walks
//!   the output in bands of rows (`Band`, `band.rs`), copies a band of a few input planes into
//!   a stack buffer, packs the weights of `OB` output channels into a second one, and
//!   runs the register tiles of `tile.rs` over the band.
//! - Forward: the correlation of `x` with `w`; the first pass over the input channels
//!   overwrites the outputs with bias + sum, later passes add to them.
//! - Backward-input (stride 1): a transposed convolution is a correlation of the output
//!   gradient, padded by `(k - 1) * dil - pad`, with the flipped kernel whose channel
//!   axes are swapped; it adds to the input gradient.
//! - Shapes the buffers cannot hold, strided backward-input and padding wider than the
//!   kernel's reach use the generic kernels: same results, no workspace.

use super::band::Band;
use super::tile::{rows2_1x7_k3, rows_1x8_k1, rows_1x8_k3, rows_4x4_k1, rows_4x4_k3, Rows, Src, PAIR_COLS};
use super::{depthwise, pointwise};
use super::{BUF_WORDS, OB, PACK_WORDS};
use crate::kernels::conv::{self as generic, ConvGeom};

/// One correlation, in its own terms (for backward-input: the transposed convolution).
struct Corr<'a> {
    g: &'a ConvGeom,
    /// Source planes, outputs, padding of the source, row/column stride, kernel.
    src: [usize; 2],
    out: [usize; 2],
    pad: [usize; 2],
    stride: [usize; 2],
    k: [usize; 2],
    /// Channels in and out per group.
    cin: usize,
    cout: usize,
}

/// How the correlation's weight `w'(grp, o, i, t)` sits in the convolution's `w`:
/// at `grp * group + o * so + i * si + t`, or `... + taps - 1 - t` when `flip`ped.
struct Weights<'a> {
    w: &'a [f32],
    group: usize,
    so: usize,
    si: usize,
    flip: bool,
}

impl Weights<'_> {
    /// Packs `w'` of output channels `o0..o0 + ob` and inputs `c0..c0 + ni` of group
    /// `grp` as the tiles read them: `pack[(i * taps + t) * ob + o]` (taps of one
    /// group are consecutive, so this is `[i][group][kx][o]`). Returns the length.
    #[allow(clippy::too_many_arguments)]
    fn pack(
        &self,
        pack: &mut [f32],
        grp: usize,
        o0: usize,
        ob: usize,
        c0: usize,
        ni: usize,
        taps: usize,
    ) -> usize {
        let len = ni * taps * ob;
        for o in 0..ob {
            for i in 0..ni {
                let at = grp * self.group + (o0 + o) * self.so + (c0 + i) * self.si;
                let src = &self.w[at..][..taps];
                let dst = pack[(i * taps * ob + o)..len].iter_mut().step_by(ob);
                if self.flip {
                    dst.zip(src.iter().rev()).for_each(|(d, &v)| *d = v);
                } else {
                    dst.zip(src).for_each(|(d, &v)| *d = v);
                }
            }
        }
        len
    }
}

impl Corr<'_> {
    /// `out (+)= correlate(src, w')`;
    /// `bias = Some(b)` overwrites the outputs with `b + correlation`. Returns `false`,
    /// having touched nothing, when the buffers cannot hold the shape.
    fn run(&self, src: &[f32], w: &Weights, bias: Option<Option<&[f32]>>, out: &mut [f32]) -> bool {
        let dil = self.g.dil;
        let taps = self.k[0] * self.k[1];
        let most = self.cin.min(PACK_WORDS / (OB * taps).max(1));
        let band = Band::choose(
            self.src,
            self.pad,
            self.stride,
            dil,
            self.k,
            self.out,
            most,
            BUF_WORDS,
        );
        let Some(band) = band else {
            return false;
        };
        // Three-tap row groups when a kernel row reads three neighbouring words.
        let kw = if self.k[1] == 3 && self.stride[1] == 1 && dil[1] == 1 {
            3
        } else {
            1
        };
        let groups = taps / kw;
        // One output channel: two output rows share each input window (`row_pairs`).
        let pairs = row_pairs(self.k, self.stride, dil, self.out[1]);
        // Whole pairs of rows per band for the one-channel tiles.
        let band = if pairs && self.cout < OB && band.band_out < self.out[0] && band.band_out > 1 {
            band.cap_rows(band.band_out & !1)
        } else {
            band
        };
        let nin = (BUF_WORDS / band.chan)
            .min(PACK_WORDS / (OB * taps).max(1))
            .min(self.cin);
        if nin == 0 || taps == 0 {
            return false;
        }
        let mut buf = [0.0f32; BUF_WORDS];
        let mut pack = [0.0f32; PACK_WORDS];
        let mut offs = [0usize; PACK_WORDS / OB];
        for i in 0..nin {
            for gi in 0..groups {
                let t = gi * kw;
                offs[i * groups + gi] = i * band.chan + band.tap_offset(t / self.k[1], t % self.k[1], dil);
            }
        }
        let (src_plane, out_plane) = (self.src[0] * self.src[1], self.out[0] * self.out[1]);
        let (n_groups, cin, cout) = (self.g.groups, self.cin, self.cout);
        for n in 0..self.g.n {
            for grp in 0..n_groups {
                let mut oy0 = 0;
                while oy0 < self.out[0] {
                    let oy1 = (oy0 + band.band_out).min(self.out[0]);
                    let mut c0 = 0;
                    while c0 < cin {
                        let ni = nin.min(cin - c0);
                        let first = (n * n_groups * cin + grp * cin + c0) * src_plane;
                        band.fill(&mut buf, &src[first..], ni, oy0 * band.sy);
                        let init = bias.filter(|_| c0 == 0);
                        let rows = Rows {
                            plane: out_plane,
                            ow: self.out[1],
                            oy0,
                            oy1,
                            row_step: band.sy * band.row,
                        };
                        let mut o0 = 0;
                        while o0 < cout {
                            let ob = if cout - o0 >= OB { OB } else { 1 };
                            let at = w.pack(&mut pack, grp, o0, ob, c0, ni, taps);
                            let s = Src {
                                buf: &buf,
                                offs: &offs[..ni * groups],
                                wpack: &pack[..at],
                            };
                            let oc = grp * cout + o0;
                            let dst = &mut out[(n * n_groups * cout + oc) * out_plane..][..ob * out_plane];
                            let bias_of = |o: usize| init.map(|b| b.map_or(0.0, |b| b[oc + o]));
                            match (ob, kw) {
                                (OB, 3) => rows_4x4_k3(&s, &rows, dst, bias4(bias_of)),
                                (OB, _) => rows_4x4_k1(&s, &rows, dst, bias4(bias_of)),
                                (_, 3) if pairs => {
                                    if let Some(b) = bias_of(0) {
                                        dst[oy0 * rows.ow..oy1 * rows.ow].fill(b);
                                    }
                                    rows2_1x7_k3(&s, &rows, dst)
                                }
                                (_, 3) => rows_1x8_k3(&s, &rows, dst, bias_of(0).map(|b| [b])),
                                _ => rows_1x8_k1(&s, &rows, dst, bias_of(0).map(|b| [b])),
                            }
                            o0 += ob;
                        }
                        c0 += ni;
                    }
                    oy0 = oy1;
                }
            }
        }
        true
    }
}

/// Whether one-channel blocks of a correlation with this kernel, stride, dilation
/// and output width run on the two-row tile (`tile::rows2_1x7_k3`): 3x3 kernels whose
/// rows and columns read neighbouring words, over rows of whole 7-wide tiles.
pub(crate) fn row_pairs(k: [usize; 2], stride: [usize; 2], dil: [usize; 2], ow: usize) -> bool {
    k == [3, 3] && stride == [1, 1] && dil == [1, 1] && ow.is_multiple_of(PAIR_COLS)
}

/// The biases of a block of [`OB`] output channels, if the pass overwrites.
fn bias4(bias_of: impl Fn(usize) -> Option<f32>) -> Option<[f32; OB]> {
    bias_of(0).map(|b0| {
        [
            b0,
            bias_of(1).unwrap_or(0.0),
            bias_of(2).unwrap_or(0.0),
            bias_of(3).unwrap_or(0.0),
        ]
    })
}

/// `y = conv(x, w) + b`, as [`generic::conv2d_forward`].
pub fn conv2d_forward(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) {
    if !forward_tiled(g, x, w, b, y) {
        generic::conv2d_forward(g, x, w, b, y);
    }
}

/// The tiled forward pass; `false`, with `y` untouched, for a shape it does not cover.
pub(crate) fn forward_tiled(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) -> bool {
    if pointwise::forward(g, x, w, b, y) || depthwise::forward(g, x, w, b, y) {
        return true;
    }
    let (cin, cout, taps) = (g.c_in / g.groups, g.c_out / g.groups, g.kh * g.kw);
    let c = Corr {
        g,
        src: [g.h, g.w],
        out: [g.oh, g.ow],
        pad: g.pad,
        stride: g.stride,
        k: [g.kh, g.kw],
        cin,
        cout,
    };
    let w = Weights {
        w,
        group: cout * cin * taps,
        so: cin * taps,
        si: taps,
        flip: false,
    };
    c.run(x, &w, Some(b), y)
}

/// `gx += conv_transpose(gy, w)`, as [`generic::conv2d_backward_input`].
pub fn conv2d_backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) {
    if !backward_input_tiled(g, gy, w, gx) {
        generic::conv2d_backward_input(g, gy, w, gx);
    }
}

/// The tiled backward-input pass; `false`, with `gx` untouched, for a shape it does
/// not cover (stride above 1, padding beyond the kernel's reach, buffers too small).
pub(crate) fn backward_input_tiled(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
    if pointwise::backward_input(g, gy, w, gx) || depthwise::backward_input(g, gy, w, gx) {
        return true;
    }
    let reach = [(g.kh - 1) * g.dil[0], (g.kw - 1) * g.dil[1]];
    if g.stride != [1, 1] || reach[0] < g.pad[0] || reach[1] < g.pad[1] {
        return false;
    }
    let (cin, cout, taps) = (g.c_in / g.groups, g.c_out / g.groups, g.kh * g.kw);
    let c = Corr {
        g,
        src: [g.oh, g.ow],
        out: [g.h, g.w],
        pad: [reach[0] - g.pad[0], reach[1] - g.pad[1]],
        stride: [1, 1],
        k: [g.kh, g.kw],
        cin: cout,
        cout: cin,
    };
    // Output channel `o` of this correlation is input channel `o` of the convolution.
    let w = Weights {
        w,
        group: cout * cin * taps,
        so: taps,
        si: cin * taps,
        flip: true,
    };
    c.run(gy, &w, None, gx)
}
