//! conv2d with frozen int8 weights ([`QConv2dWeights`]) on a `Q16` graph: the forward
//! of [`NoGrad::conv2d_q8`](crate::graph::NoGrad::conv2d_q8). No backward rule exists:
//! it is meant for frozen first layers, whose input needs no gradient either.
//!
//! Validation, output shape and allocation are those of [`Graph::conv2d`] (so a meta
//! graph plans the same bytes as a real run, and as a Q16 conv2d would take); the
//! kernel is `conv2d_q8` (`kernels/conv/q8`).

use super::conv::{geometry_of, Conv2dParams};
use crate::error::Result;
use crate::fixed::Q16;
use crate::graph::{Graph, NoGrad, Op, Tensor};
use crate::kernels::conv::q8::{conv2d_q8, QConv2dWeights};
use crate::shape::Shape;

const OP: &str = "conv2d_q8";

impl<const N: usize> Graph<'_, Q16, N> {
    /// Records `x` convolved with `w` (no gradient path: the output is a leaf that
    /// requires no gradient).
    pub(crate) fn conv2d_q8_no_grad(
        &mut self,
        x: Tensor,
        w: &QConv2dWeights<'_>,
        p: Conv2dParams,
    ) -> Result<Tensor> {
        let xn = self.nodes[self.id(x)?];
        let ws = Shape::new(&w.dims())?;
        let bs = match w.bias() {
            Some(b) => Some(Shape::new(&[b.len()])?),
            None => None,
        };
        let g = geometry_of(OP, xn.shape(), ws, bs, &p)?;
        let shape = Shape::nchw(g.n, g.c_out, g.oh, g.ow)?;
        let out = self.push(shape, Op::LEAF, None, false, 0)?;
        let y = self.nodes[out.id as usize].data;
        self.exec_n([xn.data], y, g.macs(), |[x], y| conv2d_q8(&g, x, w, y))?;
        Ok(out)
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
