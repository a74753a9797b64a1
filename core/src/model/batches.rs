//! PyTorch's `num_batches_tracked`: the counter a BatchNorm in training mode counts up
//! by one per forward. A model file keeps it as a buffer beside the running statistics
//! (`<prefix>.num_batches_tracked` beside `<prefix>.running_mean`; the importer adds it,
//! since ONNX does not carry it), so a trained model exports the count PyTorch has.

use super::Model;
use crate::error::Result;
use crate::graph::Graph;
use crate::scalar::Scalar;

impl Model<'_> {
    /// Counts `batches` more training-mode forwards in every BatchNorm's
    /// `num_batches_tracked` (call it after training steps in training mode: a
    /// BatchNorm in eval mode counts nothing, as in PyTorch). The count is held in the
    /// scalar type: exact in `f32` up to 2^24, saturating in Q16.16 at 32767.
    pub fn count_batches<S: Scalar, const N: usize>(
        &self,
        g: &mut Graph<'_, S, N>,
        batches: u64,
    ) -> Result<()> {
        for t in self.file().tensors() {
            let Some(prefix) = t.name.strip_suffix(".num_batches_tracked") else {
                continue;
            };
            let has_stats = self
                .file()
                .tensors()
                .any(|s| s.name.strip_suffix(".running_mean") == Some(prefix));
            let Some(h) = self.param(t.index).filter(|_| has_stats && t.shape.numel() == 1) else {
                continue;
            };
            let d = g.param_data_mut(h)?;
            if let Some(v) = d.first_mut() {
                *v = S::from_f32(v.to_f32() + batches as f32);
            }
        }
        Ok(())
    }
}
