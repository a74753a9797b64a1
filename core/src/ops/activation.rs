//! relu, leaky_relu, sigmoid, tanh. ReLU, sigmoid and tanh save nothing extra: their
//! backward reads the output (which lives until the step ends); leaky ReLU reads the
//! input, since a negative slope would make the output's sign ambiguous.

use crate::error::Result;
use crate::graph::{Graph, NodeId, Op, Tensor};
use crate::kernels::elementwise::{grad_map, map};
use crate::scalar::Scalar;

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Records a one-input element-wise op and runs `f` on every element.
    fn unary(&mut self, x: Tensor, op: impl FnOnce(NodeId) -> Op, f: impl Fn(S) -> S) -> Result<Tensor> {
        let xi = self.id(x)?;
        let xn = self.nodes[xi];
        let rg = self.needs_grad(&[Some(xi)]);
        let op = if rg { op(xi as NodeId) } else { Op::Leaf };
        let out = self.push(xn.shape, op, rg, 0)?;
        let y = self.nodes[out.id as usize].data;
        self.exec([xn.data], y, |[x], y| map(x, y, f))?;
        Ok(out)
    }

    /// `gx += f(gy, saved)` where `saved` is the output (`from_output`) or the input.
    fn unary_backward(
        &mut self,
        i: usize,
        x: NodeId,
        from_output: bool,
        f: impl Fn(S, S) -> S,
    ) -> Result<()> {
        let gy = self.out_grad(i)?;
        let saved = if from_output {
            self.nodes[i].data
        } else {
            self.nodes[x as usize].data
        };
        if let Some(gx) = self.grad_of(x) {
            self.exec([gy, saved], gx, |[gy, s], gx| grad_map(gy, s, gx, f))?;
        }
        Ok(())
    }

    /// `max(x, 0)`.
    pub fn relu(&mut self, x: Tensor) -> Result<Tensor> {
        self.unary(x, |x| Op::Relu { x }, |v| if v > S::ZERO { v } else { S::ZERO })
    }

    pub(crate) fn relu_backward(&mut self, i: usize, x: NodeId) -> Result<()> {
        self.unary_backward(i, x, true, |g, y| if y > S::ZERO { g } else { S::ZERO })
    }

    /// `x` where positive, `slope * x` elsewhere.
    pub fn leaky_relu(&mut self, x: Tensor, negative_slope: f32) -> Result<Tensor> {
        let a = S::from_f32(negative_slope);
        self.unary(
            x,
            |x| Op::LeakyRelu {
                x,
                slope: negative_slope,
            },
            |v| if v > S::ZERO { v } else { a * v },
        )
    }

    pub(crate) fn leaky_relu_backward(&mut self, i: usize, x: NodeId, slope: f32) -> Result<()> {
        let a = S::from_f32(slope);
        self.unary_backward(i, x, false, |g, v| if v > S::ZERO { g } else { a * g })
    }

    /// `1 / (1 + e^-x)`.
    pub fn sigmoid(&mut self, x: Tensor) -> Result<Tensor> {
        self.unary(x, |x| Op::Sigmoid { x }, S::sigmoid)
    }

    pub(crate) fn sigmoid_backward(&mut self, i: usize, x: NodeId) -> Result<()> {
        self.unary_backward(i, x, true, |g, y| g * y * (S::ONE - y))
    }

    /// Hyperbolic tangent.
    pub fn tanh(&mut self, x: Tensor) -> Result<Tensor> {
        self.unary(x, |x| Op::Tanh { x }, S::tanh)
    }

    pub(crate) fn tanh_backward(&mut self, i: usize, x: NodeId) -> Result<()> {
        self.unary_backward(i, x, true, |g, y| g * (S::ONE - y * y))
    }
}
