//! Which tensors of a loaded model train. By default every parameter the file marks
//! trainable does; a list of name patterns (`*` matches any run of characters) picks
//! the parameters that train instead, the rest staying frozen, and then BatchNorm runs
//! on its running statistics, which stay as they are ("frozen statistics"): the
//! partial fine-tuning of TinyTL (biases, BatchNorm affine parameters and the
//! classifier), which works at batch 1.

use torchlet::model::{name_matches, ModelFile, Placement, TensorKind, TensorRecord};

/// The parameters that train: `None` for the file's choice, else the patterns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TrainSet(Option<Vec<String>>);

impl TrainSet {
    /// Every parameter the file marks trainable, BatchNorm on batch statistics.
    pub fn all() -> Self {
        TrainSet(None)
    }

    /// Only parameters whose name matches one of `patterns`, with frozen BatchNorm
    /// statistics; an error (naming the patterns) when no parameter of `file` matches,
    /// or when there is no pattern.
    pub fn matching(file: &ModelFile<'_>, patterns: Vec<String>) -> Result<Self, String> {
        let set = TrainSet(Some(patterns));
        if !file.tensors().any(|t| set.place(&t) == Placement::Train) {
            let p = set.0.unwrap_or_default();
            return Err(format!(
                "train: the patterns {p:?} match no parameter of the model"
            ));
        }
        Ok(set)
    }

    /// Whether BatchNorm uses batch statistics in a training step (only when all train).
    pub fn batch_statistics(&self) -> bool {
        self.0.is_none()
    }

    /// Where tensor `t` goes: the file's default, or trained when a pattern matches
    /// its name (parameters only: buffers never train).
    pub fn place(&self, t: &TensorRecord<'_>) -> Placement {
        match (&self.0, t.kind) {
            (None, kind) => Placement::default_for(kind),
            (Some(p), TensorKind::Param { .. }) if p.iter().any(|p| name_matches(p, t.name)) => {
                Placement::Train
            }
            (Some(_), _) => Placement::Frozen,
        }
    }
}
