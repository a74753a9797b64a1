//! Loading pretrained weights from flash into a graph's parameters.
//!
//! Temporary raw format, until the project's weights format (core `io`, issue 7) is
//! on main: magic `TLW1RAW1`, u32 LE number of f32 values, the values (LE, parameters
//! in creation order), u32 LE CRC-32 (IEEE) of everything before it. Everything is
//! checked before the first parameter is written, so a bad blob keeps the old weights.

use crate::crc::crc32;
use torchlet::{Error, Graph};

const MAGIC: &[u8; 8] = b"TLW1RAW1";

/// Checks `bytes` and copies the values into the parameters of `g`.
pub fn load<const N: usize>(g: &mut Graph<'_, f32, N>, bytes: &[u8]) -> Result<(), Error> {
    let corrupt = |what| Error::Corrupt { what };
    if bytes.len() < 16 || &bytes[..8] != MAGIC {
        return Err(corrupt("weights: bad magic or too short"));
    }
    let (body, tail) = bytes.split_at(bytes.len() - 4);
    if crc32(body) != u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) {
        return Err(corrupt("weights: CRC-32 checksum mismatch"));
    }
    let count = u32::from_le_bytes([body[8], body[9], body[10], body[11]]) as usize;
    let values = &body[12..];
    if values.len() != count * 4 {
        return Err(corrupt("weights: length does not match the value count"));
    }
    let mut elems = 0;
    for i in 0..g.num_params() {
        let t = g.param_handle(i).ok_or(Error::StaleTensor)?;
        elems += g.shape(t)?.numel();
    }
    if elems != count {
        return Err(Error::ShapeMismatch {
            op: "weights::load",
            what: "parameter elements of the model vs values in the blob",
            expected: elems,
            found: count,
        });
    }
    let mut words = values.chunks_exact(4);
    for i in 0..g.num_params() {
        let t = g.param_handle(i).ok_or(Error::StaleTensor)?;
        for (dst, w) in g.param_data_mut(t)?.iter_mut().zip(&mut words) {
            *dst = f32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        }
    }
    Ok(())
}

/// A rotate-xor hash of the parameters' current values, to show that a refused load (or a
/// failed step) left them untouched.
pub fn fingerprint<const N: usize>(g: &Graph<'_, f32, N>) -> u32 {
    let mut c = 0u32;
    for i in 0..g.num_params() {
        if let Some(data) = g.param_handle(i).and_then(|t| g.data(t).ok()) {
            for v in data {
                c = c.rotate_left(5) ^ v.to_bits();
            }
        }
    }
    c
}
