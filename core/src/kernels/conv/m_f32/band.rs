//! Zero-padded, column-phase-split copies of a band of rows of a few image planes.
//!
//! - A convolution tap reads the input at padded column `ox * sx + kx * dx`. Splitting
//!   every padded row into `sx` phases (phase `f` holds padded columns `f, f + sx, ...`)
//!   turns that into the contiguous run `phase[(kx*dx) % sx][ox + (kx*dx) / sx ..]`, so a
//!   tile of neighbouring outputs reads neighbouring words for any stride.
//! - Padding is real zeros in the copy: the inner loops have no border branches.
//! - Every phase row has slack up to a multiple of the tile width (`cols`) outputs plus
//!   the kernel's reach, so the last (partial) tile of a row reads zeros, never the
//!   next row.
//! - A band is the padded rows that `band_out` consecutive output rows read, so planes
//!   of any height fit a fixed stack buffer: the driver walks the output in bands.

/// The widest tile of outputs in a row (the one-channel tiles): rows are padded to it.
pub(crate) const TILE_COLS: usize = 8;

/// Output rows per band below which [`Band::choose`] rather takes fewer channels.
const MIN_BAND_ROWS: usize = 4;

/// The layout of the copied band (all sizes in words).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Band {
    /// Source rows and columns.
    pub h: usize,
    pub w: usize,
    /// Zero padding (rows, columns).
    pub pad: [usize; 2],
    /// Row stride of the convolution.
    pub sy: usize,
    /// Column stride (the number of phases).
    pub sx: usize,
    /// Words per phase row.
    pub pw: usize,
    /// Words per padded row (`sx * pw`).
    pub row: usize,
    /// Output rows per band.
    pub band_out: usize,
    /// Rows a kernel column spans minus one (`(kh - 1) * dil`).
    pub reach_y: usize,
    /// Words per channel (`rows * row`).
    pub chan: usize,
}

impl Band {
    /// The layout for `src = [h, w]` planes read by a `k = [kh, kw]` kernel with the
    /// given padding, stride and dilation, producing `out = [oh, ow]` outputs, with as
    /// many output rows per band as one channel's band fits in `words`, rows padded for
    /// tiles of `cols` outputs; `None` when not even one output row fits or a size
    /// overflows.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        src: [usize; 2],
        pad: [usize; 2],
        stride: [usize; 2],
        dil: [usize; 2],
        k: [usize; 2],
        out: [usize; 2],
        words: usize,
        cols: usize,
    ) -> Option<Self> {
        let [h, w] = src;
        let sx = stride[1];
        let data_cols = w.checked_add(pad[1].checked_mul(2)?)?.div_ceil(sx);
        let reach_x = k[1].checked_sub(1)?.checked_mul(dil[1])?;
        let read_cols = out[1]
            .div_ceil(cols)
            .checked_mul(cols)?
            .checked_add(reach_x / sx)?;
        let pw = data_cols.max(read_cols);
        let row = pw.checked_mul(sx)?;
        let reach_y = k[0].checked_sub(1)?.checked_mul(dil[0])?;
        // Padded rows read by `b` output rows: (b - 1) * sy + reach_y + 1.
        let max_rows = words / row.max(1);
        let fit = max_rows.checked_sub(reach_y + 1)? / stride[0] + 1;
        let band_out = fit.min(out[0]).max(1);
        let rows = (band_out - 1).checked_mul(stride[0])?.checked_add(reach_y + 1)?;
        let chan = rows.checked_mul(row)?;
        (chan <= words && out[0] > 0).then_some(Band {
            h,
            w,
            pad,
            sy: stride[0],
            sx,
            pw,
            row,
            band_out,
            reach_y,
            chan,
        })
    }

    /// The layout for up to `channels` planes in a buffer of `words`: bands of at least
    /// [`MIN_BAND_ROWS`] output rows (or the whole output) holding as many channels as
    /// possible, halving the channels per pass until such a band fits. Fewer passes
    /// over the channels save loading and storing the output tiles; taller bands save
    /// copying the rows their neighbours share.
    #[allow(clippy::too_many_arguments)]
    pub fn choose(
        src: [usize; 2],
        pad: [usize; 2],
        stride: [usize; 2],
        dil: [usize; 2],
        k: [usize; 2],
        out: [usize; 2],
        channels: usize,
        words: usize,
    ) -> Option<Self> {
        let mut want = channels.max(1);
        loop {
            let band = Self::new(src, pad, stride, dil, k, out, words / want, TILE_COLS);
            match band {
                Some(b) if b.band_out >= out[0].min(MIN_BAND_ROWS) => return band,
                _ if want == 1 => return band,
                _ => want = want.div_ceil(2),
            }
        }
    }

    /// The same layout with at most `max_out` (>= 1) output rows per band.
    pub fn cap_rows(mut self, max_out: usize) -> Self {
        self.band_out = self.band_out.min(max_out.max(1));
        self.chan = ((self.band_out - 1) * self.sy + self.reach_y + 1) * self.row;
        self
    }

    /// The same layout with rows of `w + pad` words, for column stride 1 with a padding
    /// of at most the kernel's column reach `reach_x` (else `self`): a row's right padding
    /// is then the next row's left padding (zeros both), so a run of outputs with this
    /// pitch spends `reach_x - pad` of every `w + pad` positions on padding instead of
    /// `reach_x` of `w + 2 * pad` (1 in 8 instead of 2 in 9 for 3x3, pad 1, at 7x7).
    /// Reads reach `pad` words past a channel: the next channel's left padding (never
    /// written, so zero), or slack the caller keeps.
    pub fn shared_padding(mut self, reach_x: usize) -> Self {
        let row = self.w + self.pad[1];
        if self.sx == 1 && self.pad[1] <= reach_x && row < self.row {
            self.pw = row;
            self.row = row;
            self.chan = ((self.band_out - 1) * self.sy + self.reach_y + 1) * row;
        }
        self
    }

    /// Offset of tap `(ky, kx)` relative to output `(oy, ox)`'s base `oy*sy*row + ox`.
    #[inline]
    pub fn tap_offset(&self, ky: usize, kx: usize, dil: [usize; 2]) -> usize {
        let c = kx * dil[1];
        ky * dil[0] * self.row + (c % self.sx) * self.pw + c / self.sx
    }

    /// Copies padded rows `r0..r0 + rows` of `count` consecutive source planes (`h * w`
    /// each, from `src`) into `buf`, channel after channel. Writes only the data words
    /// and rows wholly outside the source: `buf` must start zeroed, and every fill of
    /// one layout leaves the padding columns zero.
    pub fn fill(&self, buf: &mut [f32], src: &[f32], count: usize, r0: usize) {
        let (plane, row, w) = (self.h * self.w, self.row, self.w);
        let rows = self.chan / row.max(1);
        // Band rows `lo..hi` hold source rows `r0 + r - pad`; the others are zeros.
        let lo = self.pad[0].saturating_sub(r0).min(rows);
        let hi = (self.pad[0] + self.h).saturating_sub(r0).clamp(lo, rows);
        for c in 0..count {
            let dst = &mut buf[c * self.chan..][..rows * row];
            dst[..lo * row].fill(0.0);
            dst[hi * row..].fill(0.0);
            // Source row of band row `r`: `r0 + r - pad` (`lo` is at least `pad - r0`).
            let s0 = c * plane + (r0 + lo - self.pad[0]) * w;
            for r in lo..hi {
                let srow = &src[s0 + (r - lo) * w..][..w];
                if self.sx == 1 {
                    copy_row(&mut dst[r * row + self.pad[1]..][..w], srow);
                } else {
                    let drow = &mut dst[r * row..][..row];
                    for (c, &v) in srow.iter().enumerate() {
                        let pc = c + self.pad[1];
                        drow[(pc % self.sx) * self.pw + pc / self.sx] = v;
                    }
                }
            }
        }
    }
}

/// `dst.copy_from_slice(src)` (the shorter length): on the M4F eight and four words
/// per `VLDM`/`VSTM` pair (`micro::copy_words`); elsewhere four words at a time (a loop
/// of single words would become a `memcpy` call, which costs more than a row of W1).
pub(crate) fn copy_row(dst: &mut [f32], src: &[f32]) {
    #[cfg(all(target_arch = "arm", target_abi = "eabihf"))]
    super::micro::copy_words(dst, src);
    #[cfg(not(all(target_arch = "arm", target_abi = "eabihf")))]
    {
        let n = dst.len().min(src.len());
        let (d4, d) = dst[..n].split_at_mut(n / 4 * 4);
        let (s4, s) = src[..n].split_at(n / 4 * 4);
        for (d, s) in d4.chunks_exact_mut(4).zip(s4.chunks_exact(4)) {
            if let ([d0, d1, d2, d3], [s0, s1, s2, s3]) = (d, s) {
                (*d0, *d1, *d2, *d3) = (*s0, *s1, *s2, *s3);
            }
        }
        for (d, &v) in d.iter_mut().zip(s) {
            *d = v;
        }
    }
}
