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

/// An op's in-place form, called by name: overwrites input 0 (which the caller owns:
/// nothing else reads it and the graph may overwrite it) with the output. `None` when
/// the form does not apply to these inputs and parameters now (a batch_norm in
/// training mode or with a trained scale): the op then runs out of place.
pub type InPlaceFn<S, const N: usize> =
    for<'g> fn(&mut Graph<'g, S, N>, &[Option<Tensor>], &dyn Attrs) -> Option<Result<Tensor>>;

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
    /// Its in-place form, if it has one: a model file's node runs it when nothing
    /// else reads the node's input 0 ([`crate::model::Model::forward`]).
    pub in_place: Option<InPlaceFn<S, N>>,
}

impl<S: Scalar, const N: usize> OpSpec<S, N> {
    /// The op called `name`, if there is one.
    pub fn find(name: &str) -> Option<&'static OpSpec<S, N>> {
        Self::ALL.iter().find(|s| s.name == name)
    }
}

/// What an op is called and takes, without its functions: the same for every scalar
/// type and tape size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OpInfo {
    /// [`OpSpec::name`].
    pub name: &'static str,
    /// [`OpSpec::inputs`].
    pub inputs: &'static [&'static str],
    /// [`OpSpec::params`].
    pub params: &'static [&'static str],
}

/// [`OpSpec::ALL`] without the functions, copied out at compile time: looking an op's
/// name or parameters up links no op code (a reference to `ALL` itself would link
/// every op, for the scalar type and tape size it is taken at).
pub const OP_INFO: [OpInfo; OpSpec::<f32, 1>::ALL.len()] = {
    let all = OpSpec::<f32, 1>::ALL;
    let empty = OpInfo {
        name: "",
        inputs: &[],
        params: &[],
    };
    let mut info = [empty; OpSpec::<f32, 1>::ALL.len()];
    let mut i = 0;
    while i < info.len() {
        info[i] = OpInfo {
            name: all[i].name,
            inputs: all[i].inputs,
            params: all[i].params,
        };
        i += 1;
    }
    info
};

impl OpInfo {
    /// The op called `name`, if there is one.
    pub fn find(name: &str) -> Option<&'static OpInfo> {
        OP_INFO.iter().find(|s| s.name == name)
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

#[cfg(test)]
mod tests {
    use super::{Attrs, OpSpec, Result};
    use crate::graph::Graph;

    /// Parameters with only flags set (`training`); every other kind is absent.
    struct Flags(&'static [(&'static str, bool)]);

    impl Attrs for Flags {
        fn int(&self, _: &str) -> Result<Option<i64>> {
            Ok(None)
        }
        fn ints(&self, _: &str, _: &mut [i64]) -> Result<Option<usize>> {
            Ok(None)
        }
        fn float(&self, _: &str) -> Result<Option<f64>> {
            Ok(None)
        }
        fn float_at(&self, _: &str, _: usize) -> Result<Option<f64>> {
            Ok(None)
        }
        fn flag(&self, name: &str) -> Result<Option<bool>> {
            Ok(self.0.iter().find(|f| f.0 == name).map(|f| f.1))
        }
        fn string(&self, _: &str) -> Result<Option<&str>> {
            Ok(None)
        }
    }

    #[test]
    fn in_place_forms_match_their_ops_and_decline_what_they_cannot_do() {
        let with: Vec<&str> = OpSpec::<f32, 64>::ALL
            .iter()
            .filter(|s| s.in_place.is_some())
            .map(|s| s.name)
            .collect();
        assert_eq!(with, ["relu", "relu6", "add", "batch_norm"]);
        let mut buf = vec![0.0f32; 2048];
        let mut g: Graph<'_, f32, 64> = Graph::new(&mut buf);
        let [w, b, m, v] = [0; 4].map(|_| g.buffer(&[2]).unwrap());
        let trained_w = g.param(&[2]).unwrap();
        for (t, d) in [
            (w, [1.5, -0.5]),
            (b, [0.25, 1.0]),
            (m, [0.1, -0.2]),
            (v, [2.0, 0.5]),
        ] {
            g.param_data_mut(t).unwrap().copy_from_slice(&d);
        }
        let vals: Vec<f32> = (0..8).map(|i| i as f32 * 1.9 - 6.0).collect();
        let eval = Flags(&[]);
        for name in with {
            let x = g.input(&[1, 2, 2, 2], &vals).unwrap();
            let spec = OpSpec::<f32, 64>::find(name).unwrap();
            // add's other operand is a tensor of the input's shape.
            let other = if name == "add" { x } else { w };
            let a = g.mul_scalar(x, 1.0).unwrap();
            let want =
                (spec.call)(&mut g, &[Some(a), Some(other), Some(b), Some(m), Some(v)], &eval).unwrap();
            let want = g.data(want).unwrap().to_vec();
            let a = g.mul_scalar(x, 1.0).unwrap();
            let in_place = spec.in_place.unwrap();
            let y = in_place(&mut g, &[Some(a), Some(other), Some(b), Some(m), Some(v)], &eval);
            let y = y.expect("applies").unwrap();
            assert_eq!(g.data(y).unwrap(), &want[..], "{name}");
            assert!(g.data(a).is_err(), "{name}: the input was overwritten");
            g.end_step();
        }
        // batch_norm's form declines batch statistics and a scale that trains, and
        // leaves the input as it was.
        let bn = OpSpec::<f32, 64>::find("batch_norm").unwrap().in_place.unwrap();
        let x = g.input(&[1, 2, 2, 2], &vals).unwrap();
        let a = g.mul_scalar(x, 1.0).unwrap();
        let train = Flags(&[("training", true)]);
        assert!(bn(&mut g, &[Some(a), Some(w), Some(b), Some(m), Some(v)], &train).is_none());
        assert!(bn(
            &mut g,
            &[Some(a), Some(trained_w), Some(b), Some(m), Some(v)],
            &eval
        )
        .is_none());
        assert_eq!(g.data(a).unwrap(), &vals[..]);
        // Without gradients nothing reads the input again: a trained scale is fine.
        g.set_grad_enabled(false);
        let want = (OpSpec::<f32, 64>::find("batch_norm").unwrap().call)(
            &mut g,
            &[Some(a), Some(trained_w), Some(b), Some(m), Some(v)],
            &eval,
        )
        .unwrap();
        let want = g.data(want).unwrap().to_vec();
        let y = bn(
            &mut g,
            &[Some(a), Some(trained_w), Some(b), Some(m), Some(v)],
            &eval,
        );
        let y = y.expect("applies").unwrap();
        assert_eq!(g.data(y).unwrap(), &want[..]);
        assert!(g.data(a).is_err(), "the input was overwritten");
    }
}
