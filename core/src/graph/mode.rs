//! Train or eval mode: a flag of the graph that layers read (ops take the mode as an
//! argument, as `torch.nn.functional` does).

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
}
