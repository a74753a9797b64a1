//! Loading a checked weights file into a model: every check first, then the copy, so
//! a file that fails any check leaves the parameters as they were.

use super::format::{Record, Weights};
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::scalar::Scalar;

/// How stored words become the model's scalars.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Conversion {
    /// Same scalar type: `S::from_bits`.
    Bits,
    /// An `f32` file into another scalar type: `S::from_f32`, the type's rounding rule.
    FromF32,
}

fn conversion<S: Scalar>(w: &Weights<'_>) -> Result<Conversion> {
    let name = w.scalar_name()?;
    if name == S::NAME {
        Ok(Conversion::Bits)
    } else if name == "f32" {
        Ok(Conversion::FromF32)
    } else {
        Err(Error::Unsupported {
            op: "load weights: the file's scalar type is neither the model's nor f32",
        })
    }
}

/// Checks that the records match the model's parameters one to one: same count,
/// index `i` at position `i`, same shape.
pub fn check<S: Scalar, const N: usize>(g: &Graph<'_, S, N>, w: &Weights<'_>) -> Result<()> {
    conversion::<S>(w)?;
    if w.len() != g.num_params() {
        return Err(Error::ShapeMismatch {
            op: "load weights",
            what: "the file has {found} parameters, the model {expected}",
            expected: g.num_params(),
            found: w.len(),
        });
    }
    for (i, r) in w.records().enumerate() {
        check_record(g, i, &r)?;
    }
    Ok(())
}

fn check_record<S: Scalar, const N: usize>(g: &Graph<'_, S, N>, i: usize, r: &Record<'_>) -> Result<()> {
    if r.index as usize != i {
        return Err(Error::InvalidParam {
            op: "load weights",
            what: "record out of order: parameter index",
            value: r.index as i64,
        });
    }
    let t = g.param_handle(i).ok_or(Error::StaleTensor)?;
    if g.is_external(t)? {
        return Err(Error::InvalidParam {
            op: "load weights",
            what: "parameter is external (frozen, read-only data); index",
            value: i as i64,
        });
    }
    let want = g.shape(t)?;
    if want.rank() != r.shape.rank() {
        return Err(Error::ShapeMismatch {
            op: "load weights",
            what: "a parameter has {found} dimensions in the file, {expected} in the model",
            expected: want.rank(),
            found: r.shape.rank(),
        });
    }
    for (&a, &b) in want.dims().iter().zip(r.shape.dims()) {
        if a != b {
            return Err(Error::ShapeMismatch {
                op: "load weights",
                what: "a parameter dimension is {found} in the file, {expected} in the model",
                expected: a,
                found: b,
            });
        }
    }
    Ok(())
}

/// Parses `bytes` as a whole weights file, checks it against the model and copies
/// it into the parameters. Any error leaves every parameter untouched.
pub fn load<S: Scalar, const N: usize>(g: &mut Graph<'_, S, N>, bytes: &[u8]) -> Result<()> {
    let w = Weights::parse(bytes)?;
    load_weights(g, &w)
}

/// Like [`load`] for a file that was already parsed.
pub fn load_weights<S: Scalar, const N: usize>(g: &mut Graph<'_, S, N>, w: &Weights<'_>) -> Result<()> {
    if g.is_meta() {
        return Err(Error::InvalidState {
            what: "a meta graph holds no weights to load into",
        });
    }
    check(g, w)?;
    let conv = conversion::<S>(w)?;
    for (i, r) in w.records().enumerate() {
        let t = g.param_handle(i).ok_or(Error::StaleTensor)?;
        let dst = g.param_data_mut(t)?;
        for (d, bits) in dst.iter_mut().zip(r.bits()) {
            *d = match conv {
                Conversion::Bits => S::from_bits(bits),
                Conversion::FromF32 => S::from_f32(f32::from_bits(bits)),
            };
        }
    }
    Ok(())
}
