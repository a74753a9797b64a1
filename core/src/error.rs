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
        /// The op (or optimizer, or `"param"`) that asked; `""` outside a graph.
        op: &'static str,
        /// When it asked.
        phase: Phase,
        /// Arena bytes the whole step needs, when the graph was told its plan
        /// ([`Graph::set_plan`](crate::Graph::set_plan)).
        step_bytes: Option<usize>,
    },
    /// The tape (or the tensor table it indexes) already holds `capacity` records.
    TapeFull {
        /// The const-generic capacity of the graph.
        capacity: usize,
        /// Records the whole step needs, when the graph was told its plan
        /// ([`Graph::set_plan`](crate::Graph::set_plan), [`Plan::records`](crate::plan::Plan::records)).
        needed: Option<usize>,
    },
    /// A shape does not fit what the op requires: `what` names the dimension or the
    /// relation, `expected` and `found` the two sizes. A `what` holding `{found}` and
    /// `{expected}` is a sentence the two sizes are put into ("input has {found}
    /// channels, the weight expects {expected}"); `found` is always the caller's side.
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
    /// A real-valued op or optimizer parameter is out of its domain (a NaN epsilon, a
    /// momentum outside `[0, 1)`, a negative learning rate): [`Error::InvalidParam`]
    /// for a value that is not an integer, printed as it was given (`NaN`, `-0.5`).
    InvalidFloat {
        /// The op (or optimizer) that rejected the parameter.
        op: &'static str,
        /// Which parameter, and why.
        what: &'static str,
        /// The offending value.
        value: Real,
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
            Error::ArenaExhausted {
                needed,
                available,
                op,
                phase,
                step_bytes,
            } => {
                write!(
                    f,
                    "arena exhausted: needed {needed} bytes, {available} bytes available"
                )?;
                if !op.is_empty() {
                    write!(f, ", in {op} ({})", phase.name())?;
                }
                match step_bytes {
                    Some(b) => write!(f, "; the whole step needs {b} bytes"),
                    None => Ok(()),
                }
            }
            Error::TapeFull { capacity, needed } => {
                write!(f, "tape full: capacity {capacity} records")?;
                match needed {
                    Some(n) => write!(f, ", the step needs {n}"),
                    None => Ok(()),
                }
            }
            Error::ShapeMismatch {
                op,
                what,
                expected,
                found,
            } => {
                if !is_template(what) {
                    return write!(f, "{op}: {what}: expected {expected}, found {found}");
                }
                write!(f, "{op}: ")?;
                pieces(what, |p| match p {
                    Piece::Text(t) => f.write_str(t),
                    Piece::Expected => write!(f, "{expected}"),
                    Piece::Found => write!(f, "{found}"),
                })
            }
            Error::InvalidParam { op, what, value } => write!(f, "{op}: {what} (got {value})"),
            Error::InvalidFloat { op, what, value } => write!(f, "{op}: {what} (got {value})"),
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
            Error::ArenaExhausted {
                needed,
                available,
                op,
                phase,
                step_bytes,
            } => {
                defmt::write!(
                    f,
                    "arena exhausted: needed {=usize} bytes, {=usize} available",
                    needed,
                    available
                );
                if !op.is_empty() {
                    defmt::write!(f, ", in {=str} ({=str})", op, phase.name());
                }
                if let Some(b) = step_bytes {
                    defmt::write!(f, "; the whole step needs {=usize} bytes", b);
                }
            }
            Error::TapeFull { capacity, needed } => {
                defmt::write!(f, "tape full: capacity {=usize}", capacity);
                if let Some(n) = needed {
                    defmt::write!(f, ", the step needs {=usize}", n);
                }
            }
            Error::ShapeMismatch {
                op,
                what,
                expected,
                found,
            } => {
                if !is_template(what) {
                    defmt::write!(
                        f,
                        "{=str}: {=str}: expected {=usize}, found {=usize}",
                        op,
                        what,
                        expected,
                        found
                    );
                    return;
                }
                defmt::write!(f, "{=str}: ", op);
                let _ = pieces(what, |p| {
                    match p {
                        Piece::Text(t) => defmt::write!(f, "{=str}", t),
                        Piece::Expected => defmt::write!(f, "{=usize}", expected),
                        Piece::Found => defmt::write!(f, "{=usize}", found),
                    }
                    Ok::<(), ()>(())
                });
            }
            Error::InvalidParam { op, what, value } => {
                defmt::write!(f, "{=str}: {=str} (got {=i64})", op, what, value)
            }
            Error::InvalidFloat { op, what, value } => {
                defmt::write!(f, "{=str}: {=str} (got {=f32})", op, what, value.get())
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
    /// [`Error::InvalidFloat`] for `value`.
    pub(crate) fn float(op: &'static str, what: &'static str, value: f32) -> Error {
        Error::InvalidFloat {
            op,
            what,
            value: Real::new(value),
        }
    }

    /// The variant's name, as the conformance runner reports it (`"ShapeMismatch"`).
    pub fn kind(&self) -> &'static str {
        match self {
            Error::ArenaExhausted { .. } => "ArenaExhausted",
            Error::TapeFull { .. } => "TapeFull",
            Error::ShapeMismatch { .. } => "ShapeMismatch",
            Error::InvalidParam { .. } => "InvalidParam",
            Error::InvalidFloat { .. } => "InvalidFloat",
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

/// An `f32` carried by an error ([`Error::InvalidFloat`]): compared bit for bit, so
/// that `Error` stays `Eq` (a NaN equals the same NaN), and printed as the float,
/// `NaN` included.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Real(u32);

impl Real {
    /// The value `v`.
    pub fn new(v: f32) -> Self {
        Real(v.to_bits())
    }

    /// The value.
    pub fn get(self) -> f32 {
        f32::from_bits(self.0)
    }
}

impl From<f32> for Real {
    fn from(v: f32) -> Self {
        Real::new(v)
    }
}

impl fmt::Debug for Real {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.get(), f)
    }
}

impl fmt::Display for Real {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.get(), f)
    }
}

/// When an arena allocation was asked for (see [`Error::ArenaExhausted`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Phase {
    /// Creating parameters and frozen tensors.
    #[default]
    Setup,
    /// Recording the forward pass (inputs and ops).
    Forward,
    /// Walking the tape backward.
    Backward,
    /// Creating or applying optimizer state.
    Optimizer,
}

impl Phase {
    /// `"setup"`, `"forward"`, `"backward"` or `"optimizer"`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Setup => "setup",
            Phase::Forward => "forward",
            Phase::Backward => "backward",
            Phase::Optimizer => "optimizer",
        }
    }
}

/// Where the arena is being asked for memory now, and the step's planned size: what an
/// [`Error::ArenaExhausted`] reports.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Site {
    pub op: &'static str,
    pub phase: Phase,
    pub step_bytes: Option<usize>,
}

impl Site {
    /// The error of an allocation of `needed` bytes with `available` free, here.
    pub(crate) fn exhausted(self, needed: usize, available: usize) -> Error {
        let Site {
            op,
            phase,
            step_bytes,
        } = self;
        Error::ArenaExhausted {
            needed,
            available,
            op,
            phase,
            step_bytes,
        }
    }
}

/// A piece of a [`Error::ShapeMismatch`] sentence.
enum Piece {
    Text(&'static str),
    Expected,
    Found,
}

/// Whether a `what` is a sentence with `{found}` (and `{expected}`) to fill in. Byte
/// comparisons, not `str::contains`, whose searcher would add kilobytes of flash.
fn is_template(what: &str) -> bool {
    let b = what.as_bytes();
    (0..b.len()).any(|i| b[i..].starts_with(b"{found}"))
}

/// Calls `f` with the text and the placeholders of `what` in order.
fn pieces<E>(
    what: &'static str,
    mut f: impl FnMut(Piece) -> core::result::Result<(), E>,
) -> core::result::Result<(), E> {
    let mut rest = what;
    while let Some(i) = rest.as_bytes().iter().position(|&c| c == b'{') {
        // Checked slicing (`get`): an index panic would link `core::fmt` into every
        // program. `i` is a `{`, so a char boundary; the fallback never runs.
        let (Some(head), Some(tail)) = (rest.get(..i), rest.get(i..)) else {
            break;
        };
        let (piece, len) = if tail.as_bytes().starts_with(b"{expected}") {
            (Piece::Expected, 10)
        } else if tail.as_bytes().starts_with(b"{found}") {
            (Piece::Found, 7)
        } else {
            (Piece::Text("{"), 1)
        };
        if !head.is_empty() {
            f(Piece::Text(head))?;
        }
        f(piece)?;
        rest = tail.get(len..).unwrap_or("");
    }
    if rest.is_empty() {
        Ok(())
    } else {
        f(Piece::Text(rest))
    }
}

/// Shorthand used throughout the crate.
pub type Result<T> = core::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::string::ToString;

    #[test]
    fn shape_mismatch_sentences_are_filled_and_plain_whats_keep_the_old_form() {
        let e = |what| Error::ShapeMismatch {
            op: "op",
            what,
            expected: 16,
            found: 8,
        };
        assert_eq!(
            e("input has {found} channels, the weight expects {expected}").to_string(),
            "op: input has 8 channels, the weight expects 16"
        );
        assert_eq!(e("{found} of {expected} {x} {").to_string(), "op: 8 of 16 {x} {");
        assert_eq!(
            e("element count").to_string(),
            "op: element count: expected 16, found 8"
        );
    }

    #[test]
    fn a_float_parameter_is_printed_as_given_nan_included() {
        let e = |v: f32| Error::InvalidFloat {
            op: "batch_norm",
            what: "eps must be finite and positive",
            value: Real::new(v),
        };
        assert_eq!(
            e(f32::NAN).to_string(),
            "batch_norm: eps must be finite and positive (got NaN)"
        );
        assert_eq!(
            e(-0.5).to_string(),
            "batch_norm: eps must be finite and positive (got -0.5)"
        );
        assert_eq!(e(f32::NAN), e(f32::NAN));
        assert_ne!(e(0.0), e(-0.0));
    }

    #[test]
    fn capacity_errors_say_where_and_what_the_step_needs() {
        let a = Error::ArenaExhausted {
            needed: 64,
            available: 8,
            op: "conv2d",
            phase: Phase::Backward,
            step_bytes: Some(1000),
        };
        assert_eq!(
            a.to_string(),
            "arena exhausted: needed 64 bytes, 8 bytes available, in conv2d (backward); the whole step needs 1000 bytes"
        );
        let t = Error::TapeFull {
            capacity: 32,
            needed: None,
        };
        assert_eq!(t.to_string(), "tape full: capacity 32 records");
    }
}
