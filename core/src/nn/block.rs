//! Blocks that are not a straight line (residual adds, concatenating skips) written as
//! ordinary Rust: anything with a `forward` is a [`Block`], blocks nest by value (no
//! heap), and the tape records whatever path the code takes, so a block may branch on
//! the input's shape like any define-by-run code.
//!
//! ```
//! use torchlet::nn::{Block, Cat, Conv2d, Layer, Residual, Sequential};
//! use torchlet::{init::Rng, Conv2dParams, Graph, Tensor};
//!
//! # fn main() -> Result<(), torchlet::Error> {
//! let mut arena = vec![0.0f32; 16 * 1024];
//! let mut g: Graph<f32, 64> = Graph::new(&mut arena);
//! let mut rng = Rng::new(0);
//! let same = Conv2dParams::padded(1);
//! // x + conv(relu(conv(x))): a residual block.
//! let mut body: Sequential<3> = Sequential::new();
//! body.push(Layer::Conv2d(Conv2d::new(&mut g, 4, 4, 3, same, true, &mut rng)?))?;
//! body.push(Layer::Relu)?;
//! body.push(Layer::Conv2d(Conv2d::new(&mut g, 4, 4, 3, same, true, &mut rng)?))?;
//! let residual = Residual(body);
//! // cat([x, relu(x)], dim 1) as a closure beside a layer: 8 channels out.
//! let skip = Cat { a: |_: &mut Graph<'_, f32, 64>, x: Tensor| Ok(x), b: Layer::Relu, dim: 1 };
//! let net = (residual, skip);
//!
//! let x = g.input(&[1, 4, 6, 5], &[0.5; 4 * 6 * 5])?;
//! let y = net.forward(&mut g, x)?;
//! assert_eq!(g.shape(y)?.dims(), &[1, 8, 6, 5]);
//! # Ok(()) }
//! ```

use super::{Layer, Sequential};
use crate::error::Result;
use crate::graph::{Graph, Tensor};
use crate::scalar::Scalar;

/// A part of a network: one tensor in, one tensor out.
pub trait Block<S: Scalar, const N: usize> {
    /// Records the block's ops on `g`.
    fn forward(&self, g: &mut Graph<'_, S, N>, x: Tensor) -> Result<Tensor>;
}

impl<S: Scalar, const N: usize> Block<S, N> for Layer {
    fn forward(&self, g: &mut Graph<'_, S, N>, x: Tensor) -> Result<Tensor> {
        Layer::forward(self, g, x)
    }
}

impl<S: Scalar, const N: usize, const L: usize> Block<S, N> for Sequential<L> {
    fn forward(&self, g: &mut Graph<'_, S, N>, x: Tensor) -> Result<Tensor> {
        Ok(Sequential::forward(self, g, x)?)
    }
}

/// A closure is a block.
impl<S: Scalar, const N: usize, F> Block<S, N> for F
where
    F: Fn(&mut Graph<'_, S, N>, Tensor) -> Result<Tensor>,
{
    fn forward(&self, g: &mut Graph<'_, S, N>, x: Tensor) -> Result<Tensor> {
        self(g, x)
    }
}

/// Two blocks one after the other (nest pairs for longer chains).
impl<S: Scalar, const N: usize, A: Block<S, N>, B: Block<S, N>> Block<S, N> for (A, B) {
    fn forward(&self, g: &mut Graph<'_, S, N>, x: Tensor) -> Result<Tensor> {
        let y = self.0.forward(g, x)?;
        self.1.forward(g, y)
    }
}

/// `x + body(x)`: a residual connection (the body keeps the shape).
#[derive(Clone, Copy, Debug)]
pub struct Residual<B>(pub B);

impl<S: Scalar, const N: usize, B: Block<S, N>> Block<S, N> for Residual<B> {
    fn forward(&self, g: &mut Graph<'_, S, N>, x: Tensor) -> Result<Tensor> {
        let y = self.0.forward(g, x)?;
        g.add(x, y)
    }
}

/// `cat([a(x), b(x)], dim)`: two branches joined along `dim` (a U-Net skip: one
/// branch the identity, the other the down-and-up path).
#[derive(Clone, Copy, Debug)]
pub struct Cat<A, B> {
    /// The first branch.
    pub a: A,
    /// The second branch.
    pub b: B,
    /// The dimension to join along (negative counts from the end).
    pub dim: i64,
}

impl<S: Scalar, const N: usize, A: Block<S, N>, B: Block<S, N>> Block<S, N> for Cat<A, B> {
    fn forward(&self, g: &mut Graph<'_, S, N>, x: Tensor) -> Result<Tensor> {
        let a = self.a.forward(g, x)?;
        let b = self.b.forward(g, x)?;
        g.cat(a, b, self.dim)
    }
}
