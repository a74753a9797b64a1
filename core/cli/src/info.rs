//! `torchlet info`: what a model file holds, and with an input size each node's output
//! shape and the bytes of a step (a meta run: no data, like PyTorch's meta device with
//! forward hooks).

use crate::limits::Limits;
use crate::plan::{inference_only, inference_plan, note_if_over, sized, TAPE};
use crate::{args, files};
use std::path::Path;
use torchlet::model::{DimSpec, Model, TensorKind};
use torchlet::plan::Thousands;
use torchlet::Graph;

pub fn run(model: &Path, input: Option<&str>, limits: Limits) -> Result<(), String> {
    let bytes = files::read(model)?;
    let file = files::model(model, &bytes)?;
    println!(
        "{}: {} nodes, {} tensors, {} bytes",
        model.display(),
        file.num_nodes(),
        file.num_tensors(),
        bytes.len()
    );
    for i in file.inputs() {
        let d: Vec<String> = i
            .dims()
            .iter()
            .map(|d| match d {
                DimSpec::Fixed(n) => n.to_string(),
                DimSpec::Free { min } => format!("*(>={min})"),
            })
            .collect();
        println!("input {:?}: [{}]", i.name, d.join(", "));
    }
    let (mut train, mut frozen, mut buffers) = (0usize, 0usize, 0usize);
    for t in file.tensors() {
        let n = t.shape.numel();
        match t.kind {
            TensorKind::Param { trainable: true } => train += n,
            TensorKind::Param { trainable: false } => frozen += n,
            TensorKind::Buffer => buffers += n,
        }
    }
    println!(
        "parameters: {} trainable, {} frozen; buffers: {} values",
        Thousands(train),
        Thousands(frozen),
        Thousands(buffers)
    );
    let Some(input) = input else {
        for n in file.nodes() {
            println!("{:>4}  {:<20} {}", n.index, n.op, n.name);
        }
        return Ok(());
    };
    let dims = args::dims(input)?;
    let p = inference_plan(file, &dims)?;
    let (h, w) = crate::plan::hw(&dims);
    let mut g: Graph<'static, f32, TAPE> = Graph::meta(usize::MAX);
    let m = Model::new(&mut g, file).map_err(|e| e.to_string())?;
    g.set_training(false);
    g.set_grad_enabled(false);
    let x = g.input(&sized(&dims, h, w), &[]).map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    let mut out = [x];
    m.forward_with(&mut g, &[x], &mut out, |k, g, y| {
        rows.push((k, g.shape(y).map(|s| s.dims().to_vec()).unwrap_or_default()));
    })
    .map_err(|e| e.to_string())?;
    println!("{:-<72}", "");
    println!("node  {:<20} {:<26} name", "op", "output shape");
    println!("{:-<72}", "");
    for ((k, shape), n) in rows.iter().zip(file.nodes()) {
        println!("{:>4}  {:<20} {:<26} {}", k, n.op, format!("{shape:?}"), n.name);
    }
    println!("{:-<72}", "");
    println!("inference (eval mode): {} bytes", Thousands(p.inference_bytes));
    if inference_only(&file) {
        println!("training step: none (no trainable parameters)");
        note_if_over(limits, &p, &dims, false);
        return Ok(());
    }
    println!(
        "training step (SGD): {} bytes, of which parameters and gradients {}",
        Thousands(p.step_bytes),
        Thousands(p.persistent_bytes)
    );
    note_if_over(limits, &p, &dims, true);
    Ok(())
}
