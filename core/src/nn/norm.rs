//! Normalisation and dropout layers: [`BatchNorm2d`], [`GroupNorm`], [`Dropout`], with
//! PyTorch's initialisation, defaults and parameter order (so saved weights line up
//! with a `state_dict`). The train/eval switch is the graph's
//! ([`Graph::set_training`], PyTorch's `model.train()` / `model.eval()`).

use crate::error::{Error, Result};
use crate::graph::{Graph, Tensor};
use crate::ops::batch_norm::BatchNormParams;
use crate::scalar::Scalar;

/// Fills a parameter or buffer with `v`.
fn fill<S: Scalar, const N: usize>(g: &mut Graph<'_, S, N>, t: Tensor, v: f32) -> Result<()> {
    if !g.is_meta() {
        g.param_data_mut(t)?.fill(S::from_f32(v));
    }
    Ok(())
}

/// `nn.BatchNorm2d`'s constructor arguments (PyTorch's defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchNormOptions {
    /// Added to the variance before its square root (1e-5).
    pub eps: f32,
    /// Weight of each batch in the running statistics (0.1).
    pub momentum: f32,
    /// Learnable per-channel weight and bias (true).
    pub affine: bool,
    /// Keep running statistics (true); without them, batch statistics normalise in
    /// eval mode too.
    pub track_running_stats: bool,
}

impl Default for BatchNormOptions {
    fn default() -> Self {
        BatchNormOptions {
            eps: 1e-5,
            momentum: 0.1,
            affine: true,
            track_running_stats: true,
        }
    }
}

/// `nn.BatchNorm2d` on `[N, C, H, W]`: weight 1, bias 0, running mean 0, running
/// variance 1, created in that order (PyTorch's `state_dict` order, without
/// `num_batches_tracked`). The running statistics are buffers ([`Graph::buffer`]):
/// saved and loaded with the parameters, never touched by optimizers.
#[derive(Clone, Copy, Debug)]
pub struct BatchNorm2d {
    /// `[C]`, if affine.
    pub weight: Option<Tensor>,
    /// `[C]`, if affine.
    pub bias: Option<Tensor>,
    /// `[C]` buffer, if tracked.
    pub running_mean: Option<Tensor>,
    /// `[C]` buffer, if tracked.
    pub running_var: Option<Tensor>,
    /// Update weight of the running statistics.
    pub momentum: f32,
    /// Added to the variance.
    pub eps: f32,
    /// Frozen statistics: the running statistics normalise and are not updated in
    /// training mode too, while the affine parameters still train (fine-tuning at
    /// batch 1, where batch statistics are meaningless). PyTorch's way is to put only
    /// the BatchNorm modules in eval mode.
    pub frozen_stats: bool,
}

impl BatchNorm2d {
    /// `nn.BatchNorm2d(num_features)` with PyTorch's defaults.
    pub fn new<S: Scalar, const N: usize>(g: &mut Graph<'_, S, N>, num_features: usize) -> Result<Self> {
        Self::with_options(g, num_features, BatchNormOptions::default())
    }

    /// `nn.BatchNorm2d(num_features, eps, momentum, affine, track_running_stats)`.
    pub fn with_options<S: Scalar, const N: usize>(
        g: &mut Graph<'_, S, N>,
        num_features: usize,
        o: BatchNormOptions,
    ) -> Result<Self> {
        let (weight, bias) = match o.affine {
            true => {
                let w = g.param(&[num_features])?;
                fill(g, w, 1.0)?;
                (Some(w), Some(g.param(&[num_features])?))
            }
            false => (None, None),
        };
        let (running_mean, running_var) = match o.track_running_stats {
            true => {
                let m = g.buffer(&[num_features])?;
                let v = g.buffer(&[num_features])?;
                fill(g, v, 1.0)?;
                (Some(m), Some(v))
            }
            false => (None, None),
        };
        Ok(BatchNorm2d {
            weight,
            bias,
            running_mean,
            running_var,
            momentum: o.momentum,
            eps: o.eps,
            frozen_stats: false,
        })
    }

    /// This layer with frozen statistics on or off (see [`BatchNorm2d::frozen_stats`]).
    pub fn frozen(self, on: bool) -> Self {
        BatchNorm2d {
            frozen_stats: on,
            ..self
        }
    }

    /// Applies the layer: batch statistics (and a running-statistics update) in
    /// training mode, running statistics in eval mode or with frozen statistics.
    pub fn forward<S: Scalar, const N: usize>(&self, g: &mut Graph<'_, S, N>, x: Tensor) -> Result<Tensor> {
        let p = self.params(g, x)?;
        g.batch_norm(x, self.weight, self.bias, self.running_mean, self.running_var, p)
    }

    /// [`BatchNorm2d::forward`] that consumes `x`: the output takes over `x`'s memory
    /// where [`Graph::batch_norm_`] allows it (fixed statistics, no gradient wanted for
    /// the weight or compact saves, nothing else needing `x`), else it is a new tensor and `x` is
    /// freed. In place, freeing `x` under the output does not make the arena move the
    /// output down.
    pub fn forward_consuming<S: Scalar, const N: usize>(
        &self,
        g: &mut Graph<'_, S, N>,
        x: Tensor,
    ) -> Result<Tensor> {
        let p = self.params(g, x)?;
        if g.batch_norm_in_place_applies(self.weight, p) && g.can_overwrite_tensor(x) {
            return g.batch_norm_(x, self.weight, self.bias, self.running_mean, self.running_var, p);
        }
        let y = g.batch_norm(x, self.weight, self.bias, self.running_mean, self.running_var, p)?;
        g.free(x)?;
        Ok(y)
    }

    /// The op's parameters for input `x` in `g`'s mode (a 4-dimensional `x` only).
    fn params<S: Scalar, const N: usize>(&self, g: &Graph<'_, S, N>, x: Tensor) -> Result<BatchNormParams> {
        let rank = g.shape(x)?.rank();
        if rank != 4 {
            return Err(Error::ShapeMismatch {
                op: "BatchNorm2d",
                what: "input has {found} dimensions, expected {expected} (N, C, H, W)",
                expected: 4,
                found: rank,
            });
        }
        let tracked = self.running_mean.is_some();
        Ok(BatchNormParams {
            training: !tracked || (g.is_training() && !self.frozen_stats),
            momentum: self.momentum,
            eps: self.eps,
        })
    }
}

/// `nn.GroupNorm(num_groups, num_channels, eps, affine)`: weight 1, bias 0. The same
/// in training and eval; works at batch 1.
#[derive(Clone, Copy, Debug)]
pub struct GroupNorm {
    /// Groups the channels are split into.
    pub num_groups: usize,
    /// `[C]`, if affine.
    pub weight: Option<Tensor>,
    /// `[C]`, if affine.
    pub bias: Option<Tensor>,
    /// Added to the variance.
    pub eps: f32,
}

impl GroupNorm {
    /// `nn.GroupNorm(num_groups, num_channels)` (eps 1e-5, affine).
    pub fn new<S: Scalar, const N: usize>(
        g: &mut Graph<'_, S, N>,
        num_groups: usize,
        num_channels: usize,
    ) -> Result<Self> {
        Self::with_options(g, num_groups, num_channels, 1e-5, true)
    }

    /// `nn.GroupNorm(num_groups, num_channels, eps, affine)`.
    pub fn with_options<S: Scalar, const N: usize>(
        g: &mut Graph<'_, S, N>,
        num_groups: usize,
        num_channels: usize,
        eps: f32,
        affine: bool,
    ) -> Result<Self> {
        if num_groups == 0 || !num_channels.is_multiple_of(num_groups) {
            return Err(Error::InvalidParam {
                op: "GroupNorm",
                what: "num_groups must be at least 1 and divide num_channels",
                value: num_groups as i64,
            });
        }
        let (weight, bias) = match affine {
            true => {
                let w = g.param(&[num_channels])?;
                fill(g, w, 1.0)?;
                (Some(w), Some(g.param(&[num_channels])?))
            }
            false => (None, None),
        };
        Ok(GroupNorm {
            num_groups,
            weight,
            bias,
            eps,
        })
    }

    /// Applies the layer.
    pub fn forward<S: Scalar, const N: usize>(&self, g: &mut Graph<'_, S, N>, x: Tensor) -> Result<Tensor> {
        g.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)
    }
}

/// `nn.Dropout(p)`: zeroes elements with probability `p` in training mode (scaling the
/// rest by `1 / (1 - p)`), the identity in eval mode; masks come from the graph's
/// seeded generator ([`Graph::manual_seed`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dropout {
    /// Probability of an element being zeroed.
    pub p: f32,
}

impl Dropout {
    /// `nn.Dropout(p)`; `p` must be in `[0, 1]`.
    pub fn new(p: f32) -> Result<Self> {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::float("Dropout", "p must be a probability in [0, 1]", p));
        }
        Ok(Dropout { p })
    }

    /// Applies the layer (in eval mode, returns `x` itself).
    pub fn forward<S: Scalar, const N: usize>(&self, g: &mut Graph<'_, S, N>, x: Tensor) -> Result<Tensor> {
        let training = g.is_training();
        g.dropout(x, self.p, training)
    }
}
