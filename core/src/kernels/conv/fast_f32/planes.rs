//! Zero-padded, column-phase-split copies of a few image planes in a stack buffer.
//!
//! - A convolution tap reads the input at padded column `ox * sx + kx * dx`. Splitting
//!   every padded row into `sx` phases (phase `f` holds padded columns `f, f + sx, ...`)
//!   turns that into the contiguous run `phase[(kx*dx) % sx][ox + (kx*dx) / sx ..]`, so
//!   8 neighbouring outputs load 8 neighbouring words for any stride.
//! - Padding is real zeros in the copy: the inner loops have no border branches.
//! - Every phase row has slack up to a multiple of 8 outputs, so the last (partial)
//!   8-wide chunk of a row reads zeros, never the next row or past the buffer.

/// The layout of the copied planes (all sizes in words).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Planes {
    /// Source rows and columns.
    pub h: usize,
    pub w: usize,
    /// Zero padding (rows, columns).
    pub pad: [usize; 2],
    /// Column stride of the convolution (the number of phases).
    pub sx: usize,
    /// Words per phase row.
    pub pw: usize,
    /// Words per padded row (`sx * pw`).
    pub row: usize,
    /// Words per channel.
    pub chan: usize,
}

impl Planes {
    /// The layout for `src = [h, w]` planes read by a `k = [kh, kw]` kernel with the
    /// given padding, stride and dilation, producing `out = [oh, ow]` outputs; `None`
    /// when a size overflows.
    pub fn new(
        src: [usize; 2],
        pad: [usize; 2],
        stride: [usize; 2],
        dil: [usize; 2],
        k: [usize; 2],
        out: [usize; 2],
    ) -> Option<Self> {
        let [h, w] = src;
        let sx = stride[1];
        let data_cols = w.checked_add(pad[1].checked_mul(2)?)?.div_ceil(sx);
        let reach_x = k[1].checked_sub(1)?.checked_mul(dil[1])?;
        let read_cols = out[1].div_ceil(8).checked_mul(8)?.checked_add(reach_x / sx)?;
        let pw = data_cols.max(read_cols);
        let row = pw.checked_mul(sx)?;
        // Rows: the padded source, and at least every row a tap of a valid output reads.
        let reach_y = k[0].checked_sub(1)?.checked_mul(dil[0])?;
        let read_rows = out[0]
            .checked_sub(1)?
            .checked_mul(stride[0])?
            .checked_add(reach_y + 1)?;
        let rows = h.checked_add(pad[0].checked_mul(2)?)?.max(read_rows);
        let chan = rows.checked_mul(row)?;
        Some(Planes {
            h,
            w,
            pad,
            sx,
            pw,
            row,
            chan,
        })
    }

    /// Offset of tap `(ky, kx)` relative to output `(oy, ox)`'s base `oy*sy*row + ox`.
    #[inline]
    pub fn tap_offset(&self, ky: usize, kx: usize, dil: [usize; 2]) -> usize {
        let c = kx * dil[1];
        ky * dil[0] * self.row + (c % self.sx) * self.pw + c / self.sx
    }

    /// Copies `count` consecutive source planes (`h * w` each, from `src`) into `buf`.
    pub fn fill(&self, buf: &mut [f32], src: &[f32], count: usize) {
        let buf = &mut buf[..count * self.chan];
        buf.fill(0.0);
        let plane = self.h * self.w;
        for (dst, s) in buf
            .chunks_exact_mut(self.chan)
            .zip(src[..count * plane].chunks_exact(plane))
        {
            for (r, srow) in s.chunks_exact(self.w).enumerate() {
                let drow = &mut dst[(r + self.pad[0]) * self.row..][..self.row];
                if self.sx == 1 {
                    drow[self.pad[1]..][..self.w].copy_from_slice(srow);
                } else {
                    for (c, &v) in srow.iter().enumerate() {
                        let pc = c + self.pad[1];
                        drow[(pc % self.sx) * self.pw + pc / self.sx] = v;
                    }
                }
            }
        }
    }
}
