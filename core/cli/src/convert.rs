//! `torchlet convert`: ONNX -> model file.

use crate::args::matches;
use crate::files;
use std::path::Path;
use torchlet::model::{encode, TensorKind};

pub fn run(model: &Path, out: &Path, fold_bn: bool, freeze: &[String], int8: bool) -> Result<(), String> {
    let bytes = files::read(model)?;
    let dir = model.parent().unwrap_or(Path::new("."));
    // External initializers (`model.onnx.data`): a first import notes the files the
    // model names; they are read relative to the model and the import runs again.
    let options = torchlet_onnx::Options { fold_bn };
    let asked = std::cell::RefCell::new(Vec::<String>::new());
    let note = |loc: &str| {
        asked.borrow_mut().push(loc.to_string());
        None
    };
    let first = torchlet_onnx::import_with(&bytes, &note, &options);
    let mut locations = asked.into_inner();
    locations.sort();
    locations.dedup();
    let mut spec = if locations.is_empty() {
        first
    } else {
        let external: Vec<(String, Vec<u8>)> = locations
            .into_iter()
            .map(|loc| files::read(&dir.join(&loc)).map(|d| (loc, d)))
            .collect::<Result<_, _>>()?;
        let lookup = |loc: &str| external.iter().find(|(l, _)| l == loc).map(|(_, d)| d.as_slice());
        torchlet_onnx::import_with(&bytes, &lookup, &options)
    }
    .map_err(|e| format!("{}: {e}", model.display()))?;
    let mut frozen = 0;
    for t in &mut spec.tensors {
        if let TensorKind::Param { trainable: true } = t.kind {
            if freeze.iter().any(|p| matches(p, &t.name)) {
                t.kind = TensorKind::Param { trainable: false };
                frozen += 1;
            }
        }
    }
    if !freeze.is_empty() && frozen == 0 {
        return Err(format!("--freeze {freeze:?} matches no trainable parameter"));
    }
    let quantized = match int8 {
        true => spec.quantize_frozen_conv_weights().len(),
        false => 0,
    };
    if int8 && quantized == 0 {
        return Err(
            "--int8-frozen: no frozen convolution weight to quantize (freeze some with --freeze)".into(),
        );
    }
    let file = encode(&spec).map_err(|e| format!("{}: {e}", model.display()))?;
    files::write(out, &file)?;
    let params: usize = spec
        .tensors
        .iter()
        .filter(|t| matches!(t.kind, TensorKind::Param { .. }))
        .map(|t| t.data.len())
        .sum();
    println!(
        "{}: {} nodes, {} tensors ({} parameter values, {} frozen tensors, {} int8), {} bytes",
        out.display(),
        spec.nodes.len(),
        spec.tensors.len(),
        params,
        frozen,
        quantized,
        file.len()
    );
    Ok(())
}
