//! interpolate: 2-D resize (`torch.nn.functional.interpolate(size=...)`), nearest and
//! bilinear; the op behind progressive resizing.

use super::expect_rank;
use super::registry::{flag, need, pair, Attrs, OpSpec};
use crate::error::{Error, Result};
use crate::graph::reads;
use crate::graph::{BackwardFn, Graph, NoGrad, NodeId, Op, OpKind, Tensor, NO_PARAMS};
pub use crate::kernels::resize::InterpMode;
use crate::kernels::resize::{self as k, ResizeGeom};
use crate::scalar::Scalar;
use crate::shape::Shape;

const OP: &str = "interpolate";

/// interpolate's records: backward reads no data; the mode is parameter word 0.
static INTERPOLATE: OpKind = OpKind {
    name: OP,
    reads_inputs: reads(0),
    reads_output: false,
};

fn mode_word(mode: InterpMode) -> u16 {
    match mode {
        InterpMode::Nearest => 0,
        InterpMode::Bilinear { align_corners } => 1 + align_corners as u16,
    }
}

fn word_mode(w: u16) -> InterpMode {
    match w {
        0 => InterpMode::Nearest,
        _ => InterpMode::Bilinear {
            align_corners: w == 2,
        },
    }
}

pub(crate) fn geometry(x: Shape, size: [usize; 2], mode: InterpMode) -> Result<ResizeGeom> {
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
        let g = geometry(xn.shape(), size, mode)?;
        let rg = rule.is_some() && self.needs_grad(&[Some(xi)]);
        let mut params = NO_PARAMS;
        params[0] = mode_word(mode);
        let op = match rg {
            true => Op::new(&INTERPOLATE, [Some(xi), None, None], params),
            false => Op::LEAF,
        };
        let shape = Shape::nchw(xn.shape().dim(0), xn.shape().dim(1), g.oh, g.ow)?;
        let out = self.push(shape, op, rule, rg, 0)?;
        let y = self.nodes[out.id as usize].data;
        self.exec([xn.data], y, |[x], y| k::resize_forward(&g, x, y))?;
        Ok(out)
    }

    /// interpolate's backward rule, recorded by [`Graph::interpolate`].
    fn interpolate_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &INTERPOLATE)?;
        g.interpolate_backward(i, op.input(0), word_mode(op.params[0]))
    }

    fn interpolate_backward(&mut self, i: usize, x: NodeId, mode: InterpMode) -> Result<()> {
        let gy = self.grads_for(i)?;
        let ys = self.nodes[i].shape();
        let g = geometry(self.nodes[x as usize].shape(), [ys.dim(2), ys.dim(3)], mode)?;
        if let Some(gx) = self.grad_of(x) {
            self.exec([gy], gx, |[gy], gx| k::resize_backward(&g, gy, gx))?;
        }
        Ok(())
    }

    /// interpolate called by name: `size` `[h, w]` (or `scale_factor` `[sh, sw]`), `mode` (`nearest` or `bilinear`;
    /// anything but a string is the default), `align_corners`.
    fn interpolate_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        let x = need(OP, t, 0)?;
        let mut size = pair(a, OP, "size", 0)?;
        let s = g.shape(x)?;
        if a.ints("size", &mut [0; 2])?.is_none() && s.rank() == 4 {
            // `scale_factor` `[sh, sw]` (a model with free H, W): the size is
            // floor(input * scale), the scale then exact for integer factors.
            for (k, d) in size.iter_mut().enumerate() {
                let f = a.float_at("scale_factor", k)?.or(a.float_at("scale_factor", 0)?);
                let what = "size or a finite, positive scale_factor is required";
                let f = match f {
                    Some(f) if f.is_finite() && f > 0.0 => f,
                    Some(f) => return Err(Error::float(OP, what, f as f32)),
                    None => {
                        return Err(Error::InvalidParam {
                            op: OP,
                            what,
                            value: k as i64,
                        })
                    }
                };
                *d = (s.dim(2 + k) as f64 * f) as usize; // f > 0: truncation is floor
            }
        }
        let mode = match a.string("mode")?.unwrap_or("nearest") {
            "nearest" => InterpMode::Nearest,
            "bilinear" => InterpMode::Bilinear {
                align_corners: flag(a, "align_corners", false)?,
            },
            _ => {
                return Err(Error::Unsupported {
                    op: "interpolate mode",
                })
            }
        };
        g.interpolate(x, size, mode)
    }

    /// interpolate by name.
    pub(crate) const INTERPOLATE_SPEC: OpSpec<S, N> = OpSpec {
        name: OP,
        inputs: &["input"],
        params: &["size", "scale_factor", "mode", "align_corners"],
        call: Self::interpolate_call,
        in_place: None,
    };
}

impl<S: Scalar, const N: usize> NoGrad<'_, '_, S, N> {
    /// [`Graph::interpolate`] without gradients.
    pub fn interpolate(&mut self, x: Tensor, size: [usize; 2], mode: InterpMode) -> Result<Tensor> {
        self.g.interpolate_with(x, size, mode, None)
    }
}
