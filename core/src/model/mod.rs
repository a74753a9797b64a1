//! Models from elsewhere: one checked binary file for a whole model (graph, parameters,
//! buffers, PyTorch names), read zero-copy, and a [`Model`] that runs its graph on the
//! ordinary define-by-run tape, calling every op by its registry name.
//!
//! - `spec` (`std`) is the model as host data, which an importer produces;
//!   `encode` (`std`) checks it and writes the file; `ModelFile::to_spec` (`std`)
//!   reads it back (`encode(&file.to_spec())` is the file's bytes again).
//! - [`ModelFile::parse`] checks a file once (length, magic, version, CRC-32, the
//!   bounds of every record, that every node reads only earlier values, that every op
//!   name is in [`OpSpec::ALL`](crate::ops::registry::OpSpec::ALL), every attribute
//!   encoding) and then hands out views into the bytes: nothing is copied, so a file in
//!   flash stays in flash. No input makes it panic.
//! - [`Model::new`] creates the tensors in a [`Graph`](crate::Graph) (trainable
//!   parameters with [`Graph::param`](crate::Graph::param), frozen ones and buffers
//!   with [`Graph::buffer`](crate::Graph::buffer), values through `Scalar::from_f32`),
//!   or [`Model::in_place`] leaves chosen frozen `f32` tensors in the file's bytes
//!   ([`Graph::external`](crate::Graph::external)). [`Model::forward`] runs the nodes
//!   in order through [`OpSpec::find`](crate::ops::registry::OpSpec::find), reading
//!   each node's attributes in place; it frees every intermediate value after its last
//!   use and runs a ReLU in place when it can, as [`Sequential`](crate::nn::Sequential)
//!   does, so a loaded W1 plans to the byte as the hand-written one. The node table
//!   takes `N` entries of the graph's tape capacity on the stack (no allocation).
//!   [`Model::check`] runs the graph once on a meta graph at the smallest declared
//!   input, so a shape that cannot work is found at load, naming its node.
//! - Saving: [`Model::write_file`] writes the file again with the graph's current
//!   values (same layout, new checksum); [`Model::write_weights`] writes them as
//!   [`crate::io`] weights with their PyTorch names.
//! - Errors name their place ([`ModelError`], [`Site`]): which input, tensor, node (its
//!   index, op and name) or output.
//!
//! # Layout, version 1 (all integers little-endian)
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 4 | magic `b"TLMD"` |
//! | 4 | 2 | version `u16` = 1 |
//! | 6 | 2 | flags `u16` = 0 (anything else is refused) |
//! | 8 | 4 | total file length `u32`, checksum included |
//! | 12 | 4 | number of graph inputs `u32` |
//! | 16 | 4 | number of tensors (parameters and buffers) `u32` |
//! | 20 | 4 | number of nodes `u32` |
//! | 24 | 4 | number of outputs `u32` (at least 1) |
//! | 28 | ... | input records, tensor records, node records, then one value reference `u32` per output |
//! | total - 4 | 4 | CRC-32 (IEEE, as zlib; [`crate::io::crc32`]) of bytes `0 .. total - 4` |
//!
//! Every record starts 4-byte aligned and ends with zero padding to a multiple of 4.
//!
//! An input record: `rank u8` (0 ..= 4), `name length u8`, 2 reserved bytes (0); per
//! dim a `u32` kind (0 fixed, 1 free) and a `u32` size (the size, or a free dim's
//! minimum); the name (UTF-8).
//!
//! A tensor record: `rank u8` (0 ..= 4), `kind u8` (0 frozen parameter, 1 trainable
//! parameter, 2 buffer, 3 frozen int8 parameter), `name length u16`; `rank` dims `u32`; the PyTorch name; padding;
//! then the values, `f32` IEEE bits, row-major. The values start 4-byte aligned in the
//! file, so a file placed at a 4-byte aligned address is read in place as `&[f32]`.
//! Kind 3 is a frozen parameter stored as int8 per output channel (rank at least 1):
//! `dims[0]` finite `f32` scales, then the values as `i8`, row-major (value `q *
//! scale[dim-0 index]`), then zero padding. [`Model::in_place`] reads it in place when
//! only `conv2d` reads it (as its weight), through
//! [`Graph::conv2d_int8`](crate::Graph::conv2d_int8); elsewhere it becomes its
//! dequantized values.
//!
//! A node record: `inputs u8` (at most the op's [`OpSpec::inputs`](crate::ops::registry::OpSpec::inputs)),
//! `attrs u8`, `op name length u8`, 1 reserved byte; `node name length u16`, 2 reserved
//! bytes; one value reference `u32` per input; the op's registry name; the node's
//! name; padding; then its attribute records. An attribute record: `type u8`,
//! `name length u8`, 2 reserved bytes, `value length u32`; the PyTorch name; the
//! value; padding. Types and values: 1 int (`i64`), 2 ints (`i64` each), 3 float
//! (`f64`), 4 floats (`f64` each), 5 flag (one byte, 0 or 1), 6 string (UTF-8).
//!
//! A value reference `u32`: the kind in the top byte (0 absent, 1 graph input, 2
//! tensor, 3 node output), the index in the low 24 bits. A node may only read nodes
//! before it.

mod attrs;
mod batches;
mod choice;
#[cfg(feature = "std")]
mod encode;
mod error;
mod file;
mod format;
mod in_place;
mod int8;
mod limits;
mod run;
mod save;
#[cfg(feature = "std")]
pub mod spec;
mod unique;

pub use attrs::{List, NodeAttrs};
pub use choice::{name_matches, Trained};
#[cfg(feature = "std")]
pub use encode::{check_spec, encode};
pub use error::{ModelError, ModelResult, Site};
pub use file::{Attr, AttrRecord, InputRecord, ModelFile, NodeRecord, TensorRecord};
pub use format::{HEADER_LEN, MAGIC, MAX_NODE_INPUTS, VERSION};
pub use run::{Model, Placement};

/// Where a node's input comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueRef {
    /// Graph input `k`.
    Input(usize),
    /// Tensor `k` (a parameter or buffer, in file order).
    Tensor(usize),
    /// The output of node `k` (which must come earlier).
    Node(usize),
}

/// One dim of a graph input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DimSpec {
    /// Always this size (the channel count).
    Fixed(usize),
    /// Any size of at least `min` (batch, height, width, length).
    Free {
        /// The smallest size the graph accepts.
        min: usize,
    },
}

/// Whether a tensor trains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorKind {
    /// A parameter; `trainable` is the default choice, which a user may change.
    Param {
        /// Trains by default.
        trainable: bool,
    },
    /// A buffer (BatchNorm's running statistics, its batch counter): saved and
    /// loaded with the parameters, never trained.
    Buffer,
}
