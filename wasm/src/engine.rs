//! The model behind the JS class, in plain Rust (testable on the host): a network (core's
//! `nn::Sequential`), its SGD optimizer and an owned arena, planned by core's
//! `plan::Planner`. Every call validates through the engine and ends its step whatever
//! happened, so an error leaves the model usable.

use crate::limits::{self, Cost, Costs};
use crate::owned::{OwnedGraph, TAPE};
use crate::spec::{layer_name, NetSpec, SpecError, MAX_LAYERS};
use core::cell::RefCell;
use torchlet::init::Rng;
use torchlet::nn::Sequential;
use torchlet::optim::Sgd;
use torchlet::plan::{Plan as CorePlan, Planner};
use torchlet::{io, Error, Graph};

/// Arena size when the caller passes 0: the plan of a batch of this many 28x28 images.
pub const AUTO_BATCH: usize = 32;

/// One layer's output in a plan.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedLayer {
    /// `"conv2d"`, `"relu"`, ... (a loaded model's node: its op's registry name)
    pub name: String,
    /// Output shape, NCHW or `[N, F]`.
    pub shape: Vec<usize>,
}

/// What a step at one size needs, from running the same code on a meta graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Arena bytes for a training step (forward, backward, SGD), parameters included.
    pub train_bytes: usize,
    /// Arena bytes for a prediction (forward without gradients), parameters included.
    pub infer_bytes: usize,
    /// Bytes of parameters, gradients and optimizer state (the long-lived end).
    pub persistent_bytes: usize,
    /// Output of every layer, in order.
    pub layers: Vec<PlannedLayer>,
    /// Multiply-accumulates of a training step (0 when nothing trains).
    pub train_macs: u64,
    /// Multiply-accumulates of a prediction.
    pub infer_macs: u64,
    /// Whether the model has something to train (else only the prediction was
    /// planned: `train_bytes` and `train_macs` are 0).
    pub trains: bool,
}

impl Plan {
    /// The arena this plan asks for: a training step's, or a prediction's when the
    /// model has nothing to train.
    pub fn arena_bytes(&self) -> usize {
        if self.trains {
            self.train_bytes
        } else {
            self.infer_bytes
        }
    }

    /// What a training step (`training`) or a prediction costs, for
    /// [`limits::check_step`].
    pub fn cost(&self, training: bool) -> Cost {
        match training {
            true => Cost {
                bytes: self.train_bytes,
                macs: self.train_macs,
                trains: self.trains,
            },
            false => Cost {
                bytes: self.infer_bytes,
                macs: self.infer_macs,
                trains: self.trains,
            },
        }
    }
}

/// The engine's layers for `spec`, parameters created in `g` from `Rng::new(seed)`.
fn build<const N: usize>(
    spec: &NetSpec,
    g: &mut Graph<'_, f32, N>,
    seed: u64,
) -> Result<Sequential<MAX_LAYERS>, SpecError> {
    let mut seq = Sequential::new();
    for l in spec.build(g, &mut Rng::new(seed))? {
        seq.push(l)?;
    }
    Ok(seq)
}

/// Which passes a plan runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Passes {
    /// The training step and the prediction; a model with nothing to train gets the
    /// prediction alone ([`Plan::trains`] false, the training fields 0).
    Both,
    /// The prediction alone (what `predict` needs: a size that cannot train, such as
    /// batch norm on one value per channel, may still predict).
    Inference,
}

/// The plan of `planner`'s passes as `passes` asks: the training step and the
/// prediction, or the prediction alone, the latter also when the planner says there
/// is nothing to train (and `refused`, a failure the closures noted, is not set).
pub(crate) fn run_planner(
    passes: Passes,
    refused: impl Fn() -> bool,
    full: impl FnOnce() -> Result<CorePlan, Error>,
    inference: impl FnOnce() -> Result<CorePlan, Error>,
) -> Result<(CorePlan, bool), Error> {
    if passes == Passes::Inference {
        return Ok((inference()?, false));
    }
    match full() {
        Err(Error::NoGradient { .. }) if !refused() => Ok((inference()?, false)),
        r => Ok((r?, true)),
    }
}

impl Plan {
    /// Our plan from the planner's (`trains`: whether its training fields count).
    pub(crate) fn from_core(p: CorePlan, trains: bool, layers: Vec<PlannedLayer>) -> Plan {
        Plan {
            train_bytes: if trains { p.step_bytes } else { 0 },
            infer_bytes: p.inference_bytes,
            persistent_bytes: p.persistent_bytes,
            layers,
            train_macs: if trains { p.macs } else { 0 },
            infer_macs: p.inference_macs,
            trains,
        }
    }
}

/// The meta plan of `spec` for a `[batch, C, h, w]` input with SGD of this momentum:
/// core's [`Planner`] runs the engine's own setup (parameters, SGD state) and step on a
/// meta graph, so the plan is what [`Engine::train_step`] and [`Engine::predict`]
/// use. The SGD update itself allocates nothing, so the training step's bytes are
/// those of forward, loss and backward.
pub fn plan(spec: &NetSpec, momentum: f32, batch: usize, h: usize, w: usize) -> Result<Plan, SpecError> {
    plan_passes(spec, momentum, (batch, h, w), Passes::Both)
}

/// [`plan`] of the passes `passes` asks for.
pub fn plan_passes(
    spec: &NetSpec,
    momentum: f32,
    (batch, h, w): (usize, usize, usize),
    passes: Passes,
) -> Result<Plan, SpecError> {
    let dims = spec.input_dims(batch, h, w)?;
    // A spec refused for its structure keeps its own error (the planner's closures
    // return the engine's `Error`).
    let refused = RefCell::new(None);
    let shapes = RefCell::new(Vec::new());
    let planner = Planner::<f32, TAPE, _, _>::new(
        |g: &mut Graph<'static, f32, TAPE>| {
            let model = build(spec, g, 0).map_err(|e| match e {
                SpecError::Engine(e) => e,
                other => {
                    *refused.borrow_mut() = Some(other);
                    Error::InvalidParam {
                        op: "plan",
                        what: "layer spec refused",
                        value: 0,
                    }
                }
            })?;
            Sgd::new(g, 0.01, momentum, 0.0)?;
            Ok(model)
        },
        |g: &mut Graph<'static, f32, TAPE>, model: &Sequential<MAX_LAYERS>, _h: usize, _w: usize| {
            let x = g.input(&dims, &[])?;
            // The planner's inference pass is a prediction: eval mode, the forward alone.
            let training = g.grad_enabled();
            g.set_training(training);
            // Each pass records the layers' shapes (the same in both).
            shapes.borrow_mut().clear();
            let logits = model.forward_with(g, x, |g, l, y| {
                shapes.borrow_mut().push(PlannedLayer {
                    name: layer_name(l).to_string(),
                    shape: g.shape(y)?.dims().to_vec(),
                });
                Ok(())
            })?;
            match training {
                true => g.cross_entropy(logits, &[]),
                false => Ok(logits),
            }
        },
    );
    let r = run_planner(
        passes,
        || refused.borrow().is_some(),
        || planner.plan(h, w),
        || planner.plan_inference(h, w),
    );
    if let Some(e) = refused.take() {
        return Err(e);
    }
    let (p, trains) = r?;
    Ok(Plan::from_core(p, trains, shapes.into_inner()))
}

/// Result of one training step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepStats {
    /// Mean cross-entropy of the batch before the update.
    pub loss: f32,
    /// Share of the batch whose largest logit was the label, before the update.
    pub accuracy: f32,
}

/// A network with its optimizer and its own arena.
pub struct Engine {
    g: OwnedGraph,
    spec: NetSpec,
    layers: Sequential<MAX_LAYERS>,
    sgd: Sgd,
    labels: Vec<usize>,
    costs: Costs,
    /// Multiply-accumulates a step may take ([`limits::DEFAULT_MAX_MACS`] at first).
    pub max_macs: u64,
    /// Statistics of the last successful training step.
    pub last: Option<StepStats>,
    /// Training steps taken.
    pub steps: u64,
}

impl Engine {
    /// Builds `spec` with SGD (`lr`, `momentum`) over an arena of `arena_bytes`
    /// (0: the plan of a batch of [`AUTO_BATCH`] 28x28 images).
    pub fn new(
        spec: NetSpec,
        seed: u64,
        lr: f32,
        momentum: f32,
        arena_bytes: usize,
    ) -> Result<Self, SpecError> {
        let bytes = if arena_bytes == 0 {
            plan(&spec, momentum, AUTO_BATCH, 28, 28)?.arena_bytes()
        } else {
            arena_bytes
        };
        let mut g = OwnedGraph::new(bytes.div_ceil(4)).map_err(SpecError::Refused)?;
        let built = g.with(|g| -> Result<_, SpecError> {
            let layers = build(&spec, g, seed)?;
            let sgd = Sgd::new(g, lr, momentum, 0.0)?;
            Ok((layers, sgd))
        });
        let (layers, sgd) = built?;
        Ok(Engine {
            g,
            spec,
            layers,
            sgd,
            labels: Vec::new(),
            costs: Costs::default(),
            max_macs: limits::DEFAULT_MAX_MACS,
            last: None,
            steps: 0,
        })
    }

    /// Refuses a step at `dims` (`[batch, h, w]` of the call) whose plan does not fit
    /// the arena or takes more than [`Engine::max_macs`], before it starts.
    fn check(
        &mut self,
        training: bool,
        dims: &[usize],
        (batch, h, w): (usize, usize, usize),
    ) -> Result<(), SpecError> {
        let key = (training, batch, h, w);
        let cost = match self.costs.find(key) {
            Some(c) => c,
            None => {
                let passes = if training { Passes::Both } else { Passes::Inference };
                let c = plan_passes(&self.spec, self.sgd.momentum, (batch, h, w), passes)?.cost(training);
                self.costs.insert(key, c);
                c
            }
        };
        let arena = self.g.get().arena().capacity_bytes();
        limits::check_step(training, dims, cost, arena, self.max_macs).map_err(SpecError::Refused)
    }

    /// The network description.
    pub fn spec(&self) -> &NetSpec {
        &self.spec
    }

    /// The SGD settings (momentum matters for plans).
    pub fn sgd(&mut self) -> &mut Sgd {
        &mut self.sgd
    }

    /// Arena capacity in bytes.
    pub fn arena_bytes(&self) -> usize {
        self.g.get().arena().capacity_bytes()
    }

    /// Most arena bytes used by any step so far (parameters included).
    pub fn high_water_bytes(&self) -> usize {
        self.g.get().arena().high_water_bytes()
    }

    /// Number of parameter scalars.
    pub fn num_parameters(&self) -> usize {
        let g = self.g.get();
        (0..g.num_params())
            .filter_map(|i| g.param_handle(i))
            .filter_map(|t| g.shape(t).ok())
            .map(|s| s.numel())
            .sum()
    }

    /// The plan of this network at `[batch, C, h, w]`.
    pub fn plan(&self, batch: usize, h: usize, w: usize) -> Result<Plan, SpecError> {
        plan(&self.spec, self.sgd.momentum, batch, h, w)
    }

    /// One SGD step on `batch` images of `h x w` (`x` is `[batch, C, h, w]`, row-major).
    pub fn train_step(
        &mut self,
        x: &[f32],
        batch: usize,
        h: usize,
        w: usize,
        labels: &[u32],
    ) -> Result<StepStats, SpecError> {
        let dims = self.spec.input_dims(batch, h, w)?;
        self.check(true, &dims, (batch, h, w))?;
        self.labels.clear();
        self.labels.extend(labels.iter().map(|&l| l as usize));
        let (layers, sgd, targets) = (&self.layers, &mut self.sgd, &self.labels);
        let r = self.g.with(|g| {
            g.set_training(true);
            let r = (|| -> Result<StepStats, Error> {
                g.zero_grad();
                let x = g.input(&dims, x)?;
                let logits = layers.forward(g, x)?;
                let loss = g.cross_entropy(logits, targets)?;
                let correct = count_correct(g.data(logits)?, targets);
                let loss_v = g.data(loss)?[0];
                g.backward(loss)?;
                sgd.step(g)?;
                Ok(StepStats {
                    loss: loss_v,
                    accuracy: correct as f32 / batch as f32,
                })
            })();
            g.end_step();
            r
        });
        if let Ok(s) = r {
            self.last = Some(s);
            self.steps += 1;
        }
        Ok(r?)
    }

    /// Class probabilities (softmax of the logits), `[batch, classes]` row-major.
    pub fn predict(&mut self, x: &[f32], batch: usize, h: usize, w: usize) -> Result<Vec<f32>, SpecError> {
        let dims = self.spec.input_dims(batch, h, w)?;
        self.check(false, &dims, (batch, h, w))?;
        let layers = &self.layers;
        self.g.with(|g| {
            g.set_grad_enabled(false);
            g.set_training(false); // model.eval(): BatchNorm's running statistics, no dropout
            let r = (|| -> Result<Vec<f32>, SpecError> {
                let x = g.input(&dims, x)?;
                let logits = layers.forward(g, x).map_err(Error::from)?;
                let l = g.data(logits)?;
                softmax_rows(l, batch).map_err(SpecError::Refused)
            })();
            g.end_step();
            g.set_grad_enabled(true);
            r
        })
    }

    /// The parameters in the project's weights format (`torchlet::io`, magic `TLWT`,
    /// CRC-32); W1's records carry their PyTorch-style names (`c1.weight`, ...).
    pub fn export_weights(&self) -> Result<Vec<u8>, SpecError> {
        let g = self.g.get();
        let names: &[&str] = match self.spec {
            NetSpec::W1 => &io::DIGITS_FCN_NAMES,
            NetSpec::Layers { .. } => &[],
        };
        let len = io::saved_len_named(g, names)?;
        let mut out = limits::vec_for("exportWeights", len).map_err(SpecError::Refused)?;
        out.resize(len, 0);
        let n = io::save_named(g, names, &mut out)?;
        out.truncate(n);
        Ok(out)
    }

    /// Loads parameters saved by [`Engine::export_weights`] (or the host converter).
    /// Every check runs before any value is written: on error the model is untouched.
    /// The optimizer's momentum is kept, as `load_state_dict` on a module keeps it.
    pub fn import_weights(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.g.with(|g| io::load(g, bytes))
    }

    /// Share of `count` images (`h x w` each) whose prediction is the label, evaluated
    /// one image at a time so the arena a batch-1 step needs suffices.
    pub fn evaluate(
        &mut self,
        x: &[f32],
        count: usize,
        h: usize,
        w: usize,
        labels: &[u32],
    ) -> Result<f32, SpecError> {
        let per = limits::product("input", &self.spec.input_dims(1, h, w)?).map_err(SpecError::Refused)?;
        evaluate_by(per, x, count, labels, |img| self.predict(img, 1, h, w))
    }
}

/// Share of `count` inputs of `per` values each whose prediction (by `predict`, one
/// input at a time) is the label; the counts are checked first.
pub(crate) fn evaluate_by<E: From<Error>>(
    per: usize,
    x: &[f32],
    count: usize,
    labels: &[u32],
    mut predict: impl FnMut(&[f32]) -> Result<Vec<f32>, E>,
) -> Result<f32, E> {
    if labels.len() != count {
        return Err(Error::ShapeMismatch {
            op: "evaluate",
            what: "number of labels vs count",
            expected: count,
            found: labels.len(),
        }
        .into());
    }
    if Some(x.len()) != count.checked_mul(per) {
        return Err(Error::ShapeMismatch {
            op: "evaluate",
            what: "data length vs count*channels*height*width",
            expected: count.saturating_mul(per),
            found: x.len(),
        }
        .into());
    }
    let mut correct = 0usize;
    for (img, &label) in x.chunks_exact(per.max(1)).zip(labels) {
        let p = predict(img)?;
        correct += count_correct(&p, &[label as usize]);
    }
    Ok(correct as f32 / count.max(1) as f32)
}

/// Rows of `logits` (`targets.len()` of them) whose largest entry is the target.
pub(crate) fn count_correct(logits: &[f32], targets: &[usize]) -> usize {
    let c = logits.len() / targets.len().max(1);
    logits
        .chunks_exact(c.max(1))
        .zip(targets)
        .filter(|(row, &t)| argmax(row) == t)
        .count()
}

fn argmax(row: &[f32]) -> usize {
    (0..row.len())
        .max_by(|&a, &b| row[a].total_cmp(&row[b]))
        .unwrap_or(0)
}

/// The softmax of each of the `batch` rows of `logits` (a slice of the arena: its
/// length is the engine's, not a caller's number).
pub(crate) fn softmax_rows(logits: &[f32], batch: usize) -> Result<Vec<f32>, String> {
    let classes = (logits.len() / batch.max(1)).max(1);
    let mut p = limits::vec_for("the probabilities", logits.len())?;
    for row in logits.chunks_exact(classes) {
        softmax_into(row, &mut p);
    }
    Ok(p)
}

/// Appends the softmax of one row of logits (around its maximum, in f64).
fn softmax_into(row: &[f32], out: &mut Vec<f32>) {
    let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let z: f64 = row.iter().map(|&v| (v as f64 - m).exp()).sum();
    out.extend(row.iter().map(|&v| ((v as f64 - m).exp() / z) as f32));
}
