//! `torchlet convert`: ONNX -> model file.

use crate::args::matches;
use crate::files;
use std::path::Path;
use torchlet::model::{encode, TensorKind};

pub fn run(model: &Path, out: &Path, fold_bn: bool, freeze: &[String], int8: bool) -> Result<(), String> {
    let bytes = files::read(model)?;
    // External initializers (`model.onnx.data`, or several files) are read from the
    // model's folder only, each tensor's own bytes (`torchlet_onnx::external`).
    let folder = model.parent().unwrap_or(Path::new(""));
    let options = torchlet_onnx::Options { fold_bn };
    let mut spec = torchlet_onnx::import_from_folder(&bytes, folder, &options)
        .map_err(|e| format!("{}: {e}", model.display()))?;
    if let Some(note) = torchlet_onnx::notes::fused_batch_norm(&bytes) {
        eprintln!("{}: {note}", model.display());
    }
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
