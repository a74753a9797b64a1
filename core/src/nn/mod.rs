//! Layer conveniences: `Conv2d`, `Linear`, activations and pools as [`Layer`]s, and a
//! [`Sequential`] of them held inline (no heap). Each layer owns parameter handles of a
//! [`Graph`] and calls the same ops the plain-function style uses.

use crate::error::{Error, Result};
use crate::graph::{Graph, Tensor};
use crate::init::{uniform_fan_in, Rng};
use crate::ops::conv::Conv2dParams;
use crate::ops::pool::Pool2dParams;
use crate::scalar::Scalar;

mod block;
mod mobile_fcn;
mod op_layer;
mod sequential;

pub use block::{Block, Cat, Residual};
pub use mobile_fcn::{mobile_fcn, ConvBn, InvertedResidual, MobileFcn};
pub use op_layer::{OpLayer, ParamValue, MAX_LIST_LEN, MAX_WORD_LEN};
pub use sequential::{LayerError, LayerSite, Sequential};

mod norm;
pub use norm::{BatchNorm2d, BatchNormOptions, Dropout, GroupNorm};
mod conv;
pub use conv::{Conv1d, ConvTranspose2d};

/// A 2-D convolution layer with PyTorch's initialisation.
#[derive(Clone, Copy, Debug)]
pub struct Conv2d {
    /// `[out, in/groups, kh, kw]`.
    pub weight: Tensor,
    /// `[out]`, if the layer has a bias.
    pub bias: Option<Tensor>,
    /// Stride, padding, dilation, groups.
    pub params: Conv2dParams,
}

impl Conv2d {
    /// A `kernel x kernel` convolution from `in_ch` to `out_ch` channels.
    pub fn new<S: Scalar, const N: usize>(
        g: &mut Graph<'_, S, N>,
        in_ch: usize,
        out_ch: usize,
        kernel: usize,
        params: Conv2dParams,
        bias: bool,
        rng: &mut Rng,
    ) -> Result<Self> {
        if params.groups == 0 || !in_ch.is_multiple_of(params.groups) {
            return Err(Error::InvalidParam {
                op: "Conv2d",
                what: "groups must divide the input channels",
                value: params.groups as i64,
            });
        }
        let cin_g = in_ch / params.groups;
        let weight = g.param(&[out_ch, cin_g, kernel, kernel])?;
        let fan_in = cin_g * kernel * kernel;
        uniform_fan_in(g, weight, fan_in, rng)?;
        let bias = if bias {
            let b = g.param(&[out_ch])?;
            uniform_fan_in(g, b, fan_in, rng)?;
            Some(b)
        } else {
            None
        };
        Ok(Conv2d { weight, bias, params })
    }

    /// Applies the layer.
    pub fn forward<S: Scalar, const N: usize>(&self, g: &mut Graph<'_, S, N>, x: Tensor) -> Result<Tensor> {
        g.conv2d(x, self.weight, self.bias, self.params)
    }
}

/// A fully connected layer with PyTorch's initialisation.
#[derive(Clone, Copy, Debug)]
pub struct Linear {
    /// `[out, in]`.
    pub weight: Tensor,
    /// `[out]`, if the layer has a bias.
    pub bias: Option<Tensor>,
}

impl Linear {
    /// A layer from `inp` to `out` features.
    pub fn new<S: Scalar, const N: usize>(
        g: &mut Graph<'_, S, N>,
        inp: usize,
        out: usize,
        bias: bool,
        rng: &mut Rng,
    ) -> Result<Self> {
        let weight = g.param(&[out, inp])?;
        uniform_fan_in(g, weight, inp, rng)?;
        let bias = if bias {
            let b = g.param(&[out])?;
            uniform_fan_in(g, b, inp, rng)?;
            Some(b)
        } else {
            None
        };
        Ok(Linear { weight, bias })
    }

    /// Applies the layer.
    pub fn forward<S: Scalar, const N: usize>(&self, g: &mut Graph<'_, S, N>, x: Tensor) -> Result<Tensor> {
        g.linear(x, self.weight, self.bias)
    }
}

/// One step of a [`Sequential`].
#[derive(Clone, Copy, Debug)]
pub enum Layer {
    /// See [`Conv2d`].
    Conv2d(Conv2d),
    /// See [`Linear`].
    Linear(Linear),
    /// `max(x, 0)`.
    Relu,
    /// Leaky ReLU with the given negative slope.
    LeakyRelu(f32),
    /// Logistic sigmoid.
    Sigmoid,
    /// Hyperbolic tangent.
    Tanh,
    /// Max pooling.
    MaxPool2d(Pool2dParams),
    /// Average pooling.
    AvgPool2d(Pool2dParams),
    /// Adaptive average pooling to `[h, w]` (`[1, 1]` is global average pooling).
    AdaptiveAvgPool2d([usize; 2]),
    /// Flatten from the given dimension.
    Flatten(usize),
    /// See [`BatchNorm2d`].
    BatchNorm2d(BatchNorm2d),
    /// See [`GroupNorm`].
    GroupNorm(GroupNorm),
    /// See [`Dropout`].
    Dropout(Dropout),
    /// See [`Conv1d`].
    Conv1d(Conv1d),
    /// See [`ConvTranspose2d`].
    ConvTranspose2d(ConvTranspose2d),
    /// Any other op with one tensor input, by name (`relu6`, `hardswish`, `softmax`
    /// with `dim`, ...): see [`OpLayer`].
    Op(OpLayer),
}

impl Layer {
    /// The op called `name` as a layer, with PyTorch's default parameters
    /// ([`OpLayer::new`]; give parameters with [`OpLayer::with`] and wrap in
    /// [`Layer::Op`]).
    pub fn op(name: &str) -> Result<Layer> {
        OpLayer::new(name).map(Layer::Op)
    }

    /// The layer's op name (`"conv2d"`, `"relu"`, ...), as the op registry and the
    /// shape trace call it.
    pub fn name(&self) -> &'static str {
        match self {
            Layer::Conv2d(_) => "conv2d",
            Layer::Linear(_) => "linear",
            Layer::Relu => "relu",
            Layer::LeakyRelu(_) => "leaky_relu",
            Layer::Sigmoid => "sigmoid",
            Layer::Tanh => "tanh",
            Layer::MaxPool2d(_) => "max_pool2d",
            Layer::AvgPool2d(_) => "avg_pool2d",
            Layer::AdaptiveAvgPool2d(_) => "adaptive_avg_pool2d",
            Layer::Flatten(_) => "flatten",
            Layer::BatchNorm2d(_) => "batch_norm",
            Layer::GroupNorm(_) => "group_norm",
            Layer::Dropout(_) => "dropout",
            Layer::Conv1d(_) => "conv1d",
            Layer::ConvTranspose2d(_) => "conv_transpose2d",
            Layer::Op(o) => o.name(),
        }
    }

    /// Applies the layer.
    pub fn forward<S: Scalar, const N: usize>(&self, g: &mut Graph<'_, S, N>, x: Tensor) -> Result<Tensor> {
        match self {
            Layer::Conv2d(c) => c.forward(g, x),
            Layer::Linear(l) => l.forward(g, x),
            Layer::Relu => g.relu(x),
            Layer::LeakyRelu(a) => g.leaky_relu(x, *a),
            Layer::Sigmoid => g.sigmoid(x),
            Layer::Tanh => g.tanh(x),
            Layer::MaxPool2d(p) => g.max_pool2d(x, *p),
            Layer::AvgPool2d(p) => g.avg_pool2d(x, *p),
            Layer::AdaptiveAvgPool2d(s) => g.adaptive_avg_pool2d(x, *s),
            Layer::Flatten(d) => g.flatten(x, *d),
            Layer::BatchNorm2d(l) => l.forward(g, x),
            Layer::GroupNorm(l) => l.forward(g, x),
            Layer::Dropout(l) => l.forward(g, x),
            Layer::Conv1d(c) => c.forward(g, x),
            Layer::ConvTranspose2d(c) => c.forward(g, x),
            Layer::Op(o) => o.forward(g, x),
        }
    }
}

/// Reference workload W1, "digits-fcn": three 3x3 convolutions (1->8->16->32, padding
/// 1, ReLU, max-pool 2 after the first two), global average pooling and a 32->10
/// linear head; 6,218 parameters; any input of at least 4x4 pixels.
pub fn digits_fcn<S: Scalar, const N: usize>(
    g: &mut Graph<'_, S, N>,
    rng: &mut Rng,
) -> Result<Sequential<12>> {
    let mut s = Sequential::new();
    let pad1 = Conv2dParams::padded(1);
    s.push(Layer::Conv2d(Conv2d::new(g, 1, 8, 3, pad1, true, rng)?))?;
    s.push(Layer::Relu)?;
    s.push(Layer::MaxPool2d(Pool2dParams::square(2)))?;
    s.push(Layer::Conv2d(Conv2d::new(g, 8, 16, 3, pad1, true, rng)?))?;
    s.push(Layer::Relu)?;
    s.push(Layer::MaxPool2d(Pool2dParams::square(2)))?;
    s.push(Layer::Conv2d(Conv2d::new(g, 16, 32, 3, pad1, true, rng)?))?;
    s.push(Layer::Relu)?;
    s.push(Layer::AdaptiveAvgPool2d([1, 1]))?;
    s.push(Layer::Flatten(1))?;
    s.push(Layer::Linear(Linear::new(g, 32, 10, true, rng)?))?;
    Ok(s)
}
