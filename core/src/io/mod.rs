//! Weights that travel: a checked binary format for a model's parameters, and two-slot
//! checkpoints on NOR flash that survive power loss at any byte.
//!
//! - [`saved_len`] tells the exact size first, [`save`] writes into a caller buffer
//!   (or [`write_to`] streams to any sink, 64 bytes at a time), [`load`] reads from a
//!   byte slice without copying it and writes the parameters only after every check
//!   passed: on any error the model is untouched.
//! - Parameters are matched by position: record `i` is the model's `i`-th parameter
//!   in creation order ([`Graph::param_handle`](crate::Graph::param_handle)), and its
//!   shape must equal the model's. Names are optional and informative (the host
//!   converter uses them to map PyTorch `state_dict` keys; W1's are
//!   [`DIGITS_FCN_NAMES`]).
//! - Values are stored as `Scalar::to_bits`, so a model loads its own files bit for
//!   bit. An `f32` file loads into a model of another scalar type (fixed point)
//!   through `Scalar::from_f32`, the type's rounding rule; any other mismatch of scalar
//!   types is [`Error::Unsupported`](crate::Error::Unsupported).
//! - [`AbCheckpoint`] keeps two slots on an `embedded-storage` [`NorFlash`] and writes
//!   the older one, commit record last, so the newest complete save always loads.
//!
//! # Layout, version 1 (all integers little-endian)
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 4 | magic `b"TLWT"` |
//! | 4 | 2 | version `u16` = 1 |
//! | 6 | 2 | flags `u16` = 0 (anything else is refused) |
//! | 8 | 8 | scalar type name, ASCII, NUL-padded (`"f32"`, later `"q16.16"`) |
//! | 16 | 4 | total file length in bytes `u32`, checksum included |
//! | 20 | 4 | number of parameter records `u32` |
//! | 24 | ... | the records, one after the other |
//! | total - 4 | 4 | CRC-32 (IEEE, as zlib) of bytes `0 .. total - 4` |
//!
//! A record (it starts 4-byte aligned, and so does its data):
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 4 | parameter index `u32` (creation order; record `i` has index `i`) |
//! | 4 | 1 | rank `r` (0 ..= 4) |
//! | 5 | 1 | name length `n` in bytes (0 = no name) |
//! | 6 | 2 | reserved, 0 |
//! | 8 | 4 `r` | dims, `u32` each, row-major order |
//! | 8 + 4 `r` | `n` | name, UTF-8 (for example `c1.weight`) |
//! | ... | 0 ..= 3 | zero padding to a multiple of 4 |
//! | ... | 4 × numel | values, each the `u32` of `Scalar::to_bits` (`f32`: IEEE bits) |
//!
//! W1 ([`crate::nn::digits_fcn`], 6,218 parameters) is 25,036 bytes without names.
//!
//! # Errors (each leaves the model untouched)
//!
//! | what is wrong | error |
//! |---|---|
//! | not starting with the magic | [`Error::Corrupt`](crate::Error::Corrupt) [`BAD_MAGIC`] |
//! | fewer bytes than the header (or its length field) says | `Corrupt` [`TRUNCATED`] |
//! | a version other than 1 / non-zero flags | [`Error::InvalidParam`](crate::Error::InvalidParam) [`UNKNOWN_VERSION`] / [`UNKNOWN_FLAGS`] |
//! | checksum differs | `Corrupt` [`BAD_CHECKSUM`] |
//! | bytes after the declared end (in [`load`]) | `Corrupt` [`TRAILING`] |
//! | impossible record layout | `Corrupt` [`BAD_RECORD`] or [`BAD_SCALAR_FIELD`] |
//! | scalar type neither the model's nor `f32` | [`Error::Unsupported`](crate::Error::Unsupported) |
//! | parameter count, rank or a dimension differs | [`Error::ShapeMismatch`](crate::Error::ShapeMismatch) |

mod checkpoint;
mod crc32;
mod format;
mod load;
mod save;

pub use checkpoint::{AbCheckpoint, SlotInfo, SLOT_HEADER_LEN};
pub use crc32::{crc32, Crc32};
pub use format::{
    Record, Weights, BAD_CHECKSUM, BAD_MAGIC, BAD_RECORD, BAD_SCALAR_FIELD, CRC_LEN, HEADER_LEN, MAGIC,
    TRAILING, TRUNCATED, UNKNOWN_FLAGS, UNKNOWN_VERSION, VERSION,
};
pub use load::{check, load, load_weights};
pub use save::{save, save_named, saved_len, saved_len_named, write_to, DIGITS_FCN_NAMES};

#[doc(no_inline)]
pub use embedded_storage::nor_flash::NorFlash;
