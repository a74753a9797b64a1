//! The ONNX importer of the npm package `torchlet`, as a wasm module of its own so that
//! a page that trains layers or a model file never downloads it: `Model.fromOnnx` (in
//! the package's `index.js`) loads this module on first use, turns the ONNX file into
//! a torchlet model file here, and hands that to `Model.load` in the engine's module.

mod external;
// The engine module's checks of sizes and allocations, compiled here too (one source).
#[allow(dead_code)]
#[path = "../../src/limits.rs"]
mod limits;

pub use external::External;

use wasm_bindgen::prelude::*;

/// An ONNX file as PyTorch's `torch.onnx.export` writes it (either exporter) as a
/// torchlet model file (the bytes `Model.load` takes). `externalData` holds the files
/// its external initializers are stored in, by name: `{ "model.onnx.data": bytes, ...
/// }` or a `Map`; a location that is not among them is refused, naming it. A single
/// `Uint8Array` is the one file of a model that has one (the dynamo exporter's
/// `model.onnx.data`); `undefined` when every initializer is inline.
#[wasm_bindgen(js_name = onnxToModel)]
pub fn onnx_to_model(
    bytes: &[u8],
    #[wasm_bindgen(
        js_name = externalData,
        unchecked_param_type = "Uint8Array | Record<string, Uint8Array> | Map<string, Uint8Array> | null | undefined"
    )]
    external_data: JsValue,
) -> Result<Vec<u8>, JsError> {
    let external = External::from_js(&external_data).map_err(|e| JsError::new(&e))?;
    let spec = external.import(bytes).map_err(|e| JsError::new(&e))?;
    drop(external);
    torchlet::model::encode(&spec).map_err(|e| JsError::new(&e.to_string()))
}
