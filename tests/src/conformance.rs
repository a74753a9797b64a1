//! The op conformance door of `shared/CONFORMANCE.md`: one JSON case in, one result
//! out, through the same public API a user calls. Used by the `conformance` binary, the
//! golden tests and the gradient checks.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use torchlet::{
    Conv2dParams, Error, Graph, InterpMode, PadMode, PadParams, Pool2dParams, Scalar, Tensor, Q16,
};

/// Tape capacity used for single-op cases.
const TAPE: usize = 16;

/// The largest arena a case may plan for (a huge shape is an error, not an abort).
const MAX_CASE_BYTES: usize = 256 << 20;

/// A tensor as JSON: row-major data with its shape.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct JsonTensor {
    /// Dimensions.
    pub shape: Vec<usize>,
    /// `product(shape)` numbers.
    pub data: Vec<f64>,
}

/// One case of the input document.
#[derive(Clone, Debug, Deserialize)]
pub struct Case {
    /// Echoed in the result.
    pub id: String,
    /// `torch.nn.functional` name.
    pub op: String,
    /// `"f32"` (default) or `"q16.16"` ([`Q16`]).
    #[serde(default)]
    pub dtype: Option<String>,
    /// Op parameters, PyTorch names.
    #[serde(default)]
    pub params: Map<String, Value>,
    /// Named inputs.
    #[serde(default)]
    pub inputs: BTreeMap<String, JsonTensor>,
    /// Gradient flowing into the output (absent for scalar losses).
    #[serde(default)]
    pub grad_output: Option<JsonTensor>,
    /// Golden fixtures only: the expected result.
    #[serde(default)]
    pub expected: Option<Outcome>,
    /// Golden fixtures only: the expected error kind.
    #[serde(default)]
    pub expected_error: Option<String>,
}

/// The input document.
#[derive(Clone, Debug, Deserialize)]
pub struct Cases {
    /// The cases, in order.
    pub cases: Vec<Case>,
}

/// Output and gradients of a case that ran.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct Outcome {
    /// The op's output.
    pub output: JsonTensor,
    /// Gradient of every floating-point input.
    #[serde(default)]
    pub grads: BTreeMap<String, JsonTensor>,
}

/// An error result.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ErrorReport {
    /// The engine's `Error` variant name.
    pub kind: String,
    /// Its message.
    pub message: String,
}

/// One result of the output document.
#[derive(Clone, Debug, Serialize)]
pub struct CaseResult {
    /// The case's id.
    pub id: String,
    /// Output and gradients, when the case ran.
    #[serde(flatten)]
    pub outcome: Option<Outcome>,
    /// The error, when it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorReport>,
}

/// Errors of the door itself (malformed case), reported with the engine's kinds.
fn bad(what: &'static str) -> Error {
    Error::InvalidParam {
        op: "conformance",
        what,
        value: 0,
    }
}

/// Runs one case and always returns a result (never panics on bad input).
pub fn run_case(case: &Case) -> CaseResult {
    let result = match case.dtype.as_deref().unwrap_or("f32") {
        "f32" => run_f32(case),
        "q16.16" => run_scalar::<Q16>(case),
        _ => Err(Error::Unsupported { op: "dtype" }),
    };
    match result {
        Ok(outcome) => CaseResult {
            id: case.id.clone(),
            outcome: Some(outcome),
            error: None,
        },
        Err(e) => CaseResult {
            id: case.id.clone(),
            outcome: None,
            error: Some(ErrorReport {
                kind: e.kind().to_string(),
                message: e.to_string(),
            }),
        },
    }
}

/// Which inputs of an op are floating point (they get gradients).
fn float_inputs(op: &str) -> &'static [&'static str] {
    match op {
        "conv2d" | "linear" => &["input", "weight", "bias"],
        "add" | "mul" => &["input", "other"],
        "mse_loss" => &["input", "target"],
        _ => &["input"],
    }
}

/// A scalar the door can run a case in: how JSON reals (`f64`) become engine values
/// (by the type's own rounding rule) and come back.
pub trait DoorScalar: Scalar {
    /// From a JSON real.
    fn from_real(v: f64) -> Self;
    /// To a JSON real (exact for both types).
    fn to_real(self) -> f64;
}

impl DoorScalar for f32 {
    fn from_real(v: f64) -> f32 {
        v as f32
    }
    fn to_real(self) -> f64 {
        self as f64
    }
}

impl DoorScalar for Q16 {
    fn from_real(v: f64) -> Q16 {
        Q16::from_f64(v)
    }
    fn to_real(self) -> f64 {
        self.to_f64()
    }
}

/// Runs a case in f32: a meta pass sizes the arena exactly, then the real pass runs
/// in an arena of that size.
pub fn run_f32(case: &Case) -> Result<Outcome, Error> {
    run_scalar::<f32>(case)
}

/// Runs a case in scalar type `S` (see [`run_f32`]); inputs are converted with
/// [`DoorScalar::from_real`] and results reported as reals.
pub fn run_scalar<S: DoorScalar>(case: &Case) -> Result<Outcome, Error> {
    let mut meta: Graph<S, TAPE> = Graph::meta(MAX_CASE_BYTES);
    let (out, leaves) = record(&mut meta, case)?;
    if !leaves.is_empty() {
        meta.backward_with(out, &[])?;
    }
    let words = meta.arena().high_water_bytes() / core::mem::size_of::<S>();
    let mut arena = vec![S::ZERO; words];
    let mut g: Graph<S, TAPE> = Graph::new(&mut arena);
    let (out, leaves) = record(&mut g, case)?;
    let output = JsonTensor {
        shape: g.shape(out)?.dims().to_vec(),
        data: g.data(out)?.iter().map(|&v| v.to_real()).collect(),
    };
    let mut grads = BTreeMap::new();
    if !leaves.is_empty() {
        match &case.grad_output {
            Some(go) => {
                let seed: Vec<S> = go.data.iter().map(|&v| S::from_real(v)).collect();
                check_shape(go, &output.shape)?;
                g.backward_with(out, &seed)?;
            }
            None => g.backward(out)?,
        }
        for (name, t) in leaves {
            let grad = g.grad(t)?.map(|s| s.to_vec()).unwrap_or_default();
            grads.insert(
                name.to_string(),
                JsonTensor {
                    shape: g.shape(t)?.dims().to_vec(),
                    data: grad.iter().map(|&v| v.to_real()).collect(),
                },
            );
        }
    }
    Ok(Outcome { output, grads })
}

fn check_shape(t: &JsonTensor, want: &[usize]) -> Result<(), Error> {
    if t.shape != want {
        return Err(Error::ShapeMismatch {
            op: "conformance",
            what: "grad_output shape vs output shape; element counts",
            // Saturating: a grad_output of absurd dims must not overflow (found by review
            // while fuzzing; replayed by tests/tests/weights_fuzz_regressions.rs).
            expected: want.iter().fold(1usize, |a, &d| a.saturating_mul(d)),
            found: t.shape.iter().fold(1usize, |a, &d| a.saturating_mul(d)),
        });
    }
    Ok(())
}

type Leaves = Vec<(&'static str, Tensor)>;

/// Creates the inputs and calls the op on `g`.
fn record<S: DoorScalar, const N: usize>(
    g: &mut Graph<'_, S, N>,
    case: &Case,
) -> Result<(Tensor, Leaves), Error> {
    let mut leaves: Leaves = Vec::new();
    let mut t = |name: &'static str| -> Result<Option<Tensor>, Error> {
        let Some(j) = case.inputs.get(name) else {
            return Ok(None);
        };
        let data: Vec<S> = j.data.iter().map(|&v| S::from_real(v)).collect();
        let tensor = g.input_with_grad(&j.shape, &data)?;
        leaves.push((name, tensor));
        Ok(Some(tensor))
    };
    let mut inputs: BTreeMap<&'static str, Option<Tensor>> = BTreeMap::new();
    for name in float_inputs(&case.op) {
        inputs.insert(name, t(name)?);
    }
    let need = |n: &'static str| {
        inputs
            .get(n)
            .copied()
            .flatten()
            .ok_or(bad("missing input tensor"))
    };
    let p = &case.params;
    let out = match case.op.as_str() {
        "conv2d" => {
            let params = Conv2dParams {
                stride: pair(p, "stride", 1)?,
                padding: pair(p, "padding", 0)?,
                dilation: pair(p, "dilation", 1)?,
                groups: uint(p, "groups", 1)?,
            };
            g.conv2d(need("input")?, need("weight")?, inputs["bias"], params)?
        }
        "max_pool2d" | "avg_pool2d" => {
            let k = pair(p, "kernel_size", usize::MAX)?;
            if k[0] == usize::MAX {
                return Err(bad("kernel_size is required"));
            }
            let stride = match p.get("stride") {
                None | Some(Value::Null) => k,
                Some(Value::Array(a)) if a.is_empty() => k,
                _ => pair(p, "stride", 1)?,
            };
            let params = Pool2dParams {
                kernel_size: k,
                stride,
                padding: pair(p, "padding", 0)?,
                ceil_mode: flag(p, "ceil_mode", false)?,
                count_include_pad: flag(p, "count_include_pad", true)?,
            };
            if case.op == "max_pool2d" {
                g.max_pool2d(need("input")?, params)?
            } else {
                g.avg_pool2d(need("input")?, params)?
            }
        }
        "adaptive_avg_pool2d" => g.adaptive_avg_pool2d(need("input")?, pair(p, "output_size", 1)?)?,
        "linear" => g.linear(need("input")?, need("weight")?, inputs["bias"])?,
        "relu" => g.relu(need("input")?)?,
        "leaky_relu" => g.leaky_relu(need("input")?, real(p, "negative_slope", 0.01)? as f32)?,
        "sigmoid" => g.sigmoid(need("input")?)?,
        "tanh" => g.tanh(need("input")?)?,
        "add" => g.add(need("input")?, need("other")?)?,
        "mul" => g.mul(need("input")?, need("other")?)?,
        "flatten" => g.flatten(need("input")?, uint(p, "start_dim", 0)?)?,
        "mse_loss" => g.mse_loss(need("input")?, need("target")?)?,
        "cross_entropy" => {
            let target = case.inputs.get("target").ok_or(bad("missing input tensor"))?;
            let mut classes = Vec::with_capacity(target.data.len());
            for &v in &target.data {
                if v < 0.0 || v.fract() != 0.0 || v > u32::MAX as f64 {
                    return Err(Error::InvalidParam {
                        op: "cross_entropy",
                        what: "target class index out of range",
                        value: v as i64,
                    });
                }
                classes.push(v as usize);
            }
            g.cross_entropy(need("input")?, &classes)?
        }
        "pad" => g.pad(need("input")?, pad_params(p)?)?,
        "interpolate" => {
            let size = pair(p, "size", 0)?;
            let mode = match p.get("mode").and_then(Value::as_str).unwrap_or("nearest") {
                "nearest" => InterpMode::Nearest,
                "bilinear" => InterpMode::Bilinear {
                    align_corners: flag(p, "align_corners", false)?,
                },
                _ => {
                    return Err(Error::Unsupported {
                        op: "interpolate mode",
                    })
                }
            };
            g.interpolate(need("input")?, size, mode)?
        }
        _ => return Err(Error::Unsupported { op: "unknown op" }),
    };
    Ok((out, leaves))
}

/// `pad` params: `[left, right, top, bottom]` (negative crops), mode, value.
fn pad_params(p: &Map<String, Value>) -> Result<PadParams, Error> {
    let list = p
        .get("pad")
        .and_then(Value::as_array)
        .filter(|a| a.len() == 4)
        .ok_or(bad("pad must be [left, right, top, bottom]"))?;
    let mut pad = [0isize; 4];
    for (d, v) in pad.iter_mut().zip(list) {
        *d = v
            .as_i64()
            .and_then(|v| isize::try_from(v).ok())
            .ok_or(bad("pad entries must be integers"))?;
    }
    let mode = match p.get("mode").and_then(Value::as_str).unwrap_or("constant") {
        "constant" => PadMode::Constant,
        "reflect" => PadMode::Reflect,
        "replicate" => PadMode::Replicate,
        _ => return Err(Error::Unsupported { op: "pad mode" }),
    };
    Ok(PadParams {
        pad,
        mode,
        value: real(p, "value", 0.0)? as f32,
    })
}

fn uint(p: &Map<String, Value>, key: &str, default: usize) -> Result<usize, Error> {
    match p.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_u64()
            .and_then(|u| usize::try_from(u).ok())
            .ok_or(bad("parameter must be a non-negative integer")),
    }
}

fn pair(p: &Map<String, Value>, key: &str, default: usize) -> Result<[usize; 2], Error> {
    match p.get(key) {
        None | Some(Value::Null) => Ok([default, default]),
        Some(Value::Array(a)) if a.len() == 2 => {
            let one = |v: &Value| {
                v.as_u64()
                    .and_then(|u| usize::try_from(u).ok())
                    .ok_or(bad("parameter must be non-negative integers"))
            };
            Ok([one(&a[0])?, one(&a[1])?])
        }
        Some(Value::Array(a)) if a.len() == 1 => {
            pair(&Map::from_iter([(key.to_string(), a[0].clone())]), key, default)
        }
        Some(v) => {
            let u = v
                .as_u64()
                .and_then(|u| usize::try_from(u).ok())
                .ok_or(bad("parameter must be a non-negative integer or a pair"))?;
            Ok([u, u])
        }
    }
}

fn flag(p: &Map<String, Value>, key: &str, default: bool) -> Result<bool, Error> {
    match p.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v.as_bool().ok_or(bad("parameter must be a boolean")),
    }
}

fn real(p: &Map<String, Value>, key: &str, default: f64) -> Result<f64, Error> {
    match p.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v.as_f64().ok_or(bad("parameter must be a number")),
    }
}

/// Runs a whole document.
pub fn run_document(text: &str) -> Result<Vec<CaseResult>, serde_json::Error> {
    let cases: Cases = serde_json::from_str(text)?;
    Ok(cases.cases.iter().map(run_case).collect())
}
