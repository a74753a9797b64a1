//! torchlet in JavaScript: a thin wasm-bindgen layer over the `torchlet` engine.
//!
//! - [`Model`] owns a network (W1 or layers described as JSON), SGD, and one arena whose
//!   size the caller chooses or takes from a [`Plan`].
//! - Images are `Float32Array`s, row-major `[batch, channels, height, width]`, and the
//!   height and width may change from call to call.
//! - Every engine error becomes a JS `Error` carrying the engine's message; the model
//!   stays usable after it.
//! - No math lives here: the engine does the work; this file only converts values.

mod engine;
mod owned;
mod spec;

pub use engine::{Engine, Plan as EnginePlan, StepStats, AUTO_BATCH};
pub use spec::{LayerSpec, NetSpec, SpecError, MAX_LAYERS};

use wasm_bindgen::prelude::*;

fn js_err(e: impl core::fmt::Display) -> JsError {
    JsError::new(&e.to_string())
}

/// A trainable network with its optimizer and arena.
#[wasm_bindgen]
pub struct Model {
    inner: Engine,
}

/// One layer's output in a plan.
#[wasm_bindgen]
#[derive(Debug)]
pub struct PlanLayer {
    name: &'static str,
    shape: Vec<u32>,
}

#[wasm_bindgen]
impl PlanLayer {
    /// The layer kind, e.g. `"conv2d"`.
    #[wasm_bindgen(getter)]
    pub fn name(&self) -> String {
        self.name.to_string()
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
    /// Arena bytes a training step needs (parameters and optimizer state included).
    #[wasm_bindgen(getter, js_name = trainBytes)]
    pub fn train_bytes(&self) -> f64 {
        self.inner.train_bytes as f64
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
                name: l.name,
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
            "{{\"trainBytes\":{},\"inferBytes\":{},\"persistentBytes\":{},\"layers\":[{}]}}",
            self.inner.train_bytes,
            self.inner.infer_bytes,
            self.inner.persistent_bytes,
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

fn dim(v: u32) -> usize {
    v as usize
}

#[wasm_bindgen]
impl Model {
    /// W1 "digits-fcn" (1 input channel, 10 classes, 6,218 parameters) with SGD.
    /// `arenaBytes` 0 sizes the arena for a batch of 32 images of 28x28.
    pub fn w1(
        seed: u32,
        lr: f32,
        momentum: f32,
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
        #[wasm_bindgen(js_name = inChannels)] in_channels: u32,
        seed: u32,
        lr: f32,
        momentum: f32,
        #[wasm_bindgen(js_name = arenaBytes)] arena_bytes: f64,
    ) -> Result<Model, JsError> {
        let spec = NetSpec::from_json(dim(in_channels), layers_json).map_err(js_err)?;
        Self::build(spec, seed, lr, momentum, arena_bytes)
    }

    fn build(spec: NetSpec, seed: u32, lr: f32, momentum: f32, arena_bytes: f64) -> Result<Model, JsError> {
        if !(arena_bytes >= 0.0 && arena_bytes <= u32::MAX as f64) {
            return Err(JsError::new(&format!(
                "arenaBytes must be between 0 and 4294967295, got {arena_bytes}"
            )));
        }
        let inner = Engine::new(spec, seed as u64, lr, momentum, arena_bytes as usize).map_err(js_err)?;
        Ok(Model { inner })
    }

    /// The plan of W1 (SGD with this momentum) at `[batch, 1, height, width]`, without
    /// building a model: use it to choose `arenaBytes`.
    #[wasm_bindgen(js_name = planW1)]
    pub fn plan_w1(momentum: f32, batch: u32, height: u32, width: u32) -> Result<Plan, JsError> {
        let inner =
            engine::plan(&NetSpec::W1, momentum, dim(batch), dim(height), dim(width)).map_err(js_err)?;
        Ok(Plan { inner })
    }

    /// The plan of this model at `[batch, C, height, width]`.
    pub fn plan(&self, batch: u32, height: u32, width: u32) -> Result<Plan, JsError> {
        let inner = self
            .inner
            .plan(dim(batch), dim(height), dim(width))
            .map_err(js_err)?;
        Ok(Plan { inner })
    }

    /// One SGD step on `batch` images of `height x width` with one label each.
    #[wasm_bindgen(js_name = trainStep)]
    pub fn train_step(
        &mut self,
        x: &[f32],
        batch: u32,
        height: u32,
        width: u32,
        labels: &[u32],
    ) -> Result<Step, JsError> {
        let s = self
            .inner
            .train_step(x, dim(batch), dim(height), dim(width), labels)
            .map_err(js_err)?;
        Ok(Step {
            loss: s.loss,
            accuracy: s.accuracy,
        })
    }

    /// Class probabilities, `[batch, classes]` row-major.
    pub fn predict(&mut self, x: &[f32], batch: u32, height: u32, width: u32) -> Result<Vec<f32>, JsError> {
        self.inner
            .predict(x, dim(batch), dim(height), dim(width))
            .map_err(js_err)
    }

    /// Accuracy (0..1) on `count` labelled images of one size.
    pub fn evaluate(
        &mut self,
        x: &[f32],
        count: u32,
        height: u32,
        width: u32,
        labels: &[u32],
    ) -> Result<f32, JsError> {
        self.inner
            .evaluate(x, dim(count), dim(height), dim(width), labels)
            .map_err(js_err)
    }

    /// The parameters as bytes in the project's weights format (`torchlet::io`).
    #[wasm_bindgen(js_name = exportWeights)]
    pub fn export_weights(&self) -> Result<Vec<u8>, JsError> {
        self.inner.export_weights().map_err(js_err)
    }

    /// Replaces the parameters with ones from `exportWeights` (same network). A corrupt
    /// or mismatched blob throws and leaves the model as it was.
    #[wasm_bindgen(js_name = importWeights)]
    pub fn import_weights(&mut self, bytes: &[u8]) -> Result<(), JsError> {
        self.inner.import_weights(bytes).map_err(js_err)
    }

    /// Loss of the last successful training step (NaN before the first).
    #[wasm_bindgen(getter)]
    pub fn loss(&self) -> f32 {
        self.inner.last.map_or(f32::NAN, |s| s.loss)
    }

    /// Batch accuracy of the last successful training step (NaN before the first).
    #[wasm_bindgen(getter)]
    pub fn accuracy(&self) -> f32 {
        self.inner.last.map_or(f32::NAN, |s| s.accuracy)
    }

    /// Training steps taken.
    #[wasm_bindgen(getter)]
    pub fn steps(&self) -> f64 {
        self.inner.steps as f64
    }

    /// The SGD learning rate (settable, e.g. for fine-tuning).
    #[wasm_bindgen(getter)]
    pub fn lr(&mut self) -> f32 {
        self.inner.sgd().lr
    }
    /// Sets the SGD learning rate.
    #[wasm_bindgen(setter)]
    pub fn set_lr(&mut self, lr: f32) {
        self.inner.sgd().lr = lr;
    }

    /// Arena capacity in bytes.
    #[wasm_bindgen(getter, js_name = arenaBytes)]
    pub fn arena_bytes(&self) -> f64 {
        self.inner.arena_bytes() as f64
    }

    /// Most arena bytes any call has used so far.
    #[wasm_bindgen(getter, js_name = highWaterBytes)]
    pub fn high_water_bytes(&self) -> f64 {
        self.inner.high_water_bytes() as f64
    }

    /// Number of trainable scalars.
    #[wasm_bindgen(getter, js_name = numParameters)]
    pub fn num_parameters(&self) -> f64 {
        self.inner.num_parameters() as f64
    }

    /// Input channels the network expects.
    #[wasm_bindgen(getter, js_name = inChannels)]
    pub fn in_channels(&self) -> u32 {
        self.inner.spec().in_channels() as u32
    }
}
