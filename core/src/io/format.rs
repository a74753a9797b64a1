//! Reading the weights layout of [`crate::io`] from a byte slice, without copying:
//! [`Weights::parse`] checks everything once (length, magic, version, checksum, every
//! record's bounds) and [`Weights::records`] then hands out views into the bytes.

use super::crc32::crc32;
use crate::error::{Error, Result};
use crate::shape::{Shape, MAX_RANK};

/// The first four bytes of every weights file.
pub const MAGIC: [u8; 4] = *b"TLWT";
/// The layout version this engine writes and reads.
pub const VERSION: u16 = 1;
/// Bytes of the file header.
pub const HEADER_LEN: usize = 24;
/// Bytes of the fixed part of a record (before the dims).
pub const RECORD_HEAD_LEN: usize = 8;
/// Bytes of the checksum trailer.
pub const CRC_LEN: usize = 4;
/// Bytes of the scalar type name field (ASCII, NUL-padded).
pub const SCALAR_NAME_LEN: usize = 8;
/// Bytes per stored value: every [`crate::Scalar`] stores its 32 `to_bits`.
pub const VALUE_LEN: usize = 4;

/// [`Error::Corrupt`] reason: the bytes do not start with [`MAGIC`].
pub const BAD_MAGIC: &str = "weights: bad magic (not a torchlet weights file)";
/// [`Error::Corrupt`] reason: fewer bytes than the header says the file has.
pub const TRUNCATED: &str = "weights: truncated (fewer bytes than the length field)";
/// [`Error::Corrupt`] reason: the CRC-32 trailer does not match the bytes.
pub const BAD_CHECKSUM: &str = "weights: CRC-32 checksum mismatch";
/// [`Error::Corrupt`] reason: bytes after the end the header declares.
pub const TRAILING: &str = "weights: bytes after the end of the file";
/// [`Error::Corrupt`] reason: a record's layout is impossible (checksum was right,
/// so the writer was wrong).
pub const BAD_RECORD: &str = "weights: malformed parameter record";
/// [`Error::Corrupt`] reason: the scalar type field is not NUL-padded ASCII.
pub const BAD_SCALAR_FIELD: &str = "weights: malformed scalar type field";
/// [`Error::InvalidParam`] `what` for an unknown version (the value is the version).
pub const UNKNOWN_VERSION: &str = "unknown weights format version";
/// [`Error::InvalidParam`] `what` for non-zero header flags (the value is the flags).
pub const UNKNOWN_FLAGS: &str = "unknown weights header flags";

fn corrupt(what: &'static str) -> Error {
    Error::Corrupt { what }
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

/// Bytes of the record padding after a name of `name_len` bytes with `rank` dims, so
/// that the data starts 4-byte aligned.
pub(crate) fn pad_len(rank: usize, name_len: usize) -> usize {
    (4 - (RECORD_HEAD_LEN + 4 * rank + name_len) % 4) % 4
}

/// A checked weights file borrowed from its bytes.
#[derive(Clone, Copy, Debug)]
pub struct Weights<'b> {
    bytes: &'b [u8],
    count: usize,
}

/// One parameter record: a view into the file's bytes.
#[derive(Clone, Copy, Debug)]
pub struct Record<'b> {
    /// Position of the parameter in the model's creation order.
    pub index: u32,
    /// The parameter's shape.
    pub shape: Shape,
    /// The parameter's name (empty when the writer gave none).
    pub name: &'b str,
    /// `shape.numel()` little-endian 32-bit words.
    pub data: &'b [u8],
}

impl Record<'_> {
    /// The stored 32-bit words (`Scalar::to_bits` of each value), in order.
    pub fn bits(&self) -> impl Iterator<Item = u32> + '_ {
        self.data
            .chunks_exact(VALUE_LEN)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
    }
}

impl<'b> Weights<'b> {
    /// Checks a whole file: exactly the declared length, nothing after it.
    pub fn parse(bytes: &'b [u8]) -> Result<Self> {
        let w = Self::parse_prefix(bytes)?;
        if w.bytes.len() != bytes.len() {
            return Err(corrupt(TRAILING));
        }
        Ok(w)
    }

    /// Checks a file at the start of `bytes` and ignores what follows its declared
    /// length (a flash slot, a larger buffer).
    pub fn parse_prefix(bytes: &'b [u8]) -> Result<Self> {
        let head = &bytes[..bytes.len().min(MAGIC.len())];
        if head != &MAGIC[..head.len()] {
            return Err(corrupt(BAD_MAGIC));
        }
        let (Some(version), Some(flags), Some(total), Some(count)) = (
            u16_at(bytes, 4),
            u16_at(bytes, 6),
            u32_at(bytes, 16),
            u32_at(bytes, 20),
        ) else {
            return Err(corrupt(TRUNCATED));
        };
        if version != VERSION {
            return Err(Error::InvalidParam {
                op: "weights",
                what: UNKNOWN_VERSION,
                value: version as i64,
            });
        }
        if flags != 0 {
            return Err(Error::InvalidParam {
                op: "weights",
                what: UNKNOWN_FLAGS,
                value: flags as i64,
            });
        }
        let total = total as usize;
        if total < HEADER_LEN + CRC_LEN {
            return Err(corrupt(BAD_RECORD));
        }
        let Some(file) = bytes.get(..total) else {
            return Err(corrupt(TRUNCATED));
        };
        let body = &file[..total - CRC_LEN];
        if u32_at(file, total - CRC_LEN) != Some(crc32(body)) {
            return Err(corrupt(BAD_CHECKSUM));
        }
        let w = Weights {
            bytes: file,
            count: count as usize,
        };
        w.scalar_name()?;
        // Walk every record once so that `records` can trust the layout.
        let mut off = HEADER_LEN;
        for _ in 0..w.count {
            let (_, next) = w.record_at(off)?;
            off = next;
        }
        if off != body.len() {
            return Err(corrupt(BAD_RECORD));
        }
        Ok(w)
    }

    /// The file's bytes (exactly its declared length).
    pub fn as_bytes(&self) -> &'b [u8] {
        self.bytes
    }

    /// Number of parameter records.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the file holds no parameter.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The name of the scalar type the values were stored as (`"f32"`).
    pub fn scalar_name(&self) -> Result<&'b str> {
        let field = self.bytes.get(8..8 + SCALAR_NAME_LEN).ok_or(corrupt(TRUNCATED))?;
        let n = field.iter().position(|&b| b == 0).unwrap_or(field.len());
        let (name, pad) = field.split_at(n);
        let printable = name.iter().all(|b| b.is_ascii_graphic());
        if n == 0 || !printable || pad.iter().any(|&b| b != 0) {
            return Err(corrupt(BAD_SCALAR_FIELD));
        }
        core::str::from_utf8(name).map_err(|_| corrupt(BAD_SCALAR_FIELD))
    }

    /// The records, in file order.
    pub fn records(&self) -> impl Iterator<Item = Record<'b>> + '_ {
        let mut off = HEADER_LEN;
        (0..self.count).map_while(move |_| {
            let (r, next) = self.record_at(off).ok()?;
            off = next;
            Some(r)
        })
    }

    /// The record starting at `off` and the offset after it, bounds-checked against
    /// the body (the bytes before the checksum).
    fn record_at(&self, off: usize) -> Result<(Record<'b>, usize)> {
        let body = &self.bytes[..self.bytes.len() - CRC_LEN];
        let bad = || corrupt(BAD_RECORD);
        let index = u32_at(body, off).ok_or_else(bad)?;
        let head = body.get(off + 4..off + RECORD_HEAD_LEN).ok_or_else(bad)?;
        let (rank, name_len) = (head[0] as usize, head[1] as usize);
        if rank > MAX_RANK || head[2] != 0 || head[3] != 0 {
            return Err(bad());
        }
        let mut dims = [0usize; MAX_RANK];
        let mut at = off + RECORD_HEAD_LEN;
        for d in dims.iter_mut().take(rank) {
            *d = u32_at(body, at).ok_or_else(bad)? as usize;
            at += 4;
        }
        let shape = Shape::new(&dims[..rank]).map_err(|_| bad())?;
        let name_bytes = body.get(at..at + name_len).ok_or_else(bad)?;
        let name = core::str::from_utf8(name_bytes).map_err(|_| bad())?;
        at += name_len;
        let pad = body.get(at..at + pad_len(rank, name_len)).ok_or_else(bad)?;
        if pad.iter().any(|&b| b != 0) {
            return Err(bad());
        }
        at += pad.len();
        let data_len = shape.numel().checked_mul(VALUE_LEN).ok_or_else(bad)?;
        let end = at.checked_add(data_len).ok_or_else(bad)?;
        let data = body.get(at..end).ok_or_else(bad)?;
        Ok((
            Record {
                index,
                shape,
                name,
                data,
            },
            end,
        ))
    }
}
