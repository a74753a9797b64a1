//! The digit samples the host exporter (`tests/examples/export_firmware_assets.rs`)
//! writes to `assets/digits_cropped.bin`, read in place from flash (no copy).
//!
//! Layout (little-endian): magic `TLDC`, u16 version 1, u16 fine-tuning count, u16
//! held-out count, u16 0; then per digit `label, h, w` (one byte each) and
//! `ceil(h*w/2)` bytes of 4-bit pixels, high nibble first; then a u32 CRC-32 (IEEE) of
//! everything before it. [`Samples::parse`] checks all of it once; afterwards the
//! records are trusted.

use torchlet::io::crc32;
use torchlet::{Error, Q16};

const HEADER: usize = 12;

/// One digit at its native size, pixels still packed in flash.
#[derive(Clone, Copy)]
pub struct Sample<'b> {
    /// The class, 0..=9.
    pub label: u8,
    /// Height in pixels.
    pub h: usize,
    /// Width in pixels.
    pub w: usize,
    packed: &'b [u8],
}

impl Sample<'_> {
    /// Pixel `i` (row-major) as 0.0..=1.0.
    pub fn pixel(&self, i: usize) -> f32 {
        let b = self.packed[i / 2];
        let nibble = if i.is_multiple_of(2) { b >> 4 } else { b & 0x0F };
        nibble as f32 * (1.0 / 15.0)
    }

    /// Writes the `h * w` pixels into `dst` (an input tensor's data).
    pub fn fill(&self, dst: &mut [f32]) {
        for (i, v) in dst.iter_mut().enumerate() {
            *v = self.pixel(i);
        }
    }

    /// Writes the `h * w` pixels as Q16.16 (`nibble / 15`, rounded to nearest with
    /// integers only: no float on the fixed-point path).
    pub fn fill_q16(&self, dst: &mut [Q16]) {
        for (i, v) in dst.iter_mut().enumerate() {
            let b = self.packed[i / 2];
            let nibble = if i.is_multiple_of(2) { b >> 4 } else { b & 0x0F } as i32;
            *v = Q16((nibble * 65536 + 7) / 15);
        }
    }

    /// The packed 4-bit pixels as stored (to copy a record into another file).
    pub fn packed(&self) -> &[u8] {
        self.packed
    }

    /// Writes the digit centred on a larger `h x w` canvas of zeros (used to make an
    /// over-sized input from a real digit).
    pub fn fill_padded(&self, dst: &mut [f32], h: usize, w: usize) {
        let (y0, x0) = (h.saturating_sub(self.h) / 2, w.saturating_sub(self.w) / 2);
        for (i, v) in dst.iter_mut().enumerate() {
            let (y, x) = (i / w, i % w);
            let inside = y >= y0 && y < y0 + self.h && x >= x0 && x < x0 + self.w;
            *v = if inside {
                self.pixel((y - y0) * self.w + (x - x0))
            } else {
                0.0
            };
        }
    }
}

/// The checked samples file.
pub struct Samples<'b> {
    body: &'b [u8],
    /// Digits for fine-tuning (they come first in the file).
    pub n_finetune: usize,
    /// Held-out digits (after the fine-tuning ones).
    pub n_heldout: usize,
}

fn corrupt(what: &'static str) -> Error {
    Error::Corrupt { what }
}

impl<'b> Samples<'b> {
    /// Checks magic, version, checksum and every record's bounds.
    pub fn parse(bytes: &'b [u8]) -> Result<Self, Error> {
        if bytes.len() < HEADER + 4 || &bytes[..4] != b"TLDC" {
            return Err(corrupt("samples: bad magic or too short"));
        }
        let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]) as usize;
        if u16_at(4) != 1 {
            return Err(corrupt("samples: unknown version"));
        }
        let (body, tail) = bytes.split_at(bytes.len() - 4);
        if crc32(body) != u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) {
            return Err(corrupt("samples: CRC-32 mismatch"));
        }
        let s = Samples {
            body,
            n_finetune: u16_at(6),
            n_heldout: u16_at(8),
        };
        let mut off = HEADER;
        for _ in 0..s.n_finetune + s.n_heldout {
            let (h, w) = match body.get(off..off + 3) {
                Some(r) if r[0] <= 9 && r[1] > 0 && r[2] > 0 => (r[1] as usize, r[2] as usize),
                _ => return Err(corrupt("samples: bad record header")),
            };
            off += 3 + (h * w).div_ceil(2);
        }
        if off != body.len() {
            return Err(corrupt("samples: length does not match the records"));
        }
        Ok(s)
    }

    /// Every digit, fine-tuning ones first.
    pub fn iter(&self) -> impl Iterator<Item = Sample<'b>> + 'b {
        let body = self.body;
        let mut off = HEADER;
        core::iter::from_fn(move || {
            let r = body.get(off..off + 3)?;
            let (h, w) = (r[1] as usize, r[2] as usize);
            let n = (h * w).div_ceil(2);
            let packed = body.get(off + 3..off + 3 + n)?;
            off += 3 + n;
            Some(Sample {
                label: r[0],
                h,
                w,
                packed,
            })
        })
    }

    /// The fine-tuning digits.
    pub fn finetune(&self) -> impl Iterator<Item = Sample<'b>> + 'b {
        self.iter().take(self.n_finetune)
    }

    /// The held-out digits.
    pub fn heldout(&self) -> impl Iterator<Item = Sample<'b>> + 'b {
        self.iter().skip(self.n_finetune)
    }
}
