//! Ops without gradients, chosen when the program is compiled rather than when it
//! runs: [`Graph::no_grad`].
//!
//! - [`Graph::set_grad_enabled`] turns recording off at run time, but the op methods
//!   still name their backward rules, so a program that calls `conv2d` links conv2d's
//!   backward code even if it never records it.
//! - The ops of [`NoGrad`] record no gradient path and name no backward rule: frozen
//!   layers run through them (for example the frozen convolutions of the Cortex-M0
//!   program, which trains only a linear head) link only forward code.

use super::Graph;
use crate::scalar::Scalar;

/// A graph's ops without gradients, as under `torch.no_grad()`: outputs never
/// require a gradient, whatever the inputs, and nothing is saved for backward.
/// Memory, validation and errors are those of the [`Graph`] methods of the same name.
/// Each op file adds its own no-grad methods (an `impl NoGrad` block beside the op).
pub struct NoGrad<'g, 'a, S: Scalar, const N: usize> {
    pub(crate) g: &'g mut Graph<'a, S, N>,
}

impl<'a, S: Scalar, const N: usize> Graph<'a, S, N> {
    /// The ops of this graph without gradients ([`NoGrad`]); a program that calls an
    /// op only through it does not link that op's backward rule.
    pub fn no_grad(&mut self) -> NoGrad<'_, 'a, S, N> {
        NoGrad { g: self }
    }
}
