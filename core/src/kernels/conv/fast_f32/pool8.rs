//! Max pooling with 2x2 windows and stride 2 over 8-lane AVX2 vectors (W1's pools),
//! forward and backward, bit for bit the generic kernels of `kernels/pool/max.rs`.
//!
//! - Only when each pooled row covers its input row exactly (`w == 2 * ow`): then the
//!   windows of a run of whole row pairs are neighbouring pairs in one contiguous
//!   buffer, however short the rows (W1's are 28 and 14 wide).
//! - Forward: each row pair is first reduced vertically (top against bottom) into a
//!   block buffer, then the block horizontally (even against odd element), 8 outputs
//!   per step. The winner is the one the generic in-order scan picks: the greater
//!   value, else the first NaN, else on a tie (or two NaNs) the earlier position.
//! - A block holds whole row pairs and, except the last, a multiple of 8 outputs, so
//!   the packed positions (one byte per output) go out two whole words at a time.
//! - Backward: 8 outputs' gradients at a time are spread to the top and bottom rows
//!   of a block buffer (zero where an element did not win), which are then added to
//!   the input gradient's rows: the same additions as the generic loop.

use super::avx2::{load, store, F8};
use crate::kernels::pool::{max, PoolGeom};
use core::arch::x86_64::{
    __m256, _mm256_add_ps, _mm256_and_ps, _mm256_and_si256, _mm256_andnot_ps, _mm256_blendv_ps,
    _mm256_castpd_ps, _mm256_castps_pd, _mm256_castsi256_ps, _mm256_cmp_ps, _mm256_cmpeq_epi32,
    _mm256_cvtepu8_epi32, _mm256_movemask_ps, _mm256_or_ps, _mm256_permute2f128_ps, _mm256_permute4x64_pd,
    _mm256_set1_epi32, _mm256_shuffle_ps, _mm256_unpackhi_ps, _mm256_unpacklo_ps, _mm_cvtsi64_si128,
    _CMP_EQ_OQ, _CMP_GT_OQ, _CMP_ORD_Q, _CMP_UNORD_Q,
};

/// Words of a block buffer (whole row pairs), plus room to round up to 16.
const BLOCK: usize = 512;

/// Row pairs per block: whole pairs, a multiple of 8 outputs; `None` when the shape is
/// not one this file handles (or 8 outputs' worth of rows does not fit a block).
fn block_pairs(g: &PoolGeom) -> Option<usize> {
    if !max::is_2x2(g) || g.ow == 0 || g.w != 2 * g.ow {
        return None;
    }
    let unit = 8 >> g.ow.trailing_zeros().min(3);
    let words = unit * g.w;
    (words <= BLOCK).then(|| unit * (BLOCK / words))
}

/// The blocks of row pairs: `(first pair, pairs)`.
fn blocks(g: &PoolGeom, per_block: usize) -> impl Iterator<Item = (usize, usize)> {
    let pairs = g.planes * g.oh;
    (0..pairs)
        .step_by(per_block)
        .map(move |first| (first, per_block.min(pairs - first)))
}

/// Where row pair `pair` (plane-major) starts in the input.
fn pair_start(g: &PoolGeom, pair: usize) -> usize {
    (pair / g.oh) * g.h * g.w + 2 * (pair % g.oh) * g.w
}

/// Byte `k` of `SPREAD[m]` is bit `k` of `m`: 8 mask bits to 8 position bytes.
static SPREAD: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut m = 0;
    while m < 256 {
        let mut k = 0;
        while k < 8 {
            t[m] |= ((m as u64 >> k) & 1) << (8 * k);
            k += 1;
        }
        m += 1;
    }
    t
};

/// All ones where `b` beats `a`, `a` being earlier in the window: greater, or the first
/// NaN.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn beats(a: __m256, b: __m256) -> __m256 {
    let nan_b = _mm256_cmp_ps::<_CMP_UNORD_Q>(b, b);
    let num_a = _mm256_cmp_ps::<_CMP_ORD_Q>(a, a);
    _mm256_or_ps(_mm256_cmp_ps::<_CMP_GT_OQ>(b, a), _mm256_and_ps(nan_b, num_a))
}

/// Evens and odds of 16 consecutive words, each in order.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn deinterleave(s: &[f32]) -> (__m256, __m256) {
    let (a, b) = (load(s).0, load(&s[8..]).0);
    // Within each 128-bit half the shuffles give outputs 0 1 4 5 | 2 3 6 7; the
    // 64-bit permute puts them back in order.
    let fix = |v: __m256| _mm256_castpd_ps(_mm256_permute4x64_pd::<0xD8>(_mm256_castps_pd(v)));
    (
        fix(_mm256_shuffle_ps::<0x88>(a, b)),
        fix(_mm256_shuffle_ps::<0xDD>(a, b)),
    )
}

/// The vertical winners of one row pair (`pair` = top row then bottom row, `w` each)
/// into `v`, and in `r` all ones where the bottom element won.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn vertical(pair: &[f32], w: usize, v: &mut [f32], r: &mut [f32]) {
    if w < 8 {
        for i in 0..w {
            let (t, b) = (pair[i], pair[w + i]);
            let wins = b > t || (b.is_nan() && !t.is_nan());
            v[i] = if wins { b } else { t };
            r[i] = f32::from_bits(if wins { u32::MAX } else { 0 });
        }
        return;
    }
    // The last vector overlaps the one before it: it writes the same values again.
    for i in (0..w).step_by(8) {
        let i = i.min(w - 8);
        let (t, b) = (load(&pair[i..]).0, load(&pair[w + i..]).0);
        let m = beats(t, b);
        store(F8(_mm256_blendv_ps(t, b, m)), &mut v[i..]);
        store(F8(m), &mut r[i..]);
    }
}

/// Max pooling (2x2, stride 2, `w == 2 * ow`); `false` (nothing written) for other
/// shapes. `idx` empty: no positions (inference).
#[target_feature(enable = "avx2,fma")]
pub(crate) fn max_pool_2x2(g: &PoolGeom, x: &[f32], y: &mut [f32], idx: &mut [f32]) -> bool {
    let Some(per_block) = block_pairs(g) else {
        return false;
    };
    let w = g.w;
    let (mut v, mut r) = ([0.0f32; BLOCK + 16], [0.0f32; BLOCK + 16]);
    for (first, n) in blocks(g, per_block) {
        for k in 0..n {
            let pair = &x[pair_start(g, first + k)..][..2 * w];
            vertical(pair, w, &mut v[k * w..][..w], &mut r[k * w..][..w]);
        }
        let len = n * w;
        let padded = len.next_multiple_of(16);
        v[len..padded].fill(0.0);
        r[len..padded].fill(0.0);
        horizontal(&v[..padded], &r[..padded], first * g.ow, len / 2, y, idx);
    }
    true
}

/// The horizontal winners of `v` (`count` outputs from output `out0`, a multiple of
/// 8; `v` and `r` zero-padded to whole vectors), with their positions.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn horizontal(v: &[f32], r: &[f32], out0: usize, count: usize, y: &mut [f32], idx: &mut [f32]) {
    for k in 0..count.div_ceil(8) {
        let ((even, odd), (r_even, r_odd)) = (deinterleave(&v[16 * k..]), deinterleave(&r[16 * k..]));
        let tie = _mm256_or_ps(
            _mm256_cmp_ps::<_CMP_EQ_OQ>(odd, even),
            _mm256_and_ps(
                _mm256_cmp_ps::<_CMP_UNORD_Q>(odd, odd),
                _mm256_cmp_ps::<_CMP_UNORD_Q>(even, even),
            ),
        );
        // On a tie the odd element wins only from the top row against the even one
        // from the bottom row (position 1 before 2).
        let earlier = _mm256_and_ps(tie, _mm256_andnot_ps(r_odd, r_even));
        let pick = _mm256_or_ps(beats(even, odd), earlier);
        let best = F8(_mm256_blendv_ps(even, odd, pick));
        let (o, valid) = (out0 + 8 * k, (count - 8 * k).min(8));
        if valid == 8 {
            store(best, &mut y[o..]);
        } else {
            let mut t = [0.0f32; 8];
            store(best, &mut t);
            y[o..o + valid].copy_from_slice(&t[..valid]);
        }
        if !idx.is_empty() {
            let row = _mm256_blendv_ps(r_even, r_odd, pick);
            let col = _mm256_movemask_ps(pick) as usize;
            let bytes = SPREAD[col] | SPREAD[_mm256_movemask_ps(row) as usize] << 1;
            let at = o / 4;
            idx[at] = f32::from_bits(bytes as u32);
            if let Some(next) = idx.get_mut(at + 1) {
                *next = f32::from_bits((bytes >> 32) as u32);
            }
        }
    }
}

/// `gx[winner] += gy` for [`max_pool_2x2`]'s shapes, or with `overwrite` `gx = 0`
/// then that, writing every element (only when the windows cover every input row);
/// `false` (nothing written) for other shapes.
#[target_feature(enable = "avx2,fma")]
pub(crate) fn max_pool_2x2_backward(
    g: &PoolGeom,
    gy: &[f32],
    idx: &[f32],
    gx: &mut [f32],
    overwrite: bool,
) -> bool {
    let Some(per_block) = block_pairs(g) else {
        return false;
    };
    if overwrite && g.h != 2 * g.oh {
        return false;
    }
    let w = g.w;
    let (mut top, mut bottom) = ([0.0f32; BLOCK + 16], [0.0f32; BLOCK + 16]);
    for (first, n) in blocks(g, per_block) {
        spread(gy, idx, first * g.ow, n * g.ow, &mut top, &mut bottom);
        for k in 0..n {
            let (t, rest) = gx[pair_start(g, first + k)..].split_at_mut(w);
            let (rows, sums) = ([t, &mut rest[..w]], [&top[k * w..][..w], &bottom[k * w..][..w]]);
            for (d, s) in rows.into_iter().zip(sums) {
                match overwrite {
                    true => d.copy_from_slice(s),
                    false => add(d, s),
                }
            }
        }
    }
    true
}

/// `count` outputs' gradients from output `out0` (a multiple of 8) spread over the
/// block's top and bottom rows.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn spread(gy: &[f32], idx: &[f32], out0: usize, count: usize, top: &mut [f32], bottom: &mut [f32]) {
    let word = |i: usize| idx.get(i).map_or(0, |v| v.to_bits() as u64);
    let (one, two) = (_mm256_set1_epi32(1), _mm256_set1_epi32(2));
    for k in 0..count.div_ceil(8) {
        let (o, valid) = (out0 + 8 * k, (count - 8 * k).min(8));
        let g = if valid == 8 {
            load(&gy[o..]).0
        } else {
            let mut t = [0.0f32; 8];
            t[..valid].copy_from_slice(&gy[o..o + valid]);
            load(&t).0
        };
        let bytes = word(o / 4) | word(o / 4 + 1) << 32;
        let at = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes as i64));
        let col = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(at, one), one));
        let row = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(at, two), two));
        let (left, right) = (_mm256_andnot_ps(col, g), _mm256_and_ps(col, g));
        let rows = [
            (_mm256_andnot_ps(row, left), _mm256_andnot_ps(row, right)),
            (_mm256_and_ps(row, left), _mm256_and_ps(row, right)),
        ];
        for ((l, r), dst) in rows.into_iter().zip([&mut *top, &mut *bottom]) {
            let (lo, hi) = (_mm256_unpacklo_ps(l, r), _mm256_unpackhi_ps(l, r));
            store(F8(_mm256_permute2f128_ps::<0x20>(lo, hi)), &mut dst[16 * k..]);
            store(F8(_mm256_permute2f128_ps::<0x31>(lo, hi)), &mut dst[16 * k + 8..]);
        }
    }
}

/// `d += s`, element by element.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn add(d: &mut [f32], s: &[f32]) {
    let mut i = 0;
    while i + 8 <= d.len() {
        store(F8(_mm256_add_ps(load(&d[i..]).0, load(&s[i..]).0)), &mut d[i..]);
        i += 8;
    }
    for (dv, &sv) in d[i..].iter_mut().zip(&s[i..]) {
        *dv += sv;
    }
}
