//! `torchlet export`: a model file's parameters and buffers as safetensors, under their
//! PyTorch `state_dict` names, so that `model.load_state_dict(load_file(...))` takes them.

use crate::files::{self, Values};
use crate::limits::Limits;
use std::collections::HashSet;
use std::path::Path;

pub fn run(model: &Path, out: &Path, limits: Limits) -> Result<(), String> {
    let bytes = files::read(model)?;
    let file = files::model(model, &bytes)?;
    // Each value as f32, as bytes and in the written file (int8 tensors too): 12
    // bytes a value, sized before anything is allocated.
    let values: usize = file.tensors().map(|t| t.shape.numel()).sum();
    limits.memory(&format!("exporting {values} values"), values.saturating_mul(12))?;
    let mut tensors = Vec::new();
    for t in file.tensors() {
        let data: Vec<f32> = t.values().collect();
        let values = if t.name.ends_with("num_batches_tracked") {
            Values::I64(data.iter().map(|v| *v as i64).collect())
        } else {
            Values::F32(data)
        };
        tensors.push((t.name.to_string(), t.shape.dims().to_vec(), values));
    }
    // PyTorch's BatchNorm has a `num_batches_tracked` buffer that ONNX does not carry;
    // `load_state_dict` (strict) wants it: give every BatchNorm without one a 0.
    let names: HashSet<String> = tensors.iter().map(|t| t.0.clone()).collect();
    let mut added = Vec::new();
    for (n, _, _) in &tensors {
        if let Some(prefix) = n.strip_suffix(".running_mean") {
            let tracked = format!("{prefix}.num_batches_tracked");
            if !names.contains(&tracked) {
                added.push((tracked, vec![], Values::I64(vec![0])));
            }
        }
    }
    tensors.extend(added);
    files::write_tensors(out, &tensors)?;
    println!("{}: {} tensors", out.display(), tensors.len());
    Ok(())
}
