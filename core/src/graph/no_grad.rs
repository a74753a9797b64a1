//! Ops without gradients, chosen when the program is compiled rather than when it
//! runs: [`Graph::no_grad`].
//!
//! - [`Graph::set_grad_enabled`] turns recording off at run time, but the op methods
//!   still name their backward rules, so a program that calls `conv2d` links conv2d's
//!   backward code even if it never records it.
//! - The ops of [`NoGrad`] record no gradient path and name no backward rule: frozen
//!   layers run through them (for example the frozen convolutions of the Cortex-M0
//!   program, which trains only a linear head) link only forward code.

use super::{Graph, Tensor};
use crate::error::Result;
use crate::fixed::{QConv2dWeights, Q16};
use crate::ops::conv::Conv2dParams;
use crate::ops::interpolate::InterpMode;
use crate::ops::pool::Pool2dParams;
use crate::scalar::Scalar;

/// A graph's ops without gradients, as under `torch.no_grad()`: outputs never
/// require a gradient, whatever the inputs, and nothing is saved for backward.
/// Memory, validation and errors are those of the [`Graph`] methods of the same name.
pub struct NoGrad<'g, 'a, S: Scalar, const N: usize> {
    g: &'g mut Graph<'a, S, N>,
}

impl<'a, S: Scalar, const N: usize> Graph<'a, S, N> {
    /// The ops of this graph without gradients ([`NoGrad`]); a program that calls an
    /// op only through it does not link that op's backward rule.
    pub fn no_grad(&mut self) -> NoGrad<'_, 'a, S, N> {
        NoGrad { g: self }
    }
}

impl<S: Scalar, const N: usize> NoGrad<'_, '_, S, N> {
    /// [`Graph::conv2d`] without gradients.
    pub fn conv2d(&mut self, x: Tensor, w: Tensor, b: Option<Tensor>, p: Conv2dParams) -> Result<Tensor> {
        self.g.conv2d_with(x, w, b, p, None)
    }

    /// [`Graph::relu_`] without gradients (no mask is saved).
    pub fn relu_(&mut self, x: Tensor) -> Result<Tensor> {
        self.g.relu_with_(x, None)
    }

    /// [`Graph::max_pool2d`] without gradients (no argmax is saved).
    pub fn max_pool2d(&mut self, x: Tensor, p: Pool2dParams) -> Result<Tensor> {
        self.g.max_pool2d_with(x, p, None)
    }

    /// [`Graph::adaptive_avg_pool2d`] without gradients.
    pub fn adaptive_avg_pool2d(&mut self, x: Tensor, output_size: [usize; 2]) -> Result<Tensor> {
        self.g.adaptive_avg_pool2d_with(x, output_size, None)
    }

    /// [`Graph::interpolate`] without gradients.
    pub fn interpolate(&mut self, x: Tensor, size: [usize; 2], mode: InterpMode) -> Result<Tensor> {
        self.g.interpolate_with(x, size, mode, None)
    }

    /// [`Graph::reshape`] without gradients.
    pub fn reshape(&mut self, x: Tensor, dims: &[usize]) -> Result<Tensor> {
        self.g.reshape_with(x, dims, None)
    }

    /// [`Graph::flatten`] without gradients.
    pub fn flatten(&mut self, x: Tensor, start_dim: usize) -> Result<Tensor> {
        self.g.flatten_with(x, start_dim, None)
    }
}

impl<const N: usize> NoGrad<'_, '_, Q16, N> {
    /// conv2d with frozen int8 weights quantized per output channel
    /// ([`QConv2dWeights`], read in place, for example from flash): validation, output
    /// shape and arena bytes as [`Graph::conv2d`] (a meta graph plans it exactly), each
    /// output `sat(round(sum(x_raw * q) * mult / 2^shift) + bias_raw)`, exact for any
    /// input (see [`QConv2dWeights`]). `Q16` graphs only; there is no gradient
    /// version (frozen layers).
    pub fn conv2d_q8(&mut self, x: Tensor, w: &QConv2dWeights<'_>, p: Conv2dParams) -> Result<Tensor> {
        self.g.conv2d_q8_no_grad(x, w, p)
    }
}
