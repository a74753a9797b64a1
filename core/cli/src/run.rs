//! `torchlet run`: the model's forward in eval mode on every tensor of a safetensors
//! file; the outputs are written under the same names.

use crate::files::{self, Values};
use crate::limits::Limits;
use crate::plan::{inference_plan, within, TAPE};
use std::path::Path;
use torchlet::model::Model;
use torchlet::Graph;

pub fn run(model: &Path, input: &Path, output: &Path, limits: Limits) -> Result<(), String> {
    let bytes = files::read(model)?;
    let file = files::model(model, &bytes)?;
    let mut results = Vec::new();
    // The outputs kept until they are written, within the memory budget too.
    let mut kept = 0usize;
    for t in files::read_tensors(input)? {
        let at = |e: String| format!("{}: tensor {:?} {:?}: {e}", input.display(), t.name, t.shape);
        if !(2..=4).contains(&t.shape.len()) {
            return Err(at("expected an [N, features], NCL or NCHW tensor".into()));
        }
        let plan = inference_plan(file, &t.shape).map_err(at)?;
        within(limits, &plan, &t.shape, false).map_err(at)?;
        let mut arena = vec![0.0f32; plan.inference_bytes.div_ceil(4) + 16];
        let mut g: Graph<'_, f32, TAPE> = Graph::new(&mut arena);
        let m = Model::new(&mut g, file).map_err(|e| at(e.to_string()))?;
        g.set_training(false);
        g.set_grad_enabled(false);
        let x = g.input(&t.shape, &t.data).map_err(|e| at(e.to_string()))?;
        let y = m.forward(&mut g, &[x]).map_err(|e| at(e.to_string()))?;
        let shape = g.shape(y).map_err(|e| at(e.to_string()))?;
        kept = kept.saturating_add(shape.numel().saturating_mul(4));
        limits.memory("the outputs", kept).map_err(at)?;
        let data = g.data(y).map_err(|e| at(e.to_string()))?.to_vec();
        let shape = shape.dims().to_vec();
        println!("{} {:?} -> {:?}", t.name, t.shape, shape);
        results.push((t.name.clone(), shape, Values::F32(data)));
    }
    files::write_tensors(output, &results)
}
