//! `winograd.rs`'s products of one pass on 8-sample lanes: `M = sum over input
//! channels of U . V` for blocks of tiles and 4 output channels, then `A^T M A + bias`
//! into the pass's output rows; with AVX-512F (`products_wide`) two tiles per 16-lane
//! vector.

use super::avx2::{add, fma, load, splat, store, sub, F8};
use super::avx512::{add16, fma16, high_halves, load16, low_halves, splat16, store16, sub16};
use super::winograd::{bias4, bias8, Wino};

impl Wino {
    /// Every output channel of the pass's `nt` tiles, `A^T M A + bias`, into `yb`
    /// (`[channel][row][position][8]`, rows `2 * tb` positions long). Blocks of tiles
    /// outside, channels inside: a block's transformed inputs are read once per block
    /// of 4 channels while they are in the L1 cache.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn products(&self, u: &[f32], vb: &[f32], nt: usize, bias: Option<&[f32]>, yb: &mut [f32]) {
        let mut t0 = 0;
        while t0 < nt {
            // Blocks of 3 tiles (12 accumulators), 2 where 3 would leave one alone.
            let t = match nt - t0 {
                1 => 1,
                2 | 4 => 2,
                _ => 3,
            };
            for cb in 0..self.cb {
                let b4 = bias4(bias, cb);
                match t {
                    3 => self.block::<3>(u, vb, cb, [nt, t0], b4, yb),
                    2 => self.block::<2>(u, vb, cb, [nt, t0], b4, yb),
                    _ => self.block::<1>(u, vb, cb, [nt, t0], b4, yb),
                }
            }
            t0 += t;
        }
    }

    /// `T` tiles from `t0` of the pass's `nt` x 4 output channels.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn block<const T: usize>(
        &self,
        u: &[f32],
        vb: &[f32],
        cb: usize,
        [nt, t0]: [usize; 2],
        bias: [f32; 4],
        yb: &mut [f32],
    ) {
        let xs = self.v_stride(nt);
        // `m[o][j][xi]`: channel `o`, tile `j`.
        let mut m = [[[splat(0.0); 16]; T]; 4];
        for xi in 0..16 {
            let ux = &u[(xi * self.cb + cb) * self.cin * 4..][..self.cin * 4];
            let vx = &vb[xi * xs..][..xs];
            let mut acc = [[splat(0.0); T]; 4];
            for (ci, uw) in ux.chunks_exact(4).enumerate() {
                let vr = &vx[(ci * nt + t0) * 8..][..T * 8];
                let mut v = [splat(0.0); T];
                for (j, vj) in v.iter_mut().enumerate() {
                    *vj = load(&vr[8 * j..]);
                }
                for (a, &uo) in acc.iter_mut().zip(uw) {
                    let s = splat(uo);
                    for (aj, &vj) in a.iter_mut().zip(&v) {
                        *aj = fma(s, vj, *aj);
                    }
                }
            }
            for (mo, ao) in m.iter_mut().zip(&acc) {
                for (mj, &a) in mo.iter_mut().zip(ao) {
                    mj[xi] = a;
                }
            }
        }
        self.untransform(&m, cb, [t0, T], bias, yb);
    }

    /// [`Wino::products`] with 16-lane multiply-adds: a vector holds two adjacent
    /// tiles (their 8 samples each), so each product is the 8-lane one, in the same
    /// order. Blocks of up to 8 tiles; an odd count reads one tile more (the next
    /// channel's first, or the padding after the last), whose products are dropped.
    #[target_feature(enable = "avx2,fma,avx512f")]
    pub(super) fn products_wide(
        &self,
        u: &[f32],
        vb: &[f32],
        nt: usize,
        bias: Option<&[f32]>,
        yb: &mut [f32],
    ) {
        let mut t0 = 0;
        while t0 < nt {
            let t = (nt - t0).min(8);
            let at = [nt, t0, t];
            let mut cb = 0;
            while cb < self.cb {
                // Short blocks of tiles take 8 channels (16 accumulators), long ones 4.
                if t <= 4 && cb + 1 < self.cb {
                    let b8 = bias8(bias, cb);
                    match t.div_ceil(2) {
                        2 => self.block_wide::<4, 2, 8>(u, vb, cb, at, b8, yb),
                        _ => self.block_wide::<2, 1, 8>(u, vb, cb, at, b8, yb),
                    }
                    cb += 2;
                    continue;
                }
                let b4 = bias4(bias, cb);
                match t.div_ceil(2) {
                    4 => self.block_wide::<8, 4, 4>(u, vb, cb, at, b4, yb),
                    3 => self.block_wide::<6, 3, 4>(u, vb, cb, at, b4, yb),
                    2 => self.block_wide::<4, 2, 4>(u, vb, cb, at, b4, yb),
                    _ => self.block_wide::<2, 1, 4>(u, vb, cb, at, b4, yb),
                }
                cb += 1;
            }
            t0 += t;
        }
    }

    /// [`Wino::block`] of `T = 2 P` tiles, `P` 16-lane vectors per channel, of which
    /// the first `count` are kept, and `C` (4 or 8) output channels from `4 cb`.
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline]
    fn block_wide<const T: usize, const P: usize, const C: usize>(
        &self,
        u: &[f32],
        vb: &[f32],
        cb: usize,
        [nt, t0, count]: [usize; 3],
        bias: [f32; C],
        yb: &mut [f32],
    ) {
        let xs = self.v_stride(nt);
        let cw = self.cin * 4;
        // `m[o][p][xi]`: channel `o`, tiles `2p` and `2p + 1`.
        let mut m = [[[splat16(0.0); 16]; P]; C];
        for xi in 0..16 {
            // The weights of channels `4 cb..` and, for 8, `4 cb + 4..`.
            let ux = &u[(xi * self.cb + cb) * cw..][..cw * C / 4];
            let vx = &vb[xi * xs..][..xs];
            let mut acc = [[splat16(0.0); P]; C];
            for ci in 0..self.cin {
                let vr = &vx[(ci * nt + t0) * 8..][..T * 8];
                let mut v = [splat16(0.0); P];
                for (p, vp) in v.iter_mut().enumerate() {
                    *vp = load16(&vr[16 * p..]);
                }
                for (o, a) in acc.iter_mut().enumerate() {
                    let s = splat16(ux[(o / 4) * cw + ci * 4 + o % 4]);
                    for (ap, &vp) in a.iter_mut().zip(&v) {
                        *ap = fma16(s, vp, *ap);
                    }
                }
            }
            for (mo, ao) in m.iter_mut().zip(&acc) {
                for (mp, &a) in mo.iter_mut().zip(ao) {
                    mp[xi] = a;
                }
            }
        }
        // `A^T M A` as in [`Wino::untransform`], two tiles per vector.
        let row = 2 * self.tb * 8;
        for (o, (&bo, mo)) in bias.iter().zip(&m).enumerate().take(self.cout - 4 * cb) {
            let b = splat16(bo);
            for (p, mp) in mo.iter().enumerate().take(count.div_ceil(2)) {
                let mut s = [[splat16(0.0); 4]; 2];
                for c in 0..4 {
                    s[0][c] = add16(add16(mp[c], mp[4 + c]), mp[8 + c]);
                    s[1][c] = sub16(sub16(mp[4 + c], mp[8 + c]), mp[12 + c]);
                }
                for (r, sr) in s.iter().enumerate() {
                    let y0 = add16(add16(add16(sr[0], sr[1]), sr[2]), b);
                    let y1 = add16(sub16(sub16(sr[1], sr[2]), sr[3]), b);
                    // Tile `2p` then `2p + 1`, each its two positions.
                    let at = ((4 * cb + o) * 2 + r) * row + 2 * (t0 + 2 * p) * 8;
                    store16(low_halves(y0, y1), &mut yb[at..]);
                    if 2 * p + 1 < count {
                        store16(high_halves(y0, y1), &mut yb[at + 16..]);
                    }
                }
            }
        }
    }

    /// `A^T M A + bias` of the first `count` of the `T` tiles from `t0` and 4 output
    /// channels from `4 cb`, `m[o][j][xi]`, into `yb`.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn untransform<const T: usize>(
        &self,
        m: &[[[F8; 16]; T]; 4],
        cb: usize,
        [t0, count]: [usize; 2],
        bias: [f32; 4],
        yb: &mut [f32],
    ) {
        // `A^T M A`: rows m0 + m1 + m2 and m1 - m2 - m3, then the same along each row.
        let row = 2 * self.tb * 8;
        for (o, (&bo, mo)) in bias.iter().zip(m).enumerate().take(self.cout - 4 * cb) {
            let b = splat(bo);
            for (j, mj) in mo.iter().enumerate().take(count) {
                let mut s = [[splat(0.0); 4]; 2];
                for c in 0..4 {
                    s[0][c] = add(add(mj[c], mj[4 + c]), mj[8 + c]);
                    s[1][c] = sub(sub(mj[4 + c], mj[8 + c]), mj[12 + c]);
                }
                for (r, sr) in s.iter().enumerate() {
                    let y0 = add(add(add(sr[0], sr[1]), sr[2]), b);
                    let y1 = add(sub(sub(sr[1], sr[2]), sr[3]), b);
                    let at = ((4 * cb + o) * 2 + r) * row + 2 * (t0 + j) * 8;
                    store(y0, &mut yb[at..]);
                    store(y1, &mut yb[at + 8..]);
                }
            }
        }
    }
}
