//! Flags of the graph: train or eval mode, which layers read (ops take the mode as an
//! argument, as `torch.nn.functional` does), and whether ops may keep compact saves.

use super::Graph;
use crate::scalar::Scalar;

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Train or eval mode, PyTorch's `model.train()` / `model.eval()`: layers read it
    /// ([`crate::nn::BatchNorm2d`] normalises by batch statistics and updates its
    /// running ones in training, by the running ones in eval; [`crate::nn::Dropout`] is
    /// the identity in eval). Ops take the mode as an argument, as
    /// `torch.nn.functional` does. A new graph is in training mode. Independent of
    /// [`Graph::set_grad_enabled`] (eval with gradients fine-tunes around frozen
    /// statistics).
    pub fn set_training(&mut self, on: bool) {
        self.training = on;
    }

    /// Whether the graph is in training mode (see [`Graph::set_training`]).
    pub fn is_training(&self) -> bool {
        self.training
    }

    /// Lets ops keep 16-bit values for backward where only a parameter's gradient
    /// reads them (off in a new graph): a BatchNorm with fixed statistics and a scale
    /// that trains keeps its normalised input as bfloat16 (`f32`) or Q8.8 (fixed
    /// point), half the bytes of its input, instead of keeping the input. That scale's
    /// gradient is then computed from the rounded values (relative error about
    /// `2^-9` per value); every other gradient is unchanged. The record may then run in
    /// place ([`Graph::batch_norm_`]). Set it before the step: the planner must see it too.
    pub fn set_compact_saves(&mut self, on: bool) {
        self.compact_saves = on;
    }

    /// Whether ops may keep compact saves (see [`Graph::set_compact_saves`]).
    pub fn compact_saves(&self) -> bool {
        self.compact_saves
    }
}
