//! Saving a trained model: its tensors' current values written back by name, either
//! as the model file again ([`Model::write_file`]: same layout, new values, new
//! checksum) or as [`crate::io`] weights with the PyTorch names
//! ([`Model::write_weights`]), which the host tools turn into safetensors.

use super::error::{ModelResult, Site};
use super::format::CRC_LEN;
use super::run::Model;
use crate::error::Error;
use crate::graph::Graph;
use crate::io::crc32;
use crate::scalar::Scalar;

/// The layout of [`crate::io`]: header and record sizes.
mod weights {
    pub use crate::io::{HEADER_LEN, MAGIC, VERSION};
    pub const RECORD_HEAD_LEN: usize = 8;
    pub const SCALAR_NAME_LEN: usize = 8;
}

fn no_room(need: usize, found: usize) -> Error {
    Error::ShapeMismatch {
        op: "model save",
        what: "output buffer has {found} bytes, the file needs {expected}",
        expected: need,
        found,
    }
}

impl<'m> Model<'m> {
    /// Writes the model file again into `out` (at least as long as the original file),
    /// with every tensor's current value from `g` (as `f32`, through
    /// `Scalar::to_f32`; tensors read in place and int8 tensors keep theirs), and
    /// returns the number of bytes written. The result parses like the original.
    pub fn write_file<S: Scalar, const N: usize>(
        &self,
        g: &Graph<'_, S, N>,
        out: &mut [u8],
    ) -> ModelResult<'m, usize> {
        let src = self.file().as_bytes();
        if g.is_meta() {
            return Err(Site::File.error(Error::InvalidState {
                what: "a meta graph has no values to save",
            }));
        }
        let have = out.len();
        let out = out
            .get_mut(..src.len())
            .ok_or(Site::File.error(no_room(src.len(), have)))?;
        out.copy_from_slice(src);
        for t in self.file().tensors() {
            let site = Site::Tensor {
                index: t.index,
                name: t.name,
            };
            if t.int8 {
                continue; // frozen: its stored bytes stay
            }
            let h = self.param(t.index).ok_or(site.error(Error::StaleTensor))?;
            let data = g.data(h).map_err(|e| site.error(e))?;
            let dst = &mut out[t.offset..t.offset + t.data.len()];
            for (c, v) in dst.chunks_exact_mut(4).zip(data) {
                c.copy_from_slice(&v.to_f32().to_le_bytes());
            }
        }
        let body = src.len() - CRC_LEN;
        let crc = crc32(&out[..body]);
        out[body..].copy_from_slice(&crc.to_le_bytes());
        Ok(src.len())
    }

    /// Bytes [`Model::write_weights`] writes for a graph of scalar type `S`.
    pub fn weights_len(&self) -> ModelResult<'m, usize> {
        let mut total = weights::HEADER_LEN + CRC_LEN;
        for t in self.file().tensors() {
            let site = Site::Tensor {
                index: t.index,
                name: t.name,
            };
            if t.name.len() > 255 {
                return Err(site.error(Error::InvalidParam {
                    op: "model save",
                    what: "a weights file holds names of at most 255 bytes; name length",
                    value: t.name.len() as i64,
                }));
            }
            let head = weights::RECORD_HEAD_LEN + 4 * t.shape.rank() + t.name.len();
            total = total
                .checked_add(head.next_multiple_of(4))
                .and_then(|v| v.checked_add(t.shape.numel().checked_mul(4)?))
                .ok_or(site.error(Error::Overflow { op: "model save" }))?;
        }
        Ok(total)
    }

    /// Writes the tensors' current values as [`crate::io`] weights (scalar type `S`,
    /// `Scalar::to_bits`, as [`crate::io::save`] does) with their PyTorch names into
    /// `out`, and returns the number of bytes written. Record `k` is tensor `k`, so
    /// the file loads with [`crate::io::load`] into a graph that holds only this
    /// model's tensors.
    pub fn write_weights<S: Scalar, const N: usize>(
        &self,
        g: &Graph<'_, S, N>,
        out: &mut [u8],
    ) -> ModelResult<'m, usize> {
        let total = self.weights_len()?;
        if g.is_meta() {
            return Err(Site::File.error(Error::InvalidState {
                what: "a meta graph has no values to save",
            }));
        }
        if S::NAME.len() > weights::SCALAR_NAME_LEN {
            return Err(Site::File.error(Error::Unsupported {
                op: "model save: scalar type name longer than 8 bytes",
            }));
        }
        let have = out.len();
        let out = out
            .get_mut(..total)
            .ok_or(Site::File.error(no_room(total, have)))?;
        out.fill(0);
        let mut at = 0;
        let mut put = |bytes: &[u8], out: &mut [u8]| {
            out[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        put(&weights::MAGIC, out);
        put(&weights::VERSION.to_le_bytes(), out);
        put(&0u16.to_le_bytes(), out);
        let mut scalar = [0u8; weights::SCALAR_NAME_LEN];
        scalar[..S::NAME.len()].copy_from_slice(S::NAME.as_bytes());
        put(&scalar, out);
        put(&(total as u32).to_le_bytes(), out);
        put(&(self.file().num_tensors() as u32).to_le_bytes(), out);
        for t in self.file().tensors() {
            let site = Site::Tensor {
                index: t.index,
                name: t.name,
            };
            put(&(t.index as u32).to_le_bytes(), out);
            put(&[t.shape.rank() as u8, t.name.len() as u8, 0, 0], out);
            for &d in t.shape.dims() {
                put(&(d as u32).to_le_bytes(), out);
            }
            put(t.name.as_bytes(), out);
            let head = weights::RECORD_HEAD_LEN + 4 * t.shape.rank() + t.name.len();
            put(&[0u8; 3][..head.next_multiple_of(4) - head], out);
            if t.int8 {
                // Frozen: the dequantized values, whatever form the graph holds.
                for v in t.values() {
                    put(&S::from_f32(v).to_bits().to_le_bytes(), out);
                }
                continue;
            }
            let h = self.param(t.index).ok_or(site.error(Error::StaleTensor))?;
            for v in g.data(h).map_err(|e| site.error(e))? {
                put(&v.to_bits().to_le_bytes(), out);
            }
        }
        let body = total - CRC_LEN;
        let crc = crc32(&out[..body]);
        out[body..].copy_from_slice(&crc.to_le_bytes());
        Ok(total)
    }

    /// [`Model::write_file`] into a new vector.
    #[cfg(feature = "std")]
    pub fn to_file_bytes<S: Scalar, const N: usize>(
        &self,
        g: &Graph<'_, S, N>,
    ) -> ModelResult<'m, std::vec::Vec<u8>> {
        let mut v = std::vec![0u8; self.file().as_bytes().len()];
        self.write_file(g, &mut v)?;
        Ok(v)
    }

    /// [`Model::write_weights`] into a new vector.
    #[cfg(feature = "std")]
    pub fn to_weights_bytes<S: Scalar, const N: usize>(
        &self,
        g: &Graph<'_, S, N>,
    ) -> ModelResult<'m, std::vec::Vec<u8>> {
        let mut v = std::vec![0u8; self.weights_len()?];
        self.write_weights(g, &mut v)?;
        Ok(v)
    }
}
