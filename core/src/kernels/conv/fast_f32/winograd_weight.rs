//! Winograd F(2x2, 3x3) backward-weight for 3x3 stride-1 padding-1 convolutions with
//! AVX2 and FMA: `gw += correlate(gy, x)` with 16 multiply-adds per 2x2 tile of the
//! output gradient and channel pair instead of 36.
//!
//! - The transpose of the forward pass `y = A^T [(G g G^T) . (B^T d B)] A`:
//!   `gw[co][ci] += G^T M G`, `M = sum over samples and tiles of (A gy A^T)[co] .
//!   (B^T d B)[ci]` (`d` the 4x4 zero-padded input patch of the tile, `gy` its 2x2
//!   block of the output gradient, zero past the plane).
//! - Lanes are channels, not samples: both planes of a sample are transposed to
//!   `[position][channel]` (`transpose8`), so the transforms are vector additions and
//!   `M[xi][ci][co]` is a product over (sample, tile) of `W` vectors (8 output
//!   channels) with broadcast `V` words: `R` input channels x 2 vectors in registers,
//!   8 loads per 12 FMAs, no horizontal sums, and `M` stays as small as the weights
//!   (sample lanes would need 8 partial sums per weight).
//! - Rounding differs from the direct kernels (the transforms add and halve); the
//!   tests bound the difference relative to `sum |gy| |x|`.
//! - A non-finite value in `x` or `gy` makes sums of `M` non-finite, and the
//!   transforms would carry it to more taps than the direct kernels do (an edge tap
//!   whose products meet only padding gets `inf - inf` from `V`'s or `W`'s sums):
//!   such calls are declined after the products (nothing written), and the dispatch
//!   falls back to the strip kernels, whose non-finite weights they were before.
//! - Stack only, no heap: one sample's transposed padded input (`X_WORDS`, 16 KiB) and
//!   output gradient (`G_WORDS`, 16 KiB), transformed tiles of a few samples
//!   (`VW_WORDS`, 80 KiB) and `M` (`M_WORDS`, 32 KiB): 144 KiB. Shapes they do not
//!   hold are declined.

use super::avx2::{add, fma, load, splat, store, sub, transpose8};
use super::avx512::{fma16, load16, load8x2, splat16, store16};
use super::layout::copy_short;
use super::winograd::input_transform;
use crate::kernels::conv::ConvGeom;

/// Words of one sample's padded input, `[input channel / 8][padded row][padded
/// column][8]`.
const X_WORDS: usize = 4096;
/// Words of one sample's output gradient, `[output channel / 8][row][column][8]`, whole
/// tiles.
const G_WORDS: usize = 4096;
/// Words of the transformed tiles of a chunk of samples: `V` (`[k][ci / 8][xi][8]`)
/// then `W` (`[k][co / 8][xi][8]`), `k` running over the chunk's (sample, tile) pairs.
const VW_WORDS: usize = 20480;
/// Words of the sums, `[xi][ci][co]`.
const M_WORDS: usize = 8192;

/// One backward-weight: sizes, padded channel counts and the chunking.
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
    /// Samples per chunk of transformed tiles.
    spc: usize,
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
        let per_sample = th * tw * (16 * (cip + cop) + 32);
        let spc = (VW_WORDS / per_sample).min(g.n);
        let fits = spc > 0
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
            spc,
        })
    }

    /// `gw += correlate(gy, x)`, or `false` (nothing written) if a sum is not finite.
    /// Not inlined: its 144 KiB of buffers stay out of the dispatch's frame.
    #[target_feature(enable = "avx2,fma")]
    #[inline(never)]
    fn run(&self, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
        let mut xt = [0.0f32; X_WORDS];
        let mut gt = [0.0f32; G_WORDS];
        let mut vw = [0.0f32; VW_WORDS];
        let mut m = [0.0f32; M_WORDS];
        let (ip, tiles) = (self.h * self.w, self.th * self.tw);
        let (xp, gp) = (self.x_plane(), 4 * tiles * 8);
        let pw = 2 * self.tw + 2;
        // Positions outside the planes and channels past `cin`/`cout` are never written:
        // they stay zero.
        let xt = &mut xt[..self.cip / 8 * xp];
        let gt = &mut gt[..self.cop / 8 * gp];
        let m = &mut m[..16 * self.cip * self.cop];
        let (vk, wk) = (self.v_stride(), self.w_stride());
        let mut n0 = 0;
        while n0 < self.n {
            let ns = self.spc.min(self.n - n0);
            let k = ns * tiles;
            let (v, w) = vw.split_at_mut(k * vk);
            let w = &mut w[..k * wk];
            for s in 0..ns {
                let n = n0 + s;
                for (c8, xc) in xt.chunks_exact_mut(xp).enumerate() {
                    let c0 = 8 * c8;
                    let at = (n * self.cin + c0) * ip;
                    let cs = 8.min(self.cin - c0);
                    transpose_planes(&x[at..], cs, [self.h, self.w], pw, &mut xc[(pw + 1) * 8..]);
                }
                for (c8, gc) in gt.chunks_exact_mut(gp).enumerate() {
                    let c0 = 8 * c8;
                    let at = (n * self.cout + c0) * ip;
                    let cs = 8.min(self.cout - c0);
                    transpose_planes(&gy[at..], cs, [self.h, self.w], 2 * self.tw, gc);
                }
                let v = &mut v[s * tiles * vk..][..tiles * vk];
                let w = &mut w[s * tiles * wk..][..tiles * wk];
                for (c8, xc) in xt.chunks_exact(xp).enumerate() {
                    self.input_tiles(xc, c8, v);
                }
                for (c8, gc) in gt.chunks_exact(gp).enumerate() {
                    self.gradient_tiles(gc, c8, w);
                }
            }
            for xi in 0..16 {
                let (v, w) = (&v[..k * vk], &w[..k * wk]);
                let m = &mut m[xi * self.cip * self.cop..][..self.cip * self.cop];
                if !(self.wide && super::avx512::winograd_weight_products(self, v, w, xi, m)) {
                    self.products(v, w, xi, m);
                }
            }
            n0 += ns;
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

    /// Words between the transformed inputs of two tiles: one cache line more than they
    /// fill, so that a product's column (one `xi`, every tile) does not fall in a few
    /// cache sets (with 512 bytes apart, as W1's conv2 would be, they fall in 8).
    fn v_stride(&self) -> usize {
        16 * self.cip + 16
    }

    /// Words between the transformed output gradients of two tiles (as `v_stride`).
    fn w_stride(&self) -> usize {
        16 * self.cop + 16
    }

    /// Words of one sample's padded input plane of 8 channels, `[row][column][8]`.
    fn x_plane(&self) -> usize {
        (2 * self.th + 2) * (2 * self.tw + 2) * 8
    }

    /// `V = B^T d B` of every tile of 8 input channels (`c8`, padded plane `xc`) of one
    /// sample, into `v[tile][c8][xi][8]`.
    #[target_feature(enable = "avx2,fma")]
    fn input_tiles(&self, xc: &[f32], c8: usize, v: &mut [f32]) {
        let row = (2 * self.tw + 2) * 8;
        let vk = self.v_stride();
        for ty in 0..self.th {
            for tx in 0..self.tw {
                let patch = &xc[2 * ty * row + 2 * tx * 8..][..3 * row + 32];
                let mut d = [[splat(0.0); 4]; 4];
                for (r, dr) in d.iter_mut().enumerate() {
                    for (j, dv) in dr.iter_mut().enumerate() {
                        *dv = load(&patch[r * row + 8 * j..]);
                    }
                }
                let dst = &mut v[(ty * self.tw + tx) * vk + c8 * 128..][..128];
                for (r, t) in input_transform(d).iter().enumerate() {
                    for (j, &tv) in t.iter().enumerate() {
                        store(tv, &mut dst[(4 * r + j) * 8..]);
                    }
                }
            }
        }
    }

    /// `A gy A^T` of every tile of 8 output channels (`c8`, plane `gc`) of one sample,
    /// with row and column 3 negated (`A`'s last row is `[0, -1]`; `add_weights`
    /// restores the sign), into `w[tile][c8][xi][8]`.
    #[target_feature(enable = "avx2,fma")]
    fn gradient_tiles(&self, gc: &[f32], c8: usize, w: &mut [f32]) {
        let row = 2 * self.tw * 8;
        let wk = self.w_stride();
        for ty in 0..self.th {
            for tx in 0..self.tw {
                let block = &gc[2 * ty * row + 2 * tx * 8..][..row + 16];
                let g = [
                    [load(block), load(&block[8..])],
                    [load(&block[row..]), load(&block[row + 8..])],
                ];
                // Rows g0, g0 + g1, g0 - g1, g1; then the same along each row.
                let e = [
                    g[0],
                    [add(g[0][0], g[1][0]), add(g[0][1], g[1][1])],
                    [sub(g[0][0], g[1][0]), sub(g[0][1], g[1][1])],
                    g[1],
                ];
                let dst = &mut w[(ty * self.tw + tx) * wk + c8 * 128..][..128];
                for (r, er) in e.iter().enumerate() {
                    let t = [er[0], add(er[0], er[1]), sub(er[0], er[1]), er[1]];
                    for (j, &tv) in t.iter().enumerate() {
                        store(tv, &mut dst[(4 * r + j) * 8..]);
                    }
                }
            }
        }
    }

    /// The products' blocks, `(r, ci0, co0, two)`: `r` input channels from `ci0` in
    /// near-equal blocks of up to 6 (8 channels as 4 + 4, 16 as 6 + 5 + 5) x 16 output
    /// channels from `co0` (`two` vectors of 8), or a last 8.
    fn blocks(&self) -> impl Iterator<Item = (usize, usize, usize, bool)> + '_ {
        let nb = self.cin.div_ceil(6);
        let mut ci0 = 0;
        (0..nb).flat_map(move |b| {
            let r = (self.cin - ci0).div_ceil(nb - b);
            let c = ci0;
            ci0 += r;
            (0..self.cop)
                .step_by(16)
                .map(move |co0| (r, c, co0, self.cop - co0 >= 16))
        })
    }

    /// `m[ci][co] += sum over k of V[k][ci] * W[k][co]` for one `xi`, block by block
    /// ([`WinoWeight::blocks`]).
    #[target_feature(enable = "avx2,fma")]
    fn products(&self, v: &[f32], w: &[f32], xi: usize, m: &mut [f32]) {
        for (r, ci0, co0, two) in self.blocks() {
            macro_rules! go {
                ($r:literal) => {
                    if two {
                        self.block::<$r, 2>(v, w, [xi, ci0, co0], m)
                    } else {
                        self.block::<$r, 1>(v, w, [xi, ci0, co0], m)
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

    /// [`WinoWeight::products`] with 16-lane multiply-adds: a vector holds 16 output
    /// channels (two 8-channel groups), each lane's products in the same order, so
    /// the sums are the same bits; a last group of 8 takes the 8-lane block.
    #[target_feature(enable = "avx2,fma,avx512f")]
    pub(super) fn products_wide(&self, v: &[f32], w: &[f32], xi: usize, m: &mut [f32]) {
        for (r, ci0, co0, two) in self.blocks() {
            macro_rules! go {
                ($r:literal) => {
                    if two {
                        self.block16::<$r>(v, w, [xi, ci0, co0], m)
                    } else {
                        self.block::<$r, 1>(v, w, [xi, ci0, co0], m)
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

    /// [`WinoWeight::block`] of 2 vectors as one 16-lane vector.
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline]
    fn block16<const R: usize>(&self, v: &[f32], w: &[f32], [xi, ci0, co0]: [usize; 3], m: &mut [f32]) {
        let cop = self.cop;
        let vo: [usize; R] = core::array::from_fn(|r| ((ci0 + r) / 8 * 16 + xi) * 8 + (ci0 + r) % 8);
        let wo = [(co0 / 8 * 16 + xi) * 8, ((co0 / 8 + 1) * 16 + xi) * 8];
        let mut acc = [splat16(0.0); R];
        for (r, a) in acc.iter_mut().enumerate() {
            *a = load16(&m[(ci0 + r) * cop + co0..]);
        }
        for (vk, wk) in v
            .chunks_exact(self.v_stride())
            .zip(w.chunks_exact(self.w_stride()))
        {
            let wv = load8x2(&wk[wo[0]..], &wk[wo[1]..]);
            for (a, &o) in acc.iter_mut().zip(&vo) {
                *a = fma16(splat16(vk[o]), wv, *a);
            }
        }
        for (r, &a) in acc.iter().enumerate() {
            store16(a, &mut m[(ci0 + r) * cop + co0..]);
        }
    }

    /// `R` input channels from `ci0` x `NV` vectors of output channels from `co0`, over
    /// every `k` of `v` (`[k][ci / 8][xi][8]`) and `w` (`[k][co / 8][xi][8]`).
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn block<const R: usize, const NV: usize>(
        &self,
        v: &[f32],
        w: &[f32],
        [xi, ci0, co0]: [usize; 3],
        m: &mut [f32],
    ) {
        let cop = self.cop;
        let vo: [usize; R] = core::array::from_fn(|r| ((ci0 + r) / 8 * 16 + xi) * 8 + (ci0 + r) % 8);
        let wo: [usize; NV] = core::array::from_fn(|j| ((co0 / 8 + j) * 16 + xi) * 8);
        let mut acc = [[splat(0.0); NV]; R];
        for (r, ar) in acc.iter_mut().enumerate() {
            for (j, a) in ar.iter_mut().enumerate() {
                *a = load(&m[(ci0 + r) * cop + co0 + 8 * j..]);
            }
        }
        for (vk, wk) in v
            .chunks_exact(self.v_stride())
            .zip(w.chunks_exact(self.w_stride()))
        {
            let mut wv = [splat(0.0); NV];
            for (x, &o) in wv.iter_mut().zip(&wo) {
                *x = load(&wk[o..]);
            }
            for (ar, &o) in acc.iter_mut().zip(&vo) {
                let s = splat(vk[o]);
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

/// `dst[(y * row + x) * 8 + c] = src[c][y][x]` for `cs <= 8` planes of `h x w` (lanes
/// past `cs` zero): 8 positions at a time through `transpose8`, a row's last vector
/// read short where the planes end.
#[target_feature(enable = "avx2,fma")]
fn transpose_planes(src: &[f32], cs: usize, [h, w]: [usize; 2], row: usize, dst: &mut [f32]) {
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
                store(v, &mut dst[(y * row + x + j) * 8..]);
            }
            x += k;
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
