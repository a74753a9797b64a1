//! `torchlet train`: cross-entropy (mean) and SGD on the samples of a safetensors file,
//! the model in training mode (BatchNorm batch statistics, dropout); the trained model
//! is written as a new model file.
//!
//! With a fine-tuning choice (`--choice`, `--train-only`) the step runs as a device's
//! does, through [`Trained::build`]: BatchNorm statistics frozen, the tensors that do
//! not train read in place from the file, so they come out unchanged.

use crate::choices::{plan_choice, trained_values, StepMode};
use crate::files;
use crate::limits::Limits;
use crate::plan::{loss, plan_at, target_count, within, TAPE};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use torchlet::init::Rng;
use torchlet::model::{ModelFile, Trained};
use torchlet::ops::nll::LossParams;
use torchlet::optim::Sgd;
use torchlet::plan::Thousands;
use torchlet::Graph;

/// The command's arguments.
pub struct Settings {
    pub model: PathBuf,
    pub data: PathBuf,
    pub lr: f32,
    pub steps: Option<usize>,
    pub batch: usize,
    pub momentum: f32,
    pub seed: u64,
    pub output: PathBuf,
    pub choice: Choice,
    pub train_only: Vec<String>,
    pub compact_saves: bool,
}

/// `--choice`: the fine-tuning choices of [`Trained`] (`--train-only` gives the last).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Choice {
    /// Every trainable parameter, in training mode.
    All,
    /// The classifier only.
    Head,
    /// Biases and the classifier.
    Biases,
    /// Biases, normalisation scales and the classifier.
    BiasesNorms,
}

/// The [`Trained`] of the settings; patterns are leaked (they live for the program).
fn trained(s: &Settings) -> Trained<'static> {
    if !s.train_only.is_empty() {
        let patterns: Vec<&'static str> = s.train_only.iter().map(|p| &*p.clone().leak()).collect();
        return Trained::Matching(patterns.leak());
    }
    match s.choice {
        Choice::All => Trained::All,
        Choice::Head => Trained::Head,
        Choice::Biases => Trained::Biases,
        Choice::BiasesNorms => Trained::BiasesAndNorms,
    }
}

/// Refuses a momentum outside [0, 1) (as PyTorch refuses a negative one; 1 or more
/// makes the velocity grow without bound).
pub fn check_momentum(momentum: f32) -> Result<(), String> {
    if (0.0..1.0).contains(&momentum) {
        return Ok(());
    }
    Err(format!("--momentum {momentum}: expected a value in [0, 1)"))
}

/// Refuses a learning rate that is negative or not finite (PyTorch: "Invalid learning
/// rate").
fn check_lr(lr: f32) -> Result<(), String> {
    if lr.is_finite() && lr >= 0.0 {
        return Ok(());
    }
    Err(format!(
        "--lr {lr}: expected a finite learning rate of at least 0"
    ))
}

/// Streaming means of the first and last `k` losses of `steps` (a loss list of
/// `--steps` entries could be gigabytes); skipped steps are not counted.
struct Means {
    steps: usize,
    k: usize,
    first: (f32, usize),
    last: (f32, usize),
}

impl Means {
    fn add(&mut self, step: usize, v: f32) {
        if step < self.k {
            self.first = (self.first.0 + v, self.first.1 + 1);
        }
        if step >= self.steps.saturating_sub(self.k) {
            self.last = (self.last.0 + v, self.last.1 + 1);
        }
    }
    fn mean((sum, n): (f32, usize)) -> f32 {
        sum / n.max(1) as f32
    }
}

pub fn run(s: Settings, limits: Limits) -> Result<(), String> {
    check_lr(s.lr)?;
    check_momentum(s.momentum)?;
    // Frozen tensors are read in place from these bytes for the whole program.
    let bytes: &'static [u8] = files::read(&s.model)?.leak();
    let file: ModelFile<'static> = files::model(&s.model, bytes)?;
    let trained = trained(&s);
    let (values, total) = (
        trained_values(&file, trained),
        trained_values(&file, Trained::All),
    );
    if total == 0 {
        return Err(format!(
            "{}: the model has no trainable parameters: nothing to train (run, info and plan work)",
            s.model.display()
        ));
    }
    if values == 0 {
        return Err(format!(
            "{}: no parameter trains with {}",
            s.model.display(),
            match trained {
                Trained::Matching(p) => format!("--train-only {p:?}"),
                _ => format!("--choice {:?}", s.choice),
            }
        ));
    }
    let (tensors, labels) = files::read_tensors_and_labels(&s.data, Some("y"))?;
    let missing = |name: &str| {
        format!(
            "{}: no tensor {name:?} (x: f32 [N, ...], y: int64 [N])",
            s.data.display()
        )
    };
    let x = tensors
        .iter()
        .find(|t| t.name == "x")
        .ok_or_else(|| missing("x"))?;
    let y = labels.ok_or_else(|| missing("y"))?;
    let n = x.shape.first().copied().unwrap_or(0);
    if n == 0 || y.shape.first() != Some(&n) {
        return Err(format!(
            "{}: x has shape {:?} and y {:?}: both need the same N >= 1",
            s.data.display(),
            x.shape,
            y.shape
        ));
    }
    if s.batch == 0 || !(2..=4).contains(&x.shape.len()) {
        return Err("--batch must be at least 1, and x [N, features], NCL or NCHW".into());
    }
    // N samples of at least one value each: N is bounded by the file's size (the
    // sample order below has N entries).
    let (per_x, per_y) = (x.data.len() / n, y.values.len() / n);
    if per_x == 0 || per_y == 0 {
        return Err(format!(
            "{}: x {:?} and y {:?} hold no values per sample",
            s.data.display(),
            x.shape,
            y.shape
        ));
    }
    let labels = y.values;
    let ignore = LossParams::default().ignore_index;
    let batch = s.batch.min(n);
    let mut dims = x.shape.clone();
    dims[0] = batch;
    let plan = match trained {
        Trained::All => plan_at(file, &dims, s.momentum)?,
        t => plan_choice(file, &dims, t, s.momentum, s.compact_saves, StepMode::Device)?,
    };
    within(limits, &plan, &dims, true)?;
    let mut arena = vec![0.0f32; plan.step_bytes.div_ceil(4) + 16];
    let mut g: Graph<'_, f32, TAPE> = Graph::new(&mut arena);
    g.set_compact_saves(s.compact_saves);
    let m = trained.build(&mut g, file).map_err(|e| e.to_string())?;
    let mut sgd = Sgd::new(&mut g, s.lr, s.momentum, 0.0).map_err(|e| e.to_string())?;
    let steps = s.steps.unwrap_or(n.div_ceil(batch));
    let bar = ProgressBar::new(steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps, loss {msg} ({eta} left)")
            .map_err(|e| e.to_string())?,
    );
    let mut rng = Rng::new(s.seed);
    let mut order: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut order);
    let k = (steps / 10).max(1);
    let mut means = Means {
        steps,
        k,
        first: (0.0, 0),
        last: (0.0, 0),
    };
    let (mut at, mut skipped) = (0usize, 0usize);
    // One batch's samples and targets, refilled every step.
    let (mut xb, mut yb) = (
        Vec::with_capacity(batch * per_x),
        Vec::with_capacity(batch * per_y),
    );
    for step in 0..steps {
        if at >= n {
            rng.shuffle(&mut order);
            at = 0;
        }
        let idx = &order[at..(at + batch).min(n)];
        at += idx.len();
        xb.clear();
        yb.clear();
        for &i in idx {
            xb.extend_from_slice(&x.data[i * per_x..(i + 1) * per_x]);
            yb.extend_from_slice(&labels[i * per_y..(i + 1) * per_y]);
        }
        dims[0] = idx.len();
        if yb.iter().all(|&t| t == ignore) {
            // A mean over no targets is NaN: the step would write NaN into the model.
            bar.suspend(|| {
                eprintln!(
                    "step {}: every label of the batch is ignore_index ({ignore}): step skipped",
                    step + 1
                )
            });
            skipped += 1;
            bar.inc(1);
            continue;
        }
        let r = (|| {
            g.zero_grad();
            let xt = g.input(&dims, &xb)?;
            let logits = m.forward(&mut g, &[xt])?;
            if target_count(&g, logits)? != yb.len() {
                return Err(torchlet::Error::ShapeMismatch {
                    op: "train",
                    what: "y holds {found} targets per batch, the model's output needs {expected}",
                    expected: target_count(&g, logits)?,
                    found: yb.len(),
                });
            }
            let l = loss(&mut g, logits, &yb)?;
            let v = g.data(l)?[0];
            g.backward(l)?;
            sgd.step(&mut g)?;
            Ok(v)
        })();
        g.end_step();
        let v = r.map_err(|e| format!("step {}: {e}", step + 1))?;
        means.add(step, v);
        bar.set_message(format!("{v:.4}"));
        bar.inc(1);
    }
    bar.finish_and_clear();
    if skipped == steps {
        return Err(format!(
            "{}: every label is ignore_index ({ignore}): nothing trained, nothing written",
            s.data.display()
        ));
    }
    // BatchNorm counted its batches (training mode: every parameter trained).
    if g.is_training() {
        m.count_batches(&mut g, (steps - skipped) as u64)
            .map_err(|e| e.to_string())?;
    }
    let out = m.to_file_bytes(&g).map_err(|e| e.to_string())?;
    files::write(&s.output, &out)?;
    let skipped = match skipped {
        0 => String::new(),
        n => format!(" ({n} skipped: every label ignored)"),
    };
    println!(
        "{} steps{skipped} of batch {batch}, {} of {} parameter values trained: mean loss {:.4} over the first {k} steps, {:.4} over the last {k}; wrote {}",
        steps,
        Thousands(values),
        Thousands(total),
        Means::mean(means.first),
        Means::mean(means.last),
        s.output.display()
    );
    Ok(())
}
