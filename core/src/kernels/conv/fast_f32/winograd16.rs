//! Winograd F(2x2, 3x3) (`winograd.rs`) with the whole pipeline on 16 lanes, 16 samples
//! per vector (AVX-512F): 16x16 transposes in and out, and the input transform done for
//! blocks of 2 tiles just before their products, so that the blocks of output channels
//! read them from the L1 cache (past 16 input channels, in chunks of 16 input channels,
//! each block of output channels summing across chunks; with 8 or 16 output channels,
//! one row of the transform at a time over every input channel). Each lane's arithmetic is the
//! 8-lane one: the same results bit for bit.
//!
//! Stack only: rows and outputs of one pass (40 and 33 KiB, or `X16_WORDS` and
//! `Y16_WORDS`, 80 and 17 KiB), one block's transformed inputs (33 KiB) and two blocks'
//! products (32 KiB): at most 162 KiB, beside `winograd.rs`'s 32 KiB of weights.

use super::avx512::{
    add16, fma16, load16, load16_first, prefetch, splat16, store16, store16_first, sub16, transpose16, F16,
};
use super::winograd::{bias4, bias8, Lines, Wino, X16_WORDS, X_WORDS, Y16_WORDS, Y_WORDS};

/// Vectors of one block's `M`, `[xi][channel][tile]`.
const M16: usize = 256;

impl Wino {
    /// [`Wino::run`] in groups of 16 samples, the last one possibly partial (AVX-512F).
    /// The buffers are zeroed on every call: no larger than the shape needs (a second
    /// block of `M` only past 16 input channels with 16 output channels, where
    /// [`Wino::by_rows16`] takes two).
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline(never)]
    pub(super) fn run16(&self, src: &[f32], u: &[f32], out: &mut [f32], bias: Option<Option<&[f32]>>) {
        const Y8: usize = Y_WORDS + 256;
        const Y16: usize = Y16_WORDS + 256;
        let xw = self.cin * 4 * self.pw * 16;
        let m2 = self.cin > 16 && self.cb == 4;
        match (xw, m2) {
            (..=8192, false) => self.run16_in::<8192, Y8, 1>(src, u, out, bias),
            (..=8192, true) => self.run16_in::<8192, Y8, 2>(src, u, out, bias),
            (..=X_WORDS, false) => self.run16_in::<X_WORDS, Y8, 1>(src, u, out, bias),
            (..=X_WORDS, true) => self.run16_in::<X_WORDS, Y8, 2>(src, u, out, bias),
            (..=16384, false) => self.run16_in::<16384, Y16, 1>(src, u, out, bias),
            (..=16384, true) => self.run16_in::<16384, Y16, 2>(src, u, out, bias),
            (_, false) => self.run16_in::<X16_WORDS, Y16, 1>(src, u, out, bias),
            (_, true) => self.run16_in::<X16_WORDS, Y16, 2>(src, u, out, bias),
        }
    }

    /// [`Wino::run16`] with `X` words of transposed rows, `Y` of outputs (a vector's
    /// slack for `transpose_out16`'s last reads included) and `M` blocks of products.
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline(never)]
    fn run16_in<const X: usize, const Y: usize, const M: usize>(
        &self,
        src: &[f32],
        u: &[f32],
        out: &mut [f32],
        bias: Option<Option<&[f32]>>,
    ) {
        let mut xb = Lines([0.0f32; X]);
        let mut vb = Lines([0.0f32; 16 * Self::XS16]);
        let mut yb = Lines([0.0f32; Y]);
        let mut m = [[splat16(0.0); M16]; M];
        let mut b = Bufs16 {
            xb: &mut xb.0,
            vb: &mut vb.0,
            yb: &mut yb.0,
            m: &mut m,
        };
        for n0 in (0..self.n).step_by(16) {
            let ns = 16.min(self.n - n0);
            self.group16([n0, ns], src, u, &mut b, bias, out);
        }
    }

    /// Whether [`Wino::run16`] takes this convolution (16-lane products wanted, and
    /// the buffers hold a 16-sample group).
    pub(super) fn takes16(&self) -> bool {
        self.wide && self.tb16 > 0
    }

    /// [`Wino::group8`] of up to 16 samples, one per lane of 16 (AVX-512F): the
    /// transposes, transforms and products on whole vectors, each lane's arithmetic
    /// that of the 8-lane path (the same results bit for bit).
    #[target_feature(enable = "avx2,fma,avx512f")]
    fn group16(
        &self,
        [n0, ns]: [usize; 2],
        src: &[f32],
        u: &[f32],
        b: &mut Bufs16,
        bias: Option<Option<&[f32]>>,
        out: &mut [f32],
    ) {
        for ty in 0..self.th {
            let first = if ty == 0 { 0 } else { 2 };
            self.transpose_in16(src, [n0, ns], [2 * ty + first, 2 * ty + 4], b.xb);
            let slots = [0, 1, 2, 3].map(|r| (2 * ty + r) % 4);
            let mut tx0 = 0;
            while tx0 < self.tw {
                let nt = self.tb16.min(self.tw - tx0);
                self.products16(u, b, slots, [tx0, nt], bias.flatten());
                self.transpose_out16(b.yb, [n0, ns], [ty, tx0, nt], bias.is_none(), out);
                tx0 += nt;
            }
        }
    }

    /// Padded rows `pr0..pr1` of samples `n0..n0 + ns` (at most 16) of every input
    /// channel, transposed into ring slots `pr % 4` of `xb` (`[ci][slot][position][16]`).
    /// The rows' positions are consecutive in each plane: 16 at a time, across rows.
    #[target_feature(enable = "avx2,fma,avx512f")]
    fn transpose_in16(&self, src: &[f32], [n0, ns]: [usize; 2], [pr0, pr1]: [usize; 2], xb: &mut [f32]) {
        let (plane, w) = (self.h * self.w, self.w);
        let rw = self.pw * 16;
        // The zero columns, and the rows outside the plane.
        for pr in pr0..pr1 {
            for ci in 0..self.cin {
                let dst = &mut xb[(ci * 4 + pr % 4) * rw..][..rw];
                if pr.wrapping_sub(1) >= self.h {
                    dst.fill(0.0);
                } else {
                    dst[..16].fill(0.0);
                    dst[(w + 1) * 16..].fill(0.0);
                }
            }
        }
        // Plane rows `lo..hi` among them.
        let lo = pr0.max(1) - 1;
        let hi = (pr1 - 1).min(self.h);
        if lo >= hi {
            return;
        }
        let len = (hi - lo) * w;
        let stride = self.cin * plane;
        let mut p = 0;
        while p < len {
            let k = 16.min(len - p);
            // Where position `p + j` goes among a channel's slots.
            let mut to = [0usize; 16];
            let (mut iy, mut ix) = (lo + p / w, p % w);
            for tj in to.iter_mut().take(k) {
                *tj = ((iy + 1) % 4) * rw + (1 + ix) * 16;
                ix += 1;
                if ix == w {
                    (iy, ix) = (iy + 1, 0);
                }
            }
            for ci in 0..self.cin {
                let at0 = n0 * stride + ci * plane + lo * w + p;
                let mut rows = [splat16(0.0); 16];
                for (s, row) in rows.iter_mut().enumerate().take(ns) {
                    let at = at0 + s * stride;
                    // The same run of the next channel.
                    prefetch(src.get(at + plane..).unwrap_or(&[]));
                    prefetch(src.get(at + plane + 15..).unwrap_or(&[]));
                    *row = match src.get(at..at + 16) {
                        Some(r) => load16(r),
                        None => load16_first(&src[at..], k),
                    };
                }
                // Vector `j` holds position `p + j` of every sample.
                let cols = transpose16(rows);
                let dst = &mut xb[ci * 4 * rw..][..4 * rw];
                for (&c, &tj) in cols.iter().zip(&to).take(k) {
                    store16(c, &mut dst[tj..]);
                }
            }
            p += k;
        }
    }

    /// Words between the transformed inputs of two `xi` in a 16-lane block of tiles:
    /// fixed, so that the 16 stores of a tile's transform take constant offsets (32
    /// tiles and input channels, and a cache line, as [`Wino::v_stride`]).
    const XS16: usize = 32 * 16 + 16;

    /// Words between the transformed inputs of two `xi` of a row ([`Wino::input_row16`]):
    /// every input channel of 2 tiles (at most 64 tile-channels, and a cache line).
    const XR16: usize = 4 * Self::XS16;

    /// [`Wino::input_tiles`] of input channels `k0..k1` on 16 lanes: `vb` is
    /// `[xi][ci - k0][tile][16]`, `xi` apart by [`Wino::XS16`].
    #[target_feature(enable = "avx2,fma,avx512f")]
    fn input_tiles16(
        &self,
        xb: &[f32],
        slots: [usize; 4],
        [tx0, nt]: [usize; 2],
        [k0, k1]: [usize; 2],
        vb: &mut [f32],
    ) {
        match nt {
            2 => self.input_block16::<2>(xb, slots, tx0, [k0, k1], vb),
            _ => self.input_block16::<1>(xb, slots, tx0, [k0, k1], vb),
        }
    }

    /// [`Wino::input_tiles16`] of `T` (1 or 2) adjacent tiles: `B^T` down each of the
    /// `2 T + 2` columns they read (shared where the tiles overlap), then `B` along each
    /// tile's rows, each value's operations those of [`super::winograd::input_transform`].
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline]
    fn input_block16<const T: usize>(
        &self,
        xb: &[f32],
        slots: [usize; 4],
        tx0: usize,
        [k0, k1]: [usize; 2],
        vb: &mut [f32],
    ) {
        let rw = self.pw * 16;
        let xs = Self::XS16;
        let c0 = 2 * tx0 * 16;
        for ci in k0..k1 {
            let chan = &xb[ci * 4 * rw..][..4 * rw];
            let row = |r: usize| &chan[slots[r] * rw + c0..][..(2 * T + 2) * 16];
            let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
            // `e[c][r]`: row `r` of column `c`'s transform.
            let mut e = [[splat16(0.0); 4]; 6];
            for (c, ec) in e.iter_mut().enumerate().take(2 * T + 2) {
                let at = 16 * c;
                *ec = bt16([
                    load16(&r0[at..]),
                    load16(&r1[at..]),
                    load16(&r2[at..]),
                    load16(&r3[at..]),
                ]);
            }
            let out = &mut vb[(ci - k0) * T * 16..][..15 * xs + T * 16];
            for t in 0..T {
                for r in 0..4 {
                    let v = bt16([e[2 * t][r], e[2 * t + 1][r], e[2 * t + 2][r], e[2 * t + 3][r]]);
                    for (c, &vc) in v.iter().enumerate() {
                        store16(vc, &mut out[(4 * r + c) * xs + 16 * t..]);
                    }
                }
            }
        }
    }

    /// [`Wino::products`] of tiles `tx0..tx0 + nt` on 16 lanes, into `yb`
    /// (as [`Wino::transpose_out16`] reads it). Blocks of 2 tiles (a last one of 1),
    /// transformed just before their products so that every block of 8 output channels
    /// reads them from the L1 cache: two tiles share each broadcast weight between two
    /// vectors (with one, every multiply-add needs a load). A block's transformed inputs
    /// take 1 KiB per tile and input channel, at most 32 KiB: past 16 input channels
    /// they come in chunks of 16. With blocks of 8 output channels whose `M` all fit
    /// `m` (8 or 16 channels), they come instead one row of `xi` at a time over every
    /// input channel ([`Wino::by_rows16`]).
    #[target_feature(enable = "avx2,fma,avx512f")]
    fn products16(
        &self,
        u: &[f32],
        b: &mut Bufs16,
        slots: [usize; 4],
        [tx0, nt]: [usize; 2],
        bias: Option<&[f32]>,
    ) {
        let Bufs16 { xb, vb, yb, m } = b;
        let count = (2 * nt).min(self.w - 2 * tx0);
        let mut t0 = 0;
        while t0 < nt {
            let mut t = (nt - t0).min(2);
            if self.cb.is_multiple_of(2) && self.cb / 2 <= m.len() {
                // Blocks of 8 output channels, as many as `m` holds: a row of `xi` at a time.
                match t {
                    2 => self.by_rows16::<2>(u, [xb, vb], m, slots, tx0, [t0, count], bias, yb),
                    _ => self.by_rows16::<1>(u, [xb, vb], m, slots, tx0, [t0, count], bias, yb),
                }
                t0 += t;
                continue;
            }
            if self.cin > 16 {
                // Chunks of 16 input channels, every block of channels summing its `M`
                // across them in `m`: two tiles while `m` holds them.
                let at = [t0, count];
                let done = match (t, self.cb) {
                    (2, 1) => self.chunked16::<2, 4>(u, [xb, vb], m, slots, tx0, at, bias, yb),
                    (2, 2 | 4) => self.chunked16::<2, 8>(u, [xb, vb], m, slots, tx0, at, bias, yb),
                    (_, 1) => self.chunked16::<1, 4>(u, [xb, vb], m, slots, tx0, at, bias, yb),
                    (_, 2) => self.chunked16::<1, 8>(u, [xb, vb], m, slots, tx0, at, bias, yb),
                    (_, 4) => self.chunked16::<1, 16>(u, [xb, vb], m, slots, tx0, at, bias, yb),
                    _ => false,
                };
                if done {
                    t0 += t;
                    continue;
                }
                t = 1;
            }
            self.input_tiles16(xb, slots, [tx0 + t0, t], [0, self.cin], vb);
            let mut cb = 0;
            while cb < self.cb {
                let at = [cb, t0, count];
                if t == 1 && cb + 3 < self.cb {
                    let b16 = core::array::from_fn(|o| bias4(bias, cb + o / 4)[o % 4]);
                    self.block16::<1, 16>(u, vb, &mut m[0], at, b16, yb);
                    cb += 4;
                } else if cb + 1 < self.cb {
                    let b8 = bias8(bias, cb);
                    match t {
                        2 => self.block16::<2, 8>(u, vb, &mut m[0], at, b8, yb),
                        _ => self.block16::<1, 8>(u, vb, &mut m[0], at, b8, yb),
                    }
                    cb += 2;
                } else {
                    let b4 = bias4(bias, cb);
                    match t {
                        2 => self.block16::<2, 4>(u, vb, &mut m[0], at, b4, yb),
                        _ => self.block16::<1, 4>(u, vb, &mut m[0], at, b4, yb),
                    }
                    cb += 1;
                }
            }
            t0 += t;
        }
    }

    /// The `T` tiles in `vb` (tiles `t0..` of the pass) x `C` (4 or 8) output channels
    /// from `4 cb`: [`Wino::block`] and [`Wino::untransform`] on 16 lanes.
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline]
    fn block16<const T: usize, const C: usize>(
        &self,
        u: &[f32],
        vb: &[f32],
        m: &mut [F16; M16],
        [cb, t0, count]: [usize; 3],
        bias: [f32; C],
        yb: &mut [f32],
    ) {
        self.accumulate16::<T, C>(u, vb, m, [cb, 0, self.cin]);
        self.untransform16::<T, C>(m, [cb, t0, count], bias, yb);
    }

    /// [`Wino::block16`] of the `T` tiles from `t0` x every output channel in blocks of
    /// 8 (one `m` each), their inputs transformed one row of `xi` at a time just before
    /// its products: 4 `xi` of transformed inputs (a quarter of a block's) stay in the
    /// L1 cache beside the rows, that row's weights and `M`. Every input channel in one
    /// pass: the sums of the chunks of [`Wino::chunked16`], in the same order.
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn by_rows16<const T: usize>(
        &self,
        u: &[f32],
        [xb, vb]: [&mut [f32]; 2],
        m: &mut [[F16; M16]],
        slots: [usize; 4],
        tx0: usize,
        [t0, count]: [usize; 2],
        bias: Option<&[f32]>,
        yb: &mut [f32],
    ) {
        let blocks = self.cb / 2;
        for r in 0..4 {
            self.input_row16::<T>(xb, slots, tx0 + t0, r, vb);
            for (k, mk) in m.iter_mut().take(blocks).enumerate() {
                self.accumulate16_in::<T, 8>(u, vb, mk, [2 * k, 0, self.cin], [4 * r, 4]);
            }
        }
        for (k, mk) in m.iter().take(blocks).enumerate() {
            self.untransform16::<T, 8>(mk, [2 * k, t0, count], bias8(bias, 2 * k), yb);
        }
    }

    /// Row `r` of [`Wino::input_block16`]'s transforms (its `xi` `4 r..4 r + 4`) of every
    /// input channel, into `vb` as `xi - 4 r`: only the two input rows that row reads,
    /// each value's operations those of [`bt16`].
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline]
    fn input_row16<const T: usize>(
        &self,
        xb: &[f32],
        slots: [usize; 4],
        tx0: usize,
        r: usize,
        vb: &mut [f32],
    ) {
        let rw = self.pw * 16;
        let xs = Self::XR16;
        let c0 = 2 * tx0 * 16;
        // `B^T` row `r` takes `d[i] - d[j]` or (row 1) `d[1] + d[2]`.
        let (i, j) = [(0, 2), (1, 2), (2, 1), (1, 3)][r];
        for ci in 0..self.cin {
            let chan = &xb[ci * 4 * rw..][..4 * rw];
            let row = |k: usize| &chan[slots[k] * rw + c0..][..(2 * T + 2) * 16];
            let (ri, rj) = (row(i), row(j));
            let mut e = [splat16(0.0); 6];
            for (c, ec) in e.iter_mut().enumerate().take(2 * T + 2) {
                let (a, b) = (load16(&ri[16 * c..]), load16(&rj[16 * c..]));
                *ec = if r == 1 { add16(a, b) } else { sub16(a, b) };
            }
            let out = &mut vb[ci * T * 16..][..3 * xs + T * 16];
            for t in 0..T {
                let v = bt16([e[2 * t], e[2 * t + 1], e[2 * t + 2], e[2 * t + 3]]);
                for (c, &vc) in v.iter().enumerate() {
                    store16(vc, &mut out[c * xs + 16 * t..]);
                }
            }
        }
    }

    /// `T` tiles x every output channel in blocks of `C`, input channels in chunks of 16
    /// transformed just before their products, each block's `M` summed across chunks
    /// in `m` in the same order (a chunk's transformed inputs, 16 KiB a tile, and its
    /// weights stay in the L1 cache). Blocks of `16 C T <= 256` vectors, as many as `m`
    /// holds: `true` once done, `false` (nothing done) for more.
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn chunked16<const T: usize, const C: usize>(
        &self,
        u: &[f32],
        [xb, vb]: [&mut [f32]; 2],
        m: &mut [[F16; M16]],
        slots: [usize; 4],
        tx0: usize,
        [t0, count]: [usize; 2],
        bias: Option<&[f32]>,
        yb: &mut [f32],
    ) -> bool {
        let blocks = 4 * self.cb / C;
        if blocks > m.len() {
            return false;
        }
        for c0 in (0..self.cin).step_by(16) {
            let c1 = (c0 + 16).min(self.cin);
            self.input_tiles16(xb, slots, [tx0 + t0, T], [c0, c1], vb);
            for (k, mk) in m.iter_mut().take(blocks).enumerate() {
                self.accumulate16::<T, C>(u, vb, mk, [k * C / 4, c0, c1]);
            }
        }
        for (k, mk) in m.iter().take(blocks).enumerate() {
            let b = core::array::from_fn(|o| bias4(bias, k * C / 4 + o / 4)[o % 4]);
            self.untransform16::<T, C>(mk, [k * C / 4, t0, count], b, yb);
        }
        true
    }

    /// `m = M` of the `T` tiles in `vb` (input channels `c0..c1`) x `C` output channels
    /// from `4 cb`, `m[(xi C + o) T + j]` (channel `o`, tile `j`); from `c0 > 0` the sums
    /// go on from those in `m`.
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline]
    fn accumulate16<const T: usize, const C: usize>(
        &self,
        u: &[f32],
        vb: &[f32],
        m: &mut [F16; M16],
        at: [usize; 3],
    ) {
        self.accumulate16_in::<T, C>(u, vb, m, at, [0, 16]);
    }

    /// [`Wino::accumulate16`] of `xi` `x0..x0 + nx` only: all 16 as [`Wino::input_tiles16`]
    /// leaves `vb`, or the 4 of a row as [`Wino::input_row16`] does.
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline]
    fn accumulate16_in<const T: usize, const C: usize>(
        &self,
        u: &[f32],
        vb: &[f32],
        m: &mut [F16; M16],
        [cb, c0, c1]: [usize; 3],
        [x0, nx]: [usize; 2],
    ) {
        for (xi, mx) in m.chunks_exact_mut(C * T).enumerate().skip(x0).take(nx) {
            let mut acc = [[splat16(0.0); T]; C];
            if c0 > 0 {
                for (ao, mo) in acc.iter_mut().zip(mx.chunks_exact(T)) {
                    ao.copy_from_slice(mo);
                }
            }
            let vx = match nx {
                16 => &vb[xi * Self::XS16..],
                _ => &vb[(xi - x0) * Self::XR16..],
            };
            self.xi_products::<T, C>(u, vx, xi, [cb, c0, c1], &mut acc);
            for (mo, ao) in mx.chunks_exact_mut(T).zip(&acc) {
                mo.copy_from_slice(ao);
            }
        }
    }

    /// `A^T M A + bias` of the `T` tiles from `t0` x `C` channels from `4 cb` in `m`
    /// (as [`Wino::accumulate16`] leaves it), into `yb`.
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline]
    fn untransform16<const T: usize, const C: usize>(
        &self,
        m: &[F16; M16],
        [cb, t0, count]: [usize; 3],
        bias: [f32; C],
        yb: &mut [f32],
    ) {
        let cs = 4 * self.tb16;
        for (o, &bo) in bias.iter().enumerate().take(self.cout - 4 * cb) {
            let b = splat16(bo);
            for j in 0..T {
                let mj = |xi: usize| m[(xi * C + o) * T + j];
                let s: [[F16; 4]; 2] = [
                    core::array::from_fn(|c| add16(add16(mj(c), mj(4 + c)), mj(8 + c))),
                    core::array::from_fn(|c| sub16(sub16(mj(4 + c), mj(8 + c)), mj(12 + c))),
                ];
                for (r, sr) in s.iter().enumerate() {
                    let y0 = add16(add16(add16(sr[0], sr[1]), sr[2]), b);
                    let y1 = add16(sub16(sub16(sr[1], sr[2]), sr[3]), b);
                    let x = 2 * (t0 + j);
                    let at = ((4 * cb + o) * cs + r * count + x) * 16;
                    store16(y0, &mut yb[at..]);
                    if x + 1 < count {
                        store16(y1, &mut yb[at + 16..]);
                    }
                }
            }
        }
    }

    /// `acc += M[xi]` of the `T` tiles in `vb` (that `xi`'s, input channels `c0..c1`) x `C` channels
    /// from `4 cb`: the sums over input channels of `U . V`, in their order.
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline]
    fn xi_products<const T: usize, const C: usize>(
        &self,
        u: &[f32],
        vb: &[f32],
        xi: usize,
        [cb, c0, c1]: [usize; 3],
        acc: &mut [[F16; T]; C],
    ) {
        let cw = self.cin * 4;
        // The weights of channels `4 cb..`, `4 cb + 4..` and so on for `C / 4` blocks
        // (the others repeat the first, unread).
        let ub = |k: usize| {
            let k = if 4 * k < C { k } else { 0 };
            &u[(xi * self.cb + cb + k) * cw + c0 * 4..][..(c1 - c0) * 4]
        };
        let (u0, u1, u2, u3) = (ub(0), ub(1), ub(2), ub(3));
        let vx = &vb[..(c1 - c0) * T * 16];
        let ws = u0
            .chunks_exact(4)
            .zip(u1.chunks_exact(4))
            .zip(u2.chunks_exact(4))
            .zip(u3.chunks_exact(4));
        for (vr, (((w0, w1), w2), w3)) in vx.chunks_exact(T * 16).zip(ws) {
            let mut v = [splat16(0.0); T];
            for (j, vj) in v.iter_mut().enumerate() {
                *vj = load16(&vr[16 * j..]);
            }
            let w = [w0, w1, w2, w3];
            for (o, a) in acc.iter_mut().enumerate() {
                let s = splat16(w[o / 4][o % 4]);
                for (aj, &vj) in a.iter_mut().zip(&v) {
                    *aj = fma16(s, vj, *aj);
                }
            }
        }
    }

    /// [`Wino::transpose_out`] of every output channel from 16-lane `yb`
    /// (`[channel][row][position][16]`, `4 tb16` positions a channel, the two rows
    /// adjacent), 16 positions at a time.
    #[target_feature(enable = "avx2,fma,avx512f")]
    fn transpose_out16(
        &self,
        yb: &[f32],
        [n0, ns]: [usize; 2],
        [ty, tx0, nt]: [usize; 3],
        acc: bool,
        out: &mut [f32],
    ) {
        let plane = self.h * self.w;
        let [x0, count, runs, len] = self.out_runs(ty, tx0, nt);
        let cs = 4 * self.tb16;
        for co in 0..self.cout {
            for r in 0..runs {
                let src = &yb[(co * cs + r * count) * 16..];
                let mut p = 0;
                while p < len {
                    let k = 16.min(len - p);
                    // Vectors past `k` hold whatever follows (dropped below).
                    let v = core::array::from_fn(|j| load16(&src[(p + j) * 16..]));
                    // Vector `s` holds positions `p..p + k` of sample `s`.
                    let per_sample = transpose16(v);
                    for (s, &ps) in per_sample.iter().enumerate().take(ns) {
                        let at = ((n0 + s) * self.cout + co) * plane + (2 * ty + r) * self.w + x0 + p;
                        let dst = &mut out[at..];
                        let new = if acc { add16(load16_first(dst, k), ps) } else { ps };
                        store16_first(new, dst, k);
                    }
                    p += k;
                }
            }
        }
    }
}

/// The 16-lane path's working buffers ([`Wino::run16_in`]'s stack arrays): transposed
/// input rows, one block's transformed inputs, one pass's outputs, one block's `M`.
struct Bufs16<'a> {
    xb: &'a mut [f32],
    vb: &'a mut [f32],
    yb: &'a mut [f32],
    m: &'a mut [[F16; M16]],
}

/// `B^T d` of one column or row of 4 on 16 lanes (`winograd.rs`'s `bt`, the same
/// operations in the same order).
#[target_feature(enable = "avx2,fma,avx512f")]
#[inline]
fn bt16(d: [F16; 4]) -> [F16; 4] {
    [
        sub16(d[0], d[2]),
        add16(d[1], d[2]),
        sub16(d[2], d[1]),
        sub16(d[1], d[3]),
    ]
}
