//! Two-slot (A/B) checkpoints of a model's weights on NOR flash, safe against power
//! loss at any byte.
//!
//! - The flash region is two slots of equal size (a multiple of the erase size and of
//!   64). A slot holds a 64-byte commit header, then a weights file of [`crate::io`].
//! - Commit header: magic `b"TLCK"`, sequence number `u32`, file length `u32`, CRC-32
//!   of those 12 bytes; the rest of the 64 bytes stays erased.
//! - A slot is *good* when its header checks and the file's own CRC-32 checks.
//! - [`AbCheckpoint::save`] picks the slot that does not hold the newest good save,
//!   erases it, writes the file, reads it back to verify, and writes the header last.
//!   Until the last header byte is on flash that slot is not good, so the previous
//!   save stays the newest good one: a cut at any byte loses at most the save in
//!   progress.
//! - [`AbCheckpoint::load`] loads the good slot with the higher sequence number
//!   (compared with wrap-around), reading it into a caller buffer.
//! - All flash accesses are whole, 64-byte aligned chunks, so any flash whose read and
//!   write sizes divide 64 works.

use super::crc32::{crc32, Crc32};
use super::format::{Weights, CRC_LEN, HEADER_LEN};
use super::load::load_weights;
use super::save::{saved_len_named, write_to};
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::scalar::Scalar;
use embedded_storage::nor_flash::NorFlash;

/// Bytes of a slot's commit header (the file follows it).
pub const SLOT_HEADER_LEN: usize = CHUNK;
const CHUNK: usize = 64;
const SLOT_MAGIC: [u8; 4] = *b"TLCK";

/// What a good slot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotInfo {
    /// 0 (A) or 1 (B).
    pub slot: usize,
    /// Sequence number: one more than the save before it.
    pub seq: u32,
    /// Bytes of the weights file.
    pub len: usize,
}

/// Two checkpoint slots on a NOR flash, starting at `base`.
#[derive(Debug)]
pub struct AbCheckpoint<F: NorFlash> {
    flash: F,
    base: u32,
    slot_size: u32,
}

fn flash_err(what: &'static str) -> Error {
    Error::InvalidState { what }
}

/// Whether sequence number `a` is newer than `b` (serial number arithmetic).
fn newer(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

impl<F: NorFlash> AbCheckpoint<F> {
    /// Two slots of `slot_size` bytes each at `base .. base + 2 * slot_size`. Both must
    /// be multiples of the flash's erase size and of 64, and fit in the flash.
    pub fn new(flash: F, base: u32, slot_size: u32) -> Result<Self> {
        let bad = |what, value: u32| Error::InvalidParam {
            op: "AbCheckpoint::new",
            what,
            value: value as i64,
        };
        if !CHUNK.is_multiple_of(F::READ_SIZE) || !CHUNK.is_multiple_of(F::WRITE_SIZE) {
            return Err(Error::Unsupported {
                op: "AbCheckpoint: flash read or write size that does not divide 64",
            });
        }
        let align = F::ERASE_SIZE.max(CHUNK) as u32;
        if slot_size == 0 || !slot_size.is_multiple_of(align) || !slot_size.is_multiple_of(CHUNK as u32) {
            return Err(bad(
                "slot size must be a non-zero multiple of the erase size and 64",
                slot_size,
            ));
        }
        if !base.is_multiple_of(align) {
            return Err(bad("base must be a multiple of the erase size and 64", base));
        }
        let end = (base as u64) + 2 * slot_size as u64;
        if end > flash.capacity() as u64 || end > u32::MAX as u64 {
            return Err(bad("two slots do not fit in the flash; slot size", slot_size));
        }
        Ok(AbCheckpoint {
            flash,
            base,
            slot_size,
        })
    }

    /// The flash back (for example to inspect or reuse it).
    pub fn into_inner(self) -> F {
        self.flash
    }

    /// Largest weights file a slot can hold.
    pub fn capacity(&self) -> usize {
        self.slot_size as usize - SLOT_HEADER_LEN
    }

    fn slot_start(&self, slot: usize) -> u32 {
        self.base + slot as u32 * self.slot_size
    }

    fn read_chunk(&mut self, off: u32) -> Result<[u8; CHUNK]> {
        let mut buf = [0u8; CHUNK];
        self.flash
            .read(off, &mut buf)
            .map_err(|_| flash_err("checkpoint: flash read failed"))?;
        Ok(buf)
    }

    /// The slot's header if it is good (the file's checksum included), else `None`.
    fn inspect(&mut self, slot: usize) -> Result<Option<SlotInfo>> {
        let start = self.slot_start(slot);
        let h = self.read_chunk(start)?;
        let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        if h[..4] != SLOT_MAGIC || word(12) != crc32(&h[..12]) {
            return Ok(None);
        }
        let (seq, len) = (word(4), word(8) as usize);
        if len < HEADER_LEN + CRC_LEN || len > self.capacity() {
            return Ok(None);
        }
        // Stream the file through the CRC: no buffer of its size is needed here.
        let good = self.payload_checks(slot, len)?;
        Ok(good.then_some(SlotInfo { slot, seq, len }))
    }

    /// The newest good save, if any.
    pub fn latest(&mut self) -> Result<Option<SlotInfo>> {
        let a = self.inspect(0)?;
        let b = self.inspect(1)?;
        Ok(match (a, b) {
            (Some(a), Some(b)) => Some(if newer(b.seq, a.seq) { b } else { a }),
            (a, b) => a.or(b),
        })
    }

    /// Saves the model's parameters (with optional names, see
    /// [`save_named`](super::save_named)) into the slot that does not hold the newest
    /// good save, and returns where it went.
    pub fn save<S: Scalar, const N: usize>(
        &mut self,
        g: &Graph<'_, S, N>,
        names: &[&str],
    ) -> Result<SlotInfo> {
        let len = saved_len_named(g, names)?;
        if len > self.capacity() {
            return Err(Error::ShapeMismatch {
                op: "AbCheckpoint::save",
                what: "the weights take {expected} bytes, the slot holds {found}",
                expected: len,
                found: self.capacity(),
            });
        }
        let (slot, seq) = match self.latest()? {
            Some(l) => (1 - l.slot, l.seq.wrapping_add(1)),
            None => (0, 1),
        };
        let start = self.slot_start(slot);
        self.flash
            .erase(start, start + self.slot_size)
            .map_err(|_| flash_err("checkpoint: flash erase failed"))?;
        let mut buf = [0xFFu8; CHUNK];
        let mut used = 0;
        let mut off = start + SLOT_HEADER_LEN as u32;
        let flash = &mut self.flash;
        let mut emit = |buf: &[u8; CHUNK], off: &mut u32| -> Result<()> {
            flash
                .write(*off, buf)
                .map_err(|_| flash_err("checkpoint: flash write failed"))?;
            *off += CHUNK as u32;
            Ok(())
        };
        write_to(g, names, |mut piece| {
            while !piece.is_empty() {
                let n = piece.len().min(CHUNK - used);
                buf[used..used + n].copy_from_slice(&piece[..n]);
                used += n;
                piece = &piece[n..];
                if used == CHUNK {
                    emit(&buf, &mut off)?;
                    buf = [0xFF; CHUNK];
                    used = 0;
                }
            }
            Ok(())
        })?;
        if used > 0 {
            emit(&buf, &mut off)?;
        }
        // Verify the file before committing to it.
        let mut header = [0xFFu8; CHUNK];
        header[..4].copy_from_slice(&SLOT_MAGIC);
        header[4..8].copy_from_slice(&seq.to_le_bytes());
        header[8..12].copy_from_slice(&(len as u32).to_le_bytes());
        let hcrc = crc32(&header[..12]);
        header[12..16].copy_from_slice(&hcrc.to_le_bytes());
        if !self.payload_checks(slot, len)? {
            return Err(flash_err("checkpoint: read-back of the written weights differs"));
        }
        // Only the 16 meaningful bytes (rounded up to the write size): the save is
        // committed exactly when the last of them is on flash.
        let commit = 16usize.div_ceil(F::WRITE_SIZE) * F::WRITE_SIZE;
        self.flash
            .write(start, &header[..commit])
            .map_err(|_| flash_err("checkpoint: flash write failed"))?;
        Ok(SlotInfo { slot, seq, len })
    }

    /// Whether the file of `len` bytes in `slot` passes its own checksum.
    fn payload_checks(&mut self, slot: usize, len: usize) -> Result<bool> {
        let mut crc = Crc32::new();
        let mut tail = [0u8; CRC_LEN];
        let mut off = self.slot_start(slot) + SLOT_HEADER_LEN as u32;
        let mut done = 0;
        while done < len {
            let chunk = self.read_chunk(off)?;
            let n = (len - done).min(CHUNK);
            let body = (len - CRC_LEN).saturating_sub(done).min(n);
            crc.update(&chunk[..body]);
            for (k, &b) in chunk[body..n].iter().enumerate() {
                tail[done + body + k - (len - CRC_LEN)] = b;
            }
            done += n;
            off += CHUNK as u32;
        }
        Ok(u32::from_le_bytes(tail) == crc.finish())
    }

    /// Loads the newest good save into the model, reading it through `scratch` (at
    /// least [`SlotInfo::len`] bytes; [`AbCheckpoint::capacity`] always suffices).
    /// Errors with [`Error::Corrupt`] when neither slot holds a good save; the model is
    /// untouched on any error.
    pub fn load<S: Scalar, const N: usize>(
        &mut self,
        g: &mut Graph<'_, S, N>,
        scratch: &mut [u8],
    ) -> Result<SlotInfo> {
        let info = self.latest()?.ok_or(Error::Corrupt {
            what: "checkpoint: neither slot holds a complete save",
        })?;
        if scratch.len() < info.len {
            return Err(Error::ShapeMismatch {
                op: "AbCheckpoint::load",
                what: "scratch has {found} bytes, the saved weights take {expected}",
                expected: info.len,
                found: scratch.len(),
            });
        }
        let mut off = self.slot_start(info.slot) + SLOT_HEADER_LEN as u32;
        let mut done = 0;
        while done < info.len {
            let chunk = self.read_chunk(off)?;
            let n = (info.len - done).min(CHUNK);
            scratch[done..done + n].copy_from_slice(&chunk[..n]);
            done += n;
            off += CHUNK as u32;
        }
        let w = Weights::parse(&scratch[..info.len])?;
        load_weights(g, &w)?;
        Ok(info)
    }
}
