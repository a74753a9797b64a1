//! The firmware's digit samples file (`firmware/assets/digits_cropped.bin`): which
//! digits it holds, and its writer. The reader is the device's own
//! `firmware/src/assets.rs`, compiled here unchanged as [`assets`] (it documents the
//! format, version 3); [`samples_file`] checks its output with it.
//!
//! The writer is the encoding half of the device's decoder:
//! - it walks the pixels as the decoder does, with the same contexts
//!   ([`assets::contexts`]), and counts each decision's zeros and ones;
//! - the model is those counts as probabilities of a 0, in 1/256 (1..=255);
//! - each digit is then coded on its own with LZMA's range encoder, and ends with the
//!   value of its final interval that has the most trailing zero bits, so that up to 4
//!   of its last bytes are zeros the decoder reads past the end without them.

#[allow(dead_code)]
#[path = "../../firmware/src/assets.rs"]
pub mod assets;

use crate::digits::{Digit, Digits};
use assets::{contexts, Samples, FLAT_CONTEXTS, MAX_W, MODEL_LEN};
use torchlet::io::crc32;

/// First fine-tuning digit: the pretraining of `export_firmware_assets` uses the
/// training digits before it.
pub const FT_FIRST: usize = 6000;
/// Fine-tuning digits (training digits never seen in pretraining) and held-out digits.
pub const FT_N: usize = 160;
/// Held-out digits: the first ones of the file's held-out part.
pub const TEST_N: usize = 100;
/// Ink threshold and margin of the crop.
const THRESHOLD: u8 = 64;
const MARGIN: usize = 1;

/// A cropped digit with pixels quantised to 4 bits (stored as `level * 17`, so that
/// `/ 255` gives exactly the device's `level / 15`).
pub fn device_digit(d: &Digit) -> Digit {
    let mut c = d.cropped(THRESHOLD, MARGIN);
    for p in &mut c.pixels {
        *p = (*p >> 4) * 17;
    }
    c
}

/// The device's fine-tuning and held-out digits, in file order.
pub fn device_digits(digits: &Digits) -> (Vec<Digit>, Vec<Digit>) {
    let (train, held) = digits.split();
    let ft = train[FT_FIRST..FT_FIRST + FT_N]
        .iter()
        .map(device_digit)
        .collect();
    let test = held[..TEST_N].iter().map(device_digit).collect();
    (ft, test)
}

/// Calls `emit(model_index, bit)` for every binary decision of a digit's pixels
/// (levels 0..=15, row-major), in the decoder's order.
fn decisions(levels: &[u8], h: usize, w: usize, mut emit: impl FnMut(usize, usize)) {
    let at = |y: usize, x: usize| levels[y * w + x];
    for y in 0..h {
        for x in 0..w {
            let left = if x > 0 { at(y, x - 1) } else { 0 };
            let up = if y > 0 { at(y - 1, x) } else { 0 };
            let up_left = if x > 0 && y > 0 { at(y - 1, x - 1) } else { 0 };
            let up_right = if y > 0 && x + 1 < w { at(y - 1, x + 1) } else { 0 };
            let (flat, tree) = contexts(left, up, up_left, up_right);
            let v = at(y, x);
            emit(flat, (v != 0) as usize);
            if v == 0 {
                continue;
            }
            emit(FLAT_CONTEXTS + flat, (v != 15) as usize);
            if v == 15 {
                continue;
            }
            let base = 2 * FLAT_CONTEXTS + tree * 15 - 1;
            let mut node = 1;
            for k in (0..4).rev() {
                let bit = (v as usize >> k) & 1;
                emit(base + node, bit);
                node = node * 2 + bit;
            }
        }
    }
}

/// The encoding half of LZMA's range coder (8-bit probabilities of a 0).
struct RangeEncoder {
    low: u64,
    range: u32,
    cache: u8,
    cache_size: u64,
    out: Vec<u8>,
}

impl RangeEncoder {
    fn new() -> Self {
        RangeEncoder {
            low: 0,
            range: u32::MAX,
            cache: 0,
            cache_size: 1,
            out: Vec::new(),
        }
    }

    fn bit(&mut self, p: u8, bit: usize) {
        let bound = (self.range >> 8) * p as u32;
        if bit == 0 {
            self.range = bound;
        } else {
            self.low += bound as u64;
            self.range -= bound;
        }
        while self.range < 1 << 24 {
            self.range <<= 8;
            self.shift_low();
        }
    }

    /// Moves the top byte of `low` out, holding back bytes a carry may still change.
    fn shift_low(&mut self) {
        if self.low < 0xFF00_0000 || self.low >= 1 << 32 {
            let carry = (self.low >> 32) as u8;
            let mut byte = self.cache;
            loop {
                self.out.push(byte.wrapping_add(carry));
                byte = 0xFF;
                self.cache_size -= 1;
                if self.cache_size == 0 {
                    break;
                }
            }
            self.cache = (self.low >> 24) as u8;
        }
        self.cache_size += 1;
        self.low = (self.low & 0x00FF_FFFF) << 8;
    }

    /// Ends the code with the value of the final interval that has the most trailing
    /// zero bits, writes it out, and drops the leading 0 byte of LZMA's coder and up to
    /// 4 trailing zero bytes (the decoder reads zeros past the end).
    fn finish(mut self) -> Result<Vec<u8>, String> {
        let end = self.low + self.range as u64;
        for k in (0..=32).rev() {
            let mask = (1u64 << k) - 1;
            let v = (self.low + mask) & !mask;
            if v < end {
                self.low = v;
                break;
            }
        }
        for _ in 0..5 {
            self.shift_low();
        }
        if self.out.first() != Some(&0) {
            return Err("range coder: first byte is not 0".into());
        }
        self.out.remove(0);
        for _ in 0..4 {
            if self.out.last() == Some(&0) {
                self.out.pop();
            }
        }
        Ok(self.out)
    }
}

/// The 4-bit levels of a device digit (pixels stored as `level * 17`).
fn levels(d: &Digit) -> Result<Vec<u8>, String> {
    d.pixels
        .iter()
        .map(|&p| match p % 17 {
            0 => Ok(p / 17),
            _ => Err(format!("pixel {p} is not a 4-bit level * 17")),
        })
        .collect()
}

/// The samples file (format version 3) of `ft` fine-tuning and `test` held-out digits
/// (pixels stored as `level * 17`, at most [`MAX_W`] wide and 255 high), checked: it
/// is decoded with the device's decoder and must give every source pixel back.
pub fn samples_file(ft: &[Digit], test: &[Digit]) -> Result<Vec<u8>, String> {
    let all: Vec<&Digit> = ft.iter().chain(test).collect();
    let mut digit_levels = Vec::new();
    for d in &all {
        if d.w == 0 || d.h == 0 || d.w > MAX_W || d.h > 255 || d.label > 9 {
            return Err(format!("digit {}x{} label {} not storable", d.h, d.w, d.label));
        }
        digit_levels.push(levels(d)?);
    }
    let (n_ft, n_test) = (u16::try_from(ft.len()), u16::try_from(test.len()));
    let (Ok(n_ft), Ok(n_test)) = (n_ft, n_test) else {
        return Err("more than 65,535 digits".into());
    };

    // The model: probability of a 0 for each decision, from the counts.
    let mut counts = vec![[0u64; 2]; MODEL_LEN];
    for (d, lv) in all.iter().zip(&digit_levels) {
        decisions(lv, d.h, d.w, |i, bit| counts[i][bit] += 1);
    }
    let model: Vec<u8> = counts
        .iter()
        .map(|&[zeros, ones]| {
            let p = (zeros as f64 + 0.4) / ((zeros + ones) as f64 + 0.8);
            (p * 256.0).round().clamp(1.0, 255.0) as u8
        })
        .collect();

    let mut out = b"TLDC".to_vec();
    for v in [3u16, n_ft, n_test, MODEL_LEN as u16] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&model);
    for (d, lv) in all.iter().zip(&digit_levels) {
        let mut enc = RangeEncoder::new();
        decisions(lv, d.h, d.w, |i, bit| enc.bit(model[i], bit));
        let code = enc.finish()?;
        let n = code.len();
        if n >= 1 << 15 {
            return Err("a digit's code is 32 KiB or more".into());
        }
        out.extend_from_slice(&[d.label, d.h as u8, d.w as u8]);
        match n {
            0..=0x7F => out.push(n as u8),
            _ => out.extend_from_slice(&[0x80 | (n & 0x7F) as u8, (n >> 7) as u8]),
        }
        out.extend_from_slice(&code);
    }
    let crc = crc32(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    check(&out, &all, &digit_levels)?;
    Ok(out)
}

/// Decodes `file` with the device's reader and compares every digit with the source.
fn check(file: &[u8], all: &[&Digit], digit_levels: &[Vec<u8>]) -> Result<(), String> {
    let samples = Samples::parse(file).map_err(|e| format!("written file refused: {e}"))?;
    let decoded: Vec<_> = samples.iter().collect();
    if decoded.len() != all.len() {
        return Err("written file holds another number of digits".into());
    }
    for (i, ((s, d), lv)) in decoded.iter().zip(all).zip(digit_levels).enumerate() {
        let mut got = vec![0xFF; s.h * s.w];
        s.levels(&mut got);
        if (s.label, s.h, s.w) != (d.label, d.h, d.w) || &got != lv {
            return Err(format!("digit {i} does not decode to its source pixels"));
        }
    }
    Ok(())
}
