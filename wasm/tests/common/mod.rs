//! What the tests share.

use torchlet_wasm::Model;
use wasm_bindgen::{JsError, JsValue};

/// `Model.fromOnnx` as the package's `index.js` does it: the importer's module makes the
/// model file, the engine's `Model.load` takes it.
pub fn from_onnx(
    onnx: &[u8],
    external_data: JsValue,
    lr: f64,
    momentum: f64,
    arena_bytes: f64,
    trainable: Option<Vec<String>>,
) -> Result<Model, JsError> {
    let file = torchlet_wasm_onnx::onnx_to_model(onnx, external_data)?;
    Model::load(file, lr, momentum, arena_bytes, trainable)
}
