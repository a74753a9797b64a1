//! The digit samples the host exporter (`tests/examples/export_firmware_assets.rs`)
//! writes to `assets/digits_cropped.bin`, read in place from flash (no copy).
//!
//! Layout (little-endian): magic `TLDC`, u16 version 2, u16 fine-tuning count, u16
//! held-out count, u16 0; then per digit `label, h, w` (one byte each), a u16 byte
//! count `n` and `n` bytes of 4-bit codes, high nibble first; then a u32 CRC-32 (IEEE)
//! of everything before it. Pixels are 4-bit grey levels (`nibble / 15`) in row-major
//! order, with runs of black and of full ink coded compactly (62% and 17% of the pixels
//! of a cropped digit, so the file is half the size of plain 4-bit pixels, which keeps
//! `finetune` inside its flash budget):
//! - a code `v` in 1..=14 is one pixel of level `v`;
//! - a code 0 or 15 is followed by a code `r`: `r + 1` pixels of level 0 or 15.
//!
//! The stream ends after `h * w` pixels (an unused last nibble is 0).
//! [`Samples::parse`] decodes every record once and checks its pixel count; afterwards
//! the records are trusted.

use torchlet::io::crc32;
use torchlet::{Error, Q16};

const HEADER: usize = 12;

/// One digit at its native size, pixels still coded in flash.
#[derive(Clone, Copy)]
pub struct Sample<'b> {
    /// The class, 0..=9.
    pub label: u8,
    /// Height in pixels.
    pub h: usize,
    /// Width in pixels.
    pub w: usize,
    codes: &'b [u8],
}

/// Decodes `codes`, calling `f(index, level)` for each of the first `n` pixels (level
/// 0..=15). Returns the number of pixels the codes hold when they end early or a run
/// passes `n`, so [`Samples::parse`] can refuse such a record.
fn decode(codes: &[u8], n: usize, mut f: impl FnMut(usize, u8)) -> Result<(), usize> {
    let mut nibbles = codes.iter().flat_map(|&b| [b >> 4, b & 0x0F]);
    let mut i = 0;
    while i < n {
        match nibbles.next() {
            Some(v @ (0 | 15)) => {
                let run = match nibbles.next() {
                    Some(r) => r as usize + 1,
                    None => return Err(i),
                };
                if i + run > n {
                    return Err(i + run);
                }
                for k in i..i + run {
                    f(k, v);
                }
                i += run;
            }
            Some(v) => {
                f(i, v);
                i += 1;
            }
            None => return Err(i),
        }
    }
    Ok(())
}

impl Sample<'_> {
    /// Calls `f(index, level)` for every pixel, row-major, level 0..=15.
    fn for_each(&self, f: impl FnMut(usize, u8)) {
        // Checked by `Samples::parse`: the codes hold exactly h * w pixels.
        let _ = decode(self.codes, self.h * self.w, f);
    }

    /// Writes the `h * w` pixels into `dst` (an input tensor's data) as 0.0..=1.0.
    pub fn fill(&self, dst: &mut [f32]) {
        self.for_each(|i, v| {
            if let Some(d) = dst.get_mut(i) {
                *d = v as f32 * (1.0 / 15.0);
            }
        });
    }

    /// Writes the `h * w` pixels as Q16.16 (`nibble / 15`, rounded to nearest with
    /// integers only: no float on the fixed-point path).
    pub fn fill_q16(&self, dst: &mut [Q16]) {
        self.for_each(|i, v| {
            if let Some(d) = dst.get_mut(i) {
                *d = Q16((v as i32 * 65536 + 7) / 15);
            }
        });
    }

    /// Writes the digit centred on a larger `h x w` canvas of zeros (used to make an
    /// over-sized input from a real digit).
    pub fn fill_padded(&self, dst: &mut [f32], h: usize, w: usize) {
        dst.fill(0.0);
        let (y0, x0) = (h.saturating_sub(self.h) / 2, w.saturating_sub(self.w) / 2);
        let sw = self.w;
        self.for_each(|i, v| {
            let (y, x) = (y0 + i / sw, x0 + i % sw);
            if x < w {
                if let Some(d) = dst.get_mut(y * w + x) {
                    *d = v as f32 * (1.0 / 15.0);
                }
            }
        });
    }
}

/// Bytes before a record's codes: label, h, w, u16 code length.
const RECORD_HEADER: usize = 5;

/// The record at `off`, if its header and codes lie inside `body`.
fn record_at(body: &[u8], off: usize) -> Option<Sample<'_>> {
    let r = body.get(off..off.checked_add(RECORD_HEADER)?)?;
    let n = u16::from_le_bytes([r[3], r[4]]) as usize;
    let start = off + RECORD_HEADER;
    Some(Sample {
        label: r[0],
        h: r[1] as usize,
        w: r[2] as usize,
        codes: body.get(start..start + n)?,
    })
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
        if u16_at(4) != 2 {
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
            let r = match record_at(body, off) {
                Some(r) if r.label <= 9 && r.h > 0 && r.w > 0 => r,
                _ => return Err(corrupt("samples: bad record header")),
            };
            if decode(r.codes, r.h * r.w, |_, _| ()).is_err() {
                return Err(corrupt("samples: pixel codes do not match the record's size"));
            }
            off += RECORD_HEADER + r.codes.len();
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
            let r = record_at(body, off)?;
            off += RECORD_HEADER + r.codes.len();
            Some(r)
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
