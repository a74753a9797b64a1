//! The strip layout of the AVX2 + FMA kernels (`strip.rs`, `rows.rs`,
//! `strip_weight.rs`): zero-padded planes whose output positions are read as one long
//! run across row ends.

use super::strip::MAX_K;

/// Layout of padded planes read as strips (all sizes in words).
#[derive(Clone, Copy, Debug)]
pub(super) struct Strip {
    pub(super) src: [usize; 2],
    pub(super) pad: [usize; 2],
    /// Words per padded row.
    pub(super) row: usize,
    /// Strip positions: output rows x `row`.
    pub(super) len: usize,
    /// Words per channel: the padded plane plus the slack that tiles read past it.
    pub(super) chan: usize,
    /// Output rows and columns.
    pub(super) out: [usize; 2],
}

impl Strip {
    /// The layout for stride-1 `k` kernels reading `src` planes; `None` if `out` is not
    /// the stride-1 output size or a size overflows.
    pub(super) fn new(
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
    pub(super) fn offsets(&self, nin: usize, k: [usize; 2], dil: [usize; 2], offs: &mut [usize; MAX_K]) {
        let taps = k[0] * k[1];
        for i in 0..nin {
            for ky in 0..k[0] {
                for kx in 0..k[1] {
                    offs[i * taps + ky * k[1] + kx] = i * self.chan + ky * dil[0] * self.row + kx * dil[1];
                }
            }
        }
    }

    /// Copies `count` consecutive source planes into `buf`'s interior positions. The
    /// padding positions are never written, by this or anything else, so a buffer
    /// zeroed once per call keeps them zero for every fill: they are not cleared again.
    pub(super) fn fill(&self, buf: &mut [f32], src: &[f32], count: usize) {
        let buf = &mut buf[..count * self.chan];
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
    pub(super) fn runs(&self, p0: usize, width: usize, mut f: impl FnMut(usize, usize, usize)) {
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
pub(super) fn copy_short(dst: &mut [f32], src: &[f32]) {
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
