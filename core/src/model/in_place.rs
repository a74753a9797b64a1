//! Reading a tensor's stored `f32`s in place: the one module of [`crate::model`] with
//! `unsafe` (a byte slice seen as `f32`s, which needs no copy and so keeps frozen
//! weights in flash).

#![allow(unsafe_code)]

use crate::error::{Error, Result};

/// `bytes` (little-endian `f32`s, as the model file stores them) as `&[f32]`, when
/// they are 4-byte aligned in memory and the target is little-endian; an error
/// otherwise (copy the tensor into the arena instead).
pub(crate) fn f32_slice(bytes: &[u8]) -> Result<&[f32]> {
    if cfg!(target_endian = "big") {
        return Err(Error::Unsupported {
            op: "model: reading f32 values in place on a big-endian target",
        });
    }
    // SAFETY: every bit pattern of 4 bytes is a valid `f32`, and `align_to` puts in
    // `mid` only properly aligned, whole `f32`s inside `bytes`, whose lifetime the
    // result keeps.
    let (head, mid, tail) = unsafe { bytes.align_to::<f32>() };
    if !head.is_empty() || !tail.is_empty() {
        return Err(Error::InvalidParam {
            op: "model",
            what: "tensor data is not 4-byte aligned in memory (place the file at an aligned address); byte address mod 4",
            value: (bytes.as_ptr() as usize % 4) as i64,
        });
    }
    Ok(mid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_bytes_read_as_f32_and_misaligned_ones_are_refused() {
        let words = [1.5f32.to_bits(), (-2.0f32).to_bits(), 0];
        // SAFETY: any u32 array is also a valid byte array.
        let (_, bytes, _) = unsafe { words.align_to::<u8>() };
        assert_eq!(f32_slice(&bytes[..8]).unwrap(), &[1.5, -2.0]);
        assert!(f32_slice(&bytes[1..9]).is_err());
    }
}
