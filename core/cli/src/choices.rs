//! `torchlet plan --choices`: the exact bytes of one training step for each choice of
//! trained parameters (TinyTL / MCUNetV3-style fine-tuning), frozen tensors read in
//! place from the model file (as from flash on a device).
//!
//! - `all`: every parameter trains; BatchNorm uses batch statistics (training mode),
//!   its running statistics in the arena.
//! - every other choice: BatchNorm's statistics frozen (eval mode, affine parameters
//!   may train), frozen tensors and statistics read in place.
//!
//! Both are [`Trained::build`], the builder the firmware's `finetune_w2` uses too.

use crate::limits::Limits;
use crate::plan::{loss, note_if_over, sized, TAPE};
use torchlet::model::{Model, ModelFile, Trained};
use torchlet::optim::Sgd;
use torchlet::plan::{Plan, Planner, Thousands};
use torchlet::{Error, Graph};

/// How a fine-tuning step runs the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepMode {
    /// A device's step ([`Trained::build`]): eval mode but for `all`, frozen tensors in place.
    Device,
    /// PyTorch's `model.train()` ([`Trained::build_training`]): batch statistics, running
    /// statistics updated, frozen tensors copied (a fleet round).
    Training,
}

/// The plan of one training step of `file` at `dims` with `trained` parameters (SGD
/// with `momentum`; 16-bit norm saves with `compact`, see
/// [`Graph::set_compact_saves`]), run as `mode` says. `file` must live for the program
/// (frozen tensors stay in it).
pub fn plan_choice(
    file: ModelFile<'static>,
    dims: &[usize],
    trained: Trained<'static>,
    momentum: f32,
    compact: bool,
    mode: StepMode,
) -> Result<Plan, String> {
    let training = trained == Trained::All || mode == StepMode::Training;
    let planner = Planner::new(
        move |g: &mut Graph<'static, f32, TAPE>| {
            g.set_compact_saves(compact);
            let m = match mode {
                StepMode::Device => trained.build(g, file),
                StepMode::Training => trained.build_training(g, file),
            };
            let m = m.map_err(Error::from)?;
            if momentum != 0.0 {
                Sgd::new(g, 0.01, momentum, 0.0)?;
            }
            Ok(m)
        },
        |g: &mut Graph<'static, f32, TAPE>, m: &Model<'static>, h: usize, w: usize| {
            g.set_training(training && g.grad_enabled());
            let x = g.input(&sized(dims, h, w), &[])?;
            let y = m.forward(g, &[x]).map_err(Error::from)?;
            // A meta graph's loss takes no targets (their count could be huge).
            loss(g, y, &[])
        },
    );
    let (h, w) = crate::plan::hw(dims);
    planner.plan(h, w).map_err(|e| format!("plan at {dims:?}: {e}"))
}

/// Number of parameter values that train under `trained`.
pub fn trained_values(file: &ModelFile<'_>, trained: Trained<'_>) -> usize {
    file.tensors()
        .filter(|t| trained.trains(file, t))
        .map(|t| t.shape.numel())
        .sum()
}

/// Prints one line per choice: the standard ones, then `patterns` as one more choice
/// when given.
pub fn run(
    name: &str,
    file: ModelFile<'static>,
    dims: &[usize],
    patterns: &'static [&'static str],
    momentum: f32,
    limits: Limits,
) -> Result<(), String> {
    let mut choices = vec![
        ("all parameters", Trained::All, false),
        ("biases + norm scales + head", Trained::BiasesAndNorms, false),
        ("  the same, 16-bit norm saves", Trained::BiasesAndNorms, true),
        ("biases + head", Trained::Biases, false),
        ("head only", Trained::Head, false),
    ];
    if !patterns.is_empty() {
        choices.insert(1, ("--train-only patterns", Trained::Matching(patterns), false));
    }
    let size: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    println!(
        "{name}: training step at {} (cross-entropy, SGD momentum {momentum}), bytes:",
        size.join("x")
    );
    println!(
        "  {:<30} {:>14} {:>12} {:>14} {:>12}",
        "trained", "values", "step", "parameters", "forward"
    );
    for (what, t, compact) in choices {
        let p = plan_choice(file, dims, t, momentum, compact, StepMode::Device)?;
        println!(
            "  {:<30} {:>14} {:>12} {:>14} {:>12}",
            what,
            Thousands(trained_values(&file, t)),
            Thousands(p.step_bytes),
            Thousands(p.persistent_bytes),
            Thousands(p.forward_bytes)
        );
        note_if_over(limits, &p, dims, true);
    }
    println!(
        "  (frozen tensors read in place from the file; BatchNorm statistics frozen except for \"all\";\n   16-bit norm saves: each trained BatchNorm scale's gradient reads its normalised input kept\n   as bfloat16, see Graph::set_compact_saves)"
    );
    Ok(())
}
