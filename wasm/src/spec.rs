//! Networks described from JavaScript: W1 or a short list of layer specs (JSON), turned
//! into the engine's own [`Layer`]s. No math here: only channel bookkeeping so that
//! each layer can be created with the right number of inputs.
//!
//! ```json
//! [ {"type": "conv2d", "out_channels": 8, "kernel_size": 3, "padding": 1},
//!   {"type": "relu"}, {"type": "max_pool2d", "kernel_size": 2},
//!   {"type": "global_avg_pool2d"}, {"type": "flatten"},
//!   {"type": "linear", "out_features": 10} ]
//! ```
//!
//! Normalisation and dropout: `{"type": "batch_norm2d"}` (`eps`, `momentum`, `affine`,
//! `track_running_stats`, optional `num_features`), `{"type": "group_norm",
//! "num_groups": 2}` (`eps`, `affine`, optional `num_channels`), `{"type": "dropout",
//! "p": 0.2}`.

use serde::Deserialize;
use torchlet::init::Rng;
use torchlet::nn::{
    digits_fcn, BatchNorm2d, BatchNormOptions, Conv1d, Conv2d, ConvTranspose2d, Dropout, GroupNorm, Layer,
    Linear, OpLayer, ParamValue,
};
use torchlet::{Conv1dParams, Conv2dParams, ConvTranspose2dParams, Error, Graph, Pool2dParams};

/// Most layers a JS-described network may have (keeps the tape within `owned::TAPE`).
pub const MAX_LAYERS: usize = 32;

/// One layer as JavaScript writes it (`snake_case` names, PyTorch's argument names).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum LayerSpec {
    /// `nn.Conv2d(in, out_channels, kernel_size, stride, padding, bias=True)`; each
    /// of kernel_size, stride, padding an int or a `[rows, columns]` pair.
    Conv2d {
        /// Output channels.
        out_channels: usize,
        /// Kernel size.
        kernel_size: IntOrPair,
        /// Stride (default 1).
        #[serde(default = "one_pair")]
        stride: IntOrPair,
        /// Zero padding on each side (default 0).
        #[serde(default)]
        padding: IntOrPair,
    },
    /// `nn.Conv1d(in, out_channels, kernel_size, stride, padding, bias=True)`. A network
    /// whose first layer is conv1d reads each sample as sequences of `height * width`
    /// values per channel (pass height 1 and the length as width).
    Conv1d {
        /// Output channels.
        out_channels: usize,
        /// Kernel width.
        kernel_size: usize,
        /// Stride (default 1).
        #[serde(default = "one")]
        stride: usize,
        /// Zero padding on each end (default 0).
        #[serde(default)]
        padding: usize,
    },
    /// `nn.ConvTranspose2d(in, out_channels, kernel_size, stride, padding,
    /// output_padding, bias=True)`, each size an int or a pair: learned upsampling.
    ConvTranspose2d {
        /// Output channels.
        out_channels: usize,
        /// Kernel size.
        kernel_size: IntOrPair,
        /// Stride (default 1).
        #[serde(default = "one_pair")]
        stride: IntOrPair,
        /// Rows and columns cut from each side (default 0).
        #[serde(default)]
        padding: IntOrPair,
        /// Rows and columns added at the end (default 0).
        #[serde(default)]
        output_padding: IntOrPair,
    },
    /// `nn.ReLU`.
    Relu,
    /// `nn.LeakyReLU(negative_slope)`.
    LeakyRelu {
        /// Slope for negative inputs (default 0.01).
        #[serde(default = "leaky")]
        negative_slope: f32,
    },
    /// `nn.Sigmoid`.
    Sigmoid,
    /// `nn.Tanh`.
    Tanh,
    /// `nn.MaxPool2d(kernel_size, stride=kernel_size)`.
    MaxPool2d {
        /// Square window side.
        kernel_size: usize,
        /// Stride (default: the kernel size).
        stride: Option<usize>,
    },
    /// `nn.AvgPool2d(kernel_size, stride=kernel_size)`.
    AvgPool2d {
        /// Square window side.
        kernel_size: usize,
        /// Stride (default: the kernel size).
        stride: Option<usize>,
    },
    /// `nn.AdaptiveAvgPool2d(1)`: any spatial size to 1x1.
    GlobalAvgPool2d,
    /// `nn.Flatten()` (from dimension 1).
    Flatten,
    /// `nn.Linear(in, out_features)`; the input width is inferred and must be known,
    /// i.e. the linear layer follows a global average pool (and a flatten).
    Linear {
        /// Output features.
        out_features: usize,
    },
    /// `nn.BatchNorm2d(num_features, eps, momentum, affine, track_running_stats)`:
    /// batch statistics in `trainStep`, running ones in `predict`.
    BatchNorm2d {
        /// Channels (default: inferred; if given, must be the input's).
        num_features: Option<usize>,
        /// Added to the variance (default 1e-5).
        #[serde(default = "eps")]
        eps: f32,
        /// Running-statistics update weight (default 0.1).
        #[serde(default = "momentum")]
        momentum: f32,
        /// Learnable weight and bias (default true).
        #[serde(default = "yes")]
        affine: bool,
        /// Keep running statistics (default true).
        #[serde(default = "yes")]
        track_running_stats: bool,
    },
    /// `nn.GroupNorm(num_groups, num_channels, eps, affine)`.
    GroupNorm {
        /// Groups (must divide the channels).
        num_groups: usize,
        /// Channels (default: inferred; if given, must be the input's).
        num_channels: Option<usize>,
        /// Added to the variance (default 1e-5).
        #[serde(default = "eps")]
        eps: f32,
        /// Learnable weight and bias (default true).
        #[serde(default = "yes")]
        affine: bool,
    },
    /// `nn.Dropout(p)`: active in `trainStep`, the identity in `predict`.
    Dropout {
        /// Probability of zeroing an element (default 0.5).
        #[serde(default = "half")]
        p: f32,
    },
    /// Any other op of the engine with one tensor input, by its `torch.nn.functional`
    /// name and keyword parameters (`{"type": "softmax", "dim": 1}`,
    /// `{"type": "hardswish"}`): [`torchlet::nn::OpLayer`]. Not a serde tag: entries
    /// whose `type` is none of the above land here.
    #[serde(skip)]
    Op {
        /// The op's name.
        name: String,
        /// Its keyword parameters as given.
        params: Vec<(String, serde_json::Value)>,
    },
}

impl LayerSpec {
    /// One JSON entry: a layer above, or else any one-input op of the engine by name.
    fn from_value(v: serde_json::Value) -> Result<Self, SpecError> {
        let known = serde_json::from_value::<LayerSpec>(v.clone());
        let serde_json::Value::Object(mut fields) = v else {
            return known.map_err(|e| SpecError::Json(e.to_string()));
        };
        let name = match fields.remove("type") {
            Some(serde_json::Value::String(t)) if OpLayer::new(&t).is_ok() => t,
            _ => return known.map_err(|e| SpecError::Json(e.to_string())),
        };
        match known {
            Ok(spec) => Ok(spec),
            Err(_) => Ok(LayerSpec::Op {
                name,
                params: fields.into_iter().collect(),
            }),
        }
    }
}

/// The engine's layer for op `name` with JSON keyword parameters. The parameter list
/// is leaked (a few bytes per layer, once per model built): an [`OpLayer`] keeps its
/// parameters in a `'static` slice so that every layer stays four words.
fn op_layer(name: &str, params: &[(String, serde_json::Value)]) -> Result<Layer, SpecError> {
    use serde_json::Value;
    let layer = OpLayer::new(name)?;
    let mut list = Vec::with_capacity(params.len());
    for (key, v) in params {
        let bad = || SpecError::Invalid(format!("{name}: parameter {key} has an unsupported value {v}"));
        let key_name = layer
            .param_name(key)
            .map_err(|e| SpecError::Invalid(format!("{name}: parameter {key}: {e}")))?;
        let value = match v {
            Value::Bool(b) => ParamValue::Flag(*b),
            Value::Number(n) => match n.as_i64() {
                Some(i) => ParamValue::Int(i),
                None => ParamValue::Float(n.as_f64().ok_or_else(bad)?),
            },
            Value::String(t) => ParamValue::word(t)?,
            Value::Array(items) => {
                let ints: Option<Vec<i64>> = items.iter().map(Value::as_i64).collect();
                ParamValue::ints(&ints.ok_or_else(bad)?)?
            }
            _ => return Err(bad()),
        };
        list.push((key_name, value));
    }
    let list: &'static [(&'static str, ParamValue)] = Box::leak(list.into_boxed_slice());
    Ok(Layer::Op(layer.with(list)?))
}

fn one() -> usize {
    1
}
fn one_pair() -> IntOrPair {
    IntOrPair::Int(1)
}

/// A size given as PyTorch takes it: `3` (both dimensions) or `[3, 1]` (rows, columns).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum IntOrPair {
    /// The same value for rows and columns.
    Int(usize),
    /// `[rows, columns]`.
    Pair([usize; 2]),
}

impl Default for IntOrPair {
    fn default() -> Self {
        IntOrPair::Int(0)
    }
}

impl IntOrPair {
    /// `[rows, columns]`.
    pub fn pair(self) -> [usize; 2] {
        match self {
            IntOrPair::Int(v) => [v, v],
            IntOrPair::Pair(p) => p,
        }
    }
}
fn leaky() -> f32 {
    0.01
}
fn eps() -> f32 {
    1e-5
}
fn momentum() -> f32 {
    0.1
}
fn yes() -> bool {
    true
}
fn half() -> f32 {
    0.5
}

/// A layer's optional channel count, checked against the channels it gets.
fn channels(i: usize, name: &str, given: Option<usize>, ch: usize) -> Result<usize, SpecError> {
    match given {
        Some(c) if c != ch => Err(SpecError::Invalid(format!(
            "layer {i} ({name}): {c} channels given, its input has {ch}"
        ))),
        _ => Ok(ch),
    }
}

/// What network to build.
#[derive(Clone, Debug, PartialEq)]
pub enum NetSpec {
    /// W1 "digits-fcn" from `torchlet::nn::digits_fcn` (1 input channel, 10 classes).
    W1,
    /// Layers described from JS, with the input's channel count.
    Layers {
        /// Input channels.
        in_channels: usize,
        /// The layers in order.
        layers: Vec<LayerSpec>,
    },
}

/// Reasons a JSON spec is refused before the engine sees it.
#[derive(Debug)]
pub enum SpecError {
    /// Not valid JSON for a list of layers.
    Json(String),
    /// The engine refused a layer.
    Engine(Error),
    /// A structural problem (empty, too long, linear width unknown).
    Invalid(String),
    /// A size, an allocation or a step past a limit (`crate::limits`), or a call the
    /// model cannot make; the message says which.
    Refused(String),
}

impl From<Error> for SpecError {
    fn from(e: Error) -> Self {
        SpecError::Engine(e)
    }
}

impl core::fmt::Display for SpecError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SpecError::Json(m) => write!(f, "layer spec: {m}"),
            SpecError::Engine(e) => write!(f, "{e}"),
            SpecError::Invalid(m) => write!(f, "layer spec: {m}"),
            SpecError::Refused(m) => f.write_str(m),
        }
    }
}

impl NetSpec {
    /// Parses a JSON array of [`LayerSpec`]s.
    pub fn from_json(in_channels: usize, json: &str) -> Result<Self, SpecError> {
        let entries: Vec<serde_json::Value> =
            serde_json::from_str(json).map_err(|e| SpecError::Json(e.to_string()))?;
        let layers = entries
            .into_iter()
            .map(LayerSpec::from_value)
            .collect::<Result<Vec<_>, _>>()?;
        if layers.is_empty() || layers.len() > MAX_LAYERS {
            return Err(SpecError::Invalid(format!(
                "expected 1 to {MAX_LAYERS} layers, got {}",
                layers.len()
            )));
        }
        if in_channels == 0 {
            return Err(SpecError::Invalid("in_channels must be at least 1".into()));
        }
        Ok(NetSpec::Layers { in_channels, layers })
    }

    /// Input channels the network expects.
    pub fn in_channels(&self) -> usize {
        match self {
            NetSpec::W1 => 1,
            NetSpec::Layers { in_channels, .. } => *in_channels,
        }
    }

    /// The input's dimensions for `batch` samples of `h x w`: `[batch, C, h, w]`, or
    /// `[batch, C, h * w]` (the same row-major data) when the first layer is conv1d;
    /// refused when their element count overflows.
    pub fn input_dims(&self, batch: usize, h: usize, w: usize) -> Result<Vec<usize>, SpecError> {
        let c = self.in_channels();
        let dims = match self {
            NetSpec::Layers { layers, .. } if matches!(layers.first(), Some(LayerSpec::Conv1d { .. })) => {
                let l = h.checked_mul(w).ok_or_else(|| {
                    SpecError::Refused(format!("input: height x width, {h} x {w}, overflows"))
                })?;
                vec![batch, c, l]
            }
            _ => vec![batch, c, h, w],
        };
        crate::limits::product("input", &dims).map_err(SpecError::Refused)?;
        Ok(dims)
    }

    /// Creates the parameters in `g` (initialised from `rng`) and returns the layers.
    pub fn build<const N: usize>(
        &self,
        g: &mut Graph<'_, f32, N>,
        rng: &mut Rng,
    ) -> Result<Vec<Layer>, SpecError> {
        match self {
            NetSpec::W1 => Ok(digits_fcn(g, rng)?.layers().to_vec()),
            NetSpec::Layers { in_channels, layers } => build_layers(g, rng, *in_channels, layers),
        }
    }
}

/// Channel (and flattened width) bookkeeping while creating the layers.
fn build_layers<const N: usize>(
    g: &mut Graph<'_, f32, N>,
    rng: &mut Rng,
    in_channels: usize,
    specs: &[LayerSpec],
) -> Result<Vec<Layer>, SpecError> {
    let mut ch = in_channels;
    // Features per sample once the spatial size is known to be 1x1 (after a global pool).
    let mut flat: Option<usize> = None;
    let mut out = Vec::with_capacity(specs.len());
    for (i, s) in specs.iter().enumerate() {
        let layer = match *s {
            LayerSpec::Conv2d {
                out_channels,
                kernel_size,
                stride,
                padding,
            } => {
                let p = Conv2dParams {
                    stride: stride.pair(),
                    padding: padding.pair(),
                    ..Default::default()
                };
                let c = Conv2d::rect(g, ch, out_channels, kernel_size.pair(), p, true, rng)?;
                ch = out_channels;
                flat = None;
                Layer::Conv2d(c)
            }
            LayerSpec::Conv1d {
                out_channels,
                kernel_size,
                stride,
                padding,
            } => {
                let p = Conv1dParams {
                    stride,
                    padding,
                    ..Default::default()
                };
                let c = Conv1d::new(g, ch, out_channels, kernel_size, p, true, rng)?;
                ch = out_channels;
                flat = None;
                Layer::Conv1d(c)
            }
            LayerSpec::ConvTranspose2d {
                out_channels,
                kernel_size,
                stride,
                padding,
                output_padding,
            } => {
                let p = ConvTranspose2dParams {
                    stride: stride.pair(),
                    padding: padding.pair(),
                    output_padding: output_padding.pair(),
                    ..Default::default()
                };
                let c = ConvTranspose2d::new(g, ch, out_channels, kernel_size.pair(), p, true, rng)?;
                ch = out_channels;
                flat = None;
                Layer::ConvTranspose2d(c)
            }
            LayerSpec::Relu => Layer::Relu,
            LayerSpec::LeakyRelu { negative_slope } => Layer::LeakyRelu(negative_slope),
            LayerSpec::Sigmoid => Layer::Sigmoid,
            LayerSpec::Tanh => Layer::Tanh,
            LayerSpec::MaxPool2d { kernel_size, stride } => Layer::MaxPool2d(pool(kernel_size, stride)),
            LayerSpec::AvgPool2d { kernel_size, stride } => Layer::AvgPool2d(pool(kernel_size, stride)),
            LayerSpec::GlobalAvgPool2d => {
                flat = Some(ch);
                Layer::AdaptiveAvgPool2d([1, 1])
            }
            LayerSpec::Flatten => Layer::Flatten(1),
            LayerSpec::Op { ref name, ref params } => op_layer(name, params)?,
            LayerSpec::Linear { out_features } => {
                let inp = flat.ok_or_else(|| {
                    SpecError::Invalid(format!(
                        "layer {i} (linear): its input width is unknown; put a \
                         global_avg_pool2d and a flatten before it"
                    ))
                })?;
                let l = Linear::new(g, inp, out_features, true, rng)?;
                flat = Some(out_features);
                ch = out_features;
                Layer::Linear(l)
            }
            LayerSpec::BatchNorm2d {
                num_features,
                eps,
                momentum,
                affine,
                track_running_stats,
            } => {
                let c = channels(i, "batch_norm2d", num_features, ch)?;
                let o = BatchNormOptions {
                    eps,
                    momentum,
                    affine,
                    track_running_stats,
                };
                Layer::BatchNorm2d(BatchNorm2d::with_options(g, c, o)?)
            }
            LayerSpec::GroupNorm {
                num_groups,
                num_channels,
                eps,
                affine,
            } => {
                let c = channels(i, "group_norm", num_channels, ch)?;
                Layer::GroupNorm(GroupNorm::with_options(g, num_groups, c, eps, affine)?)
            }
            LayerSpec::Dropout { p } => Layer::Dropout(Dropout::new(p)?),
        };
        out.push(layer);
    }
    Ok(out)
}

fn pool(k: usize, stride: Option<usize>) -> Pool2dParams {
    let mut p = Pool2dParams::square(k);
    if let Some(s) = stride {
        p.stride = [s, s];
    }
    p
}

/// A short name of a layer for plans (`"conv2d"`, `"relu"`, ...): [`Layer::name`].
pub fn layer_name(l: &Layer) -> &'static str {
    l.name()
}
