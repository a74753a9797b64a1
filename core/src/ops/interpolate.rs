//! interpolate: 2-D resize (`torch.nn.functional.interpolate(size=...)`), nearest and
//! bilinear; the op behind progressive resizing.

use super::expect_rank;
use crate::error::{Error, Result};
use crate::graph::{BackwardFn, Graph, NodeId, Op, Tensor, RULE_MISMATCH};
pub use crate::kernels::resize::InterpMode;
use crate::kernels::resize::{self as k, ResizeGeom};
use crate::scalar::Scalar;
use crate::shape::Shape;

const OP: &str = "interpolate";

pub(crate) fn geometry(x: Shape, size: [usize; 2], mode: InterpMode) -> Result<ResizeGeom> {
    expect_rank(OP, "input rank (N, C, H, W)", x.rank(), 4)?;
    if x.numel() == 0 {
        return Err(Error::ShapeMismatch {
            op: OP,
            what: "zero-sized input dimension",
            expected: 1,
            found: 0,
        });
    }
    for &s in &size {
        if s == 0 {
            return Err(Error::InvalidParam {
                op: OP,
                what: "output size must be at least 1",
                value: 0,
            });
        }
    }
    Ok(ResizeGeom {
        planes: x.dim(0) * x.dim(1),
        h: x.dim(2),
        w: x.dim(3),
        oh: size[0],
        ow: size[1],
        mode,
    })
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Resizes the spatial dims of `x: [N, C, H, W]` to `size = [h, w]`.
    pub fn interpolate(&mut self, x: Tensor, size: [usize; 2], mode: InterpMode) -> Result<Tensor> {
        self.interpolate_with(x, size, mode, Some(Self::interpolate_rule))
    }

    /// Records interpolate with `rule` as its backward; `None` records no gradient path.
    pub(crate) fn interpolate_with(
        &mut self,
        x: Tensor,
        size: [usize; 2],
        mode: InterpMode,
        rule: Option<BackwardFn<S, N>>,
    ) -> Result<Tensor> {
        let xi = self.id(x)?;
        let xn = self.nodes[xi];
        let g = geometry(xn.shape, size, mode)?;
        let rg = rule.is_some() && self.needs_grad(&[Some(xi)]);
        let op = Op::Interpolate {
            x: xi as NodeId,
            mode,
        };
        let shape = Shape::nchw(xn.shape.dim(0), xn.shape.dim(1), g.oh, g.ow)?;
        let out = self.push(shape, if rg { op } else { Op::Leaf }, rule, rg, 0)?;
        let y = self.nodes[out.id as usize].data;
        self.exec([xn.data], y, |[x], y| k::resize_forward(&g, x, y))?;
        Ok(out)
    }

    /// interpolate's backward rule, recorded by [`Graph::interpolate`].
    fn interpolate_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let Op::Interpolate { x, mode } = g.nodes[i].op else {
            return Err(RULE_MISMATCH);
        };
        g.interpolate_backward(i, x, mode)
    }

    fn interpolate_backward(&mut self, i: usize, x: NodeId, mode: InterpMode) -> Result<()> {
        let gy = self.grads_for(i)?;
        let ys = self.nodes[i].shape;
        let g = geometry(self.nodes[x as usize].shape, [ys.dim(2), ys.dim(3)], mode)?;
        if let Some(gx) = self.grad_of(x) {
            self.exec([gy], gx, |[gy], gx| k::resize_backward(&g, gy, gx))?;
        }
        Ok(())
    }
}
