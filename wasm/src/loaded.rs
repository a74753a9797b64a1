//! The engine of a loaded model: a model file (`torchlet::model`, or an ONNX file
//! imported into one by `torchlet-onnx`) run on the tape by op name, with SGD and an
//! owned arena sized from the model's own meta plan, as [`crate::Engine`] does for
//! layer networks. Training steps run in training mode (BatchNorm batch statistics,
//! dropout), predictions in eval mode; every call ends its step whatever happened.

use crate::engine::{
    count_correct, evaluate_by, run_planner, softmax_rows, Passes, Plan, PlannedLayer, StepStats, AUTO_BATCH,
};
use crate::limits::{self, Costs};
use crate::owned::{OwnedGraph, OwnedModel};
use crate::partial::TrainSet;
use core::cell::RefCell;
use core::fmt;
use torchlet::model::{DimSpec, Model, ModelFile, Placement};
use torchlet::optim::Sgd;
use torchlet::plan::Planner;
use torchlet::{Error, Graph};

/// Tape capacity of a loaded model's graph: its parameters and buffers, the input and
/// every node output of one step (a file with more nodes is refused when it runs).
pub const MODEL_TAPE: usize = crate::owned::TAPE;

/// An error of a loaded model, with the place the model names (node, tensor, input).
#[derive(Clone, Debug, PartialEq)]
pub struct LoadError(pub String);

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Error> for LoadError {
    fn from(e: Error) -> Self {
        LoadError(e.to_string())
    }
}

fn msg(e: impl fmt::Display) -> LoadError {
    LoadError(e.to_string())
}

type R<T> = Result<T, LoadError>;

/// The dims of `file`'s first input for a `[batch, C, h, w]` call: `[batch, C, h, w]`
/// for an NCHW input, `[batch, C, w]` for an NCL one, `[batch, F]` for a flat one;
/// refused when their element count overflows.
fn input_dims(file: &ModelFile<'_>, batch: usize, h: usize, w: usize) -> R<Vec<usize>> {
    let dims = shape_of_call(file, batch, h, w)?;
    limits::product("input", &dims).map_err(LoadError)?;
    Ok(dims)
}

fn shape_of_call(file: &ModelFile<'_>, batch: usize, h: usize, w: usize) -> R<Vec<usize>> {
    let rec = file
        .inputs()
        .next()
        .ok_or_else(|| msg("model: the model has no input"))?;
    let fixed = |d: &DimSpec| match *d {
        DimSpec::Fixed(n) => n,
        DimSpec::Free { min } => min.max(1),
    };
    Ok(match rec.dims() {
        [_, c, _, _] => vec![batch, fixed(c), h, w],
        [_, c, _] => vec![batch, fixed(c), w],
        [_, f] => vec![batch, fixed(f)],
        other => {
            return Err(LoadError(format!(
                "model: an input of {} dims is not supported here",
                other.len()
            )))
        }
    })
}

/// The input's channels (or features).
fn channels(file: &ModelFile<'_>) -> usize {
    file.inputs()
        .next()
        .and_then(|r| match r.dims().get(1) {
            Some(DimSpec::Fixed(n)) => Some(*n),
            _ => None,
        })
        .unwrap_or(1)
}

/// The default plan size: 28x28 where the input's H and W are free (at least their
/// minimum), the file's size where they are fixed.
fn default_hw(file: &ModelFile<'_>) -> (usize, usize) {
    let size = |d: Option<&DimSpec>| match d {
        Some(DimSpec::Fixed(n)) => *n,
        Some(DimSpec::Free { min }) => (*min).max(28),
        None => 1,
    };
    match file.inputs().next().as_ref().map(|r| r.dims()) {
        Some([_, _, h, w]) => (size(Some(h)), size(Some(w))),
        Some([_, _, l]) => (1, size(Some(l))),
        _ => (1, 1),
    }
}

/// The meta plan of `file` at `[batch, C, h, w]` with SGD of this momentum and these
/// parameters training: the same setup (tensors, SGD state) and step (training mode,
/// cross-entropy, backward; eval mode forward for the prediction) on a meta graph;
/// the prediction alone when `passes` says so or when nothing trains.
pub fn plan(
    file: ModelFile<'_>,
    momentum: f32,
    train: &TrainSet,
    compact_saves: bool,
    (batch, h, w): (usize, usize, usize),
    passes: Passes,
) -> R<Plan> {
    let dims = input_dims(&file, batch, h, w)?;
    let shapes = RefCell::new(Vec::new());
    let failed = RefCell::new(None);
    let planner = Planner::<f32, MODEL_TAPE, _, _>::new(
        |g: &mut Graph<'static, f32, MODEL_TAPE>| {
            g.set_compact_saves(compact_saves);
            let m = Model::with_placement(g, file, |t| train.place(t)).map_err(|e| {
                *failed.borrow_mut() = Some(msg(e));
                e.error
            })?;
            Sgd::new(g, 0.01, momentum, 0.0)?;
            Ok(m)
        },
        |g: &mut Graph<'static, f32, MODEL_TAPE>, m: &Model<'_>, _h: usize, _w: usize| {
            let x = g.input(&dims, &[])?;
            let training = g.grad_enabled();
            g.set_training(training && train.batch_statistics());
            let mut out = [x];
            // Each pass records the nodes' shapes (the same in both).
            shapes.borrow_mut().clear();
            m.forward_with(g, &[x], &mut out, |node, g, y| {
                if let (Some(n), Ok(s)) = (file.nodes().nth(node), g.shape(y)) {
                    shapes.borrow_mut().push(PlannedLayer {
                        name: n.op.to_string(),
                        shape: s.dims().to_vec(),
                    });
                }
            })
            .map_err(|e| {
                *failed.borrow_mut() = Some(msg(e));
                e.error
            })?;
            match training {
                // A meta graph's cross-entropy takes no targets.
                true => g.cross_entropy(out[0], &[]),
                false => Ok(out[0]),
            }
        },
    );
    let r = run_planner(
        passes,
        || failed.borrow().is_some(),
        || planner.plan(h, w),
        || planner.plan_inference(h, w),
    );
    if let Some(e) = failed.take() {
        return Err(e);
    }
    let (p, trains) = r?;
    Ok(Plan::from_core(p, trains, shapes.into_inner()))
}

/// A loaded model with its optimizer and its own arena.
pub struct FileEngine {
    // Declared first so it drops first; it does not borrow the model's bytes anyway
    // (every tensor is copied into the arena).
    g: OwnedGraph<MODEL_TAPE>,
    model: OwnedModel,
    sgd: Sgd,
    train: TrainSet,
    labels: Vec<usize>,
    costs: Costs,
    /// Multiply-accumulates a step may take ([`limits::DEFAULT_MAX_MACS`] at first).
    pub max_macs: u64,
    /// Statistics of the last successful training step.
    pub last: Option<StepStats>,
    /// Training steps taken.
    pub steps: u64,
}

impl FileEngine {
    /// Checks `bytes` as a model file and builds it with SGD (`lr`, `momentum`) over an
    /// arena of `arena_bytes` (0: the plan of a batch of [`AUTO_BATCH`] at 28x28, or at
    /// the model's fixed size). `train`: the names (patterns, see [`TrainSet`]) of the
    /// parameters that train, or `None` for all.
    pub fn new(
        bytes: Vec<u8>,
        lr: f32,
        momentum: f32,
        arena_bytes: usize,
        train: Option<Vec<String>>,
    ) -> R<Self> {
        let file = ModelFile::parse(&bytes).map_err(msg)?;
        let train = match train {
            None => TrainSet::all(),
            Some(p) => TrainSet::matching(&file, p).map_err(LoadError)?,
        };
        let words = if arena_bytes == 0 {
            let (h, w) = default_hw(&file);
            plan(file, momentum, &train, false, (AUTO_BATCH, h, w), Passes::Both)?.arena_bytes()
        } else {
            arena_bytes
        }
        .div_ceil(4);
        let mut g = OwnedGraph::new(words).map_err(LoadError)?;
        let (model, sgd) = g.with(|g| -> R<_> {
            let model = OwnedModel::with_placement(bytes, g, |t| train.place(t)).map_err(LoadError)?;
            let sgd = Sgd::new(g, lr, momentum, 0.0)?;
            Ok((model, sgd))
        })?;
        Ok(FileEngine {
            g,
            model,
            sgd,
            train,
            labels: Vec::new(),
            costs: Costs::default(),
            max_macs: limits::DEFAULT_MAX_MACS,
            last: None,
            steps: 0,
        })
    }

    /// Refuses a step at `dims` (`[batch, h, w]` of the call) whose plan does not fit
    /// the arena or takes more than [`FileEngine::max_macs`], before it starts.
    fn check(&mut self, training: bool, dims: &[usize], (batch, h, w): (usize, usize, usize)) -> R<()> {
        let key = (training, batch, h, w);
        let cost = match self.costs.find(key) {
            Some(c) => c,
            None => {
                let passes = if training { Passes::Both } else { Passes::Inference };
                let c = self.plan_passes((batch, h, w), passes)?.cost(training);
                self.costs.insert(key, c);
                c
            }
        };
        let arena = self.g.get().arena().capacity_bytes();
        limits::check_step(training, dims, cost, arena, self.max_macs).map_err(LoadError)
    }

    /// The SGD settings.
    pub fn sgd(&mut self) -> &mut Sgd {
        &mut self.sgd
    }

    /// Arena capacity in bytes.
    pub fn arena_bytes(&self) -> usize {
        self.g.get().arena().capacity_bytes()
    }

    /// Most arena bytes used by any step so far.
    pub fn high_water_bytes(&self) -> usize {
        self.g.get().arena().high_water_bytes()
    }

    /// Number of scalars in the model's parameters and buffers.
    pub fn num_parameters(&self) -> usize {
        self.model.get().file().tensors().map(|t| t.shape.numel()).sum()
    }

    /// Number of scalars that train (in the parameters the [`TrainSet`] chose).
    pub fn trained_parameters(&self) -> usize {
        let file = self.model.get().file();
        let train = file.tensors().filter(|t| self.train.place(t) == Placement::Train);
        train.map(|t| t.shape.numel()).sum()
    }

    /// The same model with its current values, rebuilt with other parameters training
    /// (`None`: all); same SGD settings and arena size, fresh momentum. On error
    /// (patterns matching nothing) this model is unchanged.
    pub fn retrain(&mut self, train: Option<Vec<String>>) -> R<()> {
        let bytes = self.export_model()?;
        let (lr, momentum) = (self.sgd.lr, self.sgd.momentum);
        let mut next = FileEngine::new(bytes, lr, momentum, self.arena_bytes(), train)?;
        next.set_compact_saves(self.g.get().compact_saves());
        next.max_macs = self.max_macs;
        *self = next;
        Ok(())
    }

    /// Whether a BatchNorm with frozen statistics whose scale trains keeps its
    /// normalised input in 16 bits (bfloat16): less memory, the scales' gradients
    /// rounded; no effect when every parameter trains (batch statistics).
    pub fn set_compact_saves(&mut self, on: bool) {
        self.g.with(|g| g.set_compact_saves(on));
        self.costs.clear();
    }

    /// The input's channels.
    pub fn in_channels(&self) -> usize {
        channels(self.model.get().file())
    }

    /// The plan of this model at `[batch, C, h, w]`.
    pub fn plan(&self, batch: usize, h: usize, w: usize) -> R<Plan> {
        self.plan_passes((batch, h, w), Passes::Both)
    }

    fn plan_passes(&self, size: (usize, usize, usize), passes: Passes) -> R<Plan> {
        let compact = self.g.get().compact_saves();
        plan(
            *self.model.get().file(),
            self.sgd.momentum,
            &self.train,
            compact,
            size,
            passes,
        )
    }

    /// One SGD step in training mode on `batch` inputs with one class label each.
    pub fn train_step(
        &mut self,
        x: &[f32],
        batch: usize,
        h: usize,
        w: usize,
        labels: &[u32],
    ) -> R<StepStats> {
        let dims = input_dims(self.model.get().file(), batch, h, w)?;
        self.check(true, &dims, (batch, h, w))?;
        self.labels.clear();
        self.labels.extend(labels.iter().map(|&l| l as usize));
        let m = self.model.get();
        let (sgd, targets) = (&mut self.sgd, &self.labels);
        let batch_stats = self.train.batch_statistics();
        let r = self.g.with(|g| {
            g.set_training(batch_stats);
            let r = (|| -> R<StepStats> {
                g.zero_grad();
                let x = g.input(&dims, x)?;
                let logits = m.forward(g, &[x]).map_err(msg)?;
                let loss = g.cross_entropy(logits, targets)?;
                let correct = count_correct(g.data(logits)?, targets);
                let loss_v = g.data(loss)?[0];
                g.backward(loss)?;
                sgd.step(g)?;
                Ok(StepStats {
                    loss: loss_v,
                    accuracy: correct as f32 / batch.max(1) as f32,
                })
            })();
            g.end_step();
            r
        });
        if let Ok(s) = r {
            self.last = Some(s);
            self.steps += 1;
        }
        r
    }

    /// Class probabilities (softmax over each row of the output), in eval mode.
    pub fn predict(&mut self, x: &[f32], batch: usize, h: usize, w: usize) -> R<Vec<f32>> {
        let dims = input_dims(self.model.get().file(), batch, h, w)?;
        self.check(false, &dims, (batch, h, w))?;
        let m = self.model.get();
        self.g.with(|g| {
            g.set_grad_enabled(false);
            g.set_training(false);
            let r = (|| -> R<Vec<f32>> {
                let x = g.input(&dims, x)?;
                let logits = m.forward(g, &[x]).map_err(msg)?;
                softmax_rows(g.data(logits)?, batch).map_err(LoadError)
            })();
            g.end_step();
            g.set_grad_enabled(true);
            r
        })
    }

    /// Accuracy on `count` labelled inputs of one size, one at a time (eval mode).
    pub fn evaluate(&mut self, x: &[f32], count: usize, h: usize, w: usize, labels: &[u32]) -> R<f32> {
        let dims = input_dims(self.model.get().file(), 1, h, w)?;
        let per = limits::product("input", &dims).map_err(LoadError)?;
        evaluate_by(per, x, count, labels, |img| self.predict(img, 1, h, w))
    }

    /// The model's tensors in the project's weights format, with their PyTorch names.
    pub fn export_weights(&self) -> R<Vec<u8>> {
        self.model.get().to_weights_bytes(self.g.get()).map_err(msg)
    }

    /// Loads weights from [`FileEngine::export_weights`]; checked before anything is
    /// written, so on error the model is untouched.
    pub fn import_weights(&mut self, bytes: &[u8]) -> R<()> {
        Ok(self.g.with(|g| torchlet::io::load(g, bytes))?)
    }

    /// The model file with the current (trained) values.
    pub fn export_model(&self) -> R<Vec<u8>> {
        self.model.get().to_file_bytes(self.g.get()).map_err(msg)
    }

    /// The parameters and buffers as safetensors under their PyTorch `state_dict`
    /// names (`num_batches_tracked` as int64; a BatchNorm without one, as ONNX files
    /// are, gets a 0, which `load_state_dict` wants).
    pub fn export_safetensors(&self) -> R<Vec<u8>> {
        use safetensors::Dtype;
        let bytes = self.export_model()?;
        let file = ModelFile::parse(&bytes).map_err(msg)?;
        let mut raw: Vec<StateTensor> = Vec::new();
        for t in file.tensors() {
            let (dtype, data) = if t.name.ends_with("num_batches_tracked") {
                (
                    Dtype::I64,
                    t.values().flat_map(|v| (v as i64).to_le_bytes()).collect(),
                )
            } else {
                (Dtype::F32, t.values().flat_map(f32::to_le_bytes).collect())
            };
            raw.push((t.name.to_string(), t.shape.dims().to_vec(), dtype, data));
        }
        let bn: Vec<String> = raw
            .iter()
            .filter_map(|t| t.0.strip_suffix(".running_mean"))
            .map(|p| format!("{p}.num_batches_tracked"))
            .filter(|n| !raw.iter().any(|t| &t.0 == n))
            .collect();
        for n in bn {
            raw.push((n, vec![], Dtype::I64, 0i64.to_le_bytes().to_vec()));
        }
        safetensors_bytes(&raw)
    }
}

/// One tensor of a `state_dict` for [`safetensors_bytes`]: name, shape, dtype, bytes.
pub type StateTensor = (String, Vec<usize>, safetensors::Dtype, Vec<u8>);

/// `tensors` as a safetensors file; two tensors of one name are refused with that
/// name (a `state_dict` maps each name to one tensor; the `safetensors` crate would
/// panic on them).
pub fn safetensors_bytes(tensors: &[StateTensor]) -> R<Vec<u8>> {
    let mut names: Vec<&str> = tensors.iter().map(|t| t.0.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(LoadError(format!(
            "exportSafetensors: two tensors are named {:?}; a state_dict holds one tensor per name",
            w[0]
        )));
    }
    let mut views = Vec::new();
    for (name, shape, dtype, data) in tensors {
        let view = safetensors::tensor::TensorView::new(*dtype, shape.clone(), data).map_err(msg)?;
        views.push((name.as_str(), view));
    }
    safetensors::serialize(views, None).map_err(msg)
}
