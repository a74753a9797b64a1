//! The one error type of the engine.
//!
//! Every public function that takes shapes, sizes, parameters or data returns
//! `Result<_, Error>`. Variants carry `&'static str` names and numbers, never heap
//! strings, so the type is `Copy` and works without `alloc`. An error leaves the
//! engine usable: parameters and the long-lived arena region are never touched by a
//! failed call.

use core::fmt;

/// What went wrong, with enough detail to say which op and which sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The arena had `available` bytes free but the request needed `needed` bytes.
    ArenaExhausted {
        /// Bytes the allocation asked for.
        needed: usize,
        /// Bytes that were free at that moment.
        available: usize,
    },
    /// The tape (or the tensor table it indexes) already holds `capacity` records.
    TapeFull {
        /// The const-generic capacity of the graph.
        capacity: usize,
    },
    /// A shape does not fit what the op requires: `what` names the dimension or the
    /// relation, `expected` and `found` the two sizes.
    ShapeMismatch {
        /// The op that rejected the input.
        op: &'static str,
        /// Which dimension or relation was wrong.
        what: &'static str,
        /// The size the op needed.
        expected: usize,
        /// The size it was given.
        found: usize,
    },
    /// An op parameter is out of its domain (stride 0, kernel larger than the padded
    /// input, a class index out of range, ...).
    InvalidParam {
        /// The op that rejected the parameter.
        op: &'static str,
        /// Which parameter, and why.
        what: &'static str,
        /// The offending value.
        value: i64,
    },
    /// A size computation overflowed `usize` (a huge shape or parameter).
    Overflow {
        /// The op whose size arithmetic overflowed.
        op: &'static str,
    },
    /// The op or feature exists in PyTorch but not (yet) in this engine.
    Unsupported {
        /// The op or feature.
        op: &'static str,
    },
    /// A tensor handle from an earlier step (or another graph) was used after
    /// [`Graph::end_step`](crate::Graph::end_step) released it.
    StaleTensor,
    /// `backward` was asked for something that cannot have a gradient (not a scalar,
    /// or no parameter or input that requires a gradient led to it).
    NoGradient {
        /// Why the gradient cannot be computed.
        what: &'static str,
    },
    /// An operation was called at a time it cannot run (for example creating a
    /// parameter while a step is recording).
    InvalidState {
        /// What was out of order.
        what: &'static str,
    },
    /// Bytes that should hold engine data (weights, a data file) are malformed.
    Corrupt {
        /// What check failed.
        what: &'static str,
    },
    /// A value that must be finite is NaN or infinite (an input's data, a gradient or an
    /// update an optimizer would write): refused before anything was written.
    NonFinite {
        /// The call that refused it (`"input"`, `"Sgd::step"`, `"fused SGD"`, ...).
        op: &'static str,
        /// What was not finite.
        what: &'static str,
        /// The parameter it belongs to, by creation order (as
        /// [`Graph::param_handle`](crate::Graph::param_handle)); `None` for an input,
        /// a loss or a setting.
        param: Option<usize>,
        /// The first element that is not finite (0 for a single value).
        index: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::ArenaExhausted { needed, available } => write!(
                f,
                "arena exhausted: needed {needed} bytes, {available} bytes available"
            ),
            Error::TapeFull { capacity } => write!(f, "tape full: capacity {capacity} records"),
            Error::ShapeMismatch {
                op,
                what,
                expected,
                found,
            } => write!(f, "{op}: {what}: expected {expected}, found {found}"),
            Error::InvalidParam { op, what, value } => write!(f, "{op}: {what} (got {value})"),
            Error::Overflow { op } => write!(f, "{op}: size arithmetic overflows"),
            Error::Unsupported { op } => write!(f, "{op}: not supported"),
            Error::StaleTensor => write!(f, "tensor handle from an earlier step was used"),
            Error::NoGradient { what } => write!(f, "no gradient: {what}"),
            Error::InvalidState { what } => write!(f, "invalid state: {what}"),
            Error::Corrupt { what } => write!(f, "corrupt data: {what}"),
            Error::NonFinite {
                op,
                what,
                param: Some(p),
                index,
            } => write!(f, "{op}: parameter {p}: {what} at element {index}"),
            Error::NonFinite {
                op,
                what,
                param: None,
                index,
            } => write!(f, "{op}: {what} at element {index}"),
        }
    }
}

impl core::error::Error for Error {}

#[cfg(feature = "defmt")]
impl defmt::Format for Error {
    fn format(&self, f: defmt::Formatter) {
        match *self {
            Error::ArenaExhausted { needed, available } => defmt::write!(
                f,
                "arena exhausted: needed {=usize} bytes, {=usize} available",
                needed,
                available
            ),
            Error::TapeFull { capacity } => defmt::write!(f, "tape full: capacity {=usize}", capacity),
            Error::ShapeMismatch {
                op,
                what,
                expected,
                found,
            } => defmt::write!(
                f,
                "{=str}: {=str}: expected {=usize}, found {=usize}",
                op,
                what,
                expected,
                found
            ),
            Error::InvalidParam { op, what, value } => {
                defmt::write!(f, "{=str}: {=str} (got {=i64})", op, what, value)
            }
            Error::Overflow { op } => defmt::write!(f, "{=str}: size arithmetic overflows", op),
            Error::Unsupported { op } => defmt::write!(f, "{=str}: not supported", op),
            Error::StaleTensor => defmt::write!(f, "stale tensor handle"),
            Error::NoGradient { what } => defmt::write!(f, "no gradient: {=str}", what),
            Error::InvalidState { what } => defmt::write!(f, "invalid state: {=str}", what),
            Error::Corrupt { what } => defmt::write!(f, "corrupt data: {=str}", what),
            Error::NonFinite {
                op,
                what,
                param: Some(p),
                index,
            } => defmt::write!(
                f,
                "{=str}: parameter {=usize}: {=str} at element {=usize}",
                op,
                p,
                what,
                index
            ),
            Error::NonFinite {
                op,
                what,
                param: None,
                index,
            } => defmt::write!(f, "{=str}: {=str} at element {=usize}", op, what, index),
        }
    }
}

impl Error {
    /// The variant's name, as the conformance runner reports it (`"ShapeMismatch"`).
    pub fn kind(&self) -> &'static str {
        match self {
            Error::ArenaExhausted { .. } => "ArenaExhausted",
            Error::TapeFull { .. } => "TapeFull",
            Error::ShapeMismatch { .. } => "ShapeMismatch",
            Error::InvalidParam { .. } => "InvalidParam",
            Error::Overflow { .. } => "Overflow",
            Error::Unsupported { .. } => "Unsupported",
            Error::StaleTensor => "StaleTensor",
            Error::NoGradient { .. } => "NoGradient",
            Error::InvalidState { .. } => "InvalidState",
            Error::Corrupt { .. } => "Corrupt",
            Error::NonFinite { .. } => "NonFinite",
        }
    }
}

/// Shorthand used throughout the crate.
pub type Result<T> = core::result::Result<T, Error>;
