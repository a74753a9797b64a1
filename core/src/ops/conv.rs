//! conv2d: `torch.nn.functional.conv2d` with stride, padding, dilation and groups
//! (depthwise is `groups == in_channels`).

use super::registry::{need, opt, pair, uint, Attrs, OpSpec};
use super::{expect_rank, window_out};
#[cfg(not(target_arch = "arm"))]
use crate::arena::Span;
use crate::error::{Error, Result};
use crate::graph::{word, BackwardFn, Graph, NoGrad, NodeId, Op, OpKind, Packed, Params, Tensor};
use crate::kernels::conv::ConvGeom;
use crate::kernels::KernelSet;
use crate::scalar::Scalar;
use crate::shape::Shape;

/// Parameters of a 2-D convolution (rows, columns). `Default` is PyTorch's:
/// stride 1, padding 0, dilation 1, one group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dParams {
    /// Step between windows.
    pub stride: [usize; 2],
    /// Zeros added on both sides.
    pub padding: [usize; 2],
    /// Spacing between kernel taps.
    pub dilation: [usize; 2],
    /// Channel groups; input and output channels must both be divisible by it.
    pub groups: usize,
}

impl Default for Conv2dParams {
    fn default() -> Self {
        Conv2dParams {
            stride: [1, 1],
            padding: [0, 0],
            dilation: [1, 1],
            groups: 1,
        }
    }
}

impl Conv2dParams {
    /// Read by name (`stride`, `padding`, `dilation`, `groups`; PyTorch's defaults).
    pub(crate) fn from_attrs(a: &dyn Attrs) -> Result<Self> {
        Ok(Conv2dParams {
            stride: pair(a, OP, "stride", 1)?,
            padding: pair(a, OP, "padding", 0)?,
            dilation: pair(a, OP, "dilation", 1)?,
            groups: uint(a, OP, "groups", 1)?,
        })
    }

    /// Same padding on every side (`padding=p` in PyTorch).
    pub fn padded(p: usize) -> Self {
        Conv2dParams {
            padding: [p, p],
            ..Default::default()
        }
    }
}

const OP: &str = "conv2d";

/// conv2d's records: backward reads the input's data (for the weight gradient).
pub(crate) static CONV2D: OpKind = OpKind {
    name: OP,
    reads_inputs: [0b010, 0, 0],
    reads_output: false,
};

impl Packed for Conv2dParams {
    fn pack(&self, op: &'static str) -> Result<Params> {
        let p = self;
        Ok([
            word(p.stride[0], op)?,
            word(p.stride[1], op)?,
            word(p.padding[0], op)?,
            word(p.padding[1], op)?,
            word(p.dilation[0], op)?,
            word(p.dilation[1], op)?,
        ])
    }

    /// All but `groups`, which is `in_channels / weight.dim(1)` (the rule sets it).
    fn unpack(w: &Params) -> Self {
        let u = |k: usize| w[k] as usize;
        Conv2dParams {
            stride: [u(0), u(1)],
            padding: [u(2), u(3)],
            dilation: [u(4), u(5)],
            groups: 1,
        }
    }
}

/// Validates shapes and parameters and returns the kernel geometry.
pub(crate) fn geometry(x: Shape, w: Shape, b: Option<Shape>, p: &Conv2dParams) -> Result<ConvGeom> {
    geometry_of(OP, x, w, b, p)
}

/// [`geometry`] with errors naming the op `op` (conv2d's variants share its rules).
pub(crate) fn geometry_of(
    op: &'static str,
    x: Shape,
    w: Shape,
    b: Option<Shape>,
    p: &Conv2dParams,
) -> Result<ConvGeom> {
    expect_rank(
        op,
        "input has {found} dimensions, expected {expected} (N, C, H, W)",
        x.rank(),
        4,
    )?;
    expect_rank(
        op,
        "weight has {found} dimensions, expected {expected} (out, in/groups, kh, kw)",
        w.rank(),
        4,
    )?;
    let (n, c_in, h, wd) = (x.dim(0), x.dim(1), x.dim(2), x.dim(3));
    let (c_out, cin_g, kh, kw) = (w.dim(0), w.dim(1), w.dim(2), w.dim(3));
    if p.groups == 0 {
        return Err(Error::InvalidParam {
            op,
            what: "groups must be at least 1",
            value: 0,
        });
    }
    if c_in % p.groups != 0 || c_out % p.groups != 0 {
        return Err(Error::InvalidParam {
            op,
            what: "groups must divide input and output channels",
            value: p.groups as i64,
        });
    }
    if cin_g != c_in / p.groups {
        return Err(Error::ShapeMismatch {
            op,
            what: "input has {found} channels, the weight expects {expected}",
            expected: cin_g * p.groups,
            found: c_in,
        });
    }
    if n == 0 || c_in == 0 || c_out == 0 || h == 0 || wd == 0 {
        return Err(Error::ShapeMismatch {
            op,
            what: "the input or the weight has a dimension of size {found}, expected at least {expected}",
            expected: 1,
            found: 0,
        });
    }
    if let Some(b) = b {
        if b.rank() != 1 || b.dim(0) != c_out {
            return Err(Error::ShapeMismatch {
                op,
                what: "bias has {found} values, the layer has {expected} output channels",
                expected: c_out,
                found: b.numel(),
            });
        }
    }
    let oh = window_out(op, h, kh, p.stride[0], p.padding[0], p.dilation[0], false)?;
    let ow = window_out(op, wd, kw, p.stride[1], p.padding[1], p.dilation[1], false)?;
    Ok(ConvGeom {
        n,
        c_in,
        h,
        w: wd,
        c_out,
        kh,
        kw,
        oh,
        ow,
        stride: p.stride,
        pad: p.padding,
        dil: p.dilation,
        groups: p.groups,
    })
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// 2-D convolution of `x: [N, C, H, W]` with `w: [O, C/groups, kh, kw]` plus an
    /// optional bias `[O]`; output `[N, O, OH, OW]`.
    pub fn conv2d(&mut self, x: Tensor, w: Tensor, b: Option<Tensor>, p: Conv2dParams) -> Result<Tensor> {
        self.conv2d_with(x, w, b, p, Some(Self::conv2d_rule))
    }

    /// Records conv2d with `rule` as its backward; `None` records no gradient path
    /// (see [`crate::graph::NoGrad`]).
    pub(crate) fn conv2d_with(
        &mut self,
        x: Tensor,
        w: Tensor,
        b: Option<Tensor>,
        p: Conv2dParams,
        rule: Option<BackwardFn<S, N>>,
    ) -> Result<Tensor> {
        let (xi, wi) = (self.id(x)?, self.id(w)?);
        let bi = b.map(|b| self.id(b)).transpose()?;
        let (xn, wn) = (self.nodes[xi], self.nodes[wi]);
        let bn = bi.map(|i| self.nodes[i]);
        let g = geometry(xn.shape(), wn.shape(), bn.map(|b| b.shape()), &p)?;
        let rg = rule.is_some() && self.needs_grad(&[Some(xi), Some(wi), bi]);
        let op = match rg {
            true => Op::new(&CONV2D, [Some(xi), Some(wi), bi], p.pack(OP)?),
            false => Op::LEAF,
        };
        let shape = Shape::nchw(g.n, g.c_out, g.oh, g.ow)?;
        let out = self.push(shape, op, rule, rg, 0)?;
        let (y, bspan) = (self.nodes[out.id as usize].data, bn.map(|b| b.data));
        let reads = [xn.data, wn.data, bspan.unwrap_or_default()];
        self.exec_n(reads, y, g.macs(), |[x, w, b], y| {
            S::Kernels::conv2d_forward(&g, x, w, bspan.map(|_| b), y)
        })?;
        Ok(out)
    }

    /// conv2d's backward rule, recorded by [`Graph::conv2d`].
    fn conv2d_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        g.record(i, &CONV2D)?;
        // Fused SGD may let the weight kernels add into the parameters directly.
        g.with_direct_params(i, Self::conv2d_general)
    }

    /// conv2d's backward into the gradients its record's inputs have.
    fn conv2d_general(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &CONV2D)?;
        let (x, w, b) = (op.input(0), op.input(1), op.opt_input(2));
        let mut p = Conv2dParams::unpack(&op.params);
        // Validated when recorded: the weight holds in_channels / groups channels.
        let cin_g = g.nodes[w as usize].shape().dim(1).max(1);
        p.groups = g.nodes[x as usize].shape().dim(1) / cin_g;
        g.conv2d_backward(i, x, w, b, p)
    }

    fn conv2d_backward(
        &mut self,
        i: usize,
        x: NodeId,
        w: NodeId,
        b: Option<NodeId>,
        p: Conv2dParams,
    ) -> Result<()> {
        let (xn, wn) = (self.nodes[x as usize], self.nodes[w as usize]);
        let g = geometry(xn.shape(), wn.shape(), None, &p)?;
        self.conv_grads(i, x, w, b, &g)
    }

    /// The gradients of record `i`'s convolution of geometry `g` (conv2d, and conv1d
    /// as a one-row conv2d) into those of input `x`, weight `w` and bias `b` that
    /// have one.
    pub(crate) fn conv_grads(
        &mut self,
        i: usize,
        x: NodeId,
        w: NodeId,
        b: Option<NodeId>,
        g: &ConvGeom,
    ) -> Result<()> {
        let gy = self.grads_for(i)?;
        let (xn, wn) = (self.nodes[x as usize], self.nodes[w as usize]);
        // Each gradient pass is the forward's work; counted here, whichever kernels run.
        let passes = [self.grad_of(x), self.grad_of(w)].iter().flatten().count();
        self.count(g.macs().saturating_mul(passes as u64));
        #[cfg(not(target_arch = "arm"))]
        if self.conv_grads_at_once(g, [gy, xn.data, wn.data], x, w)? {
            if let Some(gb) = b.and_then(|b| self.grad_of(b)) {
                self.exec([gy], gb, |[gy], gb| S::Kernels::conv2d_backward_bias(g, gy, gb))?;
            }
            return Ok(());
        }
        if let Some(gx) = self.grad_of(x) {
            self.exec_n([gy, wn.data], gx, 0, |[gy, w], gx| {
                S::Kernels::conv2d_backward_input(g, gy, w, gx)
            })?;
        }
        if let Some(gw) = self.grad_of(w) {
            self.exec_n([gy, xn.data], gw, 0, |[gy, x], gw| {
                S::Kernels::conv2d_backward_weight(g, gy, x, gw)
            })?;
        }
        if let Some(gb) = b.and_then(|b| self.grad_of(b)) {
            self.exec([gy], gb, |[gy], gb| S::Kernels::conv2d_backward_bias(g, gy, gb))?;
        }
        Ok(())
    }

    /// The input's and the weight's gradients in one kernel call when the kernel set
    /// has one for `g` (`reads`: output gradient, input, weight); `Ok(false)`: the
    /// passes must run apart. Not when the weight stands in for its gradient (a direct
    /// update: the input's gradient reads the weight before it changes). Cortex-M's
    /// kernels have none: not linked there.
    #[cfg(not(target_arch = "arm"))]
    fn conv_grads_at_once(&mut self, g: &ConvGeom, reads: [Span; 3], x: NodeId, w: NodeId) -> Result<bool> {
        let (Some(gx), Some(gw)) = (self.grad_of(x), self.grad_of(w)) else {
            return Ok(false);
        };
        if gw == reads[2] || self.arena.is_meta() {
            return Ok(false);
        }
        let ([gy, xd, wd], gx, gw) = self.arena.views2(reads, gx, gw)?;
        Ok(S::Kernels::conv2d_backward_input_weight(g, gy, xd, wd, gx, gw))
    }

    /// conv2d called by name (`stride`, `padding`, `dilation`, `groups`).
    fn conv2d_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        let p = Conv2dParams::from_attrs(a)?;
        g.conv2d(need(OP, t, 0)?, need(OP, t, 1)?, opt(t, 2), p)
    }

    /// conv2d by name.
    pub(crate) const CONV2D_SPEC: OpSpec<S, N> = OpSpec {
        name: OP,
        inputs: &["input", "weight", "bias"],
        params: &["stride", "padding", "dilation", "groups"],
        call: Self::conv2d_call,
        in_place: None,
    };
}

impl<S: Scalar, const N: usize> NoGrad<'_, '_, S, N> {
    /// [`Graph::conv2d`] without gradients.
    pub fn conv2d(&mut self, x: Tensor, w: Tensor, b: Option<Tensor>, p: Conv2dParams) -> Result<Tensor> {
        self.g.conv2d_with(x, w, b, p, None)
    }
}
