//! relu, leaky_relu, sigmoid, tanh, silu. ReLU, sigmoid and tanh save nothing extra:
//! their backward reads the output (which lives until the step ends); leaky ReLU reads
//! the input, since a negative slope would make the output's sign ambiguous, and SiLU
//! reads the input (one tensor kept, where `x * sigmoid(x)` as two ops keeps two).

use super::registry::{need, opt, real, Attrs, OpSpec};
use crate::error::{Error, Result};
use crate::graph::{
    f32_words, words_f32, BackwardFn, Graph, NoGrad, NodeId, Op, OpKind, Params, Tensor, NO_PARAMS,
};
use crate::graph::{reads, touched};
use crate::kernels::compact as c;
use crate::kernels::elementwise::{grad_map, map};
use crate::kernels::set::KernelSet;
use crate::scalar::Scalar;

/// A one-input op's record kind: backward reads the output (`reads_output`) or the input.
const fn kind(name: &'static str, reads_output: bool) -> OpKind {
    OpKind {
        name,
        reads_inputs: if reads_output { reads(0) } else { reads(0b001) },
        reads_output,
    }
}

static RELU: OpKind = kind("relu", true);
static LEAKY_RELU: OpKind = kind("leaky_relu", false);
static SIGMOID: OpKind = kind("sigmoid", true);
static TANH: OpKind = kind("tanh", true);
static SILU: OpKind = kind("silu", false);
/// In-place ReLU: the output took over the input's memory; a bit mask is saved.
static RELU_MASKED: OpKind = OpKind {
    name: "relu_",
    reads_inputs: reads(0),
    reads_output: false,
};

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Records a one-input element-wise op and runs `f` on every element.
    pub(super) fn unary(
        &mut self,
        x: Tensor,
        kind: &'static OpKind,
        params: Params,
        rule: BackwardFn<S, N>,
        f: impl Fn(S) -> S,
    ) -> Result<Tensor> {
        let xi = self.id(x)?;
        let xn = self.nodes[xi];
        let rg = self.needs_grad(&[Some(xi)]);
        let op = match rg {
            true => Op::new(kind, [Some(xi), None, None], params),
            false => Op::LEAF,
        };
        let out = self.push(xn.shape(), op, Some(rule), rg, 0)?;
        let y = self.nodes[out.id as usize].data;
        self.exec([xn.data], y, |[x], y| map(x, y, f))?;
        Ok(out)
    }

    /// `gx += f(gy, saved)` where `saved` is the output (`from_output`) or the input.
    pub(super) fn unary_backward(
        &mut self,
        i: usize,
        x: NodeId,
        from_output: bool,
        f: impl Fn(S, S) -> S,
    ) -> Result<()> {
        let gy = self.grads_for(i)?;
        let saved = if from_output {
            self.nodes[i].data
        } else {
            self.nodes[x as usize].data
        };
        if let Some(gx) = self.grad_of(x) {
            self.exec([gy, saved], gx, |[gy, s], gx| grad_map(gy, s, gx, f))?;
        }
        Ok(())
    }

    /// `max(x, 0)`; NaN propagates, as in PyTorch.
    pub fn relu(&mut self, x: Tensor) -> Result<Tensor> {
        self.unary(x, &RELU, NO_PARAMS, Self::relu_rule, |v| {
            if v < S::ZERO {
                S::ZERO
            } else {
                v
            }
        })
    }

    /// relu's backward rule, recorded by [`Graph::relu`].
    fn relu_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let x = g.record(i, &RELU)?.input(0);
        g.relu_backward(i, x)
    }

    fn relu_backward(&mut self, i: usize, x: NodeId) -> Result<()> {
        // PyTorch's `y <= 0 ? 0 : g`: a NaN output passes the gradient.
        self.unary_backward(i, x, true, |g, y| if y <= S::ZERO { S::ZERO } else { g })
    }

    /// `x` where positive, `slope * x` elsewhere (NaN propagates).
    pub fn leaky_relu(&mut self, x: Tensor, negative_slope: f32) -> Result<Tensor> {
        if !negative_slope.is_finite() {
            let what = "negative_slope must be finite";
            return Err(Error::float("leaky_relu", what, negative_slope));
        }
        let a = S::from_f32(negative_slope);
        let mut slope = NO_PARAMS;
        [slope[0], slope[1]] = f32_words(negative_slope);
        self.unary(x, &LEAKY_RELU, slope, Self::leaky_relu_rule, |v| {
            if v > S::ZERO {
                v
            } else {
                a * v
            }
        })
    }

    /// leaky_relu's backward rule, recorded by [`Graph::leaky_relu`].
    fn leaky_relu_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &LEAKY_RELU)?;
        g.leaky_relu_backward(i, op.input(0), words_f32([op.params[0], op.params[1]]))
    }

    fn leaky_relu_backward(&mut self, i: usize, x: NodeId, slope: f32) -> Result<()> {
        let a = S::from_f32(slope);
        self.unary_backward(i, x, false, |g, v| if v > S::ZERO { g } else { a * g })
    }

    /// `1 / (1 + e^-x)`.
    pub fn sigmoid(&mut self, x: Tensor) -> Result<Tensor> {
        self.unary(x, &SIGMOID, NO_PARAMS, Self::sigmoid_rule, S::sigmoid)
    }

    /// sigmoid's backward rule, recorded by [`Graph::sigmoid`].
    fn sigmoid_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let x = g.record(i, &SIGMOID)?.input(0);
        g.sigmoid_backward(i, x)
    }

    fn sigmoid_backward(&mut self, i: usize, x: NodeId) -> Result<()> {
        self.unary_backward(i, x, true, |g, y| g * y * (S::ONE - y))
    }

    /// Hyperbolic tangent.
    pub fn tanh(&mut self, x: Tensor) -> Result<Tensor> {
        self.unary(x, &TANH, NO_PARAMS, Self::tanh_rule, S::tanh)
    }

    /// tanh's backward rule, recorded by [`Graph::tanh`].
    fn tanh_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let x = g.record(i, &TANH)?.input(0);
        g.tanh_backward(i, x)
    }

    fn tanh_backward(&mut self, i: usize, x: NodeId) -> Result<()> {
        self.unary_backward(i, x, true, |g, y| g * (S::ONE - y * y))
    }

    /// `x * sigmoid(x)` (SiLU, Swish).
    pub fn silu(&mut self, x: Tensor) -> Result<Tensor> {
        self.unary(x, &SILU, NO_PARAMS, Self::silu_rule, |v| v * v.sigmoid())
    }

    /// silu's backward rule, recorded by [`Graph::silu`]: PyTorch's
    /// `g * s * (1 + x * (1 - s))`, `s = sigmoid(x)`.
    fn silu_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let x = g.record(i, &SILU)?.input(0);
        g.unary_backward(i, x, false, |g, v| {
            let s = v.sigmoid();
            g * s * (S::ONE + v * (S::ONE - s))
        })
    }
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// In-place ReLU (`torch.relu_`, `nn.ReLU(inplace=True)`): the output takes over
    /// `x`'s memory and keeps only a bit mask for backward, and `x`'s handle is
    /// consumed (later use is refused). Refused, with `x` left intact, when something
    /// recorded still needs `x`'s value for backward or a view of `x` is alive.
    pub fn relu_(&mut self, x: Tensor) -> Result<Tensor> {
        self.relu_with_(x, Some(Self::relu_masked_rule))
    }

    /// Records relu_ with `rule` as its backward; `None` records no gradient path.
    pub(crate) fn relu_with_(&mut self, x: Tensor, rule: Option<BackwardFn<S, N>>) -> Result<Tensor> {
        let xi = self.id(x)?;
        if xi < self.num_params() || !self.can_overwrite(xi) {
            return Err(Error::InvalidState {
                what: "relu_: the input is a parameter, is shared by a view, or its value is needed for backward (use relu)",
            });
        }
        let xn = self.nodes[xi];
        let rg = rule.is_some() && self.needs_grad(&[Some(xi)]);
        let n = xn.shape().numel();
        let op = match rg {
            true => Op::unary(&RELU_MASKED, xi),
            false => Op::LEAF,
        };
        let (out, saved) =
            self.take_over("relu_", xi, op, rule, rg, if rg { c::mask_words(n) } else { 0 })?;
        let work = touched(&[], xn.data);
        self.exec2([], [xn.data, saved], work, |[], xv, mv| {
            S::Kernels::relu_masked(xv, mv)
        })?;
        Ok(out)
    }

    /// relu_'s backward rule, recorded by [`Graph::relu_`].
    fn relu_masked_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let x = g.record(i, &RELU_MASKED)?.input(0);
        // The output gradient, masked in place, becomes the input's when it has none yet.
        let mask = g.nodes[i].saved;
        if g.pass_grad_in_place(i, x, |g, gy| {
            g.exec([mask], gy, |[m], gy| S::Kernels::relu_mask_in_place(gy, m))
        })? {
            return Ok(());
        }
        g.relu_masked_backward(i, x)
    }

    fn relu_masked_backward(&mut self, i: usize, x: NodeId) -> Result<()> {
        let gy = self.grads_for(i)?;
        let mask = self.nodes[i].saved;
        if let Some(gx) = self.grad_of(x) {
            self.exec([gy, mask], gx, |[gy, m], gx| c::relu_masked_backward(gy, m, gx))?;
        }
        Ok(())
    }
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    fn relu_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], _: &dyn Attrs) -> Result<Tensor> {
        g.relu(need("relu", t, 0)?)
    }

    /// relu's in-place form by name ([`Graph::relu_`]).
    fn relu_in_place(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], _: &dyn Attrs) -> Option<Result<Tensor>> {
        Some(g.relu_(opt(t, 0)?))
    }

    fn leaky_relu_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        let slope = real(a, "negative_slope", 0.01)? as f32;
        g.leaky_relu(need("leaky_relu", t, 0)?, slope)
    }

    fn sigmoid_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], _: &dyn Attrs) -> Result<Tensor> {
        g.sigmoid(need("sigmoid", t, 0)?)
    }

    fn tanh_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], _: &dyn Attrs) -> Result<Tensor> {
        g.tanh(need("tanh", t, 0)?)
    }

    fn silu_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], _: &dyn Attrs) -> Result<Tensor> {
        g.silu(need("silu", t, 0)?)
    }

    /// relu by name.
    pub(crate) const RELU_SPEC: OpSpec<S, N> = OpSpec {
        name: "relu",
        inputs: &["input"],
        params: &[],
        call: Self::relu_call,
        in_place: Some(Self::relu_in_place),
    };
    /// leaky_relu by name (`negative_slope`, default 0.01).
    pub(crate) const LEAKY_RELU_SPEC: OpSpec<S, N> = OpSpec {
        name: "leaky_relu",
        inputs: &["input"],
        params: &["negative_slope"],
        call: Self::leaky_relu_call,
        in_place: None,
    };
    /// sigmoid by name.
    pub(crate) const SIGMOID_SPEC: OpSpec<S, N> = OpSpec {
        name: "sigmoid",
        inputs: &["input"],
        params: &[],
        call: Self::sigmoid_call,
        in_place: None,
    };
    /// tanh by name.
    pub(crate) const TANH_SPEC: OpSpec<S, N> = OpSpec {
        name: "tanh",
        inputs: &["input"],
        params: &[],
        call: Self::tanh_call,
        in_place: None,
    };
    /// silu by name.
    pub(crate) const SILU_SPEC: OpSpec<S, N> = OpSpec {
        name: "silu",
        inputs: &["input"],
        params: &[],
        call: Self::silu_call,
        in_place: None,
    };
}

impl<S: Scalar, const N: usize> NoGrad<'_, '_, S, N> {
    /// [`Graph::relu_`] without gradients (no mask is saved).
    pub fn relu_(&mut self, x: Tensor) -> Result<Tensor> {
        self.g.relu_with_(x, None)
    }
}
