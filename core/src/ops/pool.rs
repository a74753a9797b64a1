//! max_pool2d, avg_pool2d and adaptive_avg_pool2d (`torch.nn.functional` semantics).

use super::{expect_rank, window_out};
use crate::error::{Error, Result};
use crate::graph::{BackwardFn, Graph, NodeId, Op, Tensor, RULE_MISMATCH};
use crate::kernels::compact as c;
use crate::kernels::pool::{self as k, PoolGeom};
use crate::scalar::Scalar;
use crate::shape::Shape;

/// Parameters of max and average pooling (rows, columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool2dParams {
    /// Window size.
    pub kernel_size: [usize; 2],
    /// Step between windows (PyTorch's default is the kernel size).
    pub stride: [usize; 2],
    /// Implicit padding on both sides; at most half the kernel.
    pub padding: [usize; 2],
    /// Round the output size up instead of down.
    pub ceil_mode: bool,
    /// Average pooling only: count padded zeros in the divisor.
    pub count_include_pad: bool,
}

impl Pool2dParams {
    /// A `k x k` window with stride `k`, no padding (PyTorch's defaults).
    pub fn square(k: usize) -> Self {
        Pool2dParams {
            kernel_size: [k, k],
            stride: [k, k],
            padding: [0, 0],
            ceil_mode: false,
            count_include_pad: true,
        }
    }
}

fn planes(op: &'static str, x: Shape) -> Result<(usize, usize, usize)> {
    expect_rank(op, "input rank (N, C, H, W)", x.rank(), 4)?;
    if x.numel() == 0 {
        return Err(Error::ShapeMismatch {
            op,
            what: "zero-sized input dimension",
            expected: 1,
            found: 0,
        });
    }
    Ok((x.dim(0) * x.dim(1), x.dim(2), x.dim(3)))
}

pub(crate) fn geometry(op: &'static str, x: Shape, p: &Pool2dParams) -> Result<PoolGeom> {
    let (planes, h, w) = planes(op, x)?;
    for d in 0..2 {
        if p.padding[d] > p.kernel_size[d] / 2 {
            return Err(Error::InvalidParam {
                op,
                what: "padding must be at most half the kernel size",
                value: p.padding[d] as i64,
            });
        }
    }
    let oh = window_out(op, h, p.kernel_size[0], p.stride[0], p.padding[0], 1, p.ceil_mode)?;
    let ow = window_out(op, w, p.kernel_size[1], p.stride[1], p.padding[1], 1, p.ceil_mode)?;
    Ok(PoolGeom {
        planes,
        h,
        w,
        oh,
        ow,
        kernel: p.kernel_size,
        stride: p.stride,
        pad: p.padding,
    })
}

fn out_shape(x: Shape, g: &PoolGeom) -> Result<Shape> {
    Shape::nchw(x.dim(0), x.dim(1), g.oh, g.ow)
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Max pooling; saves each winner's position inside its window, packed (one byte
    /// for windows of up to 127 taps), for backward.
    pub fn max_pool2d(&mut self, x: Tensor, p: Pool2dParams) -> Result<Tensor> {
        self.max_pool2d_with(x, p, Some(Self::max_pool2d_rule))
    }

    /// Records max_pool2d with `rule` as its backward; `None` records no gradient path.
    pub(crate) fn max_pool2d_with(
        &mut self,
        x: Tensor,
        p: Pool2dParams,
        rule: Option<BackwardFn<S, N>>,
    ) -> Result<Tensor> {
        const OP: &str = "max_pool2d";
        let xi = self.id(x)?;
        let xn = self.nodes[xi];
        let g = geometry(OP, xn.shape, &p)?;
        let rg = rule.is_some() && self.needs_grad(&[Some(xi)]);
        let op = Op::MaxPool2d { x: xi as NodeId, p };
        let shape = out_shape(xn.shape, &g)?;
        let taps = p.kernel_size[0] * p.kernel_size[1];
        let saved = if rg {
            c::argmax_words(shape.numel(), taps)
        } else {
            0
        };
        let out = self.push(shape, if rg { op } else { Op::Leaf }, rule, rg, saved)?;
        let node = self.nodes[out.id as usize];
        if !self.arena.is_meta() {
            let ([xv], yv, iv) = self.arena.views2([xn.data], node.data, node.saved)?;
            c::max_pool2d_forward_packed(&g, xv, yv, iv);
        }
        Ok(out)
    }

    /// max_pool2d's backward rule, recorded by [`Graph::max_pool2d`].
    fn max_pool2d_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let Op::MaxPool2d { x, p } = g.nodes[i].op else {
            return Err(RULE_MISMATCH);
        };
        g.max_pool2d_backward(i, x, p)
    }

    fn max_pool2d_backward(&mut self, i: usize, x: NodeId, p: Pool2dParams) -> Result<()> {
        let gy = self.grads_for(i)?;
        let xn = self.nodes[x as usize];
        let idx = self.nodes[i].saved;
        let g = geometry("max_pool2d", xn.shape, &p)?;
        if let Some(gx) = self.grad_of(x) {
            self.exec([gy, idx], gx, |[gy, idx], gx| {
                c::max_pool2d_backward_packed(&g, gy, idx, gx)
            })?;
        }
        Ok(())
    }

    /// Average pooling.
    pub fn avg_pool2d(&mut self, x: Tensor, p: Pool2dParams) -> Result<Tensor> {
        const OP: &str = "avg_pool2d";
        let xi = self.id(x)?;
        let xn = self.nodes[xi];
        let g = geometry(OP, xn.shape, &p)?;
        let rg = self.needs_grad(&[Some(xi)]);
        let op = Op::AvgPool2d { x: xi as NodeId, p };
        let rule = Some(Self::avg_pool2d_rule as BackwardFn<S, N>);
        let out = self.push(
            out_shape(xn.shape, &g)?,
            if rg { op } else { Op::Leaf },
            rule,
            rg,
            0,
        )?;
        let y = self.nodes[out.id as usize].data;
        let inc = p.count_include_pad;
        self.exec([xn.data], y, |[x], y| k::avg_pool2d_forward(&g, inc, x, y))?;
        Ok(out)
    }

    /// avg_pool2d's backward rule, recorded by [`Graph::avg_pool2d`].
    fn avg_pool2d_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let Op::AvgPool2d { x, p } = g.nodes[i].op else {
            return Err(RULE_MISMATCH);
        };
        g.avg_pool2d_backward(i, x, p)
    }

    fn avg_pool2d_backward(&mut self, i: usize, x: NodeId, p: Pool2dParams) -> Result<()> {
        let gy = self.grads_for(i)?;
        let xn = self.nodes[x as usize];
        let g = geometry("avg_pool2d", xn.shape, &p)?;
        let inc = p.count_include_pad;
        if let Some(gx) = self.grad_of(x) {
            self.exec([gy], gx, |[gy], gx| k::avg_pool2d_backward(&g, inc, gy, gx))?;
        }
        Ok(())
    }

    /// Adaptive average pooling to `[oh, ow]`; `[1, 1]` is global average pooling.
    pub fn adaptive_avg_pool2d(&mut self, x: Tensor, output_size: [usize; 2]) -> Result<Tensor> {
        self.adaptive_avg_pool2d_with(x, output_size, Some(Self::adaptive_avg_pool2d_rule))
    }

    /// Records adaptive_avg_pool2d with `rule` as its backward; `None` records no
    /// gradient path.
    pub(crate) fn adaptive_avg_pool2d_with(
        &mut self,
        x: Tensor,
        output_size: [usize; 2],
        rule: Option<BackwardFn<S, N>>,
    ) -> Result<Tensor> {
        let xi = self.id(x)?;
        let xn = self.nodes[xi];
        let g = adaptive_geometry(xn.shape, output_size)?;
        let rg = rule.is_some() && self.needs_grad(&[Some(xi)]);
        let op = Op::AdaptiveAvgPool2d { x: xi as NodeId };
        let out = self.push(
            out_shape(xn.shape, &g)?,
            if rg { op } else { Op::Leaf },
            rule,
            rg,
            0,
        )?;
        let y = self.nodes[out.id as usize].data;
        self.exec([xn.data], y, |[x], y| k::adaptive_avg_pool2d_forward(&g, x, y))?;
        Ok(out)
    }

    /// adaptive_avg_pool2d's backward rule, recorded by [`Graph::adaptive_avg_pool2d`].
    fn adaptive_avg_pool2d_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let Op::AdaptiveAvgPool2d { x } = g.nodes[i].op else {
            return Err(RULE_MISMATCH);
        };
        g.adaptive_avg_pool2d_backward(i, x)
    }

    fn adaptive_avg_pool2d_backward(&mut self, i: usize, x: NodeId) -> Result<()> {
        let gy = self.grads_for(i)?;
        let xn = self.nodes[x as usize];
        let ys = self.nodes[i].shape;
        let g = adaptive_geometry(xn.shape, [ys.dim(2), ys.dim(3)])?;
        if let Some(gx) = self.grad_of(x) {
            self.exec([gy], gx, |[gy], gx| k::adaptive_avg_pool2d_backward(&g, gy, gx))?;
        }
        Ok(())
    }
}

fn adaptive_geometry(x: Shape, out: [usize; 2]) -> Result<PoolGeom> {
    const OP: &str = "adaptive_avg_pool2d";
    let (planes, h, w) = planes(OP, x)?;
    for &o in &out {
        if o == 0 {
            return Err(Error::InvalidParam {
                op: OP,
                what: "output size must be at least 1",
                value: 0,
            });
        }
    }
    // Window bounds multiply an index by the input length.
    out[0].checked_mul(h + 1).ok_or(Error::Overflow { op: OP })?;
    out[1].checked_mul(w + 1).ok_or(Error::Overflow { op: OP })?;
    Ok(PoolGeom {
        planes,
        h,
        w,
        oh: out[0],
        ow: out[1],
        kernel: [0, 0],
        stride: [0, 0],
        pad: [0, 0],
    })
}
