//! BatchNorm's, ReLU's and ReLU6's passes over 8-lane AVX2 vectors, bit for bit the generic
//! `f32` kernels (`kernels/norm.rs`, `kernels/compact.rs`), chosen at run time.
//!
//! - LLVM does not vectorise the generic kernels' lane-wise sums (`kernels/lanes.rs`):
//!   the eight chains live in registers across the loop, where its SLP pass finds no
//!   stores to start from, so each lane stays a scalar chain. Here the eight chains are
//!   one `ymm` register: lane `k` takes the values whose index in their run is `k`
//!   modulo 8, the last `len % 8` of a run go to the scalar tail chain, and the lanes
//!   are added in `lanes.rs`'s tree, so the sums are the same bits.
//! - No FMA: every product is rounded before its sum, as in the generic code (Rust
//!   does not contract `a * b + c`).
//! - ReLU's and ReLU6's mask bits come from compares and `movemask`, 16 elements per
//!   mask word.

use super::avx2::{load, splat, store, F8};
use crate::kernels::compact::MASK_BITS;
use crate::kernels::norm::NormGeom;
use core::arch::x86_64::{
    __m256, _mm256_add_ps, _mm256_and_ps, _mm256_blendv_ps, _mm256_castsi256_ps, _mm256_cmp_ps,
    _mm256_max_ps, _mm256_movemask_ps, _mm256_mul_ps, _mm256_set1_epi32, _mm256_setr_epi32,
    _mm256_setzero_ps, _mm256_sllv_epi32, _mm256_sub_ps, _CMP_GT_OQ, _CMP_LT_OQ, _CMP_NLE_UQ,
};

/// `lanes.rs`'s tree over the eight chains, then the tail.
#[target_feature(enable = "avx2,fma")]
fn total(v: __m256, tail: f32) -> f32 {
    let mut l = [0.0f32; 8];
    store(F8(v), &mut l);
    ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])) + tail
}

/// The run of channel `ch` in sample `b`.
#[inline(always)]
fn run(g: NormGeom, x: &[f32], b: usize, ch: usize) -> &[f32] {
    &x[(b * g.c + ch) * g.inner..][..g.inner]
}

/// `f` folded over channel `ch`'s runs in lane-wise chains (`fv` on whole vectors,
/// `fs` on a run's last `inner % 8` values).
#[target_feature(enable = "avx2,fma")]
#[inline]
fn fold(
    g: NormGeom,
    x: &[f32],
    ch: usize,
    fv: impl Fn(__m256, __m256) -> __m256,
    fs: impl Fn(f32, f32) -> f32,
) -> f32 {
    let (mut acc, mut tail) = (_mm256_setzero_ps(), 0.0f32);
    for b in 0..g.n {
        let r = run(g, x, b, ch);
        let mut c = r.chunks_exact(8);
        for v in &mut c {
            acc = fv(acc, load(v).0);
        }
        for &v in c.remainder() {
            tail = fs(tail, v);
        }
    }
    total(acc, tail)
}

/// `acc / n` (0 for no terms), as `Scalar::acc_mean`.
fn mean(acc: f32, n: usize) -> f32 {
    match n {
        0 => 0.0,
        _ => acc / n as f32,
    }
}

/// `norm::channel_stats` for `f32`.
#[target_feature(enable = "avx2,fma")]
pub(super) fn channel_stats(
    g: NormGeom,
    x: &[f32],
    stats: &mut [f32],
    running_var: &mut [f32],
    momentum: f32,
) {
    let count = g.per_channel();
    for ch in 0..g.c {
        let sum = fold(g, x, ch, |a, v| _mm256_add_ps(a, v), |a, v| a + v);
        let m = mean(sum, count);
        let mv = splat(m).0;
        let dev = fold(
            g,
            x,
            ch,
            |a, v| {
                let d = _mm256_sub_ps(v, mv);
                _mm256_add_ps(a, _mm256_mul_ps(d, d))
            },
            |a, v| {
                let d = v - m;
                a + d * d
            },
        );
        stats[ch] = m;
        stats[g.c + ch] = mean(dev, count);
        if let (Some(r), true) = (running_var.get_mut(ch), count > 1) {
            *r = (1.0 - momentum) * *r + momentum * mean(dev, count - 1);
        }
    }
}

/// `norm::bias_grads` for `f32`.
#[target_feature(enable = "avx2,fma")]
pub(super) fn bias_grads(g: NormGeom, gy: &[f32], gb: &mut [f32]) {
    for (ch, v) in gb.iter_mut().enumerate().take(g.c) {
        *v += fold(g, gy, ch, |a, v| _mm256_add_ps(a, v), |a, v| a + v);
    }
}

/// Channel `ch`'s sums of `gy` and `gy * (x - m) * r` over the batch, in
/// `lanes.rs`'s chains.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn backward_sums(g: NormGeom, x: &[f32], gy: &[f32], ch: usize, m: f32, r: f32) -> (f32, f32) {
    let (mv, rv) = (splat(m).0, splat(r).0);
    let (mut s1, mut s2) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let mut tail = [0.0f32; 2];
    for b in 0..g.n {
        let (xr, gr) = (run(g, x, b, ch), run(g, gy, b, ch));
        let (mut xc, mut gc) = (xr.chunks_exact(8), gr.chunks_exact(8));
        for (xs, gs) in (&mut xc).zip(&mut gc) {
            let (xv, gv) = (load(xs).0, load(gs).0);
            s1 = _mm256_add_ps(s1, gv);
            let d = _mm256_mul_ps(_mm256_sub_ps(xv, mv), rv);
            s2 = _mm256_add_ps(s2, _mm256_mul_ps(gv, d));
        }
        for (&xv, &gv) in xc.remainder().iter().zip(gc.remainder()) {
            tail = [tail[0] + gv, tail[1] + gv * ((xv - m) * r)];
        }
    }
    (total(s1, tail[0]), total(s2, tail[1]))
}

/// `a * (gy - m1 - (x - m) * r * m2)` on 8 lanes (`k` holds `a, m1, m2, m, r`).
#[target_feature(enable = "avx2,fma")]
#[inline]
fn input_grad(xv: __m256, gv: __m256, k: [__m256; 5]) -> __m256 {
    let [av, m1v, m2v, mv, rv] = k;
    let t = _mm256_mul_ps(_mm256_mul_ps(_mm256_sub_ps(xv, mv), rv), m2v);
    _mm256_mul_ps(av, _mm256_sub_ps(_mm256_sub_ps(gv, m1v), t))
}

/// `norm::batch_norm_backward_batch` for `f32`.
#[target_feature(enable = "avx2,fma")]
pub(super) fn batch_norm_backward_batch(
    g: NormGeom,
    x: &[f32],
    gy: &[f32],
    saved: &[f32],
    w: &[f32],
    gw: &mut [f32],
    gx: &mut [f32],
) {
    for ch in 0..g.c {
        let (m, r) = (saved[ch], saved[g.c + ch]);
        let a = r * w.get(ch).copied().unwrap_or(1.0);
        let (s1, s2) = backward_sums(g, x, gy, ch, m, r);
        if let Some(v) = gw.get_mut(ch) {
            *v += s2;
        }
        let (m1, m2) = (mean(s1, g.per_channel()), mean(s2, g.per_channel()));
        let k = [a, m1, m2, m, r].map(|v| splat(v).0);
        for b in 0..g.n {
            let at = (b * g.c + ch) * g.inner;
            let (gxr, xr, gr) = (&mut gx[at..at + g.inner], run(g, x, b, ch), run(g, gy, b, ch));
            let whole = g.inner / 8 * 8;
            for j in (0..whole).step_by(8) {
                let (xv, gv, ov) = (load(&xr[j..]).0, load(&gr[j..]).0, load(&gxr[j..]).0);
                store(F8(_mm256_add_ps(ov, input_grad(xv, gv, k))), &mut gxr[j..]);
            }
            for j in whole..g.inner {
                gxr[j] += a * (gr[j] - m1 - (xr[j] - m) * r * m2);
            }
        }
    }
}

/// `norm::batch_norm_backward_batch_in_place` for `f32`.
#[target_feature(enable = "avx2,fma")]
pub(super) fn batch_norm_backward_batch_in_place(
    g: NormGeom,
    x: &[f32],
    w: &[f32],
    saved: &mut [f32],
    gy: &mut [f32],
) {
    let zero = _mm256_setzero_ps();
    for ch in 0..g.c {
        let (m, r) = (saved[ch], saved[g.c + ch]);
        let a = r * w.get(ch).copied().unwrap_or(1.0);
        let (s1, s2) = backward_sums(g, x, gy, ch, m, r);
        (saved[ch], saved[g.c + ch]) = (s1, s2);
        let (m1, m2) = (mean(s1, g.per_channel()), mean(s2, g.per_channel()));
        let k = [a, m1, m2, m, r].map(|v| splat(v).0);
        for b in 0..g.n {
            let at = (b * g.c + ch) * g.inner;
            let (gr, xr) = (&mut gy[at..at + g.inner], run(g, x, b, ch));
            let whole = g.inner / 8 * 8;
            for j in (0..whole).step_by(8) {
                let (xv, gv) = (load(&xr[j..]).0, load(&gr[j..]).0);
                store(F8(_mm256_add_ps(zero, input_grad(xv, gv, k))), &mut gr[j..]);
            }
            for j in whole..g.inner {
                gr[j] = 0.0 + a * (gr[j] - m1 - (xr[j] - m) * r * m2);
            }
        }
    }
}

/// `relu6` over `x` in place, with `compact::band_mask`'s bits of `0 < x < 6` in `mask`
/// (one word per 16 values), as `Graph::relu6_` computes them in two passes.
#[target_feature(enable = "avx2,fma")]
pub(super) fn relu6_masked(x: &mut [f32], mask: &mut [f32]) {
    let (zero, six) = (_mm256_setzero_ps(), splat(6.0).0);
    let clamp = |v: __m256| {
        let lo = _mm256_cmp_ps::<_CMP_LT_OQ>(v, zero);
        let hi = _mm256_cmp_ps::<_CMP_GT_OQ>(v, six);
        let pass = _mm256_and_ps(
            _mm256_cmp_ps::<_CMP_GT_OQ>(v, zero),
            _mm256_cmp_ps::<_CMP_LT_OQ>(v, six),
        );
        (
            _mm256_blendv_ps(_mm256_blendv_ps(v, zero, lo), six, hi),
            _mm256_movemask_ps(pass) as u32,
        )
    };
    let mut chunks = x.chunks_exact_mut(MASK_BITS);
    // An empty `mask` keeps no bits (no gradient wanted); the values are clamped anyway.
    let mut words = mask.iter_mut();
    for c in &mut chunks {
        let (y0, b0) = clamp(load(c).0);
        let (y1, b1) = clamp(load(&c[8..]).0);
        store(F8(y0), c);
        store(F8(y1), &mut c[8..]);
        if let Some(m) = words.next() {
            *m = f32::from_bits(b0 | b1 << 8);
        }
    }
    let rest = chunks.into_remainder();
    let mut bits = 0u32;
    for (j, v) in rest.iter_mut().enumerate() {
        bits |= ((*v > 0.0 && *v < 6.0) as u32) << j;
        *v = crate::kernels::activation::relu6(*v);
    }
    if let Some(m) = words.next().filter(|_| !rest.is_empty()) {
        *m = f32::from_bits(bits);
    }
}

/// `compact::relu_inplace_masked` for `f32`: `x = max(x, 0)` in place, with the bits
/// of `!(x <= 0)` in `mask` (empty: none kept, and `-0.0` stays as in the generic loop).
#[target_feature(enable = "avx2,fma")]
pub(super) fn relu_masked(x: &mut [f32], mask: &mut [f32]) {
    let zero = _mm256_setzero_ps();
    if mask.is_empty() {
        let mut c = x.chunks_exact_mut(8);
        for v in &mut c {
            // `maxps` answers its second operand for NaN and for two zeros: NaN and
            // -0.0 stay, as in the generic loop.
            store(F8(_mm256_max_ps(zero, load(v).0)), v);
        }
        c.into_remainder()
            .iter_mut()
            .for_each(|v| *v = if *v < 0.0 { 0.0 } else { *v });
        return;
    }
    // `black_box`: see `relu_mask_in_place`.
    let keep = |v: __m256| {
        let pos = _mm256_cmp_ps::<_CMP_NLE_UQ>(v, zero);
        (
            _mm256_and_ps(core::hint::black_box(v), pos),
            _mm256_movemask_ps(pos) as u32,
        )
    };
    let mut chunks = x.chunks_exact_mut(MASK_BITS);
    let mut words = mask.iter_mut();
    for (c, m) in (&mut chunks).zip(&mut words) {
        let (y0, b0) = keep(load(c).0);
        let (y1, b1) = keep(load(&c[8..]).0);
        store(F8(y0), c);
        store(F8(y1), &mut c[8..]);
        *m = f32::from_bits(b0 | b1 << 8);
    }
    let rest = chunks.into_remainder();
    if let Some(m) = words.next().filter(|_| !rest.is_empty()) {
        crate::kernels::compact::relu_inplace_masked(rest, core::slice::from_mut(m));
    }
}

/// `compact::relu_mask_in_place` for `f32`: `g = 0` where the mask bit is clear.
#[target_feature(enable = "avx2,fma")]
pub(super) fn relu_mask_in_place(g: &mut [f32], mask: &[f32]) {
    // Bit `j` of the word moved to lane `j`'s sign bit selects `v` or 0. `v` goes
    // through `black_box`: LLVM would otherwise see a select of the loaded value stored
    // back and turn it into a masked store of zeros, which AMD CPUs run in microcode.
    let lo = _mm256_setr_epi32(31, 30, 29, 28, 27, 26, 25, 24);
    let hi = _mm256_setr_epi32(23, 22, 21, 20, 19, 18, 17, 16);
    let keep = |v: __m256, bits: u32, sel| {
        let s = _mm256_sllv_epi32(_mm256_set1_epi32(bits as i32), sel);
        _mm256_blendv_ps(
            _mm256_setzero_ps(),
            core::hint::black_box(v),
            _mm256_castsi256_ps(s),
        )
    };
    let mut chunks = g.chunks_exact_mut(MASK_BITS);
    let mut words = mask.iter();
    for (c, m) in (&mut chunks).zip(&mut words) {
        let bits = m.to_bits();
        let (y0, y1) = (keep(load(c).0, bits, lo), keep(load(&c[8..]).0, bits, hi));
        store(F8(y0), c);
        store(F8(y1), &mut c[8..]);
    }
    let rest = chunks.into_remainder();
    if let Some(m) = words.next() {
        let bits = m.to_bits();
        for (j, v) in rest.iter_mut().enumerate() {
            *v = if bits >> j & 1 == 1 { *v } else { 0.0 };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::avx2;
    use crate::init::Rng;
    use crate::kernels::norm::{self, NormGeom};
    use crate::kernels::test_shapes::random;
    use crate::kernels::{activation, compact};

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Shapes with runs shorter than, equal to and longer than a vector, and tails.
    const SHAPES: [(usize, usize, usize); 7] = [
        (2, 3, 1),
        (1, 2, 7),
        (3, 2, 8),
        (2, 5, 9),
        (4, 3, 16),
        (3, 4, 49),
        (2, 2, 196),
    ];

    #[test]
    fn batch_norm_passes_are_the_generic_bits() {
        if !avx2::available() {
            return;
        }
        let mut rng = Rng::new(7);
        for (n, c, inner) in SHAPES {
            let g = NormGeom { n, c, inner };
            let len = n * c * inner;
            // An offset mean, so that the deviations' rounding depends on the order.
            let x: Vec<f32> = random(&mut rng, len).iter().map(|v| v * 3.0 + 1.7).collect();
            let gy = random(&mut rng, len);
            let (mut st, mut st2) = (vec![0.0; 2 * c], vec![0.0; 2 * c]);
            let (mut rv, mut rv2) = (vec![0.5; c], vec![0.5; c]);
            norm::channel_stats(g, &x, &mut st, &mut rv, 0.1);
            assert!(avx2::channel_stats(g, &x, &mut st2, &mut rv2, 0.1));
            assert_eq!((bits(&st), bits(&rv)), (bits(&st2), bits(&rv2)), "stats {g:?}");
            let saved: Vec<f32> = (0..2 * c)
                .map(|i| if i < c { st[i] } else { 1.0 / (st[i] + 1e-5).sqrt() })
                .collect();
            let w = random(&mut rng, c);
            for w in [&w[..], &[]] {
                let (mut gw, mut gw2) = (vec![0.25; w.len()], vec![0.25; w.len()]);
                let gx0 = random(&mut rng, len);
                let (mut gx, mut gx2) = (gx0.clone(), gx0);
                norm::batch_norm_backward_batch(g, &x, &gy, &saved, w, &mut gw, &mut gx);
                assert!(avx2::batch_norm_backward_batch(
                    g, &x, &gy, &saved, w, &mut gw2, &mut gx2
                ));
                assert_eq!((bits(&gw), bits(&gx)), (bits(&gw2), bits(&gx2)), "backward {g:?}");
            }
            let (mut gb, mut gb2) = (vec![0.5; c], vec![0.5; c]);
            norm::bias_grads(g, &gy, &mut gb);
            assert!(avx2::bias_grads(g, &gy, &mut gb2));
            assert_eq!(bits(&gb), bits(&gb2), "bias {g:?}");
        }
    }

    #[test]
    fn in_place_backward_is_the_cleared_buffer_backward_and_the_bias_sums() {
        let mut rng = Rng::new(11);
        for (n, c, inner) in SHAPES {
            let g = NormGeom { n, c, inner };
            let len = n * c * inner;
            let x: Vec<f32> = random(&mut rng, len).iter().map(|v| v * 2.0 - 0.6).collect();
            let gy = random(&mut rng, len);
            let saved: Vec<f32> = (0..2 * c)
                .map(|i| {
                    if i < c {
                        0.1 * i as f32
                    } else {
                        0.5 + 0.25 * (i - c) as f32
                    }
                })
                .collect();
            let w = random(&mut rng, c);
            for w in [&w[..], &[]] {
                // What the general path computes into a cleared input gradient.
                let (mut gw, mut gx, mut gb) = (vec![0.0; c], vec![0.0; len], vec![0.0; c]);
                norm::batch_norm_backward_batch(g, &x, &gy, &saved, w, &mut gw, &mut gx);
                norm::bias_grads(g, &gy, &mut gb);
                let want = (bits(&gx), bits(&gb), bits(&gw));
                let (mut s, mut gv) = (saved.clone(), gy.clone());
                norm::batch_norm_backward_batch_in_place(g, &x, w, &mut s, &mut gv);
                assert_eq!((bits(&gv), bits(&s[..c]), bits(&s[c..])), want, "generic {g:?}");
                if avx2::available() {
                    let (mut s, mut gv) = (saved.clone(), gy.clone());
                    assert!(avx2::batch_norm_backward_batch_in_place(
                        g, &x, w, &mut s, &mut gv
                    ));
                    assert_eq!((bits(&gv), bits(&s[..c]), bits(&s[c..])), want, "avx2 {g:?}");
                }
            }
        }
    }

    #[test]
    fn relu_relu6_and_their_masks_are_the_generic_bits() {
        if !avx2::available() {
            return;
        }
        let mut rng = Rng::new(3);
        for len in [0, 1, 5, 15, 16, 17, 40, 63, 64, 100] {
            let mut x: Vec<f32> = random(&mut rng, len).iter().map(|v| v * 8.0).collect();
            for (k, v) in [0.0, -0.0, 6.0, f32::NAN, -f32::NAN, f32::INFINITY]
                .into_iter()
                .enumerate()
            {
                if let Some(e) = x.get_mut(k * 7) {
                    *e = v;
                }
            }
            let words = compact::mask_words(len);
            let (mut want, mut mw) = (x.clone(), vec![0.0f32; words]);
            compact::band_mask(&want, &mut mw, |v| v > 0.0 && v < 6.0);
            want.iter_mut().for_each(|v| *v = activation::relu6(*v));
            let (mut got, mut mg) = (x.clone(), vec![1.0f32; words]);
            assert!(avx2::relu6_masked(&mut got, &mut mg));
            assert_eq!((bits(&want), bits(&mw)), (bits(&got), bits(&mg)), "relu6 {len}");
            // Without a mask the values are still clamped.
            let mut bare = x.clone();
            assert!(avx2::relu6_masked(&mut bare, &mut []));
            assert_eq!(bits(&bare), bits(&want), "relu6 unmasked {len}");
            let (mut want, mut mw2) = (x.clone(), vec![0.0f32; words]);
            compact::relu_inplace_masked(&mut want, &mut mw2);
            let (mut got, mut mg2) = (x.clone(), vec![1.0f32; words]);
            assert!(avx2::relu_masked(&mut got, &mut mg2));
            assert_eq!((bits(&want), bits(&mw2)), (bits(&got), bits(&mg2)), "relu {len}");
            let (mut want, mut got) = (x.clone(), x.clone());
            compact::relu_inplace_masked(&mut want, &mut []);
            assert!(avx2::relu_masked(&mut got, &mut []));
            assert_eq!(bits(&want), bits(&got), "relu unmasked {len}");
            let gy = random(&mut rng, len);
            let (mut a, mut b) = (gy.clone(), gy);
            compact::relu_mask_in_place(&mut a, &mw);
            assert!(avx2::relu_mask_in_place(&mut b, &mw));
            assert_eq!(bits(&a), bits(&b), "mask {len}");
        }
    }
}
