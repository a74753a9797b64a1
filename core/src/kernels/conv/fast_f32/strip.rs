//! Stride-1 convolutions as implicit matrix products over padded "strips", AVX2 + FMA.
//!
//! - A zero-padded plane (`rows x row` words) is read as one long strip: output
//!   `(oy, ox)` is strip position `p = oy * row + ox`, and tap `(ky, kx)` reads the plane
//!   at `p + ky * dy * row + kx * dx`. Positions with `ox >= ow` are computed and
//!   dropped; in exchange a tile is a run of contiguous positions across row ends, so
//!   small planes (7x7) still fill whole 8-lane vectors and tiles can be 24 wide.
//! - Forward and backward-input: a tile is `B <= 4` output channels x `8 * V <= 24`
//!   positions (12 `ymm` accumulators); per (input channel, tap) it loads `V` vectors of
//!   the strip and broadcasts `B` weights, read in place, into `B * V` FMAs. 3x3
//!   kernels (dilation 1) read weights packed per block and taps at fixed offsets
//!   (`Tiles::run3`); their forward tiles follow output rows when those are at least 8
//!   wide (`rows.rs`).
//! - Backward-weight vectorises over output channels instead: the output gradient is
//!   transposed into `gyT[p][oc]` (zeros at dropped positions and padding channels), and
//!   a tile is `R` (input channel, tap) rows x `8 * V` output channels, summed over every
//!   position of every sample with one broadcast input word per row: no horizontal sums.
//!   With few rows (W1's first layer: 1 channel x 9 taps) the transposition would cost
//!   more than it saves, and tiles run along positions instead (`weight_by_position`).
//! - Only stride 1 (every backward-input the portable kernels also tile); anything else,
//!   or planes larger than the stack buffers, answers `false` and the caller falls back.
//! - Workspace on the stack only, never the arena: forward and backward-input 32 KiB of
//!   planes + 8 KiB of offsets; backward-weight 32 KiB of planes + 2 x 32 KiB of
//!   transposed gradients + 4 KiB of offsets (100 KiB at most).

use super::avx2::{fma, load, splat, store, F8};
pub(super) use super::layout::{copy_short, Strip};
use super::rows::Rows;
use crate::kernels::conv::ConvGeom;

/// Words of the stack buffer holding padded planes.
pub(super) const PLANE_WORDS: usize = 8192;
/// Words of each transposed buffer of backward-weight (`gyT` and `gwT`).
pub(super) const T_WORDS: usize = 8192;
/// (input channel, tap) pairs per pass.
pub(super) const MAX_K: usize = 512;
/// Output channels per forward tile.
pub(super) const OB: usize = 4;
/// Words of the stack buffer of packed 3x3 weights (`Tiles::run3`).
const PACK_WORDS: usize = 8192;
/// Output positions (batch x plane) from which packing the 3x3 weights pays: below it
/// (batch 1 on small planes) packing and clearing the buffer cost more than it saves.
const PACK_MIN_POSITIONS: usize = 256;

/// How a forward tile starts: from the bias (or zero), or from what the output holds.
#[derive(Clone, Copy)]
pub(super) enum Init {
    Bias([f32; OB]),
    Load,
}

/// The correlation `out[o] (+)= sum_i sum_t w'(o, i, t) * src[i]` shared by forward and
/// backward-input.
struct Corr<'a> {
    strip: Strip,
    k: [usize; 2],
    dil: [usize; 2],
    batch: usize,
    groups: usize,
    /// Channels in and out per group.
    cin: usize,
    cout: usize,
    /// `Some(bias)`: overwrite the outputs with `bias + correlation` (forward);
    /// `None`: add the correlation to them (backward-input).
    bias: Option<Option<&'a [f32]>>,
}

impl Corr<'_> {
    #[target_feature(enable = "avx2,fma")]
    fn run(
        &self,
        src: &[f32],
        w: &[f32],
        out: &mut [f32],
        ostride: usize,
        wof: impl Fn(usize, usize, usize) -> usize,
    ) -> bool {
        let s = &self.strip;
        let taps = self.k[0] * self.k[1];
        let chunk = (PLANE_WORDS / s.chan).min(MAX_K / taps.max(1)).min(self.cin);
        if taps == 0 || chunk == 0 || self.cout == 0 {
            return false;
        }
        let mut buf = [0.0f32; PLANE_WORDS];
        let mut offs = [0usize; MAX_K];
        let mut woffs = [0usize; MAX_K];
        let (src_plane, out_plane) = (s.src[0] * s.src[1], s.out[0] * s.out[1]);
        // A 1x1 kernel without padding reads the planes as they are (a strip whose
        // channels are the planes), wherever the source holds the 7 words a last
        // tile may read past the last plane (those positions are dropped).
        let direct = taps == 1 && s.pad == [0, 0] && s.row == s.src[1];
        let direct_strip = Strip {
            chan: src_plane,
            ..*s
        };
        let mut offs_direct = [0usize; MAX_K];
        // 3x3 kernels (dilation 1) whose weights fit `pack`, over enough positions to
        // repay the packing: weights packed per block of output channels in the order
        // `Tiles::run3` reads them.
        let fits = chunk.min(PACK_WORDS / (taps * self.cout));
        let many = self.batch * out_plane >= PACK_MIN_POSITIONS;
        let packed = self.k == [3, 3] && self.dil == [1, 1] && fits > 0 && many;
        let chunk = if packed { fits } else { chunk };
        let mut pack_words;
        let pack: &mut [f32] = match packed {
            true => {
                pack_words = [0.0f32; PACK_WORDS];
                &mut pack_words
            }
            false => &mut [],
        };
        for grp in 0..self.groups {
            let mut c0 = 0;
            while c0 < self.cin {
                let nin = chunk.min(self.cin - c0);
                let kk = nin * taps;
                s.offsets(nin, self.k, self.dil, &mut offs);
                if direct {
                    direct_strip.offsets(nin, self.k, self.dil, &mut offs_direct);
                }
                for i in 0..nin {
                    for t in 0..taps {
                        woffs[i * taps + t] = wof(grp, c0 + i, t);
                    }
                }
                if packed {
                    // Block `o0` (of `b` channels) at `o0 * kk`: `[row k][channel o]`.
                    for o0 in (0..self.cout).step_by(OB) {
                        let b = OB.min(self.cout - o0);
                        let blk = &mut pack[o0 * kk..][..b * kk];
                        for (k, row) in blk.chunks_exact_mut(b).enumerate() {
                            for (o, v) in row.iter_mut().enumerate() {
                                *v = w[woffs[k] + (o0 + o) * ostride];
                            }
                        }
                    }
                }
                let bias = self.bias.filter(|_| c0 == 0);
                for n in 0..self.batch {
                    let first = (n * self.groups * self.cin + grp * self.cin + c0) * src_plane;
                    let reach = (nin - 1) * src_plane + s.len + 7;
                    let read_in_place = direct && src.len() >= first + reach;
                    let (plane_buf, strip, offsets) = match read_in_place {
                        true => (&src[first..first + reach], &direct_strip, &offs_direct),
                        false => {
                            s.fill(&mut buf, &src[first..], nin);
                            (&buf[..nin * s.chan], s, &offs)
                        }
                    };
                    for o0 in (0..self.cout).step_by(OB) {
                        let b = OB.min(self.cout - o0);
                        let ch = grp * self.cout + o0;
                        let init = match bias {
                            Some(bs) => Init::Bias(core::array::from_fn(|o| match bs {
                                Some(v) if o < b => v[ch + o],
                                _ => 0.0,
                            })),
                            None => Init::Load,
                        };
                        let dst = &mut out[(n * self.groups * self.cout + ch) * out_plane..][..b * out_plane];
                        if let (true, Init::Bias(bias)) = (packed && b > 1 && Rows::fit(s.out[1]), init) {
                            let pack = &pack[o0 * kk..][..b * kk];
                            let r = Rows {
                                strip,
                                buf: plane_buf,
                                pack,
                                bias,
                            };
                            match b {
                                4 => r.all::<4>(dst),
                                3 => r.all::<3>(dst),
                                _ => r.all::<2>(dst),
                            }
                            continue;
                        }
                        let t = Tiles {
                            strip,
                            buf: plane_buf,
                            offs: &offsets[..kk],
                            woffs: &woffs[..kk],
                            w: &w[o0 * ostride..],
                            ostride,
                            init,
                            pack: match packed {
                                true => Some(&pack[o0 * kk..][..b * kk]),
                                false => None,
                            },
                        };
                        match b {
                            4 => t.all::<4>(dst),
                            3 => t.all::<3>(dst),
                            2 => t.all::<2>(dst),
                            _ => t.all::<1>(dst),
                        }
                    }
                }
                c0 += nin;
            }
        }
        true
    }
}

/// Forward tiles of one block of output channels over one sample's strip.
struct Tiles<'a> {
    strip: &'a Strip,
    buf: &'a [f32],
    offs: &'a [usize],
    /// The weight of row `k` and channel `o` of the block is `w[woffs[k] + o * ostride]`
    /// (read in place: packing them would cost as much as a batch-1 pass).
    woffs: &'a [usize],
    w: &'a [f32],
    ostride: usize,
    init: Init,
    /// 3x3 kernels with dilation 1: the block's weights packed `[row][channel]`
    /// (`Corr::run`), read by `Tiles::run3` instead of `w` and `offs`.
    pack: Option<&'a [f32]>,
}

impl Tiles<'_> {
    #[target_feature(enable = "avx2,fma")]
    fn all<const B: usize>(&self, dst: &mut [f32]) {
        let mut p0 = 0;
        // Packed 3x3 tiles of 4 channels stop at 16 positions: with 24, the 12
        // accumulators, 3 strip vectors and the broadcast weight need every `ymm`
        // register and LLVM spills one. One channel takes 48.
        let wide = self.pack.is_none() || B < OB;
        while p0 < self.strip.len {
            let left = self.strip.len - p0;
            p0 += if B == 1 && left > 40 && self.pack.is_some() {
                self.tile::<B, 6>(p0, dst)
            } else if left > 16 && wide {
                self.tile::<B, 3>(p0, dst)
            } else if left > 8 {
                self.tile::<B, 2>(p0, dst)
            } else {
                self.tile::<B, 1>(p0, dst)
            };
        }
    }

    /// `B` channels x `8 * V` positions from `p0`; returns the width.
    #[target_feature(enable = "avx2,fma")]
    fn tile<const B: usize, const V: usize>(&self, p0: usize, dst: &mut [f32]) -> usize {
        let width = 8 * V;
        let plane = self.strip.out[0] * self.strip.out[1];
        // Every position of the tile kept, in output order (rows without padding
        // columns, e.g. 1x1 kernels): the accumulators load and store the output itself.
        let whole = self.strip.row == self.strip.out[1] && p0 + width <= self.strip.len;
        let mut tmp = [0.0f32; OB * 24];
        let mut acc = [[splat(0.0); V]; B];
        match self.init {
            Init::Bias(bv) => {
                for (a, &v) in acc.iter_mut().zip(&bv) {
                    *a = [splat(v); V];
                }
            }
            Init::Load if whole => {
                for (o, a) in acc.iter_mut().enumerate() {
                    for (v, av) in a.iter_mut().enumerate() {
                        *av = load(&dst[o * plane + p0 + 8 * v..]);
                    }
                }
            }
            Init::Load => {
                self.strip.runs(p0, width, |p, at, n| {
                    for o in 0..B {
                        copy_short(&mut tmp[o * width + p - p0..][..n], &dst[o * plane + at..]);
                    }
                });
                for (o, a) in acc.iter_mut().enumerate() {
                    for (v, av) in a.iter_mut().enumerate() {
                        *av = load(&tmp[o * width + 8 * v..]);
                    }
                }
            }
        }
        if let Some(pack) = self.pack {
            self.run3(pack, p0, &mut acc);
        } else {
            self.run_any(p0, &mut acc);
        }
        if whole {
            for (o, a) in acc.iter().enumerate() {
                for (v, &av) in a.iter().enumerate() {
                    store(av, &mut dst[o * plane + p0 + 8 * v..]);
                }
            }
            return width;
        }
        for (o, a) in acc.iter().enumerate() {
            for (v, &av) in a.iter().enumerate() {
                store(av, &mut tmp[o * width + 8 * v..]);
            }
        }
        self.strip.runs(p0, width, |p, at, n| {
            for o in 0..B {
                copy_short(&mut dst[o * plane + at..][..n], &tmp[o * width + p - p0..]);
            }
        });
        width
    }

    /// `acc += ` the products of the tile at `p0`, any kernel: offsets and weights
    /// looked up per (input channel, tap).
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn run_any<const B: usize, const V: usize>(&self, p0: usize, acc: &mut [[F8; V]; B]) {
        let width = 8 * V;
        for (&off, &wo) in self.offs.iter().zip(self.woffs) {
            let wk = &self.w[wo..];
            let s = &self.buf[p0 + off..][..width];
            let mut x = [splat(0.0); V];
            for (v, xv) in x.iter_mut().enumerate() {
                *xv = load(&s[8 * v..]);
            }
            for (o, a) in acc.iter_mut().enumerate() {
                let wv = splat(wk[o * self.ostride]);
                for (av, &xv) in a.iter_mut().zip(&x) {
                    *av = fma(wv, xv, *av);
                }
            }
        }
    }

    /// `acc += ` the products of the tile at `p0` for a 3x3 kernel with dilation 1:
    /// per input channel and kernel row, one bounds check for the strip (its length
    /// is fixed by `V`) and none for the packed weights, three taps at fixed offsets.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn run3<const B: usize, const V: usize>(&self, pack: &[f32], p0: usize, acc: &mut [[F8; V]; B]) {
        let (row, chan) = (self.strip.row, self.strip.chan);
        for (i, wi) in pack.chunks_exact(9 * B).enumerate() {
            for ky in 0..3 {
                let r = &self.buf[i * chan + ky * row + p0..][..8 * V + 2];
                let wr = &wi[3 * B * ky..][..3 * B];
                for kx in 0..3 {
                    let mut x = [splat(0.0); V];
                    for (v, xv) in x.iter_mut().enumerate() {
                        *xv = load(&r[kx + 8 * v..]);
                    }
                    for (o, a) in acc.iter_mut().enumerate() {
                        let wv = splat(wr[kx * B + o]);
                        for (av, &xv) in a.iter_mut().zip(&x) {
                            *av = fma(wv, xv, *av);
                        }
                    }
                }
            }
        }
    }
}

/// `y = conv(x, w) + b` for stride 1; `false` (nothing written) for other shapes.
///
/// # Safety
/// Only on a CPU with AVX2 and FMA (see `avx2::available`).
#[target_feature(enable = "avx2,fma")]
pub(crate) fn conv2d_forward(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) -> bool {
    if super::one::conv2d_forward(g, x, w, b, y) || super::avx512::one_forward_s2(g, x, w, b, y) {
        return true;
    }
    if super::avx512::pointwise_forward(g, x, w, b, y) {
        return true;
    }
    if super::winograd::pays(g) && super::winograd::conv2d_forward(g, x, w, b, y) {
        return true;
    }
    if g.stride != [1, 1] {
        return false;
    }
    let k = [g.kh, g.kw];
    let Some(strip) = Strip::new([g.h, g.w], g.pad, k, g.dil, [g.oh, g.ow]) else {
        return false;
    };
    let (cin, cout, taps) = (g.c_in / g.groups, g.c_out / g.groups, g.kh * g.kw);
    let c = Corr {
        strip,
        k,
        dil: g.dil,
        batch: g.n,
        groups: g.groups,
        cin,
        cout,
        bias: Some(b),
    };
    c.run(x, w, y, cin * taps, |grp, i, t| (grp * cout * cin + i) * taps + t)
}

/// `gx += conv_transpose(gy, w)` for stride 1 and padding at most the kernel's reach:
/// a correlation of `gy`, padded by `reach - pad`, with the flipped kernel.
#[target_feature(enable = "avx2,fma")]
pub(crate) fn conv2d_backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
    if super::one_input::conv2d_backward_input(g, gy, w, gx) {
        return true;
    }
    if super::avx512::pointwise_backward_input(g, gy, w, gx) {
        return true;
    }
    if super::winograd::pays(g) && super::winograd::conv2d_backward_input(g, gy, w, gx) {
        return true;
    }
    let k = [g.kh, g.kw];
    let reach = [(g.kh - 1) * g.dil[0], (g.kw - 1) * g.dil[1]];
    if g.stride != [1, 1] || reach[0] < g.pad[0] || reach[1] < g.pad[1] {
        return false;
    }
    let pad = [reach[0] - g.pad[0], reach[1] - g.pad[1]];
    let Some(strip) = Strip::new([g.oh, g.ow], pad, k, g.dil, [g.h, g.w]) else {
        return false;
    };
    let (cin, cout, taps) = (g.c_in / g.groups, g.c_out / g.groups, g.kh * g.kw);
    let c = Corr {
        strip,
        k,
        dil: g.dil,
        batch: g.n,
        groups: g.groups,
        cin: cout,
        cout: cin,
        bias: None,
    };
    // Output channel `o` of this correlation is input channel `o` of the convolution.
    c.run(gy, w, gx, taps, |grp, i, t| {
        (grp * cout + i) * cin * taps + (taps - 1 - t)
    })
}
