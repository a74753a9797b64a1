//! Writing a model's parameters in the layout of [`crate::io`]: the exact size first
//! ([`saved_len`]), then the bytes, either into one caller buffer ([`save`]) or streamed
//! in small pieces to any sink ([`write_to`], used by the flash checkpoints).

use super::crc32::Crc32;
use super::format::{
    pad_len, CRC_LEN, HEADER_LEN, MAGIC, RECORD_HEAD_LEN, SCALAR_NAME_LEN, VALUE_LEN, VERSION,
};
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::scalar::Scalar;

/// Parameter names of workload W1 ([`crate::nn::digits_fcn`]) in creation order, as
/// the PyTorch module of `tests/golden/make_safetensors.py` names its state_dict.
pub const DIGITS_FCN_NAMES: [&str; 8] = [
    "c1.weight",
    "c1.bias",
    "c2.weight",
    "c2.bias",
    "c3.weight",
    "c3.bias",
    "fc.weight",
    "fc.bias",
];

/// Checks that `names` is empty (no names stored) or names every parameter with at
/// most 255 bytes.
fn check_names<S: Scalar, const N: usize>(g: &Graph<'_, S, N>, names: &[&str]) -> Result<()> {
    if !names.is_empty() && names.len() != g.num_params() {
        return Err(Error::ShapeMismatch {
            op: "save weights",
            what: "{found} names for {expected} parameters",
            expected: g.num_params(),
            found: names.len(),
        });
    }
    if let Some(long) = names.iter().find(|n| n.len() > 255) {
        return Err(Error::InvalidParam {
            op: "save weights",
            what: "parameter name longer than 255 bytes",
            value: long.len() as i64,
        });
    }
    if S::NAME.len() > SCALAR_NAME_LEN || S::NAME.is_empty() {
        return Err(Error::Unsupported {
            op: "save weights: scalar type name longer than 8 bytes",
        });
    }
    Ok(())
}

fn overflow() -> Error {
    Error::Overflow { op: "save weights" }
}

/// Exact bytes [`save`] writes for this model without names.
pub fn saved_len<S: Scalar, const N: usize>(g: &Graph<'_, S, N>) -> Result<usize> {
    saved_len_named(g, &[])
}

/// Exact bytes [`save_named`] writes for this model and these names.
pub fn saved_len_named<S: Scalar, const N: usize>(g: &Graph<'_, S, N>, names: &[&str]) -> Result<usize> {
    check_names(g, names)?;
    let mut total = HEADER_LEN + CRC_LEN;
    for i in 0..g.num_params() {
        let t = g.param_handle(i).ok_or(Error::StaleTensor)?;
        let shape = g.shape(t)?;
        let name_len = names.get(i).map_or(0, |n| n.len());
        let rec = RECORD_HEAD_LEN + 4 * shape.rank() + name_len + pad_len(shape.rank(), name_len);
        let data = shape.numel().checked_mul(VALUE_LEN).ok_or_else(overflow)?;
        total = total
            .checked_add(rec)
            .and_then(|t| t.checked_add(data))
            .ok_or_else(overflow)?;
    }
    if total > u32::MAX as usize {
        return Err(overflow());
    }
    Ok(total)
}

/// Writes the model's parameters into `out` (at least [`saved_len`] bytes) and
/// returns the number of bytes written.
pub fn save<S: Scalar, const N: usize>(g: &Graph<'_, S, N>, out: &mut [u8]) -> Result<usize> {
    save_named(g, &[], out)
}

/// [`save`] with a name stored beside every parameter (`names` in creation order).
pub fn save_named<S: Scalar, const N: usize>(
    g: &Graph<'_, S, N>,
    names: &[&str],
    out: &mut [u8],
) -> Result<usize> {
    let need = saved_len_named(g, names)?;
    if out.len() < need {
        return Err(Error::ShapeMismatch {
            op: "save weights",
            what: "output buffer has {found} bytes, the weights need {expected}",
            expected: need,
            found: out.len(),
        });
    }
    let mut at = 0;
    write_to(g, names, |piece| {
        let dst = out
            .get_mut(at..at + piece.len())
            .ok_or(Error::Overflow { op: "save weights" })?;
        dst.copy_from_slice(piece);
        at += piece.len();
        Ok(())
    })
}

/// Streams the file to `sink` in pieces of at most 64 bytes, in order, and returns the
/// total length. An error from `sink` stops the writing and is returned.
pub fn write_to<S: Scalar, const N: usize>(
    g: &Graph<'_, S, N>,
    names: &[&str],
    mut sink: impl FnMut(&[u8]) -> Result<()>,
) -> Result<usize> {
    if g.is_meta() {
        return Err(Error::InvalidState {
            what: "a meta graph has no weights to save",
        });
    }
    let total = saved_len_named(g, names)?;
    let mut w = Writer {
        buf: [0; 64],
        used: 0,
        crc: Crc32::new(),
        sink: &mut sink,
    };
    let mut scalar = [0u8; SCALAR_NAME_LEN];
    scalar[..S::NAME.len()].copy_from_slice(S::NAME.as_bytes());
    w.put(&MAGIC)?;
    w.put(&VERSION.to_le_bytes())?;
    w.put(&0u16.to_le_bytes())?;
    w.put(&scalar)?;
    w.put(&(total as u32).to_le_bytes())?;
    w.put(&(g.num_params() as u32).to_le_bytes())?;
    for i in 0..g.num_params() {
        let t = g.param_handle(i).ok_or(Error::StaleTensor)?;
        let shape = g.shape(t)?;
        let name = names.get(i).copied().unwrap_or("");
        w.put(&(i as u32).to_le_bytes())?;
        w.put(&[shape.rank() as u8, name.len() as u8, 0, 0])?;
        for &d in shape.dims() {
            let d = u32::try_from(d).map_err(|_| overflow())?;
            w.put(&d.to_le_bytes())?;
        }
        w.put(name.as_bytes())?;
        w.put(&[0u8; 3][..pad_len(shape.rank(), name.len())])?;
        for &v in g.data(t)? {
            w.put(&v.to_bits().to_le_bytes())?;
        }
    }
    w.flush()?;
    let crc = w.crc.finish();
    (w.sink)(&crc.to_le_bytes())?;
    Ok(total)
}

/// Gathers small writes into 64-byte pieces and checksums them on the way out.
struct Writer<'s, F: FnMut(&[u8]) -> Result<()>> {
    buf: [u8; 64],
    used: usize,
    crc: Crc32,
    sink: &'s mut F,
}

impl<F: FnMut(&[u8]) -> Result<()>> Writer<'_, F> {
    fn put(&mut self, mut bytes: &[u8]) -> Result<()> {
        while !bytes.is_empty() {
            let n = bytes.len().min(self.buf.len() - self.used);
            self.buf[self.used..self.used + n].copy_from_slice(&bytes[..n]);
            self.used += n;
            bytes = &bytes[n..];
            if self.used == self.buf.len() {
                self.flush()?;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let piece = &self.buf[..self.used];
        self.crc.update(piece);
        (self.sink)(piece)?;
        self.used = 0;
        Ok(())
    }
}
