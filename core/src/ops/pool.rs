//! max_pool2d, avg_pool2d and adaptive_avg_pool2d (`torch.nn.functional` semantics).

use super::registry::{flag, need, pair, Attrs, OpSpec};
use super::{expect_rank, window_out};
use crate::error::{Error, Result};
use crate::graph::reads;
use crate::graph::{word, BackwardFn, Graph, NoGrad, NodeId, Op, OpKind, Packed, Params, Tensor};
use crate::kernels::pool::max as c;
use crate::kernels::pool::{self as k, PoolGeom};
use crate::kernels::KernelSet;
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

/// The top bit of a packed padding word: padding is at most half a kernel that fits
/// in a word (and is checked to stay below this bit), so it never uses that bit.
const FLAG: u16 = 1 << 15;
const PAD: u16 = FLAG - 1;

/// Packed after validation (padding at most half the kernel size): the two flags ride
/// in the padding words' top bits.
impl Packed for Pool2dParams {
    fn pack(&self, op: &'static str) -> Result<Params> {
        let p = self;
        let flag = |on: bool| if on { FLAG } else { 0 };
        let pad = |v: usize| match word(v, op)? {
            w if w <= PAD => Ok(w),
            _ => Err(Error::Overflow { op }),
        };
        Ok([
            word(p.kernel_size[0], op)?,
            word(p.kernel_size[1], op)?,
            word(p.stride[0], op)?,
            word(p.stride[1], op)?,
            pad(p.padding[0])? | flag(p.ceil_mode),
            pad(p.padding[1])? | flag(p.count_include_pad),
        ])
    }

    fn unpack(w: &Params) -> Self {
        let u = |k: usize| w[k] as usize;
        Pool2dParams {
            kernel_size: [u(0), u(1)],
            stride: [u(2), u(3)],
            padding: [(w[4] & PAD) as usize, (w[5] & PAD) as usize],
            ceil_mode: w[4] & FLAG != 0,
            count_include_pad: w[5] & FLAG != 0,
        }
    }
}

/// A pooling op's record kind: backward reads no data (max pooling keeps packed
/// argmax positions in the record's saved values instead).
const fn kind(name: &'static str) -> OpKind {
    OpKind {
        name,
        reads_inputs: reads(0),
        reads_output: false,
    }
}

static MAX_POOL2D: OpKind = kind("max_pool2d");
static AVG_POOL2D: OpKind = kind("avg_pool2d");
static ADAPTIVE_AVG_POOL2D: OpKind = kind("adaptive_avg_pool2d");

fn planes(op: &'static str, x: Shape) -> Result<(usize, usize, usize)> {
    expect_rank(
        op,
        "input has {found} dimensions, expected {expected} (N, C, H, W)",
        x.rank(),
        4,
    )?;
    if x.numel() == 0 {
        return Err(Error::ShapeMismatch {
            op,
            what: "input has a dimension of size {found}, expected at least {expected}",
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
        let g = geometry(OP, xn.shape(), &p)?;
        let rg = rule.is_some() && self.needs_grad(&[Some(xi)]);
        let op = match rg {
            true => Op::new(&MAX_POOL2D, [Some(xi), None, None], p.pack(OP)?),
            false => Op::LEAF,
        };
        let shape = out_shape(xn.shape(), &g)?;
        let taps = p.kernel_size[0] * p.kernel_size[1];
        let saved = if rg {
            c::argmax_words(shape.numel(), taps)
        } else {
            0
        };
        let out = self.push(shape, op, rule, rg, saved)?;
        let node = self.nodes[out.id as usize];
        let work = g.taps_work();
        self.exec2([xn.data], [node.data, node.saved], work, |[xv], yv, iv| {
            S::Kernels::max_pool2d_forward_packed(&g, xv, yv, iv)
        })?;
        Ok(out)
    }

    /// max_pool2d's backward rule, recorded by [`Graph::max_pool2d`].
    fn max_pool2d_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &MAX_POOL2D)?;
        g.max_pool2d_backward(i, op.input(0), Pool2dParams::unpack(&op.params))
    }

    /// A gradient the input does not have yet is written over rather than cleared and
    /// added to, where the kernel set can (W1's pools: no clearing pass, no read).
    fn max_pool2d_backward(&mut self, i: usize, x: NodeId, p: Pool2dParams) -> Result<()> {
        let fresh = self.grad_to_overwrite(i, x as usize)?;
        let gy = self.out_grad(i)?;
        let xn = self.nodes[x as usize];
        let idx = self.nodes[i].saved;
        let g = geometry("max_pool2d", xn.shape(), &p)?;
        if let Some(gx) = self.grad_of(x) {
            self.exec_n([gy, idx], gx, g.taps_work(), |[gy, idx], gx| {
                if fresh && S::Kernels::max_pool2d_backward_overwrite(&g, gy, idx, gx) {
                    return;
                }
                if fresh {
                    gx.fill(S::ZERO);
                }
                S::Kernels::max_pool2d_backward_packed(&g, gy, idx, gx)
            })?;
        }
        Ok(())
    }

    /// Average pooling.
    pub fn avg_pool2d(&mut self, x: Tensor, p: Pool2dParams) -> Result<Tensor> {
        const OP: &str = "avg_pool2d";
        let xi = self.id(x)?;
        let xn = self.nodes[xi];
        let g = geometry(OP, xn.shape(), &p)?;
        let rg = self.needs_grad(&[Some(xi)]);
        let op = match rg {
            true => Op::new(&AVG_POOL2D, [Some(xi), None, None], p.pack(OP)?),
            false => Op::LEAF,
        };
        let rule = Some(Self::avg_pool2d_rule as BackwardFn<S, N>);
        let out = self.push(out_shape(xn.shape(), &g)?, op, rule, rg, 0)?;
        let y = self.nodes[out.id as usize].data;
        let inc = p.count_include_pad;
        self.exec_n([xn.data], y, g.taps_work(), |[x], y| {
            k::avg_pool2d_forward(&g, inc, x, y)
        })?;
        Ok(out)
    }

    /// avg_pool2d's backward rule, recorded by [`Graph::avg_pool2d`].
    fn avg_pool2d_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &AVG_POOL2D)?;
        g.avg_pool2d_backward(i, op.input(0), Pool2dParams::unpack(&op.params))
    }

    fn avg_pool2d_backward(&mut self, i: usize, x: NodeId, p: Pool2dParams) -> Result<()> {
        let gy = self.grads_for(i)?;
        let xn = self.nodes[x as usize];
        let g = geometry("avg_pool2d", xn.shape(), &p)?;
        let inc = p.count_include_pad;
        if let Some(gx) = self.grad_of(x) {
            self.exec_n([gy], gx, g.taps_work(), |[gy], gx| {
                k::avg_pool2d_backward(&g, inc, gy, gx)
            })?;
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
        let g = adaptive_geometry(xn.shape(), output_size)?;
        let rg = rule.is_some() && self.needs_grad(&[Some(xi)]);
        let op = match rg {
            true => Op::unary(&ADAPTIVE_AVG_POOL2D, xi),
            false => Op::LEAF,
        };
        let out = self.push(out_shape(xn.shape(), &g)?, op, rule, rg, 0)?;
        let y = self.nodes[out.id as usize].data;
        self.exec([xn.data], y, |[x], y| k::adaptive_avg_pool2d_forward(&g, x, y))?;
        Ok(out)
    }

    /// adaptive_avg_pool2d's backward rule, recorded by [`Graph::adaptive_avg_pool2d`].
    fn adaptive_avg_pool2d_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let x = g.record(i, &ADAPTIVE_AVG_POOL2D)?.input(0);
        g.adaptive_avg_pool2d_backward(i, x)
    }

    fn adaptive_avg_pool2d_backward(&mut self, i: usize, x: NodeId) -> Result<()> {
        let gy = self.grads_for(i)?;
        let xn = self.nodes[x as usize];
        let ys = self.nodes[i].shape();
        let g = adaptive_geometry(xn.shape(), [ys.dim(2), ys.dim(3)])?;
        if let Some(gx) = self.grad_of(x) {
            self.exec([gy], gx, |[gy], gx| k::adaptive_avg_pool2d_backward(&g, gy, gx))?;
        }
        Ok(())
    }
    /// max_pool2d or avg_pool2d called by name: `kernel_size` (required), `stride`
    /// (default: the kernel size; an empty list counts as absent), `padding`,
    /// `ceil_mode`, `count_include_pad`.
    fn pool_params(op: &'static str, a: &dyn Attrs) -> Result<Pool2dParams> {
        let k = pair(a, op, "kernel_size", usize::MAX)?;
        if k[0] == usize::MAX {
            return Err(Error::InvalidParam {
                op,
                what: "kernel_size is required",
                value: 0,
            });
        }
        let mut s = [0i64; 2];
        let stride = match a.ints("stride", &mut s) {
            Ok(None | Some(0)) => k,
            _ => pair(a, op, "stride", 1)?,
        };
        Ok(Pool2dParams {
            kernel_size: k,
            stride,
            padding: pair(a, op, "padding", 0)?,
            ceil_mode: flag(a, "ceil_mode", false)?,
            count_include_pad: flag(a, "count_include_pad", true)?,
        })
    }

    fn max_pool2d_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        let p = Self::pool_params("max_pool2d", a)?;
        g.max_pool2d(need("max_pool2d", t, 0)?, p)
    }

    fn avg_pool2d_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        let p = Self::pool_params("avg_pool2d", a)?;
        g.avg_pool2d(need("avg_pool2d", t, 0)?, p)
    }

    fn adaptive_avg_pool2d_call(
        g: &mut Graph<'_, S, N>,
        t: &[Option<Tensor>],
        a: &dyn Attrs,
    ) -> Result<Tensor> {
        const OP: &str = "adaptive_avg_pool2d";
        let size = pair(a, OP, "output_size", 1)?;
        g.adaptive_avg_pool2d(need(OP, t, 0)?, size)
    }

    /// max_pool2d by name.
    pub(crate) const MAX_POOL2D_SPEC: OpSpec<S, N> = OpSpec {
        name: "max_pool2d",
        inputs: &["input"],
        params: &["kernel_size", "stride", "padding", "ceil_mode"],
        call: Self::max_pool2d_call,
        in_place: None,
    };
    /// avg_pool2d by name.
    pub(crate) const AVG_POOL2D_SPEC: OpSpec<S, N> = OpSpec {
        name: "avg_pool2d",
        inputs: &["input"],
        params: &[
            "kernel_size",
            "stride",
            "padding",
            "ceil_mode",
            "count_include_pad",
        ],
        call: Self::avg_pool2d_call,
        in_place: None,
    };
    /// adaptive_avg_pool2d by name (`output_size`).
    pub(crate) const ADAPTIVE_AVG_POOL2D_SPEC: OpSpec<S, N> = OpSpec {
        name: "adaptive_avg_pool2d",
        inputs: &["input"],
        params: &["output_size"],
        call: Self::adaptive_avg_pool2d_call,
        in_place: None,
    };
}

impl<S: Scalar, const N: usize> NoGrad<'_, '_, S, N> {
    /// [`Graph::max_pool2d`] without gradients (no argmax is saved).
    pub fn max_pool2d(&mut self, x: Tensor, p: Pool2dParams) -> Result<Tensor> {
        self.g.max_pool2d_with(x, p, None)
    }

    /// [`Graph::adaptive_avg_pool2d`] without gradients.
    pub fn adaptive_avg_pool2d(&mut self, x: Tensor, output_size: [usize; 2]) -> Result<Tensor> {
        self.g.adaptive_avg_pool2d_with(x, output_size, None)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `d sum(max_pool2d(x) [+ sum(x)]) / dx` for a 2x2 pool: 1 at each window's
    /// first maximum, plus 1 everywhere when `x` is summed too, recorded before or
    /// after the pool (so that the pool's backward finds `x`'s gradient unset, which
    /// it may write over, or already holding the sum's ones, which it must add to).
    fn pool_grad(dims: [usize; 4], also_sum: Option<bool>) -> (Vec<f32>, Vec<f32>) {
        let n: usize = dims.iter().product();
        let data: Vec<f32> = (0..n).map(|i| ((i * 7) % 5) as f32 - (i % 3) as f32).collect();
        // Garbage in the arena: a gradient written over must not show any of it.
        let mut mem = [f32::NAN; 4096];
        let mut g: Graph<'_, f32, 16> = Graph::new(&mut mem);
        let x = g.input_with_grad(&dims, &data).unwrap();
        let early = match also_sum {
            Some(true) => Some(g.sum(x, &[], false).unwrap()),
            _ => None,
        };
        let y = g.max_pool2d(x, Pool2dParams::square(2)).unwrap();
        let mut loss = g.sum(y, &[], false).unwrap();
        let late = match also_sum {
            Some(false) => Some(g.sum(x, &[], false).unwrap()),
            _ => None,
        };
        if let Some(s) = early.or(late) {
            loss = g.add(loss, s).unwrap();
        }
        g.backward(loss).unwrap();
        let got = g.grad(x).unwrap().unwrap().to_vec();
        let [_, c, h, w] = dims;
        let mut want = vec![if also_sum.is_some() { 1.0 } else { 0.0 }; n];
        for p in 0..dims[0] * c {
            for (oy, ox) in (0..h / 2).flat_map(|a| (0..w / 2).map(move |b| (a, b))) {
                let at =
                    [(0, 0), (0, 1), (1, 0), (1, 1)].map(|(dy, dx)| (p * h + 2 * oy + dy) * w + 2 * ox + dx);
                let best = at
                    .into_iter()
                    .fold(at[0], |b, i| if data[i] > data[b] { i } else { b });
                want[best] += 1.0;
            }
        }
        (got, want)
    }

    #[test]
    fn max_pool_backward_writes_over_a_new_gradient_and_adds_to_an_old_one() {
        // Rows covered (written over where the kernel set can), an odd row left out
        // (cleared), and an odd column left out (cleared).
        for dims in [[2, 3, 4, 6], [1, 2, 5, 4], [1, 1, 4, 5], [3, 2, 8, 16]] {
            for also_sum in [None, Some(true), Some(false)] {
                let (got, want) = pool_grad(dims, also_sum);
                assert_eq!(got, want, "{dims:?} {also_sum:?}");
            }
        }
    }
}
