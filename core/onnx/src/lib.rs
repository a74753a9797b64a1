//! ONNX models, as PyTorch's `torch.onnx.export` writes them (the TorchScript exporter,
//! opset 13 to 18, and the dynamo exporter), imported into torchlet's host-side model
//! description [`GraphSpec`]: nodes named by torchlet's op registry, parameters and
//! buffers under their PyTorch `state_dict` names.
//!
//! The shape arithmetic exporters emit around `Reshape` and `Pad` (`Shape`, `Gather`,
//! `Concat`, `ConstantOfShape`, ...) is evaluated at import time where it depends only on
//! constants, the channel count and the batch size, so a model exported with free H and W
//! keeps them free. That evaluation builds no constant of more than 2^20 elements and
//! holds at most 2^22 in all, so a crafted file cannot make the importer fill memory.
//! Anything else is refused with an [`Error`] naming the node, its op type and why. Free input dims get a minimum size ([`DimSpec::Free`]): 1 for the batch, and
//! for H, W or L the smallest size for which every op of the graph has an output of at
//! least one element (computed with [`infer::shapes`]).
//!
//! A model a user was sent is input to distrust: names must be unique (initializers,
//! inputs, node outputs and node names, as the ONNX checker requires); the imported
//! graph is run once on the engine's meta graph, so a node the engine refuses at every
//! size is refused here, naming the node; external data is read only from regular files
//! inside the model's folder, and only each tensor's own bytes ([`external`]).
//!
//! ```no_run
//! let bytes = std::fs::read("model.onnx").unwrap();
//! let data = std::fs::read("model.onnx.data").ok();
//! let spec = torchlet_onnx::import(&bytes, data.as_deref(), &Default::default()).unwrap();
//! println!("{} nodes", spec.nodes.len());
//! ```
//!
//! [`DimSpec::Free`]: torchlet::model::spec::DimSpec::Free

mod arr;
mod engine_check;
pub mod external;
#[cfg(test)]
mod external_tests;
mod fold;
mod import;
pub mod infer;
#[cfg(test)]
mod infer_tests;
#[cfg(test)]
mod limits_tests;
pub mod notes;
mod ops;
mod ops2;
#[cfg(test)]
mod shape_tests;
mod shuffle;
mod slices;
mod tensor;

use std::borrow::Cow;
use std::fmt;
use std::path::Path;

pub use tensor::ExternalRef;
pub use torchlet::model::spec::GraphSpec;

/// Import choices.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Folds each `BatchNormalization` that follows a convolution (whose output nothing
    /// else reads) into that convolution's weight and bias (inference-only models); by
    /// default BatchNorm stays a trainable `batch_norm` node with its running statistics.
    pub fold_bn: bool,
}

/// Why a model could not be imported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The bytes are not an ONNX model (truncated, corrupted, not protobuf).
    Parse(String),
    /// The model as a whole is unusable (no graph, missing external data, bad tensor).
    Model(String),
    /// One node cannot be imported.
    Node {
        /// Its index in the graph's node list.
        index: usize,
        /// Its ONNX op type (`"LSTM"`).
        op_type: String,
        /// Its name in the model (may be empty).
        name: String,
        /// Why.
        why: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Parse(m) => write!(f, "not a readable ONNX model: {m}"),
            Error::Model(m) => write!(f, "{m}"),
            Error::Node {
                index,
                op_type,
                name,
                why,
            } => write!(f, "node {index} ({op_type} {name:?}): {why}"),
        }
    }
}

impl std::error::Error for Error {}

/// Imports an ONNX model from its bytes. `external_data` is the content of the file the
/// model's external initializers live in (`model.onnx.data`, which the dynamo exporter
/// writes beside `model.onnx`); every external reference is read from it.
pub fn import(model: &[u8], external_data: Option<&[u8]>, options: &Options) -> Result<GraphSpec, Error> {
    import_with(model, &|_: &str| external_data, options)
}

/// Imports an ONNX model whose external initializers may live in several files: `lookup`
/// gives the bytes of the whole file named by an initializer's `location`, or `None`
/// (an error naming the tensor and the location). Each tensor's `offset` and length
/// must lie inside its file.
pub fn import_with<'a>(
    model: &[u8],
    lookup: &dyn Fn(&str) -> Option<&'a [u8]>,
    options: &Options,
) -> Result<GraphSpec, Error> {
    run(model, &|r| tensor::slice_of(lookup, r), options)
}

/// Imports an ONNX model whose external initializers are read by `read`: exactly
/// [`ExternalRef::length`] bytes from [`ExternalRef::offset`] of its `location`, or why
/// not (the error then names the tensor and the location too).
pub fn import_reading(
    model: &[u8],
    read: &dyn Fn(&ExternalRef<'_>) -> Result<Vec<u8>, String>,
    options: &Options,
) -> Result<GraphSpec, Error> {
    run(model, &|r| read(r).map(Cow::Owned), options)
}

/// Imports an ONNX model read from a file in `folder` (`""` is the current directory),
/// its external initializers read from files inside that folder only
/// ([`external::read`]: no absolute path, nothing outside through `..` or a symlink,
/// regular files only, only the bytes each tensor takes).
pub fn import_from_folder(model: &[u8], folder: &Path, options: &Options) -> Result<GraphSpec, Error> {
    import_reading(model, &|r| external::read(folder, r), options)
}

fn run<'a>(model: &[u8], read: &tensor::Reader<'_, 'a>, options: &Options) -> Result<GraphSpec, Error> {
    use onnx_protobuf::Message;
    let proto =
        onnx_protobuf::ModelProto::parse_from_bytes(model).map_err(|e| Error::Parse(e.to_string()))?;
    import::Importer::run(&proto, read, options)
}
