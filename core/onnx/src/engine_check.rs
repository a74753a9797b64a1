//! The engine's own check of an imported graph: the graph is encoded as a model file
//! and run once on a meta graph ([`Model::check`]: the ops' own parameter and shape
//! validation, no data), so a node the engine refuses (groups that do not divide the
//! channels, a bias of the wrong length, an empty kernel, pool padding past half the
//! kernel) is refused at import, naming the ONNX node, rather than at every later run.
//! No third copy of the ops' rules: what the engine accepts is what it says.
//!
//! A graph is refused only when the engine refuses it at the largest size the importer
//! searches too (or its inputs are fixed), so a valid model whose smallest size the
//! importer's shape rules got wrong still converts as before.

//! Without the `engine-check` feature (the wasm importer, which runs beside the
//! engine's own module) the check is left to whoever loads the model file: the engine
//! refuses the same nodes there, naming them by their ONNX names.
#![cfg_attr(not(feature = "engine-check"), allow(dead_code, unused_imports))]

use crate::Error;
use torchlet::model::spec::{DimSpec, GraphSpec, InputSpec};
use torchlet::model::{encode, Model, ModelFile, Site};

/// Tape records for the check (the wasm package's model tape): a graph that needs more
/// is not checked here (the tape is the check's limit, not the model's fault).
const TAPE: usize = 1024;

/// Where a node of the imported graph came from: the ONNX node's index, op type and name.
#[derive(Clone, Debug)]
pub(crate) struct Origin {
    pub index: usize,
    pub op_type: String,
    pub name: String,
}

/// Checks `spec` at its declared smallest sizes and, when the engine refuses it there,
/// at `large` for every free non-batch dim: an error only when both are refused.
pub(crate) fn check(spec: &mut GraphSpec, origins: &[Origin], large: usize) -> Result<(), Error> {
    let Err(small) = at(spec, origins, None) else {
        return Ok(());
    };
    let free = spec
        .inputs
        .iter()
        .any(|i| i.dims.iter().skip(1).any(|d| matches!(d, DimSpec::Free { .. })));
    match free {
        true => at(spec, origins, Some(large)).map_err(|_| small),
        false => Err(small),
    }
}

/// Checks `spec` with every free non-batch dim at `size` (when given), the batch at 1:
/// the engine's error, naming the ONNX node it came from, if it refuses.
pub(crate) fn at(spec: &mut GraphSpec, origins: &[Origin], size: Option<usize>) -> Result<(), Error> {
    let saved = size.map(|s| {
        let resized = sized(&spec.inputs, s);
        std::mem::replace(&mut spec.inputs, resized)
    });
    let r = run(spec, origins);
    if let Some(inputs) = saved {
        spec.inputs = inputs;
    }
    r
}

fn sized(inputs: &[InputSpec], size: usize) -> Vec<InputSpec> {
    let mut inputs = inputs.to_vec();
    for i in &mut inputs {
        for (k, d) in i.dims.iter_mut().enumerate() {
            if let DimSpec::Free { min } = d {
                *min = if k == 0 { 1 } else { size };
            }
        }
    }
    inputs
}

fn run(spec: &GraphSpec, origins: &[Origin]) -> Result<(), Error> {
    // What cannot be encoded is refused by `encode` later, in its own words.
    let Ok(bytes) = encode(spec) else {
        return Ok(());
    };
    let Ok(file) = ModelFile::parse(&bytes) else {
        return Ok(());
    };
    let Err(e) = Model::check::<f32, TAPE>(file) else {
        return Ok(());
    };
    if matches!(e.error, torchlet::Error::TapeFull { .. }) {
        return Ok(());
    }
    Err(match e.site {
        // The engine's words start with its op's name (`conv2d: ...`).
        Site::Node { index, .. } => match origins.get(index) {
            Some(o) => Error::Node {
                index: o.index,
                op_type: o.op_type.clone(),
                name: o.name.clone(),
                why: e.error.to_string(),
            },
            None => Error::Model(e.to_string()),
        },
        _ => Error::Model(e.to_string()),
    })
}
