//! Winograd F(2x2, 3x3) for 3x3 stride-1 padding-1 convolutions, AVX2 + FMA.
//!
//! - A 2x2 block of outputs ("tile") of one output channel is `A^T [sum over input
//!   channels of U . V] A`, where `V = B^T d B` is the transformed 4x4 input patch and
//!   `U = G g G^T` the transformed 3x3 kernel (Lavin and Gray's matrices): 16
//!   multiply-adds per tile and channel pair instead of 36.
//! - Lanes are 8 samples of the batch: the input is transposed 8 samples x 8 positions
//!   at a time (`transpose8`) into zero-padded rows whose every position is one vector,
//!   so the transforms are plain vector additions at fixed offsets and the products are
//!   `4 output channels x T tiles` of FMAs with broadcast `U` words
//!   (`winograd_products.rs`). A last group of
//!   fewer than 8 samples leaves its other lanes zero (the dispatch takes batches that
//!   fill most lanes).
//! - Backward-input of such a convolution is the same convolution of the output
//!   gradient with the kernel flipped and its channel axes swapped, accumulated into
//!   the input gradient: both passes share the driver.
//! - Rounding differs from the direct kernels (the transforms add and halve before
//!   multiplying); `tests` bounds the difference relative to `sum |w| |x|`.
//! - An input's non-finite value reaches exactly the outputs whose windows hold it
//!   (`B^T`'s and `A^T`'s zero patterns match the windows), as `inf` or `NaN` where the
//!   direct kernel may give `inf`.
//! - With AVX-512F (`avx512.rs`) the whole pipeline runs on 16 lanes, 16 samples per
//!   vector (`winograd16.rs`). Shapes its buffers do not hold (more than 32 input
//!   channels), and a last group of 8 samples or fewer, keep 8-sample groups, with the
//!   products on 16 lanes two tiles per vector. Either way each lane's arithmetic is
//!   the 8-lane one: the same results bit for bit.
//! - Stack only, no heap: transformed weights (`U_WORDS`, 32 KiB); for 8-sample groups
//!   padded transposed rows (`X_WORDS`, 40 KiB), transformed inputs of one pass
//!   (`V_WORDS`, 65 KiB, a whole tile row of W1's layers), outputs of one pass
//!   (`Y_WORDS`, 32 KiB) and one block's products (up to 12 KiB): about 181 KiB;
//!   with `winograd16.rs`'s instead, at most 194 KiB. The two sets are never on the
//!   stack together. Shapes they do not hold are declined (the strip kernels take them).

use super::avx2::{add, load, mul, splat, store, sub, transpose8, F8};
use super::layout::copy_short;
use crate::kernels::conv::ConvGeom;
use core::arch::x86_64::{_mm256_blendv_ps, _mm256_cmp_ps, _CMP_LT_OQ};

/// Words of the transformed weights, `[xi 16][block of 4 output channels][input channel][4]`.
const U_WORDS: usize = 8192;
/// Words of the transposed padded input rows, `[input channel][ring slot 4][position][8]`.
pub(super) const X_WORDS: usize = 10240;
/// Words of one pass's transformed inputs, `[xi 16][input channel][tile][8]`.
const V_WORDS: usize = 16_640;
/// Words of the 16-lane transposed padded input rows, `[input channel][slot 4][position][16]`.
pub(super) const X16_WORDS: usize = 20_480;
/// Words of one 16-lane pass's outputs beside `X16_WORDS` of rows (else `Y_WORDS`).
pub(super) const Y16_WORDS: usize = 4096;
/// Tiles per pass along a tile row.
const TB_MAX: usize = 8;
/// Words of one pass's outputs, `[channel][row 2][position][8]`.
pub(super) const Y_WORDS: usize = 8192;

/// Lanes where `a < b`, as an all-ones mask.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn less(a: F8, b: F8) -> F8 {
    F8(_mm256_cmp_ps::<_CMP_LT_OQ>(a.0, b.0))
}

/// `b` in the lanes where `mask` is set, `a` elsewhere.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn blend(a: F8, b: F8, mask: F8) -> F8 {
    F8(_mm256_blendv_ps(a.0, b.0, mask.0))
}

/// One Winograd convolution: `cout` planes from `cin` planes, both `h x w`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Wino {
    pub(super) n: usize,
    pub(super) cin: usize,
    pub(super) cout: usize,
    pub(super) h: usize,
    pub(super) w: usize,
    /// Tile rows and columns.
    pub(super) th: usize,
    pub(super) tw: usize,
    /// Positions per padded row: a zero column, the plane's, zeros up to `2 * tw + 2`.
    pub(super) pw: usize,
    /// Tiles per pass and blocks of 4 output channels.
    pub(super) tb: usize,
    pub(super) cb: usize,
    /// Whether the products take 16-lane multiply-adds (AVX-512F available).
    pub(super) wide: bool,
    /// Tiles per pass of a 16-sample group (`group16`), 0 where its buffers do not
    /// hold the shape.
    pub(super) tb16: usize,
}

impl Wino {
    fn new(n: usize, cin: usize, cout: usize, h: usize, w: usize) -> Option<Self> {
        if n == 0 || cin == 0 || cout == 0 || h == 0 || w == 0 {
            return None;
        }
        let (th, tw) = (h.div_ceil(2), w.div_ceil(2));
        let pw = 2 * tw + 2;
        let cb = cout.div_ceil(4);
        let tb = ((V_WORDS / 16).saturating_sub(16) / (cin * 8))
            .min(TB_MAX)
            .min(tw);
        let fits = tb > 0
            && 16 * cb * 4 * cin <= U_WORDS
            && cin * 4 * pw * 8 <= X_WORDS
            && cout * 2 * 2 * tb * 8 <= Y_WORDS;
        // 16-lane buffers: 40 KiB of rows and 32 KiB of outputs, or 80 and 16.
        let xw = cin * 4 * pw * 16;
        let yw = if xw <= X_WORDS { Y_WORDS } else { Y16_WORDS };
        let tb16 = if cin <= 32 && xw <= X16_WORDS {
            (yw / (cout * 64)).min(tw)
        } else {
            0
        };
        fits.then_some(Wino {
            n,
            cin,
            cout,
            h,
            w,
            th,
            tw,
            pw,
            tb,
            cb,
            wide: super::avx512::available(),
            tb16,
        })
    }

    /// Words between the transformed inputs of two `xi` in a pass of `nt` tiles: one
    /// cache line more than they fill, so that the 16 do not share a few cache sets
    /// (with 2 KiB apart, as W1's conv3 would be, they all fall in two).
    pub(super) fn v_stride(&self, nt: usize) -> usize {
        self.cin * nt * 8 + 16
    }

    /// Where `U[xi]` of output channel `co` and input channel `ci` is kept.
    fn u_at(&self, xi: usize, co: usize, ci: usize) -> usize {
        ((xi * self.cb + co / 4) * self.cin + ci) * 4 + co % 4
    }

    /// `U = G g G^T` of every channel pair, kernel tap `t` (row-major) of the pair
    /// `(co, ci)` being `wt(co, ci, t)`; channels past `cout` zero. A vector holds 2
    /// input channels x 4 output channels, the order `u_at` keeps them in.
    #[target_feature(enable = "avx2,fma")]
    fn weights(&self, u: &mut [f32], wt: impl Fn(usize, usize, usize) -> f32) {
        let half = splat(0.5);
        let g3 = |a: F8, b: F8, c: F8| [a, mul(half, add(add(a, b), c)), mul(half, add(sub(a, b), c)), c];
        for cb in 0..self.cb {
            for ci0 in (0..self.cin).step_by(2) {
                // Lane `l`: output channel `4 cb + l % 4`, input channel `ci0 + l / 4`.
                let mut taps = [[0.0f32; 8]; 9];
                for l in 0..8 {
                    let (co, ci) = (4 * cb + l % 4, ci0 + l / 4);
                    if co < self.cout && ci < self.cin {
                        for (t, tt) in taps.iter_mut().enumerate() {
                            tt[l] = wt(co, ci, t);
                        }
                    }
                }
                let mut k = [splat(0.0); 9];
                for (kt, tt) in k.iter_mut().zip(&taps) {
                    *kt = load(tt);
                }
                // `G g` (4 x 3), then `(G g) G^T` row by row.
                let cols: [[F8; 4]; 3] = core::array::from_fn(|c| g3(k[c], k[3 + c], k[6 + c]));
                let [c0, c1, c2] = cols;
                for (r, ((&x, &y), &z)) in c0.iter().zip(&c1).zip(&c2).enumerate() {
                    for (c, &v) in g3(x, y, z).iter().enumerate() {
                        let at = self.u_at(4 * r + c, 4 * cb, ci0);
                        if ci0 + 1 < self.cin {
                            store(v, &mut u[at..]);
                        } else {
                            let mut t = [0.0f32; 8];
                            store(v, &mut t);
                            u[at..at + 4].copy_from_slice(&t[..4]);
                        }
                    }
                }
            }
        }
    }

    /// `out = bias + conv(src)` (`bias` is `Some`) or `out += conv(src)` (`None`):
    /// groups of 16 samples where [`Wino::run16`] takes them, but a last group of 8
    /// or fewer (which would leave half its lanes idle) as the others, in groups of 8.
    #[target_feature(enable = "avx2,fma")]
    fn run(&self, src: &[f32], u: &[f32], out: &mut [f32], bias: Option<Option<&[f32]>>) {
        let n16 = if self.n % 16 > 8 { self.n } else { self.n / 16 * 16 };
        let head = Wino { n: n16, ..*self };
        let done = n16 > 0 && super::avx512::winograd_run16(&head, src, u, out, bias);
        self.run8(if done { n16 } else { 0 }, src, u, out, bias);
    }

    /// [`Wino::run`] of samples `from..` in groups of 8 (none if `from` is `n`). Not
    /// inlined: its buffers and [`Wino::run16`]'s are never on the stack together.
    #[target_feature(enable = "avx2,fma")]
    #[inline(never)]
    fn run8(&self, from: usize, src: &[f32], u: &[f32], out: &mut [f32], bias: Option<Option<&[f32]>>) {
        if from >= self.n {
            return;
        }
        let mut xb = Lines([0.0f32; X_WORDS]);
        let mut vb = Lines([0.0f32; V_WORDS]);
        let mut yb = Lines([0.0f32; Y_WORDS]);
        for n0 in (from..self.n).step_by(8) {
            let ns = 8.min(self.n - n0);
            self.group8([n0, ns], src, u, [&mut xb.0, &mut vb.0, &mut yb.0], bias, out);
        }
    }

    /// Samples `n0..n0 + ns` (at most 8), one per lane of 8.
    #[target_feature(enable = "avx2,fma")]
    fn group8(
        &self,
        [n0, ns]: [usize; 2],
        src: &[f32],
        u: &[f32],
        [xb, vb, yb]: [&mut [f32]; 3],
        bias: Option<Option<&[f32]>>,
        out: &mut [f32],
    ) {
        for ty in 0..self.th {
            // Tile row `ty` reads padded rows `2ty..2ty + 4`, kept in ring slots
            // `row % 4`: all four for the first tile row, the two new ones after.
            let first = if ty == 0 { 0 } else { 2 };
            for r in first..4 {
                self.transpose_in(src, n0, ns, 2 * ty + r, xb);
            }
            let slots = [0, 1, 2, 3].map(|r| (2 * ty + r) % 4);
            let mut tx0 = 0;
            while tx0 < self.tw {
                let nt = self.tb.min(self.tw - tx0);
                self.input_tiles(xb, slots, tx0, nt, vb);
                if !(self.wide && super::avx512::winograd_products(self, u, vb, nt, bias.flatten(), yb)) {
                    self.products(u, vb, nt, bias.flatten(), yb);
                }
                for cb in 0..self.cb {
                    self.transpose_out(yb, [n0, ns], [ty, tx0, nt], cb, bias.is_none(), out);
                }
                tx0 += nt;
            }
        }
    }

    /// Padded row `pr` (input row `pr - 1`) of samples `n0..n0 + ns` of every input
    /// channel, transposed into ring slot `pr % 4` of `xb`.
    #[target_feature(enable = "avx2,fma")]
    fn transpose_in(&self, src: &[f32], n0: usize, ns: usize, pr: usize, xb: &mut [f32]) {
        let plane = self.h * self.w;
        let rw = self.pw * 8;
        let iy = pr.wrapping_sub(1);
        for ci in 0..self.cin {
            let dst = &mut xb[(ci * 4 + pr % 4) * rw..][..rw];
            if iy >= self.h {
                for z in dst.chunks_exact_mut(8) {
                    store(splat(0.0), z);
                }
                continue;
            }
            store(splat(0.0), dst);
            for z in dst[(self.w + 1) * 8..].chunks_exact_mut(8) {
                store(splat(0.0), z);
            }
            let mut ix = 0;
            while ix < self.w {
                let k = 8.min(self.w - ix);
                let mut rows = [splat(0.0); 8];
                for (s, row) in rows.iter_mut().enumerate().take(ns) {
                    let at = ((n0 + s) * self.cin + ci) * plane + iy * self.w + ix;
                    *row = match src.get(at..at + 8) {
                        Some(r) => load(r),
                        None => {
                            let mut t = [0.0f32; 8];
                            copy_short(&mut t[..k], &src[at..]);
                            load(&t)
                        }
                    };
                }
                // Vector `j` holds position `ix + j` of every sample; those past the
                // row (`j >= k`) are dropped.
                let cols = transpose8(rows);
                for (j, &c) in cols.iter().enumerate().take(k) {
                    store(c, &mut dst[(1 + ix + j) * 8..]);
                }
                ix += k;
            }
        }
    }

    /// `V = B^T d B` of tiles `tx0..tx0 + nt` of the current tile row, every input
    /// channel, into `vb` (`[xi][ci][tile][8]`).
    #[target_feature(enable = "avx2,fma")]
    fn input_tiles(&self, xb: &[f32], slots: [usize; 4], tx0: usize, nt: usize, vb: &mut [f32]) {
        let rw = self.pw * 8;
        let xs = self.v_stride(nt);
        for ci in 0..self.cin {
            let chan = &xb[ci * 4 * rw..][..4 * rw];
            for t in 0..nt {
                let c0 = 2 * (tx0 + t) * 8;
                let mut d = [[splat(0.0); 4]; 4];
                for (dr, &slot) in d.iter_mut().zip(&slots) {
                    let row = &chan[slot * rw + c0..][..32];
                    for (c, dv) in dr.iter_mut().enumerate() {
                        *dv = load(&row[8 * c..]);
                    }
                }
                for (r, v) in input_transform(d).iter().enumerate() {
                    for (c, &vv) in v.iter().enumerate() {
                        store(vv, &mut vb[(4 * r + c) * xs + (ci * nt + t) * 8..]);
                    }
                }
            }
        }
    }

    /// Where a pass's outputs (tile row `ty`, tiles `tx0..tx0 + nt`) go in a plane:
    /// `[x0, count, runs, len]`, runs of `len` outputs from `(2ty + r, x0)` for `r` below
    /// `runs`, one per row of `count` positions, or one for both rows when they span
    /// the plane's width (adjacent in `out`).
    pub(super) fn out_runs(&self, ty: usize, tx0: usize, nt: usize) -> [usize; 4] {
        let x0 = 2 * tx0;
        let count = (2 * nt).min(self.w - x0);
        let rows = 2.min(self.h - 2 * ty);
        if count == self.w {
            [x0, count, 1, rows * count]
        } else {
            [x0, count, rows, count]
        }
    }

    /// The pass's outputs in `yb` (channels `4cb..`, tile row `ty`, tiles `tx0..tx0 +
    /// nt`) transposed back to samples `n0..n0 + ns` of `out`: stored, or added to it
    /// (`acc`). Positions past the plane are dropped. A pass over whole tile rows
    /// writes its two output rows as one run (they are adjacent in `out`).
    #[target_feature(enable = "avx2,fma")]
    fn transpose_out(
        &self,
        yb: &[f32],
        [n0, ns]: [usize; 2],
        [ty, tx0, nt]: [usize; 3],
        cb: usize,
        acc: bool,
        out: &mut [f32],
    ) {
        let plane = self.h * self.w;
        let [x0, count, runs, len] = self.out_runs(ty, tx0, nt);
        let row = 2 * self.tb * 8;
        let lane = load(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
        for o in 0..4.min(self.cout - 4 * cb) {
            let co = 4 * cb + o;
            for r in 0..runs {
                let src = &yb[(co * 2 + r) * row..];
                let mut p = 0;
                while p < len {
                    let k = 8.min(len - p);
                    let mut v = [splat(0.0); 8];
                    // Position `p + i` of the run: row `ry`, column `rx`.
                    let (mut ry, mut rx) = if p < count { (0, p) } else { (1, p - count) };
                    for vi in v.iter_mut().take(k) {
                        *vi = load(&src[ry * row + rx * 8..]);
                        rx += 1;
                        if rx == count {
                            (ry, rx) = (ry + 1, 0);
                        }
                    }
                    // Vector `s` holds positions `p..p + k` of sample `s`.
                    let per_sample = transpose8(v);
                    let mask = less(lane, splat(k as f32));
                    for (s, &ps) in per_sample.iter().enumerate().take(ns) {
                        let at = ((n0 + s) * self.cout + co) * plane + (2 * ty + r) * self.w + x0 + p;
                        let dst = &mut out[at..];
                        if dst.len() >= 8 {
                            let old = load(dst);
                            let new = if acc { add(old, ps) } else { ps };
                            // Lanes past `k` keep the words they read.
                            store(if k == 8 { new } else { blend(old, new, mask) }, dst);
                        } else {
                            let mut t = [0.0f32; 8];
                            store(ps, &mut t);
                            for (d, &tv) in dst[..k].iter_mut().zip(&t) {
                                *d = if acc { *d + tv } else { tv };
                            }
                        }
                    }
                    p += k;
                }
            }
        }
    }
}
/// `N` words from a cache-line boundary: the buffers' vectors, at multiples of 8 or 16
/// words, then each fill (part of) one line instead of straddling two.
#[repr(C, align(64))]
pub(super) struct Lines<const N: usize>(pub(super) [f32; N]);

/// `B^T d` of one column or row of 4: d0 - d2, d1 + d2, d2 - d1, d1 - d3.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn bt(d: [F8; 4]) -> [F8; 4] {
    [sub(d[0], d[2]), add(d[1], d[2]), sub(d[2], d[1]), sub(d[1], d[3])]
}

/// `V = B^T d B` of one 4x4 patch `d[row][column]`: the columns, then each row (the
/// forward's and the backward-weight's input transform).
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(super) fn input_transform(d: [[F8; 4]; 4]) -> [[F8; 4]; 4] {
    let mut e = [[splat(0.0); 4]; 4];
    for c in 0..4 {
        let col = bt([d[0][c], d[1][c], d[2][c], d[3][c]]);
        for (er, &v) in e.iter_mut().zip(&col) {
            er[c] = v;
        }
    }
    for er in e.iter_mut() {
        *er = bt(*er);
    }
    e
}

/// Bias words of output channels `4 cb..4 cb + 4` (zero past the last channel or
/// without a bias).
pub(super) fn bias4(bias: Option<&[f32]>, cb: usize) -> [f32; 4] {
    let mut b4 = [0.0f32; 4];
    if let Some(b) = bias {
        for (o, bo) in b4.iter_mut().enumerate() {
            *bo = b.get(4 * cb + o).copied().unwrap_or(0.0);
        }
    }
    b4
}

/// [`bias4`] of blocks `cb` and `cb + 1`.
pub(super) fn bias8(bias: Option<&[f32]>, cb: usize) -> [f32; 8] {
    let (a, b) = (bias4(bias, cb), bias4(bias, cb + 1));
    [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]]
}

/// The Winograd geometry of `g` (`cin` and `cout` as the pass reads and writes them),
/// `None` if `g` is not a 3x3 stride-1 padding-1 convolution the buffers hold.
fn geometry(g: &ConvGeom, forward: bool) -> Option<Wino> {
    let ok = g.kh == 3
        && g.kw == 3
        && g.stride == [1, 1]
        && g.pad == [1, 1]
        && g.dil == [1, 1]
        && g.groups == 1
        && g.oh == g.h
        && g.ow == g.w;
    let (cin, cout) = if forward {
        (g.c_in, g.c_out)
    } else {
        (g.c_out, g.c_in)
    };
    ok.then(|| Wino::new(g.n, cin, cout, g.h, g.w)).flatten()
}

/// `y = conv(x, w) + b`; `false` (nothing written) for shapes this file does not take.
#[target_feature(enable = "avx2,fma")]
pub(super) fn conv2d_forward(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) -> bool {
    forward(g, x, w, b, y, super::avx512::available())
}

/// [`conv2d_forward`], with 16-lane products where `wide` and the CPU allow.
#[target_feature(enable = "avx2,fma")]
pub(super) fn forward(
    g: &ConvGeom,
    x: &[f32],
    w: &[f32],
    b: Option<&[f32]>,
    y: &mut [f32],
    wide: bool,
) -> bool {
    let Some(mut wg) = geometry(g, true) else {
        return false;
    };
    wg.wide &= wide;
    let mut u = [0.0f32; U_WORDS];
    wg.weights(&mut u, |co, ci, t| w[(co * g.c_in + ci) * 9 + t]);
    wg.run(x, &u, y, Some(b));
    true
}

/// `gx += conv_transpose(gy, w)`: the convolution of `gy` with the flipped kernel whose
/// channel axes are swapped; `false` as [`conv2d_forward`].
#[target_feature(enable = "avx2,fma")]
pub(super) fn conv2d_backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
    backward_input(g, gy, w, gx, super::avx512::available())
}

/// [`conv2d_backward_input`], with 16-lane products where `wide` and the CPU allow.
#[target_feature(enable = "avx2,fma")]
pub(super) fn backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32], wide: bool) -> bool {
    let Some(mut wg) = geometry(g, false) else {
        return false;
    };
    wg.wide &= wide;
    let mut u = [0.0f32; U_WORDS];
    // Output channel `co` of this pass is input channel `co` of the convolution.
    wg.weights(&mut u, |co, ci, t| w[(ci * g.c_in + co) * 9 + 8 - t]);
    wg.run(gy, &u, gx, None);
    true
}

/// Whether the dispatch routes `g` here: batches that fill most of the 8 sample lanes,
/// at least 8 channels in and out, and planes narrower than 8, or than 16 where the
/// products take 16 lanes (measured on W1's layers at batch 32, `bench --kernels`:
/// faster than the strip kernels on conv3's 7x7 planes, whose rows leave lanes of the
/// strip tiles idle; on conv2's 14x14 slower with AVX2 only, faster with AVX-512F).
pub(super) fn pays(g: &ConvGeom) -> bool {
    let lanes = 8 * g.n.div_ceil(8);
    let narrow = g.w < 8 || (g.w < 16 && super::avx512::available());
    narrow && g.n >= 8 && 4 * g.n >= 3 * lanes && g.c_in >= 8 && g.c_out >= 8
}
