//! conv_transpose2d: `torch.nn.functional.conv_transpose2d` with stride, padding,
//! output_padding, groups and dilation, on conv2d's kernels with the roles swapped.
//!
//! A transposed convolution of `x: [N, Ci, H, W]` by `w: [Ci, Co/g, kh, kw]` is the
//! input gradient of the conv2d that maps `[N, Co, OH, OW]` to `[N, Ci, H, W]` with the
//! same weight (conv2d's weight layout `[out, in/g, kh, kw]` read as out = `Ci`). So:
//! forward is conv2d's backward-input, backward-to-input is conv2d's forward, and the
//! weight gradient is conv2d's weight gradient with `x` as the output gradient and the
//! output gradient as the input. Every pass takes the fast kernels conv2d takes.

use super::registry::{need, opt, pair, uint, Attrs, OpSpec};
use super::{expect_rank, window_words};
use crate::error::{Error, Result};
use crate::graph::{word, BackwardFn, Graph, NoGrad, Op, OpKind, Tensor};
use crate::kernels::conv::ConvGeom;
use crate::kernels::KernelSet;
use crate::scalar::Scalar;
use crate::shape::Shape;

/// Parameters of a 2-D transposed convolution (rows, columns). `Default` is
/// PyTorch's: stride 1, padding 0, output_padding 0, one group, dilation 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTranspose2dParams {
    /// Step between the windows of the matching conv2d (the upsampling factor).
    pub stride: [usize; 2],
    /// Rows and columns removed from both sides of the full output.
    pub padding: [usize; 2],
    /// Rows and columns added on one side (below the stride).
    pub output_padding: [usize; 2],
    /// Channel groups; input and output channels must both be divisible by it.
    pub groups: usize,
    /// Spacing between kernel taps.
    pub dilation: [usize; 2],
}

impl Default for ConvTranspose2dParams {
    fn default() -> Self {
        ConvTranspose2dParams {
            stride: [1, 1],
            padding: [0, 0],
            output_padding: [0, 0],
            groups: 1,
            dilation: [1, 1],
        }
    }
}

const OP: &str = "conv_transpose2d";

/// conv_transpose2d's records: backward reads the input's data (weight gradient).
static CONV_T2D: OpKind = OpKind {
    name: OP,
    reads_inputs: [0b010, 0, 0],
    reads_output: false,
};

fn invalid(what: &'static str, value: usize) -> Error {
    Error::InvalidParam {
        op: OP,
        what,
        value: value as i64,
    }
}

/// `(len - 1) * stride - 2 * pad + dil * (k - 1) + out_pad + 1`, checked.
fn out_len(len: usize, k: usize, s: usize, pad: usize, dil: usize, op: usize) -> Result<usize> {
    let ovf = Error::Overflow { op: OP };
    let full = (len - 1)
        .checked_mul(s)
        .and_then(|v| v.checked_add(dil.checked_mul(k - 1)?))
        .and_then(|v| v.checked_add(op + 1))
        .ok_or(ovf)?;
    let cut = pad.checked_mul(2).ok_or(ovf)?;
    if cut >= full {
        return Err(Error::ShapeMismatch {
            op: OP,
            what: "padding removes {found} rows or columns of an output of {expected}",
            expected: full,
            found: cut,
        });
    }
    Ok(full - cut)
}

/// Validates shapes and parameters and returns the geometry of the matching conv2d
/// (its input is this op's output, its output this op's input).
fn geometry(x: Shape, w: Shape, b: Option<Shape>, p: &ConvTranspose2dParams) -> Result<ConvGeom> {
    let what = "input has {found} dimensions, expected {expected} (N, C, H, W)";
    expect_rank(OP, what, x.rank(), 4)?;
    let what = "weight has {found} dimensions, expected {expected} (in, out/groups, kh, kw)";
    expect_rank(OP, what, w.rank(), 4)?;
    let (n, c_in, h, wd) = (x.dim(0), x.dim(1), x.dim(2), x.dim(3));
    let (kh, kw) = (w.dim(2), w.dim(3));
    if p.groups == 0 {
        return Err(invalid("groups must be at least 1", 0));
    }
    if w.dim(0) != c_in {
        return Err(Error::ShapeMismatch {
            op: OP,
            what: "input has {found} channels, the weight expects {expected}",
            expected: w.dim(0),
            found: c_in,
        });
    }
    if c_in % p.groups != 0 {
        return Err(invalid("groups must divide the input channels", p.groups));
    }
    let c_out = w.dim(1).checked_mul(p.groups).ok_or(Error::Overflow { op: OP })?;
    if [n, c_in, h, wd, c_out, kh, kw].contains(&0) {
        return Err(Error::ShapeMismatch {
            op: OP,
            what: "the input or the weight has a dimension of size {found}, expected at least {expected}",
            expected: 1,
            found: 0,
        });
    }
    for d in 0..2 {
        window_words(OP, p.stride[d], p.padding[d], p.dilation[d])?;
        if p.stride[d] == 0 {
            return Err(invalid("stride must be at least 1", 0));
        }
        if p.dilation[d] == 0 {
            return Err(invalid("dilation must be at least 1", 0));
        }
        if p.output_padding[d] >= p.stride[d] && p.output_padding[d] >= p.dilation[d] {
            return Err(invalid(
                "output_padding must be smaller than the stride or the dilation",
                p.output_padding[d],
            ));
        }
        if p.output_padding[d] >= p.stride[d] {
            // PyTorch allows it below the dilation alone; conv2d's kernels, which
            // need the output size to be the one their geometry implies, do not.
            return Err(Error::Unsupported {
                op: "conv_transpose2d: output_padding not below the stride",
            });
        }
    }
    if let Some(b) = b {
        if b.rank() != 1 || b.dim(0) != c_out {
            return Err(Error::ShapeMismatch {
                op: OP,
                what: "bias has {found} values, the layer has {expected} output channels",
                expected: c_out,
                found: b.numel(),
            });
        }
    }
    let (s, pd, dl, op) = (p.stride, p.padding, p.dilation, p.output_padding);
    let oh = out_len(h, kh, s[0], pd[0], dl[0], op[0])?;
    let ow = out_len(wd, kw, s[1], pd[1], dl[1], op[1])?;
    Ok(ConvGeom {
        n,
        c_in: c_out,
        h: oh,
        w: ow,
        c_out: c_in,
        kh,
        kw,
        oh: h,
        ow: wd,
        stride: s,
        pad: pd,
        dil: dl,
        groups: p.groups,
    })
}

/// The geometry conv2d's bias kernels read for this op's output channels.
fn bias_geometry(g: &ConvGeom) -> ConvGeom {
    ConvGeom {
        c_in: g.c_out,
        c_out: g.c_in,
        h: g.oh,
        w: g.ow,
        oh: g.h,
        ow: g.w,
        ..*g
    }
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Transposed 2-D convolution of `x: [N, Ci, H, W]` with `w: [Ci, Co/groups, kh, kw]`
    /// plus an optional bias `[Co]`; output `[N, Co, OH, OW]` with
    /// `OH = (H - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1`.
    pub fn conv_transpose2d(
        &mut self,
        x: Tensor,
        w: Tensor,
        b: Option<Tensor>,
        p: ConvTranspose2dParams,
    ) -> Result<Tensor> {
        self.conv_transpose2d_with(x, w, b, p, Some(Self::conv_transpose2d_rule))
    }

    fn conv_transpose2d_with(
        &mut self,
        x: Tensor,
        w: Tensor,
        b: Option<Tensor>,
        p: ConvTranspose2dParams,
        rule: Option<BackwardFn<S, N>>,
    ) -> Result<Tensor> {
        let (xi, wi) = (self.id(x)?, self.id(w)?);
        let bi = b.map(|b| self.id(b)).transpose()?;
        let (xn, wn) = (self.nodes[xi], self.nodes[wi]);
        let bn = bi.map(|i| self.nodes[i]);
        let g = geometry(xn.shape(), wn.shape(), bn.map(|b| b.shape()), &p)?;
        let rg = rule.is_some() && self.needs_grad(&[Some(xi), Some(wi), bi]);
        // output_padding and groups follow from the shapes when backward runs.
        let words = [
            p.stride[0],
            p.stride[1],
            p.padding[0],
            p.padding[1],
            p.dilation[0],
            p.dilation[1],
        ];
        let mut packed = [0u16; 6];
        for (d, v) in packed.iter_mut().zip(words) {
            *d = word(v, OP)?;
        }
        let op = match rg {
            true => Op::new(&CONV_T2D, [Some(xi), Some(wi), bi], packed),
            false => Op::LEAF,
        };
        let out = self.push(Shape::nchw(g.n, g.c_in, g.h, g.w)?, op, rule, rg, 0)?;
        let y = self.nodes[out.id as usize].data;
        // The transposed convolution is its dual convolution's input gradient: the
        // same multiply-accumulates.
        self.exec_n([xn.data, wn.data], y, g.macs(), |[x, w], y| {
            y.fill(S::ZERO);
            S::Kernels::conv2d_backward_input(&g, x, w, y);
        })?;
        if let Some(bn) = bn {
            let plane = g.h * g.w;
            self.exec([bn.data], y, |[b], y| {
                for (k, v) in y.iter_mut().enumerate() {
                    *v += b[(k / plane) % g.c_in];
                }
            })?;
        }
        Ok(out)
    }

    /// conv_transpose2d's backward rule, recorded by [`Graph::conv_transpose2d`].
    fn conv_transpose2d_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        g.record(i, &CONV_T2D)?;
        g.with_direct_params(i, Self::conv_transpose2d_general)
    }

    /// conv_transpose2d's backward into the gradients its record's inputs have.
    fn conv_transpose2d_general(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &CONV_T2D)?;
        let (x, w, b) = (op.input(0), op.input(1), op.opt_input(2));
        let (xn, wn, yn) = (g.nodes[x as usize], g.nodes[w as usize], g.nodes[i]);
        let u = |k: usize| op.params[k] as usize;
        let (xs, ws, ys) = (xn.shape(), wn.shape(), yn.shape());
        // Recorded after validation: the output channels are the weight's times groups,
        // and the output size exceeds the size without output_padding by it.
        let mut p = ConvTranspose2dParams {
            stride: [u(0), u(1)],
            padding: [u(2), u(3)],
            dilation: [u(4), u(5)],
            groups: ys.dim(1) / ws.dim(1).max(1),
            output_padding: [0, 0],
        };
        let bare = geometry(xs, ws, None, &p)?;
        p.output_padding = [ys.dim(2) - bare.h, ys.dim(3) - bare.w];
        let geo = geometry(xs, ws, None, &p)?;
        let fresh = g.grad_of(x).is_none();
        let gy = g.grads_for(i)?;
        if let Some(gx) = g.grad_of(x) {
            if fresh {
                g.exec_n([gy, wn.data], gx, geo.macs(), |[gy, w], gx| {
                    S::Kernels::conv2d_forward(&geo, gy, w, None, gx)
                })?;
            } else {
                // gx already holds another reader's gradient: convolve into scratch, add.
                let t = g.arena.alloc(gx.len)?;
                g.exec_n([gy, wn.data], t, geo.macs(), |[gy, w], t| {
                    S::Kernels::conv2d_forward(&geo, gy, w, None, t)
                })?;
                g.exec([t], gx, |[t], gx| {
                    gx.iter_mut().zip(t).for_each(|(a, &v)| *a += v)
                })?;
                g.reclaim(t);
            }
        }
        if let Some(gw) = g.grad_of(w) {
            g.exec_n([xn.data, gy], gw, geo.macs(), |[x, gy], gw| {
                S::Kernels::conv2d_backward_weight(&geo, x, gy, gw)
            })?;
        }
        if let Some(gb) = b.and_then(|b| g.grad_of(b)) {
            let bg = bias_geometry(&geo);
            g.exec([gy], gb, |[gy], gb| S::Kernels::conv2d_backward_bias(&bg, gy, gb))?;
        }
        Ok(())
    }

    /// conv_transpose2d called by name.
    fn conv_transpose2d_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        let p = ConvTranspose2dParams {
            stride: pair(a, OP, "stride", 1)?,
            padding: pair(a, OP, "padding", 0)?,
            output_padding: pair(a, OP, "output_padding", 0)?,
            groups: uint(a, OP, "groups", 1)?,
            dilation: pair(a, OP, "dilation", 1)?,
        };
        g.conv_transpose2d(need(OP, t, 0)?, need(OP, t, 1)?, opt(t, 2), p)
    }

    /// conv_transpose2d by name.
    pub(crate) const CONV_TRANSPOSE2D_SPEC: OpSpec<S, N> = OpSpec {
        name: OP,
        inputs: &["input", "weight", "bias"],
        params: &["stride", "padding", "output_padding", "groups", "dilation"],
        call: Self::conv_transpose2d_call,
        in_place: None,
    };
}

impl<S: Scalar, const N: usize> NoGrad<'_, '_, S, N> {
    /// [`Graph::conv_transpose2d`] without gradients.
    pub fn conv_transpose2d(
        &mut self,
        x: Tensor,
        w: Tensor,
        b: Option<Tensor>,
        p: ConvTranspose2dParams,
    ) -> Result<Tensor> {
        self.g.conv_transpose2d_with(x, w, b, p, None)
    }
}
