//! conv1d: `torch.nn.functional.conv1d` over `[N, C, L]` with stride, padding,
//! dilation and groups. It runs as a one-row conv2d (`[N, C, 1, L]` with a `1 x K`
//! kernel) on conv2d's validation and kernels, so it takes the fast kernels wherever
//! conv2d does; only the record and the 3-D shapes are its own.

use super::conv::{geometry_of, Conv2dParams};
use super::expect_rank;
use super::registry::{need, opt, Attrs, OpSpec};
use crate::error::{Error, Result};
use crate::graph::{word, BackwardFn, Graph, NoGrad, Op, OpKind, Tensor};
use crate::kernels::conv::ConvGeom;
use crate::kernels::KernelSet;
use crate::scalar::Scalar;
use crate::shape::Shape;

/// Parameters of a 1-D convolution. `Default` is PyTorch's: stride 1, padding 0,
/// dilation 1, one group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv1dParams {
    /// Step between windows.
    pub stride: usize,
    /// Zeros added on both ends.
    pub padding: usize,
    /// Spacing between kernel taps.
    pub dilation: usize,
    /// Channel groups; input and output channels must both be divisible by it.
    pub groups: usize,
}

impl Default for Conv1dParams {
    fn default() -> Self {
        Conv1dParams {
            stride: 1,
            padding: 0,
            dilation: 1,
            groups: 1,
        }
    }
}

impl Conv1dParams {
    /// The same convolution as a one-row conv2d.
    fn as_2d(&self) -> Conv2dParams {
        Conv2dParams {
            stride: [1, self.stride],
            padding: [0, self.padding],
            dilation: [1, self.dilation],
            groups: self.groups,
        }
    }
}

const OP: &str = "conv1d";

/// conv1d's records: backward reads the input's data (for the weight gradient).
static CONV1D: OpKind = OpKind {
    name: OP,
    reads_inputs: [0b010, 0, 0],
    reads_output: false,
};

/// `[a, b, c]` as `[a, b, 1, c]`, after checking the rank.
fn as_rows(x: Shape, what: &'static str) -> Result<Shape> {
    expect_rank(OP, what, x.rank(), 3)?;
    Shape::new(&[x.dim(0), x.dim(1), 1, x.dim(2)])
}

/// Validates shapes and parameters and returns the one-row conv2d geometry.
fn geometry(x: Shape, w: Shape, b: Option<Shape>, p: &Conv1dParams) -> Result<ConvGeom> {
    let x = as_rows(x, "input has {found} dimensions, expected {expected} (N, C, L)")?;
    let w = as_rows(
        w,
        "weight has {found} dimensions, expected {expected} (out, in/groups, k)",
    )?;
    geometry_of(OP, x, w, b, &p.as_2d())
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// 1-D convolution of `x: [N, C, L]` with `w: [O, C/groups, K]` plus an optional
    /// bias `[O]`; output `[N, O, OL]`.
    pub fn conv1d(&mut self, x: Tensor, w: Tensor, b: Option<Tensor>, p: Conv1dParams) -> Result<Tensor> {
        self.conv1d_with(x, w, b, p, Some(Self::conv1d_rule))
    }

    fn conv1d_with(
        &mut self,
        x: Tensor,
        w: Tensor,
        b: Option<Tensor>,
        p: Conv1dParams,
        rule: Option<BackwardFn<S, N>>,
    ) -> Result<Tensor> {
        let (xi, wi) = (self.id(x)?, self.id(w)?);
        let bi = b.map(|b| self.id(b)).transpose()?;
        let (xn, wn) = (self.nodes[xi], self.nodes[wi]);
        let bn = bi.map(|i| self.nodes[i]);
        let g = geometry(xn.shape(), wn.shape(), bn.map(|b| b.shape()), &p)?;
        let rg = rule.is_some() && self.needs_grad(&[Some(xi), Some(wi), bi]);
        let op = match rg {
            true => Op::new(
                &CONV1D,
                [Some(xi), Some(wi), bi],
                [
                    word(p.stride, OP)?,
                    word(p.padding, OP)?,
                    word(p.dilation, OP)?,
                    0,
                    0,
                    0,
                ],
            ),
            false => Op::LEAF,
        };
        let out = self.push(Shape::new(&[g.n, g.c_out, g.ow])?, op, rule, rg, 0)?;
        let (y, bspan) = (self.nodes[out.id as usize].data, bn.map(|b| b.data));
        let reads = [xn.data, wn.data, bspan.unwrap_or_default()];
        self.exec_n(reads, y, g.macs(), |[x, w, b], y| {
            S::Kernels::conv2d_forward(&g, x, w, bspan.map(|_| b), y)
        })?;
        Ok(out)
    }

    /// conv1d's backward rule, recorded by [`Graph::conv1d`].
    fn conv1d_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        g.record(i, &CONV1D)?;
        g.with_direct_params(i, Self::conv1d_general)
    }

    /// conv1d's backward into the gradients its record's inputs have.
    fn conv1d_general(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &CONV1D)?;
        let (x, w, b) = (op.input(0), op.input(1), op.opt_input(2));
        let (xn, wn) = (g.nodes[x as usize], g.nodes[w as usize]);
        // Validated when recorded: the weight holds in_channels / groups channels.
        let p = Conv1dParams {
            stride: op.params[0] as usize,
            padding: op.params[1] as usize,
            dilation: op.params[2] as usize,
            groups: xn.shape().dim(1) / wn.shape().dim(1).max(1),
        };
        let geo = geometry(xn.shape(), wn.shape(), None, &p)?;
        g.conv_grads(i, x, w, b, &geo)
    }

    /// conv1d called by name (`stride`, `padding`, `dilation` as integers or
    /// one-element lists, `groups`).
    fn conv1d_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        let p = Conv1dParams {
            stride: single(a, "stride", 1)?,
            padding: single(a, "padding", 0)?,
            dilation: single(a, "dilation", 1)?,
            groups: single(a, "groups", 1)?,
        };
        g.conv1d(need(OP, t, 0)?, need(OP, t, 1)?, opt(t, 2), p)
    }

    /// conv1d by name.
    pub(crate) const CONV1D_SPEC: OpSpec<S, N> = OpSpec {
        name: OP,
        inputs: &["input", "weight", "bias"],
        params: &["stride", "padding", "dilation", "groups"],
        call: Self::conv1d_call,
        in_place: None,
    };
}

/// A non-negative integer given as an integer or a one-element list.
fn single(a: &dyn Attrs, name: &str, default: usize) -> Result<usize> {
    let mut v = [0i64; 1];
    match a.ints(name, &mut v)? {
        None => Ok(default),
        Some(1) => usize::try_from(v[0]).map_err(|_| Error::InvalidParam {
            op: OP,
            what: "parameter must be a non-negative integer",
            value: v[0],
        }),
        Some(n) => Err(Error::InvalidParam {
            op: OP,
            what: "parameter must be an integer or a one-element list; list length",
            value: n as i64,
        }),
    }
}

impl<S: Scalar, const N: usize> NoGrad<'_, '_, S, N> {
    /// [`Graph::conv1d`] without gradients.
    pub fn conv1d(&mut self, x: Tensor, w: Tensor, b: Option<Tensor>, p: Conv1dParams) -> Result<Tensor> {
        self.g.conv1d_with(x, w, b, p, None)
    }
}
