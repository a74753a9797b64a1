//! adaptive_max_pool2d: max over PyTorch's adaptive windows. Saves each winner's
//! position in its plane (one word per output); backward reads nothing else.

use super::expect_rank;
use super::registry::{need, pair, Attrs, OpSpec};
use crate::error::{Error, Result};
use crate::graph::{reads, touched};
use crate::graph::{Graph, Op, OpKind, Tensor};
use crate::kernels::pool::adaptive_max as k;
use crate::kernels::pool::PoolGeom;
use crate::scalar::Scalar;
use crate::shape::Shape;

static ADAPTIVE_MAX_POOL2D: OpKind = OpKind {
    name: "adaptive_max_pool2d",
    reads_inputs: reads(0),
    reads_output: false,
};

fn geometry(x: Shape, out: [usize; 2]) -> Result<PoolGeom> {
    const OP: &str = "adaptive_max_pool2d";
    expect_rank(OP, "input rank (N, C, H, W)", x.rank(), 4)?;
    if x.numel() == 0 {
        return Err(Error::ShapeMismatch {
            op: OP,
            what: "zero-sized input dimension",
            expected: 1,
            found: 0,
        });
    }
    if let Some(&o) = out.iter().find(|&&o| o == 0) {
        return Err(Error::InvalidParam {
            op: OP,
            what: "output size must be at least 1",
            value: o as i64,
        });
    }
    let (h, w) = (x.dim(2), x.dim(3));
    // Window bounds multiply an index by the input length.
    out[0].checked_mul(h + 1).ok_or(Error::Overflow { op: OP })?;
    out[1].checked_mul(w + 1).ok_or(Error::Overflow { op: OP })?;
    Ok(PoolGeom {
        planes: x.dim(0) * x.dim(1),
        h,
        w,
        oh: out[0],
        ow: out[1],
        kernel: [0, 0],
        stride: [0, 0],
        pad: [0, 0],
    })
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Adaptive max pooling to `[oh, ow]` (NaN propagates, as in PyTorch).
    pub fn adaptive_max_pool2d(&mut self, x: Tensor, output_size: [usize; 2]) -> Result<Tensor> {
        let xi = self.id(x)?;
        let xn = self.nodes[xi];
        let g = geometry(xn.shape(), output_size)?;
        let shape = Shape::nchw(xn.shape().dim(0), xn.shape().dim(1), g.oh, g.ow)?;
        let rg = self.needs_grad(&[Some(xi)]);
        let op = match rg {
            true => Op::unary(&ADAPTIVE_MAX_POOL2D, xi),
            false => Op::LEAF,
        };
        let saved = if rg { shape.numel() } else { 0 };
        let out = self.push(shape, op, Some(Self::adaptive_max_pool2d_rule), rg, saved)?;
        let node = self.nodes[out.id as usize];
        let work = touched(&[xn.data], node.data);
        self.exec2([xn.data], [node.data, node.saved], work, |[xv], yv, iv| {
            k::adaptive_max_pool2d_forward(&g, xv, yv, iv)
        })?;
        Ok(out)
    }

    /// adaptive_max_pool2d's backward rule, recorded by [`Graph::adaptive_max_pool2d`].
    fn adaptive_max_pool2d_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let x = g.record(i, &ADAPTIVE_MAX_POOL2D)?.input(0);
        let ys = g.nodes[i].shape();
        let geo = geometry(g.nodes[x as usize].shape(), [ys.dim(2), ys.dim(3)])?;
        let (gy, idx) = (g.grads_for(i)?, g.nodes[i].saved);
        if let Some(gx) = g.grad_of(x) {
            g.exec([gy, idx], gx, |[gy, idx], gx| {
                k::adaptive_max_pool2d_backward(&geo, gy, idx, gx)
            })?;
        }
        Ok(())
    }

    fn adaptive_max_pool2d_call(
        g: &mut Graph<'_, S, N>,
        t: &[Option<Tensor>],
        a: &dyn Attrs,
    ) -> Result<Tensor> {
        const OP: &str = "adaptive_max_pool2d";
        let size = pair(a, OP, "output_size", 1)?;
        g.adaptive_max_pool2d(need(OP, t, 0)?, size)
    }

    /// adaptive_max_pool2d by name (`output_size`).
    pub(crate) const ADAPTIVE_MAX_POOL2D_SPEC: OpSpec<S, N> = OpSpec {
        name: "adaptive_max_pool2d",
        inputs: &["input"],
        params: &["output_size"],
        call: Self::adaptive_max_pool2d_call,
        in_place: None,
    };
}
