//! Int8 tensors of a model file in a graph: where they go, and the convolutions that
//! read them in place ([`Graph::conv2d_int8`]).
//!
//! An int8 tensor whose every reader is a `conv2d` (as its weight) is read in place by
//! [`Model::in_place`](super::Model::in_place) as one frozen tensor of its scales and
//! packed weights; any other placement holds its dequantized `f32` values (a copy).

use super::file::{ModelFile, NodeRecord, TensorRecord};
use super::run::Placement;
use super::ValueRef;
use crate::error::Result;
use crate::graph::{Graph, Tensor};
use crate::ops::conv::Conv2dParams;
use crate::ops::registry::Attrs;
use crate::scalar::Scalar;

/// The op whose weight may be int8 in place.
const CONV: &str = "conv2d";

/// The placement [`Model::in_place`](super::Model::in_place) gives tensor `t` when
/// `place` chose `p`: a frozen int8 tensor that only convolutions read stays in place.
pub(super) fn in_place_placement(file: &ModelFile<'_>, t: &TensorRecord<'_>, p: Placement) -> Placement {
    match p {
        Placement::Frozen if t.int8 && conv_weight_only(file, t) => Placement::InPlace,
        Placement::InPlace if t.int8 && !conv_weight_only(file, t) => Placement::Frozen,
        p => p,
    }
}

/// Whether `t` is rank 4 and every node that reads it is a `conv2d` reading it as its
/// weight (input 1) only.
fn conv_weight_only(file: &ModelFile<'_>, t: &TensorRecord<'_>) -> bool {
    let me = Some(ValueRef::Tensor(t.index));
    t.shape.rank() == 4
        && file.nodes().all(|n| {
            n.inputs()
                .enumerate()
                .all(|(k, r)| r != me || (n.op == CONV && k == 1))
        })
}

/// Runs node `n` through [`Graph::conv2d_int8`] when it is a `conv2d` whose weight is
/// an int8 tensor held in place (its graph tensor is the packed words, rank 1);
/// `None` otherwise (run it by name).
pub(super) fn run_conv<S: Scalar, const N: usize>(
    g: &mut Graph<'_, S, N>,
    file: &ModelFile<'_>,
    n: &NodeRecord<'_>,
    ins: &[Option<Tensor>],
    attrs: &dyn Attrs,
) -> Option<Result<Tensor>> {
    if n.op != CONV {
        return None;
    }
    let (x, w) = (ins.first().copied().flatten()?, ins.get(1).copied().flatten()?);
    // Checked first: an `f32` weight is rank 4, and then the file is not walked.
    if g.shape(w).ok()?.rank() != 1 {
        return None;
    }
    let Some(Some(ValueRef::Tensor(k))) = n.inputs().nth(1) else {
        return None;
    };
    let t = file.tensors().nth(k).filter(|t| t.int8)?;
    let dims: [usize; 4] = t.shape.dims().try_into().ok()?;
    let b = ins.get(2).copied().flatten();
    Some(Conv2dParams::from_attrs(attrs).and_then(|p| g.conv2d_int8(x, w, dims, b, p)))
}
