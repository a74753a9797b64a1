//! Stride-1 convolutions as implicit matrix products over padded "strips", AVX2 + FMA.
//!
//! - A zero-padded plane (`rows x row` words) is read as one long strip: output
//!   `(oy, ox)` is strip position `p = oy * row + ox`, and tap `(ky, kx)` reads the plane
//!   at `p + ky * dy * row + kx * dx`. Positions with `ox >= ow` are computed and
//!   dropped; in exchange a tile is a run of contiguous positions across row ends, so
//!   small planes (7x7) still fill whole 8-lane vectors and tiles can be 24 wide.
//! - Forward and backward-input: a tile is `B <= 4` output channels x `8 * V <= 24`
//!   positions (12 `ymm` accumulators); per (input channel, tap) it loads `V` vectors of
//!   the strip and broadcasts `B` packed weights into `B * V` FMAs.
//! - Backward-weight vectorises over output channels instead: the output gradient is
//!   transposed into `gyT[p][oc]` (zeros at dropped positions and padding channels), and
//!   a tile is `R` (input channel, tap) rows x `8 * V` output channels, summed over every
//!   position of every sample with one broadcast input word per row: no horizontal sums.
//! - Only stride 1 (every backward-input the portable kernels also tile); anything else,
//!   or planes larger than the stack buffers, answers `false` and the caller falls back.
//! - Workspace on the stack only, never the arena: forward and backward-input 32 KiB of
//!   planes + 32 KiB of packed weights + 8 KiB of offsets; backward-weight 32 KiB of
//!   planes + 2 x 32 KiB of transposed gradients + 8 KiB of offsets (104 KiB at most).

use super::avx2::{fma, load, splat, store, F8};
use crate::kernels::conv::ConvGeom;

/// Words of the stack buffer holding padded planes.
const PLANE_WORDS: usize = 8192;
/// Words of each transposed buffer of backward-weight (`gyT` and `gwT`).
const T_WORDS: usize = 8192;
/// (input channel, tap) pairs per pass.
const MAX_K: usize = 1024;
/// Output channels per forward tile.
const OB: usize = 4;

/// Layout of padded planes read as strips (all sizes in words).
#[derive(Clone, Copy, Debug)]
struct Strip {
    src: [usize; 2],
    pad: [usize; 2],
    /// Words per padded row.
    row: usize,
    /// Strip positions: output rows x `row`.
    len: usize,
    /// Words per channel: the padded plane plus the slack that tiles read past it.
    chan: usize,
    /// Output rows and columns.
    out: [usize; 2],
}

impl Strip {
    /// The layout for stride-1 `k` kernels reading `src` planes; `None` if `out` is not
    /// the stride-1 output size or a size overflows.
    fn new(
        src: [usize; 2],
        pad: [usize; 2],
        k: [usize; 2],
        dil: [usize; 2],
        out: [usize; 2],
    ) -> Option<Self> {
        let rows = src[0].checked_add(pad[0].checked_mul(2)?)?;
        let row = src[1].checked_add(pad[1].checked_mul(2)?)?;
        let reach_y = k[0].checked_sub(1)?.checked_mul(dil[0])?;
        let reach_x = k[1].checked_sub(1)?.checked_mul(dil[1])?;
        if rows.checked_sub(reach_y)? != out[0] || row.checked_sub(reach_x)? != out[1] || out[0] * out[1] == 0
        {
            return None;
        }
        let len = out[0].checked_mul(row)?;
        // Tiles end at most at the next multiple of 8 past `len`, and read `reach_x` on.
        let slack = len.checked_next_multiple_of(8)? - len + reach_x;
        let chan = rows.checked_mul(row)?.checked_add(slack)?;
        Some(Strip {
            src,
            pad,
            row,
            len,
            chan,
            out,
        })
    }

    /// Offsets of every (input channel, tap) of `nin` channels, channel-major.
    fn offsets(&self, nin: usize, k: [usize; 2], dil: [usize; 2], offs: &mut [usize; MAX_K]) {
        let taps = k[0] * k[1];
        for i in 0..nin {
            for ky in 0..k[0] {
                for kx in 0..k[1] {
                    offs[i * taps + ky * k[1] + kx] = i * self.chan + ky * dil[0] * self.row + kx * dil[1];
                }
            }
        }
    }

    /// Copies `count` consecutive source planes into `buf`, zero-padded.
    fn fill(&self, buf: &mut [f32], src: &[f32], count: usize) {
        let buf = &mut buf[..count * self.chan];
        buf.fill(0.0);
        let [h, w] = self.src;
        for (dst, s) in buf
            .chunks_exact_mut(self.chan)
            .zip(src[..count * h * w].chunks_exact(h * w))
        {
            for (r, srow) in s.chunks_exact(w).enumerate() {
                copy_short(&mut dst[(r + self.pad[0]) * self.row + self.pad[1]..][..w], srow);
            }
        }
    }

    /// Calls `f(strip position, output index, run length)` for every run of kept
    /// positions in `p0..p0 + width`.
    #[inline(always)]
    fn runs(&self, p0: usize, width: usize, mut f: impl FnMut(usize, usize, usize)) {
        let end = (p0 + width).min(self.len);
        let mut p = p0;
        while p < end {
            let (oy, ox) = (p / self.row, p % self.row);
            let seg = (end - p).min(self.row - ox);
            if ox < self.out[1] {
                f(p, oy * self.out[1] + ox, seg.min(self.out[1] - ox));
            }
            p += seg;
        }
    }
}

/// `dst.copy_from_slice(&src[..dst.len()])` in fixed-size moves: the runs here are a
/// few words long, too short for a `memmove` call to pay off.
#[inline(always)]
fn copy_short(dst: &mut [f32], src: &[f32]) {
    let n = dst.len();
    let src = &src[..n];
    let mut k = 0;
    while n - k >= 8 {
        dst[k..k + 8].copy_from_slice(&src[k..k + 8]);
        k += 8;
    }
    for step in [4, 2, 1] {
        if n - k >= step {
            dst[k..k + step].copy_from_slice(&src[k..k + step]);
            k += step;
        }
    }
}

/// How a forward tile starts: from the bias (or zero), or from what the output holds.
#[derive(Clone, Copy)]
enum Init {
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
        if taps == 0 || chunk == 0 {
            return false;
        }
        let mut buf = [0.0f32; PLANE_WORDS];
        let mut offs = [0usize; MAX_K];
        let mut woffs = [0usize; MAX_K];
        let (src_plane, out_plane) = (s.src[0] * s.src[1], s.out[0] * s.out[1]);
        for grp in 0..self.groups {
            let mut c0 = 0;
            while c0 < self.cin {
                let nin = chunk.min(self.cin - c0);
                let kk = nin * taps;
                s.offsets(nin, self.k, self.dil, &mut offs);
                for i in 0..nin {
                    for t in 0..taps {
                        woffs[i * taps + t] = wof(grp, c0 + i, t);
                    }
                }
                let bias = self.bias.filter(|_| c0 == 0);
                for n in 0..self.batch {
                    let first = (n * self.groups * self.cin + grp * self.cin + c0) * src_plane;
                    s.fill(&mut buf, &src[first..], nin);
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
                        let t = Tiles {
                            strip: s,
                            buf: &buf[..nin * s.chan],
                            offs: &offs[..kk],
                            woffs: &woffs[..kk],
                            w: &w[o0 * ostride..],
                            ostride,
                            init,
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
}

impl Tiles<'_> {
    #[target_feature(enable = "avx2,fma")]
    fn all<const B: usize>(&self, dst: &mut [f32]) {
        let mut p0 = 0;
        while p0 < self.strip.len {
            let left = self.strip.len - p0;
            p0 += if left > 16 {
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
        let mut tmp = [0.0f32; OB * 24];
        let mut acc = [[splat(0.0); V]; B];
        match self.init {
            Init::Bias(bv) => {
                for (a, &v) in acc.iter_mut().zip(&bv) {
                    *a = [splat(v); V];
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
}

/// `y = conv(x, w) + b` for stride 1; `false` (nothing written) for other shapes.
///
/// # Safety
/// Only on a CPU with AVX2 and FMA (see `avx2::available`).
#[target_feature(enable = "avx2,fma")]
pub(crate) fn conv2d_forward(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) -> bool {
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

/// `gw += correlate(gy, x)` for stride 1; `false` (nothing written) for other shapes.
#[target_feature(enable = "avx2,fma")]
pub(crate) fn conv2d_backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    if g.stride != [1, 1] {
        return false;
    }
    let k = [g.kh, g.kw];
    let Some(s) = Strip::new([g.h, g.w], g.pad, k, g.dil, [g.oh, g.ow]) else {
        return false;
    };
    let (cin, cout, taps) = (g.c_in / g.groups, g.c_out / g.groups, g.kh * g.kw);
    if taps == 0 {
        return false;
    }
    if cin * taps < BY_POSITION_BELOW {
        return weight_by_position(g, &s, gy, x, gw);
    }
    let ocp = cout.next_multiple_of(8);
    if s.len * ocp > T_WORDS {
        return false;
    }
    let chunk = (PLANE_WORDS / s.chan)
        .min(MAX_K / taps)
        .min(T_WORDS / (taps * ocp))
        .min(cin);
    if chunk == 0 {
        return false;
    }
    let mut buf = [0.0f32; PLANE_WORDS];
    let mut gyt = [0.0f32; T_WORDS];
    let mut gwt = [0.0f32; T_WORDS];
    let mut offs = [0usize; MAX_K];
    let (op, ip) = (g.oh * g.ow, g.h * g.w);
    // Dropped positions and padding channels stay zero: only kept ones are written.
    let gyt = &mut gyt[..s.len * ocp];
    for grp in 0..g.groups {
        let mut c0 = 0;
        while c0 < cin {
            let nin = chunk.min(cin - c0);
            let kk = nin * taps;
            s.offsets(nin, k, g.dil, &mut offs);
            let gwt = &mut gwt[..kk * ocp];
            gwt.fill(0.0);
            for n in 0..g.n {
                s.fill(&mut buf, &x[(n * g.c_in + grp * cin + c0) * ip..], nin);
                for oc in 0..cout {
                    let src = &gy[(n * g.c_out + grp * cout + oc) * op..][..op];
                    for (oy, r) in src.chunks_exact(g.ow).enumerate() {
                        for (ox, &v) in r.iter().enumerate() {
                            gyt[(oy * s.row + ox) * ocp + oc] = v;
                        }
                    }
                }
                let d = Dots {
                    buf: &buf[..nin * s.chan],
                    gyt,
                    ocp,
                    len: s.len,
                };
                let mut ob = 0;
                while ob < ocp {
                    ob += if ocp - ob >= 16 {
                        d.rows::<2>(&offs[..kk], ob, gwt)
                    } else {
                        d.rows::<1>(&offs[..kk], ob, gwt)
                    };
                }
            }
            for oc in 0..cout {
                let at = ((grp * cout + oc) * cin + c0) * taps;
                for (k, dst) in gw[at..][..kk].iter_mut().enumerate() {
                    *dst += gwt[k * ocp + oc];
                }
            }
            c0 += nin;
        }
    }
    true
}

/// Backward-weight with fewer (input channel, tap) rows than this per group uses
/// [`weight_by_position`]: transposing `gy` costs more than the few products per
/// element it feeds (W1's first layer has 9 rows).
const BY_POSITION_BELOW: usize = 32;

/// Backward-weight for few rows: vectors run along strip positions, a tile is `B`
/// output channels x `T` (input channel, tap) rows of 8-lane partial sums over one
/// sample's strip, summed across lanes at the end. `gy` planes are copied into strips
/// (zeros at dropped positions), no transposition.
#[target_feature(enable = "avx2,fma")]
fn weight_by_position(g: &ConvGeom, s: &Strip, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    let (cin, cout, taps) = (g.c_in / g.groups, g.c_out / g.groups, g.kh * g.kw);
    let stride = s.len.next_multiple_of(8);
    let chunk = (PLANE_WORDS / s.chan).min(MAX_K / taps).min(cin);
    if chunk == 0 || OB * stride > T_WORDS {
        return false;
    }
    let mut buf = [0.0f32; PLANE_WORDS];
    let mut gys = [0.0f32; T_WORDS];
    let mut offs = [0usize; MAX_K];
    let (op, ip) = (g.oh * g.ow, g.h * g.w);
    for grp in 0..g.groups {
        let mut c0 = 0;
        while c0 < cin {
            let nin = chunk.min(cin - c0);
            let kk = nin * taps;
            s.offsets(nin, [g.kh, g.kw], g.dil, &mut offs);
            for n in 0..g.n {
                s.fill(&mut buf, &x[(n * g.c_in + grp * cin + c0) * ip..], nin);
                for o0 in (0..cout).step_by(OB) {
                    let b = OB.min(cout - o0);
                    let oc = grp * cout + o0;
                    let src = &gy[(n * g.c_out + oc) * op..][..b * op];
                    // Kept positions only: the rest stays zero from the start.
                    for (o, plane) in src.chunks_exact(op).enumerate() {
                        for (oy, r) in plane.chunks_exact(g.ow).enumerate() {
                            copy_short(&mut gys[o * stride + oy * s.row..][..g.ow], r);
                        }
                    }
                    let d = Lanes {
                        buf: &buf[..nin * s.chan],
                        gys: &gys[..b * stride],
                        stride,
                    };
                    let mut k0 = 0;
                    while k0 < kk {
                        let t = if kk - k0 >= 3 { 3 } else { 1 };
                        let o = &offs[k0..];
                        let sums = match (b, t) {
                            (OB, 3) => d.tile::<OB, 3>(o),
                            (OB, _) => d.tile::<OB, 1>(o),
                            (_, 3) => d.tile::<1, 3>(o),
                            _ => d.tile::<1, 1>(o),
                        };
                        let step = if b == OB { OB } else { 1 };
                        for (i, row) in sums.iter().enumerate().take(step) {
                            let at = ((oc + i) * cin + c0) * taps + k0;
                            for (dst, v) in gw[at..][..t].iter_mut().zip(row) {
                                *dst += v;
                            }
                        }
                        k0 += t;
                    }
                    // Channels of a short last block one at a time.
                    if b != OB {
                        for i in 1..b {
                            let d = Lanes {
                                buf: &buf[..nin * s.chan],
                                gys: &gys[i * stride..][..stride],
                                stride,
                            };
                            for (k, &off) in offs[..kk].iter().enumerate() {
                                let v = d.tile::<1, 1>(&[off]);
                                gw[((oc + i) * cin + c0) * taps + k] += v[0][0];
                            }
                        }
                    }
                }
            }
            c0 += nin;
        }
    }
    true
}

/// Position-vector tiles of [`weight_by_position`].
struct Lanes<'a> {
    buf: &'a [f32],
    /// Output-gradient strips, `stride` words apart.
    gys: &'a [f32],
    stride: usize,
}

impl Lanes<'_> {
    /// `sums[o][t] = sum_p gys[o][p] * buf[offs[t] + p]` for `B` channels, `T` rows.
    #[target_feature(enable = "avx2,fma")]
    fn tile<const B: usize, const T: usize>(&self, offs: &[usize]) -> [[f32; 3]; OB] {
        let len = self.stride;
        let mut acc = [[splat(0.0); T]; B];
        let mut xs: [&[f32]; T] = [&[]; T];
        for (x, &off) in xs.iter_mut().zip(offs) {
            *x = &self.buf[off..][..len];
        }
        let mut gs: [&[f32]; B] = [&[]; B];
        for (o, gsl) in gs.iter_mut().enumerate() {
            *gsl = &self.gys[o * self.stride..][..len];
        }
        let mut p = 0;
        while p < len {
            let mut xv = [splat(0.0); T];
            for (v, x) in xv.iter_mut().zip(&xs) {
                *v = load(&x[p..]);
            }
            for (a, gsl) in acc.iter_mut().zip(&gs) {
                let gv = load(&gsl[p..]);
                for (av, &x) in a.iter_mut().zip(&xv) {
                    *av = fma(gv, x, *av);
                }
            }
            p += 8;
        }
        let mut sums = [[0.0f32; 3]; OB];
        let mut tmp = [0.0f32; 8];
        for (srow, a) in sums.iter_mut().zip(&acc) {
            for (s, &av) in srow.iter_mut().zip(a) {
                store(av, &mut tmp);
                *s = tmp.iter().sum();
            }
        }
        sums
    }
}

/// Backward-weight tiles over one sample: `gwT[k][oc] += sum_p x[offs[k] + p] * gyT[p][oc]`.
struct Dots<'a> {
    buf: &'a [f32],
    gyt: &'a [f32],
    /// Output channels per `gyT` row (a multiple of 8).
    ocp: usize,
    len: usize,
}

impl Dots<'_> {
    /// Every row for the `8 * V` output channels from `ob`; returns `8 * V`.
    #[target_feature(enable = "avx2,fma")]
    fn rows<const V: usize>(&self, offs: &[usize], ob: usize, gwt: &mut [f32]) -> usize {
        // 12 accumulators: 6 rows x 2 vectors or 12 rows x 1.
        let most = 12 / V;
        let mut k0 = 0;
        while k0 < offs.len() {
            let r = most.min(offs.len() - k0);
            let (o, g) = (&offs[k0..], &mut gwt[k0 * self.ocp..]);
            match r {
                12 => self.tile::<12, V>(o, ob, g),
                11 => self.tile::<11, V>(o, ob, g),
                10 => self.tile::<10, V>(o, ob, g),
                9 => self.tile::<9, V>(o, ob, g),
                8 => self.tile::<8, V>(o, ob, g),
                7 => self.tile::<7, V>(o, ob, g),
                6 => self.tile::<6, V>(o, ob, g),
                5 => self.tile::<5, V>(o, ob, g),
                4 => self.tile::<4, V>(o, ob, g),
                3 => self.tile::<3, V>(o, ob, g),
                2 => self.tile::<2, V>(o, ob, g),
                _ => self.tile::<1, V>(o, ob, g),
            }
            k0 += r;
        }
        8 * V
    }

    #[target_feature(enable = "avx2,fma")]
    fn tile<const R: usize, const V: usize>(&self, offs: &[usize], ob: usize, gwt: &mut [f32]) {
        let mut acc = [[splat(0.0); V]; R];
        let mut xr: [&[f32]; R] = [&[]; R];
        for (r, (a, x)) in acc.iter_mut().zip(xr.iter_mut()).enumerate() {
            for (v, av) in a.iter_mut().enumerate() {
                *av = load(&gwt[r * self.ocp + ob + 8 * v..]);
            }
            *x = &self.buf[offs[r]..][..self.len];
        }
        for (p, grow) in self.gyt.chunks_exact(self.ocp).enumerate() {
            let mut gv: [F8; V] = [splat(0.0); V];
            for (v, g) in gv.iter_mut().enumerate() {
                *g = load(&grow[ob + 8 * v..]);
            }
            for (a, x) in acc.iter_mut().zip(&xr) {
                let xs = splat(x[p]);
                for (av, &g) in a.iter_mut().zip(&gv) {
                    *av = fma(xs, g, *av);
                }
            }
        }
        for (r, a) in acc.iter().enumerate() {
            for (v, &av) in a.iter().enumerate() {
                store(av, &mut gwt[r * self.ocp + ob + 8 * v..]);
            }
        }
    }
}
