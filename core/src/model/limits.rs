//! The limits of the ops' keyword parameters, checked for every attribute of every
//! node when a model file is parsed (and by [`check_spec`](super::check_spec) before
//! one is written), so that a value no op can record is refused at load, naming its
//! node, and never reaches an op that would run it without gradients and refuse it
//! with them (or allocate by it).
//!
//! - A parameter name means the same in every op of the registry
//!   ([`OpSpec::params`](crate::ops::registry::OpSpec::params)): `stride` is a window
//!   word wherever it appears, so the rules are one table by name.
//! - The bounds are the engine's records' (a window parameter is a 16-bit word, a pad
//!   a signed 16-bit word, a dim an index below [`MAX_RANK`]) and the importer's, which
//!   emits nothing outside them.
//! - Only the values are checked here; shapes are checked by the ops when the graph
//!   runs ([`Model::check`](super::Model::check) at load).

use super::attrs::Attr;
use crate::error::{Error, Real};
use crate::shape::MAX_RANK;

/// A numeric attribute's values, whatever their storage (file bytes or host data):
/// how many, and value `k`.
pub(crate) enum Values<'a> {
    /// Integers (an int or a list of ints).
    Ints(usize, &'a dyn Fn(usize) -> i64),
    /// Reals (a float or a list of floats).
    Floats(usize, &'a dyn Fn(usize) -> f64),
    /// A flag or a string: no numeric limit.
    Other,
}

/// What an integer parameter may be.
struct IntRule {
    min: i64,
    max: i64,
    /// Most values (a pair is two, `pad` four).
    len: usize,
    what: &'static str,
}

const WORD: i64 = u16::MAX as i64;
const DIM: i64 = MAX_RANK as i64;

fn int_rule(name: &str) -> Option<IntRule> {
    let rule = |min, max, len, what| Some(IntRule { min, max, len, what });
    match name {
        "stride" | "padding" | "dilation" | "kernel_size" | "output_padding" => rule(
            0,
            WORD,
            2,
            "a window parameter (stride, padding, dilation, kernel_size, output_padding) must be one or two values in 0..=65535; value",
        ),
        "pad" => rule(-32768, 32767, 4, "pad must be four values in -32768..=32767; value"),
        "groups" | "num_groups" => rule(1, u32::MAX as i64, 1, "groups must be in 1..=4294967295; value"),
        "start_dim" => rule(-DIM, DIM - 1, 1, "start_dim must be one value in -4..=3; value"),
        "dim" | "dims" => rule(-DIM, DIM - 1, MAX_RANK, "a dim must be at most four values in -4..=3; value"),
        "step" => rule(1, u32::MAX as i64, 1, "step must be one value in 1..=4294967295; value"),
        "output_size" | "size" => rule(0, u32::MAX as i64, 2, "an output size must be one or two values in 0..=4294967295; value"),
        _ => None,
    }
}

/// What a real parameter may be: `(finite, minimum)`.
fn float_rule(name: &str) -> Option<(f64, &'static str)> {
    match name {
        "scale_factor" => Some((
            f64::MIN_POSITIVE,
            "scale_factor must be finite and positive; value",
        )),
        "eps" => Some((0.0, "eps must be finite and at least 0; value")),
        "momentum" | "negative_slope" => Some((f64::MIN, "must be finite; value")),
        _ => None,
    }
}

fn refuse(what: &'static str, value: i64) -> Error {
    Error::InvalidParam {
        op: "model attribute",
        what,
        value,
    }
}

/// Checks the attribute `name` with `values` against its parameter's limits.
pub(crate) fn check(name: &str, values: Values<'_>) -> Result<(), Error> {
    match values {
        Values::Ints(n, at) => {
            let Some(r) = int_rule(name) else {
                return Ok(());
            };
            if n > r.len {
                return Err(refuse(r.what, n as i64));
            }
            match (0..n).map(at).find(|x| *x < r.min || *x > r.max) {
                Some(x) => Err(refuse(r.what, x)),
                None => Ok(()),
            }
        }
        Values::Floats(n, at) => {
            if let Some(r) = int_rule(name) {
                return Err(refuse(r.what, 0));
            }
            let Some((min, what)) = float_rule(name) else {
                return Ok(());
            };
            match (0..n).map(at).find(|x| !x.is_finite() || *x < min) {
                Some(x) => Err(Error::InvalidFloat {
                    op: "model attribute",
                    what,
                    value: Real::new(x as f32),
                }),
                None => Ok(()),
            }
        }
        Values::Other => Ok(()),
    }
}

/// [`check`] for an attribute read from a file.
pub(crate) fn check_attr(name: &str, value: Attr<'_>) -> Result<(), Error> {
    match value {
        Attr::Int(v) => check(name, Values::Ints(1, &|_| v)),
        Attr::Ints(l) => check(name, Values::Ints(l.len(), &|k| l.int(k).unwrap_or(0))),
        Attr::Float(v) => check(name, Values::Floats(1, &|_| v)),
        Attr::Floats(l) => check(name, Values::Floats(l.len(), &|k| l.float(k).unwrap_or(0.0))),
        Attr::Flag(_) | Attr::Str(_) => check(name, Values::Other),
    }
}
