//! Training W1 ("digits-fcn", `torchlet::nn::digits_fcn`) on the digits with a fixed
//! recipe: the loop the end-to-end tests and the firmware's asset export share. The
//! loop itself is the `fixed_vs_f32` example's (the single copy, which stands alone as
//! an example); this module adds the `f32` forms.

#[allow(dead_code)] // the example's `main`
#[path = "../examples/fixed_vs_f32.rs"]
mod example;

pub use example::{
    accuracy, plan_bytes_in, train_w1_in, EpochReport, Recipe, FIXED_LOSS_SCALE, RECIPE, TAPE,
};

use crate::digits::Digit;
use torchlet::Error;

/// Bytes a W1 training step (forward, backward, SGD with momentum) needs at this batch
/// and size, parameters and optimizer state included: the meta plan.
pub fn plan_bytes(batch: usize, h: usize, w: usize) -> Result<usize, Error> {
    plan_bytes_in::<f32>(batch, h, w)
}

/// Trains W1 on `train` (all one size per batch) and reports each epoch on `test`.
pub fn train_w1(
    train: &[Digit],
    test: &[Digit],
    r: Recipe,
    report: impl FnMut(&EpochReport),
) -> Result<(Vec<EpochReport>, usize), Error> {
    train_w1_in::<f32>(train, test, r, 1.0, report)
}
