//! The digit samples the host exporter (`tests/examples/export_firmware_assets.rs`)
//! writes to `assets/digits_cropped.bin`, read in place from flash (no copy).
//!
//! Layout (little-endian): magic `TLDC`, u16 version 3, u16 fine-tuning count, u16
//! held-out count, u16 [`MODEL_LEN`]; the model, [`MODEL_LEN`] bytes; then per digit
//! `label, h, w` (one byte each, `w` at most [`MAX_W`]), the byte count `n` of its code
//! (one byte if `n < 128`, else two: `0x80 | (n & 0x7F)`, `n >> 7`) and `n` bytes of
//! arithmetic code; then a u32 CRC-32 (IEEE) of everything before it. Pixels
//! are 4-bit grey levels (`level / 15`), row-major.
//!
//! The pixels are coded with a binary arithmetic coder (the range coder of LZMA, with
//! 8-bit probabilities) and a static context model fitted to the file by the exporter:
//! - each pixel is up to 6 binary decisions: "is it 0?", then "is it 15?", then its
//!   level 1..=14 as 4 bits of a binary tree, high bit first (62% of the pixels of a
//!   cropped digit are 0 and 17% are 15);
//! - the probability of each decision is a byte of the model (`p / 256` that the bit is
//!   0), chosen by a context of already-decoded neighbours (outside the digit: 0):
//!   left and up in 4 classes (0, 1..=7, 8..=14, 15), up-left and up-right in 3 (0,
//!   1..=14, 15): 144 contexts for each of the first two decisions; left and up in 3
//!   classes (9 contexts) for the tree's 15 nodes. 423 bytes of model in all.
//!
//! Why static probabilities rather than adaptive ones: a program decodes a digit each
//! time it uses it, in any order, so each digit must decode on its own; adaptive
//! probabilities reset per digit start from nothing (a cropped digit is only ~370
//! pixels), and started from a fitted table they save only 118 bytes on the 260 digits
//! (0.8%; a model of the coder in Python, not built) for 846 bytes of RAM state (u16
//! per model entry) that the Cortex-M0 program does not have. Static probabilities
//! live in flash: decoding needs 20 bytes of decoder state and a row of the previous
//! pixels ([`MAX_W`] + 2 bytes), on the stack of the decoding call. The decoder's arithmetic is shifts, one
//! 32-bit multiply and compares: no division, no float.
//!
//! Each digit's code ends with as few bytes as decode it exactly; the decoder reads
//! zeros past the end. [`Samples::parse`] decodes every record once and checks that the
//! decoder consumed all of its bytes and at most 4 bytes of that padding; afterwards
//! the records are trusted.

use torchlet::io::crc32;
use torchlet::{Error, Q16};

const HEADER: usize = 12;
/// Widest digit the decoder's row buffer takes (MNIST digits are 28 wide at most).
pub const MAX_W: usize = 32;
/// Contexts of the "is it 0?" and "is it 15?" decisions.
pub const FLAT_CONTEXTS: usize = 144;
/// Contexts of the level tree, each with 15 nodes.
pub const TREE_CONTEXTS: usize = 9;
/// Bytes of the model: two tables of flat contexts, then the trees.
pub const MODEL_LEN: usize = 2 * FLAT_CONTEXTS + TREE_CONTEXTS * 15;
/// Padding bytes (zeros) the decoder may read past a record's code.
const MAX_PADDING: usize = 4;

/// Class of a neighbour level for the flat contexts, by level: 0, 1..=7, 8..=14, 15
/// (a table: smaller than the comparisons on a Cortex-M0).
const CLASS4: [u8; 16] = [0, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 3];
/// Class of a neighbour level, by level: 0, 1..=14, 15.
const CLASS3: [u8; 16] = [0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2];

/// Context of a pixel from its left, up, up-left and up-right neighbours (levels
/// 0..=15; higher bits are ignored): the flat context (0..[`FLAT_CONTEXTS`]) and the
/// tree context (0..[`TREE_CONTEXTS`]).
pub fn contexts(left: u8, up: u8, up_left: u8, up_right: u8) -> (usize, usize) {
    let c4 = |v: u8| CLASS4[v as usize & 15] as usize;
    let c3 = |v: u8| CLASS3[v as usize & 15] as usize;
    let flat = ((c4(left) * 4 + c4(up)) * 3 + c3(up_left)) * 3 + c3(up_right);
    (flat, c3(left) * 3 + c3(up))
}

/// The decoding half of LZMA's range coder, over one record's code; reads zeros past
/// its end and counts how many bytes it consumed.
struct RangeDecoder<'b> {
    code: &'b [u8],
    pos: usize,
    range: u32,
    value: u32,
}

impl<'b> RangeDecoder<'b> {
    fn new(code: &'b [u8]) -> Self {
        let mut d = RangeDecoder {
            code,
            pos: 0,
            range: u32::MAX,
            value: 0,
        };
        for _ in 0..4 {
            d.shift_in();
        }
        d
    }

    fn shift_in(&mut self) {
        let byte = self.code.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        // `value < range` always holds (whatever the bytes), so this cannot overflow
        // once `range < 2^24`; at start `value` is 0.
        self.value = self.value << 8 | byte as u32;
    }

    /// One binary decision whose probability of being 0 is `p / 256`.
    fn bit(&mut self, p: u8) -> usize {
        let bound = (self.range >> 8) * p as u32;
        let bit = if self.value < bound {
            self.range = bound;
            0
        } else {
            self.value -= bound;
            self.range -= bound;
            1
        };
        // After a decision `range >= 2^16` (p >= 1) or `range` is unchanged (p = 0).
        while self.range < 1 << 24 {
            self.range <<= 8;
            self.shift_in();
        }
        bit
    }
}

/// Decodes an `h x w` digit (`w <= MAX_W`) from `code` with `model`, calling
/// `f(index, level)` for each pixel in row-major order (level 0..=15). Returns the
/// number of bytes the decoder consumed, padding included.
///
/// `f` is a `dyn` callback so that one copy of this loop serves every caller (code
/// size: it is called per pixel, the call costs little next to the decisions).
fn decode(model: &[u8; MODEL_LEN], code: &[u8], h: usize, w: usize, f: &mut dyn FnMut(usize, u8)) -> usize {
    let (flat0, flat15, trees) = (0, FLAT_CONTEXTS, 2 * FLAT_CONTEXTS);
    let mut d = RangeDecoder::new(code);
    // above[x + 1] is the level above column x (the row decoded last), updated in
    // place; above[0] and above[w + 1] stay 0 (outside the digit).
    let mut above = [0u8; MAX_W + 2];
    let w = w.min(MAX_W);
    let mut i = 0;
    for _ in 0..h {
        let (mut left, mut up_left) = (0u8, 0u8);
        for x in 0..w {
            let (up, up_right) = (above[x + 1], above[x + 2]);
            let (flat, tree) = contexts(left, up, up_left, up_right);
            let level = if d.bit(model[flat0 + flat]) == 0 {
                0
            } else if d.bit(model[flat15 + flat]) == 0 {
                15
            } else {
                let base = trees + tree * 15 - 1;
                let mut node = 1;
                for _ in 0..4 {
                    node = node * 2 + d.bit(model[base + node]);
                }
                (node - 16) as u8
            };
            f(i, level);
            i += 1;
            (left, up_left) = (level, up);
            above[x + 1] = level;
        }
    }
    d.pos
}

/// One digit at its native size, pixels still coded in flash.
#[derive(Clone, Copy)]
pub struct Sample<'b> {
    /// The class, 0..=9.
    pub label: u8,
    /// Height in pixels.
    pub h: usize,
    /// Width in pixels.
    pub w: usize,
    /// The file from its start to the end of this digit's code (the model is at its
    /// start): one slice, not a model reference and a code slice, keeps `Sample` and
    /// the iterators small (measured: 8 bytes less of the M0 program's stack peak).
    file: &'b [u8],
    code_len: u16,
}

impl Sample<'_> {
    /// Calls `f(index, level)` for every pixel, row-major, level 0..=15.
    fn for_each(&self, mut f: impl FnMut(usize, u8)) {
        // Checked by `Samples::parse`: w <= MAX_W and the code holds the pixels.
        let model = self
            .file
            .get(HEADER..HEADER + MODEL_LEN)
            .and_then(|m| m.try_into().ok());
        let code = self
            .file
            .len()
            .checked_sub(self.code_len as usize)
            .and_then(|s| self.file.get(s..));
        if let (Some(model), Some(code)) = (model, code) {
            decode(model, code, self.h, self.w, &mut f);
        }
    }

    /// Writes the `h * w` pixels into `dst` (an input tensor's data) as 0.0..=1.0.
    pub fn fill(&self, dst: &mut [f32]) {
        self.for_each(|i, v| {
            if let Some(d) = dst.get_mut(i) {
                *d = v as f32 * (1.0 / 15.0);
            }
        });
    }

    /// Writes the `h * w` pixels as Q16.16 (`level / 15`, rounded to nearest with
    /// integers only: no float on the fixed-point path).
    pub fn fill_q16(&self, dst: &mut [Q16]) {
        self.for_each(|i, v| {
            if let Some(d) = dst.get_mut(i) {
                // = (v * 65536 + 7) / 15 for v in 0..=15 (65536 = 15 * 4369 + 1), with
                // no division: the M0 has no divider, and the library call's frame
                // would sit on top of the decoder's at the program's deepest stack.
                *d = Q16(v as i32 * 4369 + (v >= 8) as i32);
            }
        });
    }

    /// Writes the `h * w` pixel levels (0..=15) into `dst` (host tools and tests: the
    /// exporter checks its output with this, the device's own decoder).
    pub fn levels(&self, dst: &mut [u8]) {
        self.for_each(|i, v| {
            if let Some(d) = dst.get_mut(i) {
                *d = v;
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

/// The record at `off`, if its header and code lie inside `body`, and the offset of
/// the next one. Header: label, h, w, then the code's length `n` in one byte if it is
/// below 128, else as `0x80 | (n & 0x7F)` and `n >> 7` in a second byte.
fn record_at(body: &[u8], off: usize) -> Option<(Sample<'_>, usize)> {
    let r = body.get(off..off.checked_add(4)?)?;
    let (mut n, mut start) = (r[3] as usize, off + 4);
    if n >= 0x80 {
        n = (n & 0x7F) | (*body.get(start)? as usize) << 7;
        start += 1;
    }
    let end = start + n;
    let sample = Sample {
        label: r[0],
        h: r[1] as usize,
        w: r[2] as usize,
        file: body.get(..end)?,
        code_len: n as u16,
    };
    Some((sample, end))
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
    /// Checks magic, version, checksum and every record: its header, its width, and
    /// that decoding its `h * w` pixels reads all of its code and at most 4 bytes of
    /// padding past it.
    pub fn parse(bytes: &'b [u8]) -> Result<Self, Error> {
        let first = HEADER + MODEL_LEN;
        if bytes.len() < first + 4 || &bytes[..4] != b"TLDC" {
            return Err(corrupt("samples: bad magic or too short"));
        }
        let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]) as usize;
        if u16_at(4) != 3 || u16_at(10) != MODEL_LEN {
            return Err(corrupt("samples: unknown version"));
        }
        let (body, tail) = bytes.split_at(bytes.len() - 4);
        if crc32(body) != u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) {
            return Err(corrupt("samples: CRC-32 mismatch"));
        }
        let model: &[u8; MODEL_LEN] = match body[HEADER..first].try_into() {
            Ok(m) => m,
            Err(_) => return Err(corrupt("samples: bad magic or too short")),
        };
        let s = Samples {
            body,
            n_finetune: u16_at(6),
            n_heldout: u16_at(8),
        };
        let mut off = first;
        for _ in 0..s.n_finetune + s.n_heldout {
            let (r, next) = match record_at(body, off) {
                Some((r, next)) if r.label <= 9 && r.h > 0 && r.w > 0 && r.w <= MAX_W => (r, next),
                _ => return Err(corrupt("samples: bad record header")),
            };
            let n = r.code_len as usize;
            let read = decode(model, &body[next - n..next], r.h, r.w, &mut |_, _| ());
            if read < n || read > n + MAX_PADDING {
                return Err(corrupt("samples: pixel code does not match the record's size"));
            }
            off = next;
        }
        if off != body.len() {
            return Err(corrupt("samples: length does not match the records"));
        }
        Ok(s)
    }

    /// Every digit, fine-tuning ones first.
    pub fn iter(&self) -> impl Iterator<Item = Sample<'b>> + 'b {
        let body = self.body;
        let mut off = HEADER + MODEL_LEN;
        core::iter::from_fn(move || {
            let (r, next) = record_at(body, off)?;
            off = next;
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
