//! Max pooling with compact saved positions, forward and backward.
//!
//! - PyTorch's rules: a window starts at `o * stride - pad`, padding is -inf, the first
//!   maximum wins and NaN propagates (the first NaN of a window wins).
//! - The winner's position inside its window is kept as one byte when the window has
//!   at most 127 taps (4 per word, every byte below 0x80, so never a NaN pattern in an
//!   `f32` word), else as 16 bits (2 per word, window at most 32,767 taps), else a whole
//!   word; backward is a scatter.

use super::PoolGeom;
use crate::scalar::Scalar;

/// Bytes per saved max-pool position for a window of `taps` elements.
pub fn argmax_bytes(taps: usize) -> usize {
    if taps <= 127 {
        1
    } else if taps <= 32767 {
        2
    } else {
        4
    }
}

/// Words holding `n` positions of windows of `taps` elements.
pub fn argmax_words(n: usize, taps: usize) -> usize {
    let per = 4 / argmax_bytes(taps);
    n.div_ceil(per)
}

/// Window start `o * stride - pad` (may be negative) of output index `o`.
#[inline]
fn start(o: usize, stride: usize, pad: usize) -> isize {
    (o * stride) as isize - pad as isize
}

/// Max pooling (PyTorch's rules: first maximum wins, NaN propagates); when `idx` is
/// not empty it receives each winner's window position, packed.
pub fn max_pool2d_forward_packed<S: Scalar>(g: &PoolGeom, x: &[S], y: &mut [S], idx: &mut [S]) {
    if is_2x2(g) {
        // On Cortex-M the direct loop (no staging buffers on a small stack, no vector
        // unit to feed); elsewhere rows are staged into chunks long enough for the
        // vectorised loop.
        #[cfg(target_arch = "arm")]
        return max_pool_2x2_packed(g, x, y, idx);
        #[cfg(not(target_arch = "arm"))]
        return max_pool_2x2_staged(g, x, y, idx);
    }
    max_pool_packed_general(g, x, y, idx)
}

/// 2x2 windows with stride 2 and no padding, all inside the input (W1's pools): the
/// fast paths below need no window clipping and no divisions.
pub(crate) fn is_2x2(g: &PoolGeom) -> bool {
    g.kernel == [2, 2] && g.stride == [2, 2] && g.pad == [0, 0] && 2 * g.oh <= g.h && 2 * g.ow <= g.w
}

/// `best` against the next element of the window: a larger value wins, and so does the
/// first NaN (as the general loop, which stops at it). A select, not a branch.
#[inline(always)]
fn first_max<S: Scalar>(best: (S, u32), v: S, i: u32) -> (S, u32) {
    let nan_v = v.partial_cmp(&v).is_none();
    let nan_b = best.0.partial_cmp(&best.0).is_none();
    if v > best.0 || (nan_v && !nan_b) {
        (v, i)
    } else {
        best
    }
}

/// [`max_pool2d_forward_packed`] for 2x2 windows: one byte per output, 4 per word,
/// one output row at a time (the Cortex-M path: no staging buffers on a small stack,
/// and the code the flash budgets were measured with).
#[cfg_attr(not(target_arch = "arm"), allow(dead_code))]
fn max_pool_2x2_packed<S: Scalar>(g: &PoolGeom, x: &[S], y: &mut [S], idx: &mut [S]) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    let keep = !idx.is_empty();
    let (mut word, mut fill, mut out_w) = (0u32, 0u32, 0usize);
    for p in 0..g.planes {
        let xp = &x[p * ip..][..ip];
        for oy in 0..g.oh {
            let r0 = 2 * oy * g.w;
            let (top, bottom) = (&xp[r0..][..2 * g.ow], &xp[r0 + g.w..][..2 * g.ow]);
            let yr = &mut y[p * op + oy * g.ow..][..g.ow];
            // Winners of 16 outputs first (a loop the compiler vectorises), then their
            // positions packed into the running word.
            for ((yc, tc), bc) in yr.chunks_mut(16).zip(top.chunks(32)).zip(bottom.chunks(32)) {
                let mut ats = [0u32; 16];
                for (((yv, at), t), b) in yc
                    .iter_mut()
                    .zip(ats.iter_mut())
                    .zip(tc.chunks_exact(2))
                    .zip(bc.chunks_exact(2))
                {
                    let mut best = (t[0], 0);
                    best = first_max(best, t[1], 1);
                    best = first_max(best, b[0], 2);
                    best = first_max(best, b[1], 3);
                    *yv = best.0;
                    *at = best.1;
                }
                if keep {
                    for &at in &ats[..yc.len()] {
                        word |= at << (8 * fill);
                        fill += 1;
                        if fill == 4 {
                            idx[out_w] = S::from_bits(word);
                            (word, fill, out_w) = (0, 0, out_w + 1);
                        }
                    }
                }
            }
        }
    }
    if fill > 0 {
        idx[out_w] = S::from_bits(word);
    }
}

/// Outputs staged per call of [`pool_2x2_run`] by [`max_pool_2x2_staged`].
#[cfg_attr(target_arch = "arm", allow(dead_code))]
const STAGE: usize = 32;

/// [`max_pool_2x2_packed`] for short rows: W1's pooled rows are 14 and 7 outputs, too
/// short for the vectorised loop, which wants 16. The windows' top and bottom rows of
/// consecutive outputs (consecutive across rows and planes too) are copied into two
/// staging buffers of [`STAGE`] outputs, and each full buffer is pooled in one run.
#[cfg_attr(target_arch = "arm", allow(dead_code))]
#[inline(always)]
pub(crate) fn max_pool_2x2_staged<S: Scalar>(g: &PoolGeom, x: &[S], y: &mut [S], idx: &mut [S]) {
    let keep = !idx.is_empty();
    let mut packer = BytePacker::new(idx);
    let (mut top, mut bottom) = ([S::ZERO; 2 * STAGE], [S::ZERO; 2 * STAGE]);
    let (mut staged, mut done) = (0usize, 0usize);
    for p in 0..g.planes {
        for oy in 0..g.oh {
            let r0 = p * g.h * g.w + 2 * oy * g.w;
            let mut ox = 0;
            while ox < g.ow {
                let take = (g.ow - ox).min(STAGE - staged);
                let dst = 2 * staged..2 * (staged + take);
                top[dst.clone()].copy_from_slice(&x[r0 + 2 * ox..][..2 * take]);
                bottom[dst].copy_from_slice(&x[r0 + g.w + 2 * ox..][..2 * take]);
                (staged, ox) = (staged + take, ox + take);
                if staged == STAGE {
                    pool_2x2_run(&top, &bottom, &mut y[done..][..STAGE], &mut packer, keep);
                    (done, staged) = (done + STAGE, 0);
                }
            }
        }
    }
    let (t, b) = (&top[..2 * staged], &bottom[..2 * staged]);
    pool_2x2_run(t, b, &mut y[done..][..staged], &mut packer, keep);
    packer.finish();
}

/// Pools `y.len()` (at most [`STAGE`]) consecutive 2x2 windows whose top rows are
/// `top` and bottom rows `bottom`. Each window is a small tournament (top pair, bottom
/// pair, then the two winners), which picks the same element as the in-order scan of
/// [`first_max`]: the first NaN, else the first maximum. No branch per output.
#[cfg_attr(target_arch = "arm", allow(dead_code))]
#[inline(always)]
fn pool_2x2_run<S: Scalar>(top: &[S], bottom: &[S], y: &mut [S], packer: &mut BytePacker<'_, S>, keep: bool) {
    let mut ats = [0u8; STAGE];
    for (((yv, at), t), b) in y
        .iter_mut()
        .zip(ats.iter_mut())
        .zip(top.chunks_exact(2))
        .zip(bottom.chunks_exact(2))
    {
        let upper = first_max((t[0], 0), t[1], 1);
        let lower = first_max((b[0], 2), b[1], 3);
        let best = first_max(upper, lower.0, lower.1);
        *yv = best.0;
        *at = best.1 as u8;
    }
    if keep {
        packer.push(&ats[..y.len()]);
    }
}

/// Packs a stream of bytes into scalar words, 4 per word, byte `k` of a word at bits
/// `8k` (the order [`max_pool2d_backward_packed`] reads), through a small buffer so
/// that words are written in runs rather than one branch per byte.
#[cfg_attr(target_arch = "arm", allow(dead_code))]
struct BytePacker<'a, S> {
    words: &'a mut [S],
    buf: [u8; 64],
    len: usize,
    out: usize,
}

#[cfg_attr(target_arch = "arm", allow(dead_code))]
impl<'a, S: Scalar> BytePacker<'a, S> {
    fn new(words: &'a mut [S]) -> Self {
        BytePacker {
            words,
            buf: [0; 64],
            len: 0,
            out: 0,
        }
    }

    /// Appends up to 32 bytes.
    #[inline]
    fn push(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
        if self.len >= 32 {
            self.flush_words();
        }
    }

    /// Writes every whole word in the buffer and keeps the rest.
    fn flush_words(&mut self) {
        let n = self.len / 4;
        for (w, b) in self.words[self.out..self.out + n]
            .iter_mut()
            .zip(self.buf.chunks_exact(4))
        {
            *w = S::from_bits(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        }
        self.out += n;
        self.buf.copy_within(4 * n..self.len, 0);
        self.len -= 4 * n;
    }

    /// Writes what is left, the last word padded with zero bytes.
    fn finish(mut self) {
        self.flush_words();
        if self.len > 0 {
            self.buf[self.len..4].fill(0);
            self.len = 4;
            self.flush_words();
        }
    }
}

/// Any window: clipped to the input.
fn max_pool_packed_general<S: Scalar>(g: &PoolGeom, x: &[S], y: &mut [S], idx: &mut [S]) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    let bytes = argmax_bytes(g.kernel[0] * g.kernel[1]);
    let per = 4 / bytes;
    let (mut word, mut fill, mut out_w) = (0u32, 0usize, 0usize);
    for p in 0..g.planes {
        let xp = &x[p * ip..][..ip];
        for oy in 0..g.oh {
            let sy = start(oy, g.stride[0], g.pad[0]);
            for ox in 0..g.ow {
                let sx = start(ox, g.stride[1], g.pad[1]);
                let mut best = S::MIN;
                let mut at = u32::MAX;
                'win: for ky in 0..g.kernel[0] {
                    let iy = sy + ky as isize;
                    if iy < 0 || iy >= g.h as isize {
                        continue;
                    }
                    for kx in 0..g.kernel[1] {
                        let ix = sx + kx as isize;
                        if ix < 0 || ix >= g.w as isize {
                            continue;
                        }
                        let v = xp[iy as usize * g.w + ix as usize];
                        #[allow(clippy::eq_op)]
                        let nan = v.partial_cmp(&v).is_none();
                        if at == u32::MAX || v > best || nan {
                            best = v;
                            at = (ky * g.kernel[1] + kx) as u32;
                            if nan {
                                break 'win;
                            }
                        }
                    }
                }
                y[p * op + oy * g.ow + ox] = best;
                if !idx.is_empty() {
                    word |= at << (8 * bytes * fill);
                    fill += 1;
                    if fill == per {
                        idx[out_w] = S::from_bits(word);
                        out_w += 1;
                        word = 0;
                        fill = 0;
                    }
                }
            }
        }
    }
    if fill > 0 && !idx.is_empty() {
        idx[out_w] = S::from_bits(word);
    }
}

/// `gx[winner] += gy`, decoding the packed positions.
pub fn max_pool2d_backward_packed<S: Scalar>(g: &PoolGeom, gy: &[S], idx: &[S], gx: &mut [S]) {
    if is_2x2(g) {
        return max_pool_2x2_backward_packed(g, gy, idx, gx);
    }
    max_pool_backward_packed_general(g, gy, idx, gx)
}

/// [`max_pool2d_backward_packed`] for 2x2 windows: byte `k` of the positions is output
/// `k`'s winner, `2 * ky + kx`. Every element of the covered rows gets `gy` or zero
/// added, in order: no scattered stores, and the loops vectorise.
fn max_pool_2x2_backward_packed<S: Scalar>(g: &PoolGeom, gy: &[S], idx: &[S], gx: &mut [S]) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    let mut k = 0usize;
    for p in 0..g.planes {
        let gxp = &mut gx[p * ip..][..ip];
        for oy in 0..g.oh {
            let gyr = &gy[p * op + oy * g.ow..][..g.ow];
            let (top, rest) = gxp[2 * oy * g.w..].split_at_mut(g.w);
            let bottom = &mut rest[..g.w];
            for ((&gv, t), b) in gyr
                .iter()
                .zip(top.chunks_exact_mut(2))
                .zip(bottom.chunks_exact_mut(2))
            {
                let at = idx[k / 4].to_bits() >> (8 * (k % 4)) & 3;
                k += 1;
                let pick = |i: u32| if at == i { gv } else { S::ZERO };
                t[0] += pick(0);
                t[1] += pick(1);
                b[0] += pick(2);
                b[1] += pick(3);
            }
        }
    }
}

/// Any window: decoded and clipped to the input.
fn max_pool_backward_packed_general<S: Scalar>(g: &PoolGeom, gy: &[S], idx: &[S], gx: &mut [S]) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    let bytes = argmax_bytes(g.kernel[0] * g.kernel[1]);
    let per = 4 / bytes;
    let mask = if bytes == 4 {
        u32::MAX
    } else {
        (1u32 << (8 * bytes)) - 1
    };
    let mut k = 0usize;
    for p in 0..g.planes {
        let gxp = &mut gx[p * ip..][..ip];
        for oy in 0..g.oh {
            let sy = start(oy, g.stride[0], g.pad[0]);
            for ox in 0..g.ow {
                let sx = start(ox, g.stride[1], g.pad[1]);
                let word = idx[k / per].to_bits();
                let at = (word >> (8 * bytes * (k % per))) & mask;
                k += 1;
                let (ky, kx) = (at as usize / g.kernel[1], at as usize % g.kernel[1]);
                let (iy, ix) = (sy + ky as isize, sx + kx as isize);
                if iy >= 0 && ix >= 0 && (iy as usize) < g.h && (ix as usize) < g.w {
                    gxp[iy as usize * g.w + ix as usize] += gy[p * op + oy * g.ow + ox];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::init::Rng;

    /// The 2x2 fast paths (direct and staged forward, backward) against the general
    /// loops, on odd sizes, ties and NaNs, with rows shorter and longer than a stage and
    /// stages that end mid-row.
    #[test]
    fn max_pool_2x2_matches_general() {
        let mut rng = Rng::new(11);
        let shapes = [
            (3, 5, 7),
            (2, 28, 28),
            (5, 7, 7),
            (1, 2, 2),
            (4, 9, 4),
            (3, 4, 70),
            (2, 6, 130),
            // W1's pools at batch 3 (28x28 and 14x14 planes), and rows of 2, 6 and 10.
            (24, 28, 28),
            (48, 14, 14),
            (5, 4, 2),
            (7, 3, 6),
            (9, 6, 10),
        ];
        // Each shape with NaNs here and there, and without any (the AVX2 kernel's
        // faster path); a NaN in one plane of many.
        let nan_every = [12, 0, 5000];
        for ((planes, h, w), nan_every) in shapes.into_iter().flat_map(|s| nan_every.map(|n| (s, n))) {
            let g = PoolGeom {
                planes,
                h,
                w,
                oh: h / 2,
                ow: w / 2,
                kernel: [2, 2],
                stride: [2, 2],
                pad: [0, 0],
            };
            assert!(is_2x2(&g));
            // Few distinct values: many ties (-0 ties with 0).
            let x: Vec<f32> = (0..planes * h * w)
                .map(
                    |_| match (nan_every > 0 && rng.below(nan_every) == 0, rng.below(12)) {
                        (true, _) => f32::NAN,
                        (_, 1) => -0.0,
                        (_, v) => (v % 4) as f32,
                    },
                )
                .collect();
            let n = planes * g.oh * g.ow;
            let words = argmax_words(n, 4);
            let (mut y0, mut i0) = (vec![0.0f32; n], vec![0.0f32; words]);
            max_pool_packed_general(&g, &x, &mut y0, &mut i0);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            type Pool = fn(&PoolGeom, &[f32], &mut [f32], &mut [f32]);
            use crate::kernels::{set::F32, KernelSet};
            let paths: [(&str, Pool); 4] = [
                ("direct", max_pool_2x2_packed),
                ("staged", max_pool_2x2_staged),
                ("dispatch", max_pool2d_forward_packed),
                ("f32 kernel set (AVX2 on x86_64)", F32::max_pool2d_forward_packed),
            ];
            for (path, pool) in paths {
                let (mut y1, mut i1) = (vec![0.0f32; n], vec![0.0f32; words]);
                pool(&g, &x, &mut y1, &mut i1);
                assert_eq!(bits(&y1), bits(&y0), "{path} {g:?}");
                assert_eq!(bits(&i1), bits(&i0), "{path} {g:?}");
                // Without positions (inference) the values are the same.
                let mut y2 = vec![0.0f32; n];
                pool(&g, &x, &mut y2, &mut []);
                assert_eq!(bits(&y2), bits(&y0), "{path} {g:?}");
            }

            let gy: Vec<f32> = (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect();
            let start: Vec<f32> = (0..planes * h * w).map(|_| rng.uniform(-1.0, 1.0)).collect();
            let (mut gx0, mut gx1, mut gx2) = (start.clone(), start.clone(), start);
            max_pool_backward_packed_general(&g, &gy, &i0, &mut gx0);
            max_pool_2x2_backward_packed(&g, &gy, &i0, &mut gx1);
            assert_eq!(bits(&gx1), bits(&gx0), "{g:?}");
            F32::max_pool2d_backward_packed(&g, &gy, &i0, &mut gx2);
            assert_eq!(bits(&gx2), bits(&gx0), "f32 kernel set backward {g:?}");
            // Written over a gradient holding garbage: every element, or nothing.
            let mut zeros = vec![0.0f32; planes * h * w];
            max_pool_backward_packed_general(&g, &gy, &i0, &mut zeros);
            let mut gx3 = vec![f32::NAN; planes * h * w];
            let wrote = F32::max_pool2d_backward_overwrite(&g, &gy, &i0, &mut gx3);
            match wrote {
                true => assert_eq!(bits(&gx3), bits(&zeros), "overwrite {g:?}"),
                false => assert!(gx3.iter().all(|v| v.is_nan()), "overwrite declined {g:?}"),
            }
            #[cfg(target_arch = "x86_64")]
            {
                // Rows up to 64 wide (W1's are 28 and 14) always fit `pool8.rs`'s blocks.
                let covered = h % 2 == 0 && w % 2 == 0;
                let avx2 = crate::kernels::conv::fast_f32::avx2::available();
                assert!(!wrote || covered, "{g:?}");
                assert!(wrote || !(avx2 && covered && w <= 64), "{g:?}");
            }
        }
    }
}
