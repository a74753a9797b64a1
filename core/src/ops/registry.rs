//! Ops called by name: each op file defines an [`OpSpec`] (its `torch.nn.functional`
//! name, its tensor inputs and a `call` that reads keyword parameters from an
//! [`Attrs`] source), and [`OpSpec::ALL`] in `ops/mod.rs` lists them, one line each.
//! The conformance door (JSON) calls ops through it; a model file can too.

use crate::error::{Error, Result};
use crate::graph::{Graph, Tensor};
use crate::scalar::Scalar;

/// Where an op called by name reads its keyword parameters (PyTorch's names). Every
/// getter answers `Ok(None)` when the parameter is absent (the op then uses PyTorch's
/// default) and an error when it is there but not of the asked kind. Values are
/// returned by copy or borrowed from the source, so a source can be a JSON map or a
/// byte buffer read in place.
pub trait Attrs {
    /// An integer.
    fn int(&self, name: &str) -> Result<Option<i64>>;
    /// A list of integers: its first elements are written to `out` (as many as fit)
    /// and its length is returned. A single integer is a one-element list.
    fn ints(&self, name: &str, out: &mut [i64]) -> Result<Option<usize>>;
    /// A real number.
    fn float(&self, name: &str) -> Result<Option<f64>>;
    /// Element `k` of a list of numbers of any length (class targets; its length is
    /// what [`Attrs::ints`] returns), `None` past its end or when the list is absent.
    fn float_at(&self, name: &str, k: usize) -> Result<Option<f64>>;
    /// A boolean.
    fn flag(&self, name: &str) -> Result<Option<bool>>;
    /// A string (a mode name).
    fn string(&self, name: &str) -> Result<Option<&str>>;
}

/// The function that calls an op by name: its tensor inputs in [`OpSpec::inputs`]
/// order (`None` for an absent optional one) and its parameters.
pub type CallFn<S, const N: usize> =
    for<'g> fn(&mut Graph<'g, S, N>, &[Option<Tensor>], &dyn Attrs) -> Result<Tensor>;

/// An op that can be called by name.
pub struct OpSpec<S: Scalar, const N: usize> {
    /// The `torch.nn.functional` name.
    pub name: &'static str,
    /// Names of its tensor inputs, in order (the ones that get gradients).
    pub inputs: &'static [&'static str],
    /// Names of its keyword parameters (PyTorch's), the only ones it reads.
    pub params: &'static [&'static str],
    /// Validates the parameters and records the op.
    pub call: CallFn<S, N>,
}

impl<S: Scalar, const N: usize> OpSpec<S, N> {
    /// The op called `name`, if there is one.
    pub fn find(name: &str) -> Option<&'static OpSpec<S, N>> {
        Self::ALL.iter().find(|s| s.name == name)
    }
}

/// Input `k` of a call, or an error naming the op when it is absent.
pub(crate) fn need(op: &'static str, inputs: &[Option<Tensor>], k: usize) -> Result<Tensor> {
    inputs.get(k).copied().flatten().ok_or(Error::InvalidParam {
        op,
        what: "missing input tensor; input number",
        value: k as i64,
    })
}

/// Input `k` of a call if given (an optional bias).
pub(crate) fn opt(inputs: &[Option<Tensor>], k: usize) -> Option<Tensor> {
    inputs.get(k).copied().flatten()
}

fn non_negative(op: &'static str, v: i64) -> Result<usize> {
    usize::try_from(v).map_err(|_| Error::InvalidParam {
        op,
        what: "parameter must be a non-negative integer",
        value: v,
    })
}

/// A size or index parameter, `default` when absent.
pub(crate) fn uint(a: &dyn Attrs, op: &'static str, name: &str, default: usize) -> Result<usize> {
    a.int(name)?.map_or(Ok(default), |v| non_negative(op, v))
}

/// A per-dimension pair (`stride=2` or `stride=[2, 1]`), `[default; 2]` when absent.
pub(crate) fn pair(a: &dyn Attrs, op: &'static str, name: &str, default: usize) -> Result<[usize; 2]> {
    let mut v = [0i64; 2];
    match a.ints(name, &mut v)? {
        None => Ok([default; 2]),
        Some(1) => non_negative(op, v[0]).map(|u| [u, u]),
        Some(2) => Ok([non_negative(op, v[0])?, non_negative(op, v[1])?]),
        Some(n) => Err(Error::InvalidParam {
            op,
            what: "parameter must be a non-negative integer or a pair; list length",
            value: n as i64,
        }),
    }
}

/// A boolean parameter, `default` when absent.
pub(crate) fn flag(a: &dyn Attrs, name: &str, default: bool) -> Result<bool> {
    Ok(a.flag(name)?.unwrap_or(default))
}

/// A real parameter, `default` when absent.
pub(crate) fn real(a: &dyn Attrs, name: &str, default: f64) -> Result<f64> {
    Ok(a.float(name)?.unwrap_or(default))
}
