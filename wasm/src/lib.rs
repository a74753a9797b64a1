//! torchlet in JavaScript: a thin wasm-bindgen layer over the `torchlet` engine.
//!
//! - [`Model`] owns a network (W1, layers described as JSON, a model file or an ONNX
//!   file imported in the page), SGD, and one arena whose size the caller chooses or
//!   takes from a [`Plan`].
//! - Images are `Float32Array`s, row-major `[batch, channels, height, width]`, and the
//!   height and width may change from call to call.
//! - Every engine error becomes a JS `Error` carrying the engine's message; the model
//!   stays usable after it.
//! - No math lives here: the engine does the work; this file only converts values.

mod engine;
pub mod limits;
mod loaded;
mod owned;
mod partial;
mod spec;

pub use engine::{Engine, Plan as EnginePlan, StepStats, AUTO_BATCH};
pub use loaded::{safetensors_bytes, FileEngine, LoadError, StateTensor, MODEL_TAPE};
pub use partial::TrainSet;
pub use spec::{LayerSpec, NetSpec, SpecError, MAX_LAYERS};

use wasm_bindgen::prelude::*;

fn js_err(e: impl core::fmt::Display) -> JsError {
    JsError::new(&e.to_string())
}

/// A batch, height or width from JS: a whole number from 1 to 2^32 - 1.
fn dim(name: &str, v: f64) -> Result<usize, JsError> {
    limits::size(name, v, 1).map_err(js_err)
}

/// `[batch, height, width]` of a call.
fn dims3(batch: f64, height: f64, width: f64) -> Result<(usize, usize, usize), JsError> {
    Ok((dim("batch", batch)?, dim("height", height)?, dim("width", width)?))
}

/// SGD's learning rate and momentum from JS, checked as PyTorch checks them.
fn sgd_args(lr: f64, momentum: f64) -> Result<(f32, f32), JsError> {
    let lr = limits::learning_rate(lr).map_err(js_err)?;
    Ok((lr, limits::momentum(momentum).map_err(js_err)?))
}

/// A trainable network with its optimizer and arena.
#[wasm_bindgen]
pub struct Model {
    inner: Inner,
}

/// A layer network, or a loaded model file.
enum Inner {
    Net(Box<Engine>),
    File(Box<FileEngine>),
}

/// Runs `$body` with `$e` bound to whichever engine `$inner` (a reference) holds.
macro_rules! each {
    ($inner:expr, $e:ident => $body:expr) => {
        match $inner {
            Inner::Net($e) => $body,
            Inner::File($e) => $body,
        }
    };
}

/// One layer's output in a plan.
#[wasm_bindgen]
#[derive(Debug)]
pub struct PlanLayer {
    name: String,
    shape: Vec<u32>,
}

#[wasm_bindgen]
impl PlanLayer {
    /// The layer kind, e.g. `"conv2d"`.
    #[wasm_bindgen(getter)]
    pub fn name(&self) -> String {
        self.name.clone()
    }
    /// The output shape (`[N, C, H, W]` or `[N, F]`).
    #[wasm_bindgen(getter)]
    pub fn shape(&self) -> Vec<u32> {
        self.shape.clone()
    }
}

/// The meta plan of a step at one input size (from the same code on a meta arena).
#[wasm_bindgen]
#[derive(Debug)]
pub struct Plan {
    inner: EnginePlan,
}

#[wasm_bindgen]
impl Plan {
    /// Arena bytes a training step needs (parameters and optimizer state included);
    /// 0 for a model with nothing to train (no parameters), which only predicts.
    #[wasm_bindgen(getter, js_name = trainBytes)]
    pub fn train_bytes(&self) -> f64 {
        self.inner.train_bytes as f64
    }
    /// Multiply-accumulates of a training step (forward, backward, SGD), counted by
    /// the meta run; 0 when nothing trains.
    #[wasm_bindgen(getter, js_name = trainMacs)]
    pub fn train_macs(&self) -> f64 {
        self.inner.train_macs as f64
    }
    /// Multiply-accumulates of a prediction.
    #[wasm_bindgen(getter, js_name = inferMacs)]
    pub fn infer_macs(&self) -> f64 {
        self.inner.infer_macs as f64
    }
    /// Arena bytes a prediction needs (parameters and optimizer state included).
    #[wasm_bindgen(getter, js_name = inferBytes)]
    pub fn infer_bytes(&self) -> f64 {
        self.inner.infer_bytes as f64
    }
    /// Bytes of parameters, their gradients and the optimizer state.
    #[wasm_bindgen(getter, js_name = persistentBytes)]
    pub fn persistent_bytes(&self) -> f64 {
        self.inner.persistent_bytes as f64
    }
    /// Every layer's output shape, in order.
    #[wasm_bindgen(getter)]
    pub fn layers(&self) -> Vec<PlanLayer> {
        self.inner
            .layers
            .iter()
            .map(|l| PlanLayer {
                name: l.name.clone(),
                shape: l.shape.iter().map(|&d| d as u32).collect(),
            })
            .collect()
    }
    /// The plan as a JSON string (`JSON.parse` it, or print it).
    #[wasm_bindgen(js_name = toJSON)]
    pub fn to_json(&self) -> String {
        let layers: Vec<String> = self
            .inner
            .layers
            .iter()
            .map(|l| format!("{{\"name\":\"{}\",\"shape\":{:?}}}", l.name, l.shape))
            .collect();
        format!(
            "{{\"trainBytes\":{},\"inferBytes\":{},\"persistentBytes\":{},\"trainMacs\":{},\"inferMacs\":{},\"layers\":[{}]}}",
            self.inner.train_bytes,
            self.inner.infer_bytes,
            self.inner.persistent_bytes,
            self.inner.train_macs,
            self.inner.infer_macs,
            layers.join(",")
        )
    }
}

/// Statistics of one training step (before the update).
#[wasm_bindgen]
#[derive(Clone, Copy, Debug)]
pub struct Step {
    /// Mean cross-entropy of the batch.
    #[wasm_bindgen(readonly)]
    pub loss: f32,
    /// Share of the batch predicted right.
    #[wasm_bindgen(readonly)]
    pub accuracy: f32,
}

/// `arenaBytes` as a size (a whole number from 0 to 2^32 - 1; what the module can
/// reach is checked when the arena is allocated), or the error saying its range.
fn arena(arena_bytes: f64) -> Result<usize, JsError> {
    limits::size("arenaBytes", arena_bytes, 0).map_err(js_err)
}

/// Labels from JS (a `Uint32Array`, a `Float64Array` or an array of numbers), each a
/// class index: 2.5 or NaN is refused, not truncated.
fn labels(v: &[f64]) -> Result<Vec<u32>, JsError> {
    limits::labels(v).map_err(js_err)
}

const NOT_A_FILE: &str = "exportModel/exportSafetensors: only a model from Model.load or Model.fromOnnx has a model file (use exportWeights)";

#[wasm_bindgen]
impl Model {
    /// W1 "digits-fcn" (1 input channel, 10 classes, 6,218 parameters) with SGD.
    /// `arenaBytes` 0 sizes the arena for a batch of 32 images of 28x28.
    pub fn w1(
        seed: f64,
        lr: f64,
        momentum: f64,
        #[wasm_bindgen(js_name = arenaBytes)] arena_bytes: f64,
    ) -> Result<Model, JsError> {
        Self::build(NetSpec::W1, seed, lr, momentum, arena_bytes)
    }

    /// A network from a JSON array of layer specs (see the README), e.g.
    /// `[{"type":"conv2d","out_channels":8,"kernel_size":3,"padding":1},{"type":"relu"},
    /// {"type":"global_avg_pool2d"},{"type":"flatten"},{"type":"linear","out_features":10}]`.
    #[wasm_bindgen(js_name = fromLayers)]
    pub fn from_layers(
        #[wasm_bindgen(js_name = layersJson)] layers_json: &str,
        #[wasm_bindgen(js_name = inChannels)] in_channels: f64,
        seed: f64,
        lr: f64,
        momentum: f64,
        #[wasm_bindgen(js_name = arenaBytes)] arena_bytes: f64,
    ) -> Result<Model, JsError> {
        let in_channels = limits::size("inChannels", in_channels, 1).map_err(js_err)?;
        let spec = NetSpec::from_json(in_channels, layers_json).map_err(js_err)?;
        Self::build(spec, seed, lr, momentum, arena_bytes)
    }

    fn build(spec: NetSpec, seed: f64, lr: f64, momentum: f64, arena_bytes: f64) -> Result<Model, JsError> {
        let seed = limits::whole("seed", seed, 0, limits::MAX_SAFE_INTEGER).map_err(js_err)?;
        let (lr, momentum) = sgd_args(lr, momentum)?;
        let arena_bytes = arena(arena_bytes)?;
        let inner = Engine::new(spec, seed, lr, momentum, arena_bytes).map_err(js_err)?;
        Ok(Model {
            inner: Inner::Net(Box::new(inner)),
        })
    }

    /// A model from a model file (`torchlet convert`'s `.tlm`, or `exportModel`), with
    /// SGD; its parameters and buffers are the file's. `arenaBytes` 0 sizes the arena
    /// for a batch of 32 at 28x28 (or at the model's fixed input size). `trainable`
    /// (optional): name patterns of the parameters that train, as `setTrainable` takes
    /// them, so that the arena needs only what that choice needs.
    pub fn load(
        #[wasm_bindgen(js_name = tlmBytes)] tlm_bytes: Vec<u8>,
        lr: f64,
        momentum: f64,
        #[wasm_bindgen(js_name = arenaBytes)] arena_bytes: f64,
        trainable: Option<Vec<String>>,
    ) -> Result<Model, JsError> {
        let (lr, momentum) = sgd_args(lr, momentum)?;
        let bytes = arena(arena_bytes)?;
        let train = trainable.filter(|p| !p.is_empty());
        let inner = FileEngine::new(tlm_bytes, lr, momentum, bytes, train).map_err(js_err)?;
        Ok(Model {
            inner: Inner::File(Box::new(inner)),
        })
    }

    /// The model file of a loaded model with its current (trained) values: load it
    /// again with [`Model::load`], or use it with the `torchlet` command.
    #[wasm_bindgen(js_name = exportModel)]
    pub fn export_model(&self) -> Result<Vec<u8>, JsError> {
        match &self.inner {
            Inner::File(e) => e.export_model().map_err(js_err),
            Inner::Net(_) => Err(JsError::new(NOT_A_FILE)),
        }
    }

    /// The parameters and buffers of a loaded model as safetensors under their PyTorch
    /// `state_dict` names (`model.load_state_dict(safetensors.torch.load_file(...))`).
    #[wasm_bindgen(js_name = exportSafetensors)]
    pub fn export_safetensors(&self) -> Result<Vec<u8>, JsError> {
        match &self.inner {
            Inner::File(e) => e.export_safetensors().map_err(js_err),
            Inner::Net(_) => Err(JsError::new(NOT_A_FILE)),
        }
    }

    /// Chooses the parameters of a loaded model that train, keeping their current
    /// values: those whose names (PyTorch's) match one of `patterns` (`*` matches any
    /// run of characters), e.g. TinyTL's bias-only fine-tuning of W2 with `["*.bias",
    /// "stem.1.weight", "*.conv.1.weight", "*.conv.4.weight", "*.conv.7.weight",
    /// "fc.weight"]` (biases, BatchNorm affine parameters, the classifier); the others
    /// stay frozen and BatchNorm normalises with its running statistics, which stay
    /// as they are. An empty list trains every parameter again. Momentum restarts; the
    /// arena keeps its size. Patterns matching no parameter throw and change nothing.
    #[wasm_bindgen(js_name = setTrainable)]
    pub fn set_trainable(&mut self, patterns: Vec<String>) -> Result<(), JsError> {
        match &mut self.inner {
            Inner::File(e) => e
                .retrain((!patterns.is_empty()).then_some(patterns))
                .map_err(js_err),
            Inner::Net(_) => Err(JsError::new(
                "setTrainable: only a model from Model.load or Model.fromOnnx chooses its trained parameters",
            )),
        }
    }

    /// Whether each BatchNorm whose scale trains on frozen statistics (after
    /// `setTrainable`) keeps its normalised input in 16 bits (bfloat16) instead of 32:
    /// fewer bytes per step (see `plan`), the scales' gradients rounded, every other
    /// gradient the same. Off by default; no effect while every parameter trains.
    #[wasm_bindgen(js_name = setCompactSaves)]
    pub fn set_compact_saves(&mut self, on: bool) -> Result<(), JsError> {
        match &mut self.inner {
            Inner::File(e) => {
                e.set_compact_saves(on);
                Ok(())
            }
            Inner::Net(_) => Err(JsError::new(
                "setCompactSaves: only a model from Model.load or Model.fromOnnx has BatchNorm to keep compact",
            )),
        }
    }

    /// The plan of W1 (SGD with this momentum) at `[batch, 1, height, width]`, without
    /// building a model: use it to choose `arenaBytes`.
    #[wasm_bindgen(js_name = planW1)]
    pub fn plan_w1(momentum: f64, batch: f64, height: f64, width: f64) -> Result<Plan, JsError> {
        let momentum = limits::momentum(momentum).map_err(js_err)?;
        let (b, h, w) = dims3(batch, height, width)?;
        let inner = engine::plan(&NetSpec::W1, momentum, b, h, w).map_err(js_err)?;
        Ok(Plan { inner })
    }

    /// The plan of this model at `[batch, C, height, width]`.
    pub fn plan(&self, batch: f64, height: f64, width: f64) -> Result<Plan, JsError> {
        let (b, h, w) = dims3(batch, height, width)?;
        let inner = each!(&self.inner, e => e.plan(b, h, w).map_err(js_err))?;
        Ok(Plan { inner })
    }

    /// One SGD step on `batch` images of `height x width` with one label each.
    #[wasm_bindgen(js_name = trainStep)]
    pub fn train_step(
        &mut self,
        x: &[f32],
        batch: f64,
        height: f64,
        width: f64,
        #[wasm_bindgen(unchecked_param_type = "Uint32Array | Float64Array | number[]")] labels: &[f64],
    ) -> Result<Step, JsError> {
        let (b, h, w) = dims3(batch, height, width)?;
        let labels = self::labels(labels)?;
        let s = each!(&mut self.inner, e => e.train_step(x, b, h, w, &labels).map_err(js_err))?;
        Ok(Step {
            loss: s.loss,
            accuracy: s.accuracy,
        })
    }

    /// Class probabilities, `[batch, classes]` row-major.
    pub fn predict(&mut self, x: &[f32], batch: f64, height: f64, width: f64) -> Result<Vec<f32>, JsError> {
        let (b, h, w) = dims3(batch, height, width)?;
        each!(&mut self.inner, e => e.predict(x, b, h, w).map_err(js_err))
    }

    /// Accuracy (0..1) on `count` labelled images of one size.
    pub fn evaluate(
        &mut self,
        x: &[f32],
        count: f64,
        height: f64,
        width: f64,
        #[wasm_bindgen(unchecked_param_type = "Uint32Array | Float64Array | number[]")] labels: &[f64],
    ) -> Result<f32, JsError> {
        let count = limits::size("count", count, 0).map_err(js_err)?;
        let (h, w) = (dim("height", height)?, dim("width", width)?);
        let labels = self::labels(labels)?;
        each!(&mut self.inner, e => e.evaluate(x, count, h, w, &labels).map_err(js_err))
    }

    /// The parameters as bytes in the project's weights format (`torchlet::io`).
    #[wasm_bindgen(js_name = exportWeights)]
    pub fn export_weights(&self) -> Result<Vec<u8>, JsError> {
        each!(&self.inner, e => e.export_weights().map_err(js_err))
    }

    /// Replaces the parameters with ones from `exportWeights` (same network). A corrupt
    /// or mismatched blob throws and leaves the model as it was.
    #[wasm_bindgen(js_name = importWeights)]
    pub fn import_weights(&mut self, bytes: &[u8]) -> Result<(), JsError> {
        each!(&mut self.inner, e => e.import_weights(bytes).map_err(js_err))
    }

    /// Loss of the last successful training step (NaN before the first).
    #[wasm_bindgen(getter)]
    pub fn loss(&self) -> f32 {
        each!(&self.inner, e => e.last).map_or(f32::NAN, |s| s.loss)
    }

    /// Batch accuracy of the last successful training step (NaN before the first).
    #[wasm_bindgen(getter)]
    pub fn accuracy(&self) -> f32 {
        each!(&self.inner, e => e.last).map_or(f32::NAN, |s| s.accuracy)
    }

    /// Training steps taken.
    #[wasm_bindgen(getter)]
    pub fn steps(&self) -> f64 {
        each!(&self.inner, e => e.steps) as f64
    }

    /// The SGD learning rate (settable, e.g. for fine-tuning).
    #[wasm_bindgen(getter)]
    pub fn lr(&mut self) -> f32 {
        each!(&mut self.inner, e => e.sgd().lr)
    }
    /// Sets the SGD learning rate (finite, at least 0).
    #[wasm_bindgen(setter)]
    pub fn set_lr(&mut self, lr: f64) -> Result<(), JsError> {
        let lr = limits::learning_rate(lr).map_err(js_err)?;
        each!(&mut self.inner, e => e.sgd().lr = lr);
        Ok(())
    }

    /// Multiply-accumulates a call may take (its meta plan's count): a step over it is
    /// refused before it starts. 10^10 unless set (`limits::DEFAULT_MAX_MACS`).
    #[wasm_bindgen(getter, js_name = maxMacs)]
    pub fn max_macs(&self) -> f64 {
        each!(&self.inner, e => e.max_macs) as f64
    }
    /// Sets the work limit (a whole number from 0 to 2^53 - 1).
    #[wasm_bindgen(setter, js_name = maxMacs)]
    pub fn set_max_macs(&mut self, max: f64) -> Result<(), JsError> {
        let max = limits::whole("maxMacs", max, 0, limits::MAX_SAFE_INTEGER).map_err(js_err)?;
        each!(&mut self.inner, e => e.max_macs = max);
        Ok(())
    }

    /// Arena capacity in bytes.
    #[wasm_bindgen(getter, js_name = arenaBytes)]
    pub fn arena_bytes(&self) -> f64 {
        each!(&self.inner, e => e.arena_bytes()) as f64
    }

    /// Most arena bytes any call has used so far.
    #[wasm_bindgen(getter, js_name = highWaterBytes)]
    pub fn high_water_bytes(&self) -> f64 {
        each!(&self.inner, e => e.high_water_bytes()) as f64
    }

    /// Number of trainable scalars.
    #[wasm_bindgen(getter, js_name = numParameters)]
    pub fn num_parameters(&self) -> f64 {
        each!(&self.inner, e => e.num_parameters()) as f64
    }

    /// Number of scalars that train (all parameters, unless `setTrainable` chose some).
    #[wasm_bindgen(getter, js_name = trainedParameters)]
    pub fn trained_parameters(&self) -> f64 {
        (match &self.inner {
            Inner::Net(e) => e.num_parameters(),
            Inner::File(e) => e.trained_parameters(),
        }) as f64
    }

    /// Input channels the network expects.
    #[wasm_bindgen(getter, js_name = inChannels)]
    pub fn in_channels(&self) -> u32 {
        (match &self.inner {
            Inner::Net(e) => e.spec().in_channels(),
            Inner::File(e) => e.in_channels(),
        }) as u32
    }
}
