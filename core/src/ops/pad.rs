//! pad (`torch.nn.functional.pad` on H and W: constant, reflect, replicate; negative
//! pads crop) and crop (a window of the spatial dims, as a negative pad).

use super::expect_rank;
use super::registry::{need, real, Attrs, OpSpec};
use crate::error::{Error, Result};
use crate::graph::reads;
use crate::graph::{Graph, NodeId, Op, OpKind, Packed, Params, Tensor, NO_PARAMS};
pub use crate::kernels::pad::PadMode;
use crate::kernels::pad::{self as k, PadGeom};
use crate::scalar::Scalar;
use crate::shape::Shape;

const OP: &str = "pad";

/// Parameters of a spatial pad, in PyTorch's order `[left, right, top, bottom]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PadParams {
    /// Columns added left and right, rows added top and bottom; negative crops.
    pub pad: [isize; 4],
    /// Fill rule.
    pub mode: PadMode,
    /// Constant mode only: the fill value.
    pub value: f32,
}

/// pad's records: backward reads no data.
static PAD: OpKind = OpKind {
    name: OP,
    reads_inputs: reads(0),
    reads_output: false,
};

impl Packed for PadParams {
    fn pack(&self, op: &'static str) -> Result<Params> {
        let mut w = NO_PARAMS;
        for (d, &v) in w.iter_mut().zip(&self.pad) {
            *d = i16::try_from(v).map_err(|_| Error::Overflow { op })? as u16;
        }
        w[4] = self.mode as u16;
        Ok(w)
    }

    fn unpack(w: &Params) -> Self {
        let mode = match w[4] {
            0 => PadMode::Constant,
            1 => PadMode::Reflect,
            _ => PadMode::Replicate,
        };
        PadParams {
            pad: [0, 1, 2, 3].map(|k| w[k] as i16 as isize),
            mode,
            // Not saved: backward never reads the fill value.
            value: 0.0,
        }
    }
}

/// One padded dimension: the output length, checked.
fn padded_len(len: usize, before: isize, after: isize, mode: PadMode) -> Result<usize> {
    let out = (len as isize)
        .checked_add(before)
        .and_then(|v| v.checked_add(after))
        .ok_or(Error::Overflow { op: OP })?;
    if out < 1 {
        return Err(Error::InvalidParam {
            op: OP,
            what: "pads leave an empty output; output size",
            value: out as i64,
        });
    }
    if mode == PadMode::Reflect && (before >= len as isize || after >= len as isize) {
        return Err(Error::InvalidParam {
            op: OP,
            what: "reflect padding must be smaller than the input dimension; pad",
            value: before.max(after) as i64,
        });
    }
    Ok(out as usize)
}

pub(crate) fn geometry(x: Shape, p: &PadParams) -> Result<PadGeom> {
    expect_rank(
        OP,
        "input has {found} dimensions, expected {expected} (N, C, H, W)",
        x.rank(),
        4,
    )?;
    if x.numel() == 0 {
        return Err(Error::ShapeMismatch {
            op: OP,
            what: "input has a dimension of size {found}, expected at least {expected}",
            expected: 1,
            found: 0,
        });
    }
    // What the record keeps (a signed half-word each), with or without gradients: a
    // pad that runs without them cannot be refused when they are on.
    if let Some(&v) = p.pad.iter().find(|&&v| i16::try_from(v).is_err()) {
        return Err(Error::InvalidParam {
            op: OP,
            what: "each pad must be in -32768..=32767; pad",
            value: v as i64,
        });
    }
    let [l, r, t, b] = p.pad;
    let (h, w) = (x.dim(2), x.dim(3));
    Ok(PadGeom {
        planes: x.dim(0) * x.dim(1),
        h,
        w,
        oh: padded_len(h, t, b, p.mode)?,
        ow: padded_len(w, l, r, p.mode)?,
        top: t,
        left: l,
        mode: p.mode,
    })
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Pads (or, with negative values, crops) the last two dims of `x: [N, C, H, W]`.
    pub fn pad(&mut self, x: Tensor, p: PadParams) -> Result<Tensor> {
        let xi = self.id(x)?;
        let xn = self.nodes[xi];
        let g = geometry(xn.shape(), &p)?;
        let rg = self.needs_grad(&[Some(xi)]);
        let op = match rg {
            true => Op::new(&PAD, [Some(xi), None, None], p.pack(OP)?),
            false => Op::LEAF,
        };
        let shape = Shape::nchw(xn.shape().dim(0), xn.shape().dim(1), g.oh, g.ow)?;
        let out = self.push(shape, op, Some(Self::pad_rule), rg, 0)?;
        let y = self.nodes[out.id as usize].data;
        let v = S::from_f32(p.value);
        self.exec([xn.data], y, |[x], y| k::pad_forward(&g, v, x, y))?;
        Ok(out)
    }

    /// Zero padding on each side: `[left, right, top, bottom]`.
    pub fn zero_pad(&mut self, x: Tensor, pad: [usize; 4]) -> Result<Tensor> {
        let mut p = [0isize; 4];
        for (d, &s) in p.iter_mut().zip(&pad) {
            *d = isize::try_from(s).map_err(|_| Error::Overflow { op: OP })?;
        }
        self.pad(
            x,
            PadParams {
                pad: p,
                mode: PadMode::Constant,
                value: 0.0,
            },
        )
    }

    /// The window `[top, top + h) x [left, left + w)` of the spatial dims.
    pub fn crop(&mut self, x: Tensor, top: usize, left: usize, h: usize, w: usize) -> Result<Tensor> {
        let s = self.shape(x)?;
        expect_rank(
            "crop",
            "input has {found} dimensions, expected {expected} (N, C, H, W)",
            s.rank(),
            4,
        )?;
        let (ih, iw) = (s.dim(2), s.dim(3));
        let fits = |a: usize, b: usize, n: usize| a.checked_add(b).is_some_and(|e| e <= n);
        if h == 0 || w == 0 || !fits(top, h, ih) || !fits(left, w, iw) {
            return Err(Error::ShapeMismatch {
                op: "crop",
                what: "window (rows x columns, as rows*columns) outside the input or empty",
                expected: ih * iw,
                found: h.saturating_mul(w),
            });
        }
        let neg = |v: usize| -(v as isize);
        self.pad(
            x,
            PadParams {
                pad: [neg(left), neg(iw - left - w), neg(top), neg(ih - top - h)],
                mode: PadMode::Constant,
                value: 0.0,
            },
        )
    }

    /// pad's backward rule, recorded by [`Graph::pad`].
    fn pad_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &PAD)?;
        g.pad_backward(i, op.input(0), PadParams::unpack(&op.params))
    }

    fn pad_backward(&mut self, i: usize, x: NodeId, p: PadParams) -> Result<()> {
        let gy = self.grads_for(i)?;
        let g = geometry(self.nodes[x as usize].shape(), &p)?;
        if let Some(gx) = self.grad_of(x) {
            self.exec([gy], gx, |[gy], gx| k::pad_backward(&g, gy, gx))?;
        }
        Ok(())
    }

    /// pad called by name: `pad` `[left, right, top, bottom]` (negative crops), `mode`
    /// (`constant`, `reflect`, `replicate`; anything but a string is the default),
    /// `value`.
    fn pad_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        let mut list = [0i64; 4];
        if a.ints("pad", &mut list)? != Some(4) {
            return Err(Error::InvalidParam {
                op: OP,
                what: "pad must be [left, right, top, bottom]",
                value: 0,
            });
        }
        let mut pad = [0isize; 4];
        for (d, &v) in pad.iter_mut().zip(&list) {
            *d = isize::try_from(v).map_err(|_| Error::Overflow { op: OP })?;
        }
        let mode = match a.string("mode")?.unwrap_or("constant") {
            "constant" => PadMode::Constant,
            "reflect" => PadMode::Reflect,
            "replicate" => PadMode::Replicate,
            _ => return Err(Error::Unsupported { op: "pad mode" }),
        };
        let value = real(a, "value", 0.0)? as f32;
        g.pad(need(OP, t, 0)?, PadParams { pad, mode, value })
    }

    /// pad by name.
    pub(crate) const PAD_SPEC: OpSpec<S, N> = OpSpec {
        name: OP,
        inputs: &["input"],
        params: &["pad", "mode", "value"],
        call: Self::pad_call,
        in_place: None,
    };
}
