//! Winograd F(2x2, 3x3) backward-weight for 3x3 stride-1 padding-1 convolutions with
//! AVX2 and FMA: `gw += correlate(gy, x)` with 16 multiply-adds per 2x2 tile of the
//! output gradient and channel pair instead of 36.
//!
//! - The transpose of the forward pass `y = A^T [(G g G^T) . (B^T d B)] A`:
//!   `gw[co][ci] += G^T M G`, `M = sum over samples and tiles of (A gy A^T)[co] .
//!   (B^T d B)[ci]` (`d` the 4x4 zero-padded input patch of the tile, `gy` its 2x2
//!   block of the output gradient, zero past the plane).
//! - Lanes are channels, not samples: both planes of a sample are transposed to
//!   `[channel / L][position][L]` (`transpose8`; `L` 16 with AVX-512F where the padded
//!   channel count is a multiple of 16, else 8), so the transforms are vector additions
//!   and `M[xi][ci][co]` is a product over (sample, tile) of `W` vectors (8 or 16 output
//!   channels) with broadcast `V` words: no horizontal sums, and `M` stays as small as
//!   the weights (sample lanes would need 8 partial sums per weight).
//! - Per sample, one row of 4 `xi` at a time: that row of every tile's `V` and `W` is
//!   written to `[tile][xi % 4][channel]` (each tile's 4 vectors side by side, one
//!   running pointer for the transforms), small enough to stay in L1, then the products
//!   run as a register-blocked GEMM over the tiles (a block of input channels x 2
//!   vectors of output channels, or x 1 vector for 2 `xi`, held in registers).
//!   Every sum takes its products in (sample, tile) order and each lane's transform
//!   operations are the same at either width, so the 8- and 16-lane code give the same
//!   bits.
//! - Rounding differs from the direct kernels (the transforms add and halve); the
//!   tests bound the difference relative to `sum |gy| |x|`.
//! - A non-finite value in `x` or `gy` makes sums of `M` non-finite, and the
//!   transforms would carry it to more taps than the direct kernels do (an edge tap
//!   whose products meet only padding gets `inf - inf` from `V`'s or `W`'s sums):
//!   such calls are declined after the products (nothing written), and the dispatch
//!   falls back to the strip kernels, whose non-finite weights they were before.
//! - Stack only, no heap: one sample's transposed padded input (`X_WORDS`, 16 KiB) and
//!   output gradient (`G_WORDS`, 16 KiB), one row of its transformed tiles
//!   (`VW_WORDS`, 24 KiB) and `M` (`M_WORDS`, 32 KiB): 88 KiB. Shapes they do not hold
//!   are declined.

use super::avx2::{add, fma, load, splat, store, sub, transpose8};
use super::avx512::{add16, fma16, high8, load16, load16_first, low8, splat16, store16, sub16, transpose8x2};
use super::layout::copy_short;
use crate::kernels::conv::ConvGeom;

/// Words of one sample's padded input, `[input channel / 8][padded row][padded
/// column][8]`.
const X_WORDS: usize = 4096;
/// Words of one sample's output gradient, `[output channel / 8][row][column][8]`, whole
/// tiles.
const G_WORDS: usize = 4096;
/// Words of one row of 4 `xi` of the transformed tiles of one sample: `V`
/// (`[tile][xi % 4][ci]`) then `W` (`[tile][xi % 4][co]`).
const VW_WORDS: usize = 6144;
/// Words of the sums, `[xi][ci][co]`.
const M_WORDS: usize = 8192;

/// `N` words from a cache-line boundary: the buffers' vectors, at multiples of 8 or 16
/// words, then fill (part of) one line each instead of straddling two.
#[repr(C, align(64))]
struct Lines<const N: usize>([f32; N]);

/// Column `j` of `V` or `W` (`[tile][j][c]`): the `c` words of `xi % 4 = j` of each
/// tile, in tile order.
fn column(t: &[f32], j: usize, c: usize) -> impl Iterator<Item = &[f32]> {
    t.chunks_exact(4 * c).map(move |k| &k[j * c..][..c])
}

/// One backward-weight: sizes and padded channel counts.
#[derive(Clone, Copy, Debug)]
pub(super) struct WinoWeight {
    /// Whether the products take 16-lane multiply-adds (AVX-512F available).
    wide: bool,
    n: usize,
    cin: usize,
    cout: usize,
    h: usize,
    w: usize,
    /// Tile rows and columns.
    th: usize,
    tw: usize,
    /// Input and output channels rounded up to multiples of 8 (zero lanes).
    cip: usize,
    cop: usize,
}

impl WinoWeight {
    fn new(g: &ConvGeom) -> Option<Self> {
        let ok = g.kh == 3
            && g.kw == 3
            && g.stride == [1, 1]
            && g.pad == [1, 1]
            && g.dil == [1, 1]
            && g.groups == 1
            && g.oh == g.h
            && g.ow == g.w
            && g.n > 0
            && g.c_in > 0
            && g.c_out > 0
            && g.h > 0
            && g.w > 0;
        if !ok {
            return None;
        }
        let (th, tw) = (g.h.div_ceil(2), g.w.div_ceil(2));
        let (cip, cop) = (g.c_in.next_multiple_of(8), g.c_out.next_multiple_of(8));
        let fits = 4 * th * tw * (cip + cop) <= VW_WORDS
            && (2 * th + 2) * (2 * tw + 2) * cip <= X_WORDS
            && 4 * th * tw * cop <= G_WORDS
            && 16 * cip * cop <= M_WORDS;
        fits.then_some(WinoWeight {
            wide: super::avx512::available(),
            n: g.n,
            cin: g.c_in,
            cout: g.c_out,
            h: g.h,
            w: g.w,
            th,
            tw,
            cip,
            cop,
        })
    }

    /// `gw += correlate(gy, x)`, or `false` (nothing written) if a sum is not finite.
    /// Not inlined: its 88 KiB of buffers stay out of the dispatch's frame.
    #[target_feature(enable = "avx2,fma")]
    #[inline(never)]
    fn run(&self, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
        let (mut xt, mut gt) = (Lines([0.0f32; X_WORDS]), Lines([0.0f32; G_WORDS]));
        let (mut vw, mut m) = (Lines([0.0f32; VW_WORDS]), Lines([0.0f32; M_WORDS]));
        let (xt, gt, vw, m) = (&mut xt.0, &mut gt.0, &mut vw.0, &mut m.0);
        let (ip, tiles) = (self.h * self.w, self.th * self.tw);
        let pw = 2 * self.tw + 2;
        // Positions outside the planes and channels past `cin`/`cout` are never written:
        // they stay zero.
        let (lx, lg) = self.lanes();
        let (xp, gp) = ((2 * self.th + 2) * pw * lx, 4 * tiles * lg);
        let xt = &mut xt[..self.cip / lx * xp];
        let gt = &mut gt[..self.cop / lg * gp];
        let m = &mut m[..16 * self.cip * self.cop];
        let (v, w) = vw.split_at_mut(4 * tiles * self.cip);
        let w = &mut w[..4 * tiles * self.cop];
        for n in 0..self.n {
            for c0 in (0..self.cin).step_by(8) {
                let at = (n * self.cin + c0) * ip;
                let dst = &mut xt[c0 / lx * xp + c0 % lx + (pw + 1) * lx..];
                let (src, cs) = (&x[at..], 8.min(self.cin - c0));
                if !(self.wide
                    && self.w > 8
                    && super::avx512::winograd_weight_transpose(src, cs, [self.h, self.w], [pw, lx], dst))
                {
                    transpose_planes(src, cs, [self.h, self.w], [pw, lx], dst);
                }
            }
            for c0 in (0..self.cout).step_by(8) {
                let at = (n * self.cout + c0) * ip;
                let dst = &mut gt[c0 / lg * gp + c0 % lg..];
                let (src, cs, layout) = (&gy[at..], 8.min(self.cout - c0), [2 * self.tw, lg]);
                if !(self.wide
                    && self.w > 8
                    && super::avx512::winograd_weight_transpose(src, cs, [self.h, self.w], layout, dst))
                {
                    transpose_planes(src, cs, [self.h, self.w], layout, dst);
                }
            }
            for r in 0..4 {
                if !(self.wide && super::avx512::winograd_weight_rows(self, r, xt, gt, v, w)) {
                    match r {
                        0 => self.rows::<0>(xt, gt, v, w),
                        1 => self.rows::<1>(xt, gt, v, w),
                        2 => self.rows::<2>(xt, gt, v, w),
                        _ => self.rows::<3>(xt, gt, v, w),
                    }
                }
                let mm = self.cip * self.cop;
                let m = &mut m[4 * r * mm..][..4 * mm];
                if !(self.wide && super::avx512::winograd_weight_products(self, v, w, m)) {
                    for (j, m) in m.chunks_exact_mut(mm).enumerate() {
                        self.products(v, w, j, m);
                    }
                }
            }
        }
        // `x - x` is 0 for a finite `x`, NaN otherwise.
        let mut nan = splat(0.0);
        for c in m.chunks_exact(8) {
            let v = load(c);
            nan = add(nan, sub(v, v));
        }
        let mut lanes = [0.0f32; 8];
        store(nan, &mut lanes);
        if lanes.iter().any(|l| l.is_nan()) {
            return false;
        }
        self.add_weights(m, gw);
        true
    }

    /// Channels per vector of the transposed planes and their transforms, input and
    /// output gradient: 16 with AVX-512F where the padded count is a multiple of 16,
    /// else 8 (each lane's operations are the same either way).
    fn lanes(&self) -> (usize, usize) {
        let l = |c: usize| if self.wide && c.is_multiple_of(16) { 16 } else { 8 };
        (l(self.cip), l(self.cop))
    }

    /// [`WinoWeight::rows`] of row `r`, with 16-lane transforms where [`WinoWeight::lanes`]
    /// says 16.
    #[target_feature(enable = "avx2,fma,avx512f")]
    pub(super) fn rows_wide(&self, r: usize, xt: &[f32], gt: &[f32], v: &mut [f32], w: &mut [f32]) {
        match r {
            0 => self.rows16::<0>(xt, gt, v, w),
            1 => self.rows16::<1>(xt, gt, v, w),
            2 => self.rows16::<2>(xt, gt, v, w),
            _ => self.rows16::<3>(xt, gt, v, w),
        }
    }

    /// [`WinoWeight::rows`] with 16-lane transforms where [`WinoWeight::lanes`] says 16.
    #[target_feature(enable = "avx2,fma,avx512f")]
    fn rows16<const R: usize>(&self, xt: &[f32], gt: &[f32], v: &mut [f32], w: &mut [f32]) {
        let (lx, lg) = self.lanes();
        let xp = xt.len() / (self.cip / lx);
        for (c, xc) in xt.chunks_exact(xp).enumerate() {
            if lx == 16 {
                self.input_row16::<R>(xc, 16 * c, v);
            } else {
                self.input_row::<R>(xc, 8 * c, v);
            }
        }
        let gp = gt.len() / (self.cop / lg);
        for (c, gc) in gt.chunks_exact(gp).enumerate() {
            if lg == 16 {
                self.gradient_row16::<R>(gc, 16 * c, w);
            } else {
                self.gradient_row::<R>(gc, 8 * c, w);
            }
        }
    }

    /// [`WinoWeight::input_row`] for input channels `c0..c0 + 16` (plane `xc`,
    /// `[row][column][16]`).
    #[target_feature(enable = "avx2,fma,avx512f")]
    fn input_row16<const R: usize>(&self, xc: &[f32], c0: usize, v: &mut [f32]) {
        let row = (2 * self.tw + 2) * 16;
        let (a, b) = [(0, 2), (1, 2), (2, 1), (1, 3)][R];
        let cip = self.cip;
        let mut tiles = v.chunks_exact_mut(4 * cip);
        for ty in 0..self.th {
            let (pa, pb) = (&xc[(2 * ty + a) * row..][..row], &xc[(2 * ty + b) * row..][..row]);
            // Column `p` of `B^T d`; a tile's columns 2 and 3 are the next one's 0 and 1.
            let e = |p: usize| {
                let (da, db) = (load16(&pa[16 * p..]), load16(&pb[16 * p..]));
                if R == 1 {
                    add16(da, db)
                } else {
                    sub16(da, db)
                }
            };
            let (mut e0, mut e1) = (e(0), e(1));
            for (tx, d) in (0..self.tw).zip(&mut tiles) {
                let (e2, e3) = (e(2 * tx + 2), e(2 * tx + 3));
                let t = [sub16(e0, e2), add16(e1, e2), sub16(e2, e1), sub16(e1, e3)];
                for (j, tv) in t.into_iter().enumerate() {
                    store16(tv, &mut d[j * cip + c0..]);
                }
                (e0, e1) = (e2, e3);
            }
        }
    }

    /// [`WinoWeight::gradient_row`] for output channels `c0..c0 + 16` (plane `gc`,
    /// `[row][column][16]`).
    #[target_feature(enable = "avx2,fma,avx512f")]
    fn gradient_row16<const R: usize>(&self, gc: &[f32], c0: usize, w: &mut [f32]) {
        let row = 2 * self.tw * 16;
        let cop = self.cop;
        let mut tiles = w.chunks_exact_mut(4 * cop);
        for ty in 0..self.th {
            let g0 = gc[2 * ty * row..][..row].chunks_exact(32);
            let g1 = gc[(2 * ty + 1) * row..][..row].chunks_exact(32);
            for ((g0, g1), d) in g0.zip(g1).zip(&mut tiles) {
                let e = match R {
                    0 => [load16(g0), load16(&g0[16..])],
                    1 => [
                        add16(load16(g0), load16(g1)),
                        add16(load16(&g0[16..]), load16(&g1[16..])),
                    ],
                    2 => [
                        sub16(load16(g0), load16(g1)),
                        sub16(load16(&g0[16..]), load16(&g1[16..])),
                    ],
                    _ => [load16(g1), load16(&g1[16..])],
                };
                let t = [e[0], add16(e[0], e[1]), sub16(e[0], e[1]), e[1]];
                for (j, tv) in t.into_iter().enumerate() {
                    store16(tv, &mut d[j * cop + c0..]);
                }
            }
        }
    }

    /// Rows `R` of `V` and `W` ([`WinoWeight::input_row`], [`WinoWeight::gradient_row`])
    /// from the transposed planes of 8 channels, `xt` (padded input) and `gt`
    /// (output gradient).
    #[target_feature(enable = "avx2,fma")]
    fn rows<const R: usize>(&self, xt: &[f32], gt: &[f32], v: &mut [f32], w: &mut [f32]) {
        let xp = xt.len() / (self.cip / 8);
        for (c8, xc) in xt.chunks_exact(xp).enumerate() {
            self.input_row::<R>(xc, 8 * c8, v);
        }
        let gp = gt.len() / (self.cop / 8);
        for (c8, gc) in gt.chunks_exact(gp).enumerate() {
            self.gradient_row::<R>(gc, 8 * c8, w);
        }
    }

    /// Row `R` of `V = B^T d B` of every tile of one sample for input channels `c0..c0 +
    /// 8` (padded plane `xc`, `[row][column][8]`) into `v[tile][j][c0..c0 + 8]` (`xi = 4
    /// R + j`): `input_transform`'s operations for that row.
    #[target_feature(enable = "avx2,fma")]
    fn input_row<const R: usize>(&self, xc: &[f32], c0: usize, v: &mut [f32]) {
        let row = (2 * self.tw + 2) * 8;
        // `B^T`'s row `R`: `d[a] - d[b]`, or `d[a] + d[b]` for row 1.
        let (a, b) = [(0, 2), (1, 2), (2, 1), (1, 3)][R];
        let cip = self.cip;
        let mut tiles = v.chunks_exact_mut(4 * cip);
        for ty in 0..self.th {
            let (pa, pb) = (&xc[(2 * ty + a) * row..][..row], &xc[(2 * ty + b) * row..][..row]);
            // Column `p` of `B^T d`; a tile's columns 2 and 3 are the next one's 0 and 1.
            let e = |p: usize| {
                let (da, db) = (load(&pa[8 * p..]), load(&pb[8 * p..]));
                if R == 1 {
                    add(da, db)
                } else {
                    sub(da, db)
                }
            };
            let (mut e0, mut e1) = (e(0), e(1));
            for (tx, d) in (0..self.tw).zip(&mut tiles) {
                let (e2, e3) = (e(2 * tx + 2), e(2 * tx + 3));
                let t = [sub(e0, e2), add(e1, e2), sub(e2, e1), sub(e1, e3)];
                for (j, tv) in t.into_iter().enumerate() {
                    store(tv, &mut d[j * cip + c0..]);
                }
                (e0, e1) = (e2, e3);
            }
        }
    }

    /// Row `R` of `A gy A^T` of every tile of one sample for output channels `c0..c0 + 8`
    /// (plane `gc`, `[row][column][8]`), with row and column 3 negated (`A`'s last row
    /// is `[0, -1]`; `add_weights` restores the sign), into `w[tile][j][c0..c0 + 8]`
    /// (`xi = 4 R + j`).
    #[target_feature(enable = "avx2,fma")]
    fn gradient_row<const R: usize>(&self, gc: &[f32], c0: usize, w: &mut [f32]) {
        let row = 2 * self.tw * 8;
        let cop = self.cop;
        let mut tiles = w.chunks_exact_mut(4 * cop);
        for ty in 0..self.th {
            let g0 = gc[2 * ty * row..][..row].chunks_exact(16);
            let g1 = gc[(2 * ty + 1) * row..][..row].chunks_exact(16);
            for ((g0, g1), d) in g0.zip(g1).zip(&mut tiles) {
                // Rows g0, g0 + g1, g0 - g1, g1; then the same along the row.
                let e = match R {
                    0 => [load(g0), load(&g0[8..])],
                    1 => [add(load(g0), load(g1)), add(load(&g0[8..]), load(&g1[8..]))],
                    2 => [sub(load(g0), load(g1)), sub(load(&g0[8..]), load(&g1[8..]))],
                    _ => [load(g1), load(&g1[8..])],
                };
                let t = [e[0], add(e[0], e[1]), sub(e[0], e[1]), e[1]];
                for (j, tv) in t.into_iter().enumerate() {
                    store(tv, &mut d[j * cop + c0..]);
                }
            }
        }
    }

    /// Blocks of `r` input channels from `ci0` (near-equal blocks of up to `rmax`) x
    /// `nv` vectors of `lanes` output channels from `co0` (up to `vmax`; `nv` 0 for a
    /// last 8 output channels short of a vector), as `[r, ci0, co0, nv]`.
    fn blocks(&self, rmax: usize, lanes: usize, vmax: usize) -> impl Iterator<Item = [usize; 4]> + '_ {
        let nb = self.cin.div_ceil(rmax);
        let mut ci0 = 0;
        (0..nb).flat_map(move |b| {
            let r = (self.cin - ci0).div_ceil(nb - b);
            let c = ci0;
            ci0 += r;
            let mut co0 = 0;
            core::iter::from_fn(move || {
                (co0 < self.cop).then(|| {
                    let nv = ((self.cop - co0) / lanes).min(vmax);
                    let at = co0;
                    co0 += (nv * lanes).max(8);
                    [r, c, at, nv]
                })
            })
        })
    }

    /// `m[ci][co] += sum over k of V[xi][k][ci] * W[xi][k][co]` for one `xi`: blocks of
    /// up to 6 input channels x 2 vectors of 8 output channels, each kept in registers
    /// over every `k` (each sum's products in `k` order).
    #[target_feature(enable = "avx2,fma")]
    fn products(&self, v: &[f32], w: &[f32], xi: usize, m: &mut [f32]) {
        for [r, ci0, co0, nv] in self.blocks(6, 8, 2) {
            macro_rules! go {
                ($r:literal) => {
                    if nv == 2 {
                        self.block::<$r, 2>(v, w, xi, [ci0, co0], m)
                    } else {
                        self.block::<$r, 1>(v, w, xi, [ci0, co0], m)
                    }
                };
            }
            match r {
                1 => go!(1),
                2 => go!(2),
                3 => go!(3),
                4 => go!(4),
                5 => go!(5),
                _ => go!(6),
            }
        }
    }

    /// [`WinoWeight::products`] of the 4 `xi` of one row (`m`: their 4 sums, `[j][ci][co]`)
    /// with 16-lane multiply-adds: blocks of up to 8 input channels x 2 vectors of 16
    /// output channels, or x 1 vector for 2 `xi` at once (registers for 16 sums either
    /// way), the same products in the same order (the same bits); a last 8 output
    /// channels take the 8-lane block.
    #[target_feature(enable = "avx2,fma,avx512f")]
    pub(super) fn products_wide(&self, v: &[f32], w: &[f32], m: &mut [f32]) {
        let mm = self.cip * self.cop;
        for [r, ci0, co0, nv] in self.blocks(8, 16, 2) {
            macro_rules! go {
                ($r:literal) => {
                    match nv {
                        2 => {
                            for (j, m) in m.chunks_exact_mut(mm).enumerate() {
                                self.block16::<$r, 2>(v, w, j, [ci0, co0], m);
                            }
                        }
                        1 => {
                            let (m01, m23) = m.split_at_mut(2 * mm);
                            self.pair16::<$r>(v, w, 0, [ci0, co0], m01);
                            self.pair16::<$r>(v, w, 2, [ci0, co0], m23);
                        }
                        _ => {
                            for (j, m) in m.chunks_exact_mut(mm).enumerate() {
                                self.block::<$r, 1>(v, w, j, [ci0, co0], m);
                            }
                        }
                    }
                };
            }
            match r {
                1 => go!(1),
                2 => go!(2),
                3 => go!(3),
                4 => go!(4),
                5 => go!(5),
                6 => go!(6),
                7 => go!(7),
                _ => go!(8),
            }
        }
    }

    /// [`WinoWeight::block16`] with 1 vector of output channels for the 2 `xi` `j0` and
    /// `j0 + 1` of a row at once (`m`: their sums, `[2][ci][co]`): each vector of `W`
    /// feeds `R` multiply-adds, and 2 `R` sums hide the multiply-adds' latency.
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline]
    fn pair16<const R: usize>(&self, v: &[f32], w: &[f32], j0: usize, [ci0, co0]: [usize; 2], m: &mut [f32]) {
        let (cip, cop) = (self.cip, self.cop);
        let (m0, m1) = m.split_at_mut(cip * cop);
        let mut acc = [[splat16(0.0); R]; 2];
        for (ax, m) in acc.iter_mut().zip([&*m0, &*m1]) {
            for (r, a) in ax.iter_mut().enumerate() {
                *a = load16(&m[(ci0 + r) * cop + co0..]);
            }
        }
        for (vk, wk) in v.chunks_exact(4 * cip).zip(w.chunks_exact(4 * cop)) {
            for (x, ax) in acc.iter_mut().enumerate() {
                let (vk, wk) = (&vk[(j0 + x) * cip..], &wk[(j0 + x) * cop..]);
                let wv = load16(&wk[co0..]);
                for (a, &s) in ax.iter_mut().zip(&vk[ci0..ci0 + R]) {
                    *a = fma16(splat16(s), wv, *a);
                }
            }
        }
        for (ax, m) in acc.iter().zip([m0, m1]) {
            for (r, &a) in ax.iter().enumerate() {
                store16(a, &mut m[(ci0 + r) * cop + co0..]);
            }
        }
    }

    /// [`WinoWeight::block`] with `NV` vectors of 16 output channels.
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline]
    fn block16<const R: usize, const NV: usize>(
        &self,
        v: &[f32],
        w: &[f32],
        j: usize,
        [ci0, co0]: [usize; 2],
        m: &mut [f32],
    ) {
        let (cip, cop) = (self.cip, self.cop);
        let mut acc = [[splat16(0.0); NV]; R];
        for (r, ar) in acc.iter_mut().enumerate() {
            for (j, a) in ar.iter_mut().enumerate() {
                *a = load16(&m[(ci0 + r) * cop + co0 + 16 * j..]);
            }
        }
        for (vk, wk) in column(v, j, cip).zip(column(w, j, cop)) {
            let (vk, wk) = (&vk[ci0..ci0 + R], &wk[co0..co0 + 16 * NV]);
            let wv: [_; NV] = core::array::from_fn(|j| load16(&wk[16 * j..]));
            for (ar, &s) in acc.iter_mut().zip(vk) {
                let s = splat16(s);
                for (a, &x) in ar.iter_mut().zip(&wv) {
                    *a = fma16(s, x, *a);
                }
            }
        }
        for (r, ar) in acc.iter().enumerate() {
            for (j, &a) in ar.iter().enumerate() {
                store16(a, &mut m[(ci0 + r) * cop + co0 + 16 * j..]);
            }
        }
    }

    /// `R` input channels from `ci0` x `NV` vectors of 8 output channels from `co0`, over
    /// every tile `k` of column `j` of `v` (`[k][j][ci]`) and `w` (`[k][j][co]`).
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn block<const R: usize, const NV: usize>(
        &self,
        v: &[f32],
        w: &[f32],
        j: usize,
        [ci0, co0]: [usize; 2],
        m: &mut [f32],
    ) {
        let (cip, cop) = (self.cip, self.cop);
        let mut acc = [[splat(0.0); NV]; R];
        for (r, ar) in acc.iter_mut().enumerate() {
            for (j, a) in ar.iter_mut().enumerate() {
                *a = load(&m[(ci0 + r) * cop + co0 + 8 * j..]);
            }
        }
        for (vk, wk) in column(v, j, cip).zip(column(w, j, cop)) {
            let (vk, wk) = (&vk[ci0..ci0 + R], &wk[co0..co0 + 8 * NV]);
            let wv: [_; NV] = core::array::from_fn(|j| load(&wk[8 * j..]));
            for (ar, &s) in acc.iter_mut().zip(vk) {
                let s = splat(s);
                for (a, &x) in ar.iter_mut().zip(&wv) {
                    *a = fma(s, x, *a);
                }
            }
        }
        for (r, ar) in acc.iter().enumerate() {
            for (j, &a) in ar.iter().enumerate() {
                store(a, &mut m[(ci0 + r) * cop + co0 + 8 * j..]);
            }
        }
    }

    /// `gw[co][ci] += G^T M G` for every channel pair (3 x 3 from 4 x 4; `M`'s row and
    /// column 3 negated back first).
    fn add_weights(&self, m: &[f32], gw: &mut [f32]) {
        let gt = |a: f32, b: f32, c: f32, d: f32| [a + 0.5 * (b + c), 0.5 * (b - c), 0.5 * (b + c) + d];
        for co in 0..self.cout {
            for ci in 0..self.cin {
                let mut mm = [0.0f32; 16];
                for (xi, v) in mm.iter_mut().enumerate() {
                    let sign = if (xi / 4 == 3) != (xi % 4 == 3) { -1.0 } else { 1.0 };
                    *v = sign * m[(xi * self.cip + ci) * self.cop + co];
                }
                // `G^T M` column by column (3 x 4), then each of its rows times `G`.
                let mut q = [[0.0f32; 4]; 3];
                for c in 0..4 {
                    let col = gt(mm[c], mm[4 + c], mm[8 + c], mm[12 + c]);
                    for (qr, &cv) in q.iter_mut().zip(&col) {
                        qr[c] = cv;
                    }
                }
                let dst = &mut gw[(co * self.cin + ci) * 9..][..9];
                for (ky, qr) in q.iter().enumerate() {
                    for (kx, &t) in gt(qr[0], qr[1], qr[2], qr[3]).iter().enumerate() {
                        dst[3 * ky + kx] += t;
                    }
                }
            }
        }
    }
}

/// `dst[(y * row + x) * step + c] = src[c][y][x]` for `cs <= 8` planes of `h x w`
/// (lanes past `cs` zero): 8 positions at a time through `transpose8`, a row's last
/// vector read short where the planes end.
#[target_feature(enable = "avx2,fma")]
fn transpose_planes(src: &[f32], cs: usize, [h, w]: [usize; 2], [row, step]: [usize; 2], dst: &mut [f32]) {
    let plane = h * w;
    for y in 0..h {
        let mut x = 0;
        while x < w {
            let k = 8.min(w - x);
            let at = y * w + x;
            let rows = if cs == 8 && at + 7 * plane + 8 <= src.len() {
                core::array::from_fn(|c| load(&src[at + c * plane..]))
            } else {
                let mut rows = [splat(0.0); 8];
                for (c, r) in rows.iter_mut().enumerate().take(cs) {
                    let at = at + c * plane;
                    *r = match src.get(at..at + 8) {
                        Some(s) => load(s),
                        None => {
                            let mut t = [0.0f32; 8];
                            copy_short(&mut t[..k], &src[at..]);
                            load(&t)
                        }
                    };
                }
                rows
            };
            // Vector `j` holds position `x + j` of every channel.
            for (j, &v) in transpose8(rows).iter().enumerate().take(k) {
                store(v, &mut dst[(y * row + x + j) * step..]);
            }
            x += k;
        }
    }
}

/// [`transpose_planes`] 16 positions of a row at a time with 16-lane vectors: half the
/// shuffles for rows over 8 positions.
#[target_feature(enable = "avx2,fma,avx512f")]
pub(super) fn transpose_planes16(
    src: &[f32],
    cs: usize,
    [h, w]: [usize; 2],
    [row, step]: [usize; 2],
    dst: &mut [f32],
) {
    let plane = h * w;
    for y in 0..h {
        let mut x = 0;
        while x < w {
            let n = 16.min(w - x);
            let at = y * w + x;
            let rows = core::array::from_fn(|c| match src.get(c * plane + at..) {
                Some(s) if c < cs => load16_first(s, n),
                _ => splat16(0.0),
            });
            // Vector `q` holds positions `x + q` (lanes 0-7) and `x + 8 + q` (lanes 8-15).
            let d = &mut dst[(y * row + x) * step..];
            for (q, &v) in transpose8x2(rows).iter().enumerate() {
                if q < n {
                    store(low8(v), &mut d[q * step..]);
                }
                if q + 8 < n {
                    store(high8(v), &mut d[(q + 8) * step..]);
                }
            }
            x += n;
        }
    }
}

/// `gw += correlate(gy, x)` for 3x3 stride-1 padding-1 convolutions; `false` (nothing
/// written) for other shapes, those the buffers do not hold, and non-finite sums.
#[target_feature(enable = "avx2,fma")]
pub(super) fn conv2d_backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    backward_weight(g, gy, x, gw, super::avx512::available())
}

/// [`conv2d_backward_weight`], with 16-lane products where `wide` and the CPU allow.
#[target_feature(enable = "avx2,fma")]
pub(super) fn backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32], wide: bool) -> bool {
    let Some(mut ww) = WinoWeight::new(g) else {
        return false;
    };
    ww.wide &= wide;
    ww.run(gy, x, gw)
}

/// Whether the dispatch routes `g` here: at least 8 channels in and out and 64
/// positions over the batch (measured with `bench --kernels` and single shapes:
/// faster than the strip kernels on W1's conv2 and conv3 at batch 32 and conv2 at
/// batch 1; slower with 4 input channels or a single 4x4 plane, even on a single 7x7).
pub(super) fn pays(g: &ConvGeom) -> bool {
    g.c_in >= 8 && g.c_out >= 8 && g.n * g.h * g.w >= 64
}
