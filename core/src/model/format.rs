//! The constants and small readers of the model file layout (see the module docs of
//! [`crate::model`]), shared by the parser, the encoder and the writer.

use super::ValueRef;
use crate::ops::registry::OpInfo;

/// The first four bytes of every model file.
pub const MAGIC: [u8; 4] = *b"TLMD";
/// The layout version this engine writes and reads.
pub const VERSION: u16 = 1;
/// Bytes of the file header.
pub const HEADER_LEN: usize = 28;
/// Bytes of the checksum trailer.
pub(crate) const CRC_LEN: usize = 4;
/// The most tensor inputs a node may have (no op has more).
pub const MAX_NODE_INPUTS: usize = 8;
/// The largest index a value reference holds (24 bits).
pub(crate) const MAX_REF_INDEX: usize = (1 << 24) - 1;

/// Attribute type codes.
pub(crate) const T_INT: u8 = 1;
pub(crate) const T_INTS: u8 = 2;
pub(crate) const T_FLOAT: u8 = 3;
pub(crate) const T_FLOATS: u8 = 4;
pub(crate) const T_FLAG: u8 = 5;
pub(crate) const T_STR: u8 = 6;

/// Tensor kind codes.
pub(crate) const K_FROZEN: u8 = 0;
pub(crate) const K_TRAIN: u8 = 1;
pub(crate) const K_BUFFER: u8 = 2;
/// A frozen parameter stored as `i8` with an `f32` scale per output channel (dim 0).
pub(crate) const K_INT8: u8 = 3;

// Reasons (`Error::Corrupt` / `Error::InvalidParam` texts).
pub(crate) const BAD_MAGIC: &str = "model: bad magic (not a torchlet model file)";
pub(crate) const TRUNCATED: &str = "model: truncated (fewer bytes than the header or its length field says)";
pub(crate) const BAD_CHECKSUM: &str = "model: CRC-32 checksum mismatch";
pub(crate) const TRAILING: &str = "model: bytes after the end of the file";
pub(crate) const BAD_LENGTH: &str = "model: length field smaller than a header";
pub(crate) const BAD_RECORD: &str = "model: record runs past the end or has non-zero reserved bytes";
pub(crate) const BAD_NAME: &str = "model: name is not UTF-8";
pub(crate) const BAD_RANK: &str = "model: rank above 4";
pub(crate) const BAD_DIM_KIND: &str = "model: input dim kind is neither fixed (0) nor free (1)";
pub(crate) const BAD_KIND: &str = "model: tensor kind is not 0, 1, 2 or 3";
pub(crate) const INT8_RANK: &str = "model: an int8 tensor has rank 0 (it needs dim 0, its output channels)";
pub(crate) const INT8_SCALE: &str = "model: an int8 tensor has a scale that is not finite";
#[cfg(feature = "std")]
pub(crate) const INT8_KIND: &str = "model: an int8 tensor must be a frozen parameter";
#[cfg(feature = "std")]
pub(crate) const INT8_LEN: &str =
    "model: an int8 tensor needs one scale per output channel and one i8 per value";
pub(crate) const BAD_SIZE: &str = "model: sizes overflow";
pub(crate) const BAD_REF: &str = "model: malformed value reference";
pub(crate) const REF_RANGE: &str = "model: value reference past the inputs or tensors";
pub(crate) const LATER_NODE: &str = "model: node reads a node that does not come before it";
pub(crate) const UNKNOWN_OP: &str = "model: unknown op name (not in OpSpec::ALL)";
pub(crate) const TOO_MANY_INPUTS: &str = "model: node has more inputs than its op takes";
pub(crate) const BAD_ATTR: &str = "model: malformed attribute (type, length or value)";
pub(crate) const DUP_ATTR: &str = "model: attribute given twice";
pub(crate) const DUP_TENSOR: &str = "model: two tensors have this name";
pub(crate) const TOO_MANY_RECORDS: &str =
    "model: more inputs, tensors and nodes than a graph's tape holds (65,534 records)";
/// Inputs, tensors and nodes a file may have: the records a [`crate::Graph`]'s
/// tape can index.
pub(crate) const MAX_RECORDS: usize = u16::MAX as usize - 1;
pub(crate) const NO_OUTPUT: &str = "model: the model has no output";
pub(crate) const BAD_END: &str = "model: records do not end where the outputs end";
/// `InvalidParam` `what` for an unknown version.
pub(crate) const UNKNOWN_VERSION: &str = "unknown model format version";
/// `InvalidParam` `what` for non-zero header flags.
pub(crate) const UNKNOWN_FLAGS: &str = "unknown model header flags";

pub(crate) fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(off..off.checked_add(2)?)?.try_into().ok()?,
    ))
}

pub(crate) fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(off..off.checked_add(4)?)?.try_into().ok()?,
    ))
}

pub(crate) fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(off..off.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// `n` rounded up to a multiple of 4 (`None` on overflow).
pub(crate) fn pad4(n: usize) -> Option<usize> {
    n.checked_add(3).map(|v| v & !3)
}

#[cfg(feature = "std")]
/// A value reference as stored (`None` for an absent optional input).
pub(crate) fn ref_word(r: Option<ValueRef>) -> u32 {
    let (kind, k) = match r {
        None => (0u32, 0),
        Some(ValueRef::Input(k)) => (1, k),
        Some(ValueRef::Tensor(k)) => (2, k),
        Some(ValueRef::Node(k)) => (3, k),
    };
    (kind << 24) | (k.min(MAX_REF_INDEX) as u32)
}

/// A stored value reference back (`Err` for an unknown kind or bits of an absent one).
pub(crate) fn word_ref(w: u32) -> Result<Option<ValueRef>, ()> {
    let k = (w & MAX_REF_INDEX as u32) as usize;
    match w >> 24 {
        0 if k == 0 => Ok(None),
        1 => Ok(Some(ValueRef::Input(k))),
        2 => Ok(Some(ValueRef::Tensor(k))),
        3 => Ok(Some(ValueRef::Node(k))),
        _ => Err(()),
    }
}

/// Checks a value reference read by node `node` (or by an output when `node` is the
/// number of nodes) against the counts; `None` when it is fine, else the reason.
pub(crate) fn check_ref(r: ValueRef, inputs: usize, tensors: usize, node: usize) -> Option<&'static str> {
    match r {
        ValueRef::Input(k) if k >= inputs => Some(REF_RANGE),
        ValueRef::Tensor(k) if k >= tensors => Some(REF_RANGE),
        ValueRef::Node(k) if k >= node => Some(LATER_NODE),
        _ => None,
    }
}

/// The number of tensor inputs of the op called `name`, if the registry has it.
pub(crate) fn op_inputs(name: &str) -> Option<usize> {
    OpInfo::find(name).map(|op| op.inputs.len())
}
