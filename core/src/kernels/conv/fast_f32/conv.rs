//! Register-tiled direct convolution for `f32`: forward, backward-input, backward-weight.
//!
//! - Forward: input planes are copied, zero-padded and phase-split (`Planes`), into a
//!   stack buffer, a few channels at a time. An output tile is `OB` output channels x 8
//!   neighbouring outputs of one row, held in `[[f32; 8]; OB]` accumulators (registers);
//!   for every input channel and tap it takes one 8-word load and `OB` broadcast weights.
//! - Backward-input (stride 1): the same tile engine on the output gradient padded by
//!   `(k - 1) * dil - pad`, with the kernel flipped and its channel axes swapped (a
//!   transposed convolution is a correlation with the flipped kernel).
//! - Backward-weight: for `OB` output channels and one (input channel, tap), 8-lane dot
//!   products of output-gradient rows with the shifted padded input, summed at the end.
//! - Weights of the current `OB` output channels are packed into a small stack array in
//!   the order the inner loop reads them.
//! - Shapes the buffers cannot hold (huge planes, more than [`MAX_TAPS`] taps) and
//!   strided backward-input use the generic kernels: same results, no workspace.
//! - Plain safe Rust: the fixed-size arrays auto-vectorise (SSE2, AVX, simd128) and
//!   every load is one bounds check per 8 words.

use super::planes::Planes;
pub use super::weight::{conv2d_backward_weight, conv2d_backward_weight_portable};
use crate::kernels::conv::{self as generic, ConvGeom};

/// Words of the stack buffer holding padded planes (32 KiB).
pub const PLANE_WORDS: usize = 8192;
/// Words of the stack buffer holding packed weights (32 KiB).
pub const PACK_WORDS: usize = 8192;
/// Kernel taps (`kh * kw`) the tiled kernels handle; larger kernels use the generic ones.
pub const MAX_TAPS: usize = 64;
/// Output channels per register tile.
pub(crate) const OB: usize = 4;

/// The correlation the tile engine computes: `out[o] += sum_i sum_t wpack * planes`.
struct Corr<'a> {
    planes: &'a Planes,
    buf: &'a [f32],
    /// Input channels in `buf`.
    nin: usize,
    /// Tap offsets into a plane.
    offs: &'a [usize],
    /// Output rows, columns and row stride of the convolution.
    oh: usize,
    ow: usize,
    sy: usize,
}

impl Corr<'_> {
    /// `out[o * plane + ...] += correlation` for `B` outputs; `wpack[(i * taps + t) * B + o]`.
    /// With `init`, the outputs are overwritten with `init[o] + correlation` instead
    /// (the forward pass's bias), which saves loading them.
    fn run<const B: usize>(&self, wpack: &[f32], out: &mut [f32], init: Option<[f32; B]>) {
        let taps = self.offs.len();
        let plane = self.oh * self.ow;
        for oy in 0..self.oh {
            let rowbase = oy * self.sy * self.planes.row;
            let mut ox = 0;
            while ox < self.ow {
                let n = (self.ow - ox).min(8);
                let at = oy * self.ow + ox;
                let mut acc = [[0.0f32; 8]; B];
                for (o, a) in acc.iter_mut().enumerate() {
                    match init {
                        Some(v) => *a = [v[o]; 8],
                        None => load(a, &out[o * plane + at..][..n]),
                    }
                }
                for i in 0..self.nin {
                    let base = i * self.planes.chan + rowbase + ox;
                    let wi = &wpack[i * taps * B..][..taps * B];
                    for (wt, &off) in wi.chunks_exact(B).zip(self.offs) {
                        let s = &self.buf[base + off..][..8];
                        let xv: [f32; 8] = core::array::from_fn(|l| s[l]);
                        for (a, &wv) in acc.iter_mut().zip(wt) {
                            for l in 0..8 {
                                a[l] += wv * xv[l];
                            }
                        }
                    }
                }
                for (o, a) in acc.iter().enumerate() {
                    store(&mut out[o * plane + at..][..n], a);
                }
                ox += 8;
            }
        }
    }
}

/// `a[..src.len()] = src` (at most 8 words) with fixed-size moves, no `memcpy` call.
#[inline(always)]
pub(super) fn load(a: &mut [f32; 8], src: &[f32]) {
    let mut k = 0;
    for step in [8, 4, 2, 1] {
        if src.len() - k >= step {
            a[k..k + step].copy_from_slice(&src[k..k + step]);
            k += step;
        }
    }
}

/// `dst = a[..dst.len()]` (at most 8 words) with fixed-size moves.
#[inline(always)]
pub(super) fn store(dst: &mut [f32], a: &[f32; 8]) {
    let mut k = 0;
    for step in [8, 4, 2, 1] {
        if dst.len() - k >= step {
            dst[k..k + step].copy_from_slice(&a[k..k + step]);
            k += step;
        }
    }
}

/// Tap offsets of a kernel in a [`Planes`] layout; `None` if there are too many taps.
pub(crate) fn offsets(
    p: &Planes,
    k: [usize; 2],
    dil: [usize; 2],
    store: &mut [usize; MAX_TAPS],
) -> Option<usize> {
    let taps = k[0] * k[1];
    if taps == 0 || taps > MAX_TAPS {
        return None;
    }
    for ky in 0..k[0] {
        for kx in 0..k[1] {
            store[ky * k[1] + kx] = p.tap_offset(ky, kx, dil);
        }
    }
    Some(taps)
}

/// Input channels per pass: as many as both stack buffers hold, with `pack_per_chan`
/// packed weights per input channel; `None` if not even one fits.
pub(crate) fn chunk(chan_words: usize, pack_per_chan: usize, total: usize) -> Option<usize> {
    let c = (PLANE_WORDS / chan_words)
        .min(PACK_WORDS / pack_per_chan.max(1))
        .min(total);
    (c > 0).then_some(c)
}

/// Shared driver of forward and backward-input: `out += correlate(src, w')` per sample
/// and group, where `w'(o, i, t)` is `w[wix(o, i, t)]` for the group's channels.
struct Driver<'a> {
    g: &'a ConvGeom,
    /// `Some(bias)`: overwrite the outputs with `bias + correlation` (forward);
    /// `None`: add the correlation to them (backward-input).
    bias: Option<Option<&'a [f32]>>,
    planes: Planes,
    k: [usize; 2],
    /// Channels in and out per group, plane sizes in and out.
    cin: usize,
    cout: usize,
    src_plane: usize,
    out: [usize; 2],
    sy: usize,
}

impl Driver<'_> {
    fn run(
        &self,
        src: &[f32],
        w: &[f32],
        out: &mut [f32],
        wix: impl Fn(usize, usize, usize, usize) -> usize,
    ) -> bool {
        let mut offs = [0usize; MAX_TAPS];
        let Some(taps) = offsets(&self.planes, self.k, self.g.dil, &mut offs) else {
            return false;
        };
        let Some(chunk) = chunk(self.planes.chan, taps * self.cout, self.cin) else {
            return false;
        };
        let mut buf = [0.0f32; PLANE_WORDS];
        let mut pack = [0.0f32; PACK_WORDS];
        let out_plane = self.out[0] * self.out[1];
        let groups = self.g.groups;
        // Overwriting with a bias: in the tiles when one pass covers every input
        // channel, otherwise by filling the outputs first and accumulating.
        let single = chunk >= self.cin;
        if let (Some(bias), false) = (self.bias, single) {
            let channels = groups * self.cout;
            for (i, p) in out.chunks_exact_mut(out_plane).enumerate() {
                p.fill(bias.map_or(0.0, |b| b[i % channels]));
            }
        }
        let init = self.bias.filter(|_| single);
        for grp in 0..groups {
            let mut c0 = 0;
            while c0 < self.cin {
                let nin = chunk.min(self.cin - c0);
                // Weights of every output block of this group and chunk, block after
                // block, each in the order `Corr::run` reads them.
                let mut at = 0;
                let mut o0 = 0;
                while o0 < self.cout {
                    let b = block(self.cout - o0);
                    for i in 0..nin {
                        for t in 0..taps {
                            for o in 0..b {
                                pack[at] = w[wix(grp, o0 + o, c0 + i, t)];
                                at += 1;
                            }
                        }
                    }
                    o0 += b;
                }
                for n in 0..self.g.n {
                    let first = (n * groups * self.cin + grp * self.cin + c0) * self.src_plane;
                    self.planes.fill(&mut buf, &src[first..], nin);
                    let corr = Corr {
                        planes: &self.planes,
                        buf: &buf,
                        nin,
                        offs: &offs[..taps],
                        oh: self.out[0],
                        ow: self.out[1],
                        sy: self.sy,
                    };
                    let mut o0 = 0;
                    while o0 < self.cout {
                        let b = block(self.cout - o0);
                        let wp = &pack[o0 * nin * taps..][..b * nin * taps];
                        let at = (n * groups * self.cout + grp * self.cout + o0) * out_plane;
                        let dst = &mut out[at..][..b * out_plane];
                        let c = grp * self.cout + o0;
                        if b == OB {
                            corr.run::<OB>(wp, dst, init.map(|bs| core::array::from_fn(|o| bias(bs, c + o))));
                        } else {
                            corr.run::<1>(wp, dst, init.map(|bs| [bias(bs, c)]));
                        }
                        o0 += b;
                    }
                }
                c0 += nin;
            }
        }
        true
    }
}

/// The bias of output channel `c`, zero without a bias.
fn bias(b: Option<&[f32]>, c: usize) -> f32 {
    b.map_or(0.0, |b| b[c])
}

/// Output channels in the next register tile, with `left` still to do.
fn block(left: usize) -> usize {
    if left >= OB {
        OB
    } else {
        1
    }
}

/// `y = conv(x, w) + b`, as [`generic::conv2d_forward`]: the AVX2 + FMA strip kernel
/// when the CPU has those (x86_64, asked at run time) and the shape suits it, else
/// [`conv2d_forward_portable`].
pub fn conv2d_forward(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) {
    if super::dw8::DISPATCH && super::dw8::conv2d_forward(g, x, w, b, y)
        || super::depthwise::conv2d_forward(g, x, w, b, y)
    {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if super::avx2::conv2d_forward(g, x, w, b, y) {
        return;
    }
    conv2d_forward_portable(g, x, w, b, y)
}

/// The portable tiled forward kernel (SSE2, simd128 or whatever the build enables).
pub fn conv2d_forward_portable(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) {
    let Some(planes) = Planes::new([g.h, g.w], g.pad, g.stride, g.dil, [g.kh, g.kw], [g.oh, g.ow]) else {
        return generic::conv2d_forward(g, x, w, b, y);
    };
    let (cin, cout, taps) = (g.c_in / g.groups, g.c_out / g.groups, g.kh * g.kw);
    let d = Driver {
        g,
        bias: Some(b),
        planes,
        k: [g.kh, g.kw],
        cin,
        cout,
        src_plane: g.h * g.w,
        out: [g.oh, g.ow],
        sy: g.stride[0],
    };
    let ok = d.run(x, w, y, |grp, o, i, t| ((grp * cout + o) * cin + i) * taps + t);
    if !ok {
        generic::conv2d_forward(g, x, w, b, y);
    }
}

/// `gx += conv_transpose(gy, w)`, as [`generic::conv2d_backward_input`]; AVX2 + FMA
/// when available, as [`conv2d_forward`].
pub fn conv2d_backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) {
    if super::dw8::DISPATCH && super::dw8::conv2d_backward_input(g, gy, w, gx)
        || super::depthwise::conv2d_backward_input(g, gy, w, gx)
    {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if super::avx2::conv2d_backward_input(g, gy, w, gx) {
        return;
    }
    conv2d_backward_input_portable(g, gy, w, gx)
}

/// The portable tiled backward-input kernel.
pub fn conv2d_backward_input_portable(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) {
    let reach = [(g.kh - 1) * g.dil[0], (g.kw - 1) * g.dil[1]];
    let fast = g.stride == [1, 1] && reach[0] >= g.pad[0] && reach[1] >= g.pad[1];
    let pad = [reach[0].wrapping_sub(g.pad[0]), reach[1].wrapping_sub(g.pad[1])];
    let planes = Planes::new([g.oh, g.ow], pad, [1, 1], g.dil, [g.kh, g.kw], [g.h, g.w]);
    let (Some(planes), true) = (planes, fast) else {
        return generic::conv2d_backward_input(g, gy, w, gx);
    };
    let (cin, cout, taps) = (g.c_in / g.groups, g.c_out / g.groups, g.kh * g.kw);
    let d = Driver {
        g,
        bias: None,
        planes,
        k: [g.kh, g.kw],
        cin: cout,
        cout: cin,
        src_plane: g.oh * g.ow,
        out: [g.h, g.w],
        sy: 1,
    };
    // Output channel `o` of this correlation is input channel `o` of the convolution.
    let ok = d.run(gy, w, gx, |grp, o, i, t| {
        ((grp * cout + i) * cin + o) * taps + (taps - 1 - t)
    });
    if !ok {
        generic::conv2d_backward_input(g, gy, w, gx);
    }
}
