//! 3x3 "same" convolutions with one input channel per group (W1's first layer),
//! AVX2 + FMA: forward and backward-weight.
//!
//! - Positions are flat: output `p = oy * w + ox` reads the input at `p + (ky - 1) * w +
//!   (kx - 1)`, so a vector is 8 consecutive outputs across row ends and a plane is
//!   `h * w / 8` whole vectors (28x28: 98, no padding columns, no row tails). The output
//!   and the output gradient are read and written in place, no staging.
//! - What a flat read gets wrong, column `-1` or `w` (the neighbouring row's last or
//!   first word) and rows `-1` and `h`, comes from the input: it is copied three times
//!   per sample into a stack buffer (`Flat`), one copy per kernel column, each between
//!   `w + 1` zeros; the copy read by column 0 has its last column zeroed, the one read by
//!   column 2 its first. One input channel makes that copy small next to the work (8
//!   output channels x 9 taps per input word in W1).
//! - Forward: a tile is `NB <= 4` output channels x `V <= 3` vectors; per tap `V` loads
//!   and `NB` broadcast weights feed `NB * V` FMAs. A plane whose size is not a multiple
//!   of 8 ends with a vector at `h * w - 8`, overlapping the one before it: it stores
//!   the same values again.
//! - Backward-weight: a tile is `NB` output channels x the 3 taps of one kernel row, as
//!   8-lane partial sums over every position of every sample (kept in a stack buffer
//!   between samples) and summed across lanes once per call.
//! - With AVX-512F the forward is `one16.rs`'s (the input read in place, with masked
//!   multiply-adds at row ends: `one_centre.rs`) and the backward-weight
//!   `one_weight16.rs`'s (the same copies); both take 16-lane vectors, 8 channels per
//!   tile, the output or its gradient aligned to cache lines. The backward-input is
//!   `one_input16.rs`'s; this file's tiles run without it.
//! - Only stride 1, dilation 1, padding 1, planes of at least 8 words whose three copies
//!   fit [`X_WORDS`]; anything else answers `false` and the caller falls back.

use super::avx2::{fma, load, splat, store, F8};
use super::strip::copy_short;
use crate::kernels::conv::ConvGeom;

/// Words of the stack buffer holding the three copies of an input plane (24 KiB).
pub(super) const X_WORDS: usize = 6144;
/// Output channels per tile.
pub(super) const NB: usize = 4;
/// Output channels whose lane sums one backward-weight pass keeps (9 KiB).
const OC_CHUNK: usize = 32;

/// The three zero-bordered copies of one input plane (sizes in words).
#[derive(Clone, Copy)]
pub(super) struct Flat {
    pub(super) h: usize,
    pub(super) w: usize,
    pub(super) hw: usize,
    /// Where a copy's plane starts: at least `w + 1` zeros before it, rounded up to a
    /// whole 16-word vector (a cache line) so that the copy's stores are aligned.
    pub(super) at: usize,
    /// Words per copy (a multiple of 16): `at` zeros, the plane, at least `w + 1 + 7`
    /// zeros.
    pub(super) chan: usize,
}

/// The stack buffer of the three copies, aligned to a cache line.
#[repr(align(64))]
pub(super) struct Buf(pub(super) [f32; X_WORDS]);

impl Flat {
    /// The layout for `g`, or `None` if `g` is not a one-channel 3x3 "same" convolution
    /// this file covers.
    pub(super) fn new(g: &ConvGeom) -> Option<Flat> {
        let fits = g.stride == [1, 1]
            && g.dil == [1, 1]
            && [g.kh, g.kw] == [3, 3]
            && g.pad == [1, 1]
            && g.groups > 0
            && g.c_in == g.groups
            && g.c_out >= g.groups
            && [g.oh, g.ow] == [g.h, g.w];
        let hw = g.h.checked_mul(g.w)?;
        if !fits || !(8..=X_WORDS).contains(&hw) {
            return None;
        }
        let at = (g.w + 1).next_multiple_of(16);
        let chan = (at + hw + g.w + 8).next_multiple_of(16);
        (3 * chan <= X_WORDS).then_some(Flat {
            h: g.h,
            w: g.w,
            hw,
            at,
            chan,
        })
    }

    /// Offset, from an output position, of the word tap `t` reads in the buffer.
    #[inline(always)]
    pub(super) fn off(&self, t: usize) -> usize {
        let (ky, kx) = (t / 3, t % 3);
        kx * self.chan + self.at - self.w - 1 + ky * self.w + kx
    }

    /// Copies one input plane three times (the borders stay as they are: zero), 8 words
    /// at a time (a `memcpy` call per copy cost twice as much).
    #[target_feature(enable = "avx2,fma")]
    fn fill(&self, buf: &mut [f32], x: &[f32]) {
        let x = &x[..self.hw];
        let (at, c, hw) = (self.at, self.chan, self.hw);
        let buf = &mut buf[..3 * c];
        for (q, v) in x.chunks_exact(8).enumerate() {
            let v = load(v);
            for kx in 0..3 {
                store(v, &mut buf[kx * c + at + 8 * q..]);
            }
        }
        let full = hw / 8 * 8;
        for kx in 0..3 {
            copy_short(&mut buf[kx * c + at + full..][..hw - full], &x[full..]);
        }
        for r in 0..self.h {
            buf[self.at + r * self.w + self.w - 1] = 0.0;
            buf[2 * self.chan + self.at + r * self.w] = 0.0;
        }
    }
}

/// Whether this file's kernels (and `one_input.rs`) take `g`.
pub(super) fn covers(g: &ConvGeom) -> bool {
    Flat::new(g).is_some()
}

/// `y = conv(x, w) + b` for a one-channel 3x3 "same" convolution; `false` (nothing
/// written) for other shapes.
#[target_feature(enable = "avx2,fma")]
pub(super) fn conv2d_forward(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) -> bool {
    super::avx512::one_forward(g, x, w, b, y) || forward8(g, x, w, b, y)
}

/// [`conv2d_forward`] without `one16.rs`'s kernel (its tiles still take 16 lanes with
/// AVX-512F).
#[target_feature(enable = "avx2,fma")]
pub(super) fn forward8(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) -> bool {
    let Some(f) = Flat::new(g) else {
        return false;
    };
    let cout = g.c_out / g.groups;
    let hw = f.hw;
    let mut buf = Buf([0.0f32; X_WORDS]);
    let buf = &mut buf.0;
    let offs: [usize; 9] = core::array::from_fn(|t| f.off(t));
    for grp in 0..g.groups {
        for n in 0..g.n {
            f.fill(buf, &x[(n * g.c_in + grp) * hw..]);
            for o0 in (0..cout).step_by(NB) {
                let nb = NB.min(cout - o0);
                let ch = grp * cout + o0;
                // `[tap][channel]`; a short block repeats its last channel. (Plain loops:
                // `array::from_fn`'s closures stayed calls, as in `Sums::row`.)
                let mut wk = [[0.0f32; NB]; 9];
                let mut bias = [0.0f32; NB];
                for (o, bo) in bias.iter_mut().enumerate() {
                    let c = ch + o.min(nb - 1);
                    for (t, wt) in wk.iter_mut().enumerate() {
                        wt[o] = w[c * 9 + t];
                    }
                    *bo = b.map_or(0.0, |b| b[c]);
                }
                let t = Fwd {
                    hw,
                    buf: &buf[..3 * f.chan],
                    offs: &offs,
                    wk: &wk,
                    bias: &bias,
                };
                let dst = &mut y[(n * g.c_out + ch) * hw..][..nb * hw];
                match nb {
                    4 => t.plane::<4>(dst),
                    3 => t.plane::<3>(dst),
                    2 => t.plane::<2>(dst),
                    _ => t.plane::<1>(dst),
                }
            }
        }
    }
    true
}

/// Forward tiles of one block of output channels over one sample.
pub(super) struct Fwd<'a> {
    pub(super) hw: usize,
    pub(super) buf: &'a [f32],
    /// Tap offsets ([`Flat::off`]) and `[tap][channel]` weights: slices whose length
    /// the tile does not know at compile time, so that it keeps its loop over taps
    /// (unrolled, LLVM reorders the products channel by channel and spills the loads).
    pub(super) offs: &'a [usize],
    pub(super) wk: &'a [[f32; NB]],
    pub(super) bias: &'a [f32; NB],
}

impl Fwd<'_> {
    /// Every output of `B` channels (planes `h * w` apart in `dst`).
    #[target_feature(enable = "avx2,fma")]
    fn plane<const B: usize>(&self, dst: &mut [f32]) {
        if super::avx512::one_forward_plane::<B>(self, dst) {
            return;
        }
        let hw = self.hw;
        let mut p = 0;
        while hw - p >= 24 {
            self.tile::<B, 3>(p, dst);
            p += 24;
        }
        if hw - p >= 16 {
            self.tile::<B, 2>(p, dst);
            p += 16;
        }
        if hw - p >= 8 {
            self.tile::<B, 1>(p, dst);
            p += 8;
        }
        if p < hw {
            self.tile::<B, 1>(hw - 8, dst);
        }
    }

    /// `B` channels x `V` vectors from position `p`.
    #[target_feature(enable = "avx2,fma")]
    #[inline(never)]
    fn tile<const B: usize, const V: usize>(&self, p: usize, dst: &mut [f32]) {
        let mut acc = [[splat(0.0); V]; B];
        for (a, &v) in acc.iter_mut().zip(self.bias) {
            *a = [splat(v); V];
        }
        for (&off, wt) in self.offs.iter().zip(self.wk) {
            let r = &self.buf[off + p..][..8 * V];
            let mut xv = [splat(0.0); V];
            for (v, x) in xv.iter_mut().enumerate() {
                *x = load(&r[8 * v..]);
            }
            for (a, &wv) in acc.iter_mut().zip(wt) {
                let wv = splat(wv);
                for (av, &x) in a.iter_mut().zip(&xv) {
                    *av = fma(wv, x, *av);
                }
            }
        }
        let hw = self.hw;
        for (o, a) in acc.iter().enumerate() {
            let d = &mut dst[o * hw + p..][..8 * V];
            for (v, &av) in a.iter().enumerate() {
                store(av, &mut d[8 * v..]);
            }
        }
    }
}

/// `gw += correlate(gy, x)` for a one-channel 3x3 "same" convolution; `false` (nothing
/// written) for other shapes.
#[target_feature(enable = "avx2,fma")]
pub(super) fn conv2d_backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    super::avx512::one_backward_weight(g, gy, x, gw) || backward_weight8(g, gy, x, gw)
}

/// [`conv2d_backward_weight`] with 8 lanes only.
#[target_feature(enable = "avx2,fma")]
pub(super) fn backward_weight8(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    let Some(f) = Flat::new(g) else {
        return false;
    };
    let cout = g.c_out / g.groups;
    let hw = f.hw;
    let mut buf = Buf([0.0f32; X_WORDS]);
    let buf = &mut buf.0;
    // `[channel][tap][lane]`.
    let mut lanes = [0.0f32; OC_CHUNK * 9 * 8];
    for grp in 0..g.groups {
        for c0 in (0..cout).step_by(OC_CHUNK) {
            let m = OC_CHUNK.min(cout - c0);
            let lanes = &mut lanes[..m * 72];
            lanes.fill(0.0);
            for n in 0..g.n {
                f.fill(buf, &x[(n * g.c_in + grp) * hw..]);
                let planes = &gy[(n * g.c_out + grp * cout + c0) * hw..][..m * hw];
                for o0 in (0..m).step_by(NB) {
                    let nb = NB.min(m - o0);
                    let s = Sums {
                        f: &f,
                        buf: &buf[..3 * f.chan],
                        gy: &planes[o0 * hw..][..nb * hw],
                    };
                    let l = &mut lanes[o0 * 72..][..nb * 72];
                    for ky in 0..3 {
                        match nb {
                            4 => s.row::<4>(ky, l),
                            3 => s.row::<3>(ky, l),
                            2 => s.row::<2>(ky, l),
                            _ => s.row::<1>(ky, l),
                        }
                    }
                }
            }
            for (o, lo) in lanes.chunks_exact(72).enumerate() {
                let at = (grp * cout + c0 + o) * 9;
                for (dst, l) in gw[at..][..9].iter_mut().zip(lo.chunks_exact(8)) {
                    *dst += ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
                }
            }
        }
    }
    true
}

/// Backward-weight tiles over one sample.
struct Sums<'a> {
    f: &'a Flat,
    buf: &'a [f32],
    /// The output-gradient planes of the block's channels.
    gy: &'a [f32],
}

impl Sums<'_> {
    /// `lanes[o][3 * ky + kx] += gy[o][p] * x[p + tap]` lane-wise over every position,
    /// for `B` channels.
    #[target_feature(enable = "avx2,fma")]
    fn row<const B: usize>(&self, ky: usize, lanes: &mut [f32]) {
        let hw = self.f.hw;
        let mut acc = [[splat(0.0); 3]; B];
        for (o, a) in acc.iter_mut().enumerate() {
            for (kx, av) in a.iter_mut().enumerate() {
                *av = load(&lanes[o * 72 + (3 * ky + kx) * 8..]);
            }
        }
        // Plain loops rather than `array::from_fn`, whose closures LLVM left as calls:
        // this runs once per channel block, kernel row and sample.
        let offs = [self.f.off(3 * ky), self.f.off(3 * ky + 1), self.f.off(3 * ky + 2)];
        let nv = hw / 8;
        let mut xs: [&[f32]; 3] = [&[]; 3];
        for (x, &off) in xs.iter_mut().zip(&offs) {
            *x = &self.buf[off..][..8 * nv];
        }
        let mut gys: [&[f32]; B] = [&[]; B];
        for (o, gp) in gys.iter_mut().enumerate() {
            *gp = &self.gy[o * hw..][..8 * nv];
        }
        sweep(&xs, &gys, &mut acc);
        if nv * 8 < hw {
            // The last `hw % 8` positions, as the vector ending at `hw` whose first
            // lanes (counted already) read zero gradients.
            let r = hw - nv * 8;
            let mut tail = [0.0f32; 8 * NB];
            for (o, a) in acc.iter_mut().enumerate() {
                copy_short(&mut tail[8 * o + 8 - r..][..r], &self.gy[o * hw + nv * 8..]);
                let gv = load(&tail[8 * o..]);
                for (av, &off) in a.iter_mut().zip(&offs) {
                    *av = fma(gv, load(&self.buf[off + hw - 8..]), *av);
                }
            }
        }
        for (o, a) in acc.iter().enumerate() {
            for (kx, &av) in a.iter().enumerate() {
                store(av, &mut lanes[o * 72 + (3 * ky + kx) * 8..]);
            }
        }
    }
}

/// `acc[o][t] += gys[o][p] * xs[t][p]` lane-wise over whole vectors (slices of equal
/// length, a multiple of 8). Not inlined: on its own, LLVM keeps the 12 accumulators
/// in registers (inlined into the caller it spilled two of them in the loop).
#[target_feature(enable = "avx2,fma")]
#[inline(never)]
fn sweep<const B: usize>(xs: &[&[f32]; 3], gys: &[&[f32]; B], acc: &mut [[F8; 3]; B]) {
    let len = xs[0].len() / 8 * 8;
    // Every slice cut to `len` words and the loop bound `p + 8 <= len`: LLVM drops the
    // bounds checks of the loads.
    let [x0, x1, x2] = [&xs[0][..len], &xs[1][..len], &xs[2][..len]];
    let mut cut: [&[f32]; B] = [&[]; B];
    for (c, gp) in cut.iter_mut().zip(gys) {
        *c = &gp[..len];
    }
    let gys = cut;
    let mut a = *acc;
    if B == NB {
        // Four channels (every block of W1's 8): one zip of the seven rows, no bounds
        // checks at all.
        let mut g: [&[f32]; 4] = [&[]; 4];
        for (d, gp) in g.iter_mut().zip(&gys) {
            *d = gp;
        }
        let rows = x0.chunks_exact(8).zip(x1.chunks_exact(8)).zip(x2.chunks_exact(8));
        let grads = g[0]
            .chunks_exact(8)
            .zip(g[1].chunks_exact(8))
            .zip(g[2].chunks_exact(8).zip(g[3].chunks_exact(8)));
        for (((x0, x1), x2), ((g0, g1), (g2, g3))) in rows.zip(grads) {
            let xv = [load(x0), load(x1), load(x2)];
            for (ao, g) in a.iter_mut().zip([g0, g1, g2, g3]) {
                let gv = load(g);
                for (av, &x) in ao.iter_mut().zip(&xv) {
                    *av = fma(gv, x, *av);
                }
            }
        }
        *acc = a;
        return;
    }
    let mut p = 0;
    while p + 8 <= len {
        let xv = [load(&x0[p..]), load(&x1[p..]), load(&x2[p..])];
        for (ao, g) in a.iter_mut().zip(&gys) {
            let gv = load(&g[p..]);
            for (av, &x) in ao.iter_mut().zip(&xv) {
                *av = fma(gv, x, *av);
            }
        }
        p += 8;
    }
    *acc = a;
}
