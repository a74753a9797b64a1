//! The op conformance door of `shared/CONFORMANCE.md`: one JSON case in, one result
//! out, through the same public API a user calls. Used by the `conformance` binary, the
//! golden tests and the gradient checks.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use torchlet::ops::registry::{Attrs, OpSpec};
use torchlet::{Error, Graph, Scalar, Tensor, Q16};

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
    /// Buffers an op updates in place (batch_norm's `running_mean` and `running_var`,
    /// which get no gradient), after the call.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub buffers: BTreeMap<String, JsonTensor>,
}

/// Inputs that are buffers: created without a gradient, reported after the call.
const BUFFERS: &[&str] = &["running_mean", "running_var"];

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

/// The scalar a gradient check differentiates: `sum(output * grad_output)` in f64 (the
/// output's sum for a loss, whose gradient is 1), from the f32 result of `case`.
pub fn objective(case: &Case) -> Result<f64, Error> {
    let out = run_f32(case)?.output;
    Ok(match &case.grad_output {
        Some(go) => out.data.iter().zip(&go.data).map(|(a, b)| a * b).sum(),
        None => out.data.iter().sum(),
    })
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
    let (out, leaves, _) = record(&mut meta, case)?;
    if !leaves.is_empty() {
        meta.backward_with(out, &[])?;
    }
    let words = meta.arena().high_water_bytes() / core::mem::size_of::<S>();
    let mut arena = vec![S::ZERO; words];
    let mut g: Graph<S, TAPE> = Graph::new(&mut arena);
    let (out, leaves, bufs) = record(&mut g, case)?;
    let json = |g: &Graph<S, TAPE>, t: Tensor| -> Result<JsonTensor, Error> {
        Ok(JsonTensor {
            shape: g.shape(t)?.dims().to_vec(),
            data: g.data(t)?.iter().map(|&v| v.to_real()).collect(),
        })
    };
    let output = json(&g, out)?;
    let mut buffers = BTreeMap::new();
    for (name, t) in bufs {
        buffers.insert(name.to_string(), json(&g, t)?);
    }
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
    Ok(Outcome {
        output,
        grads,
        buffers,
    })
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

/// Creates the inputs and calls the op on `g`, by name through the engine's registry
/// ([`OpSpec`]): the spec names the tensor inputs (they get gradients), the case's
/// `params` (and integer inputs such as class targets) are its [`Attrs`]. Returns the
/// output, the inputs with gradients and the buffers ([`BUFFERS`], no gradient).
fn record<S: DoorScalar, const N: usize>(
    g: &mut Graph<'_, S, N>,
    case: &Case,
) -> Result<(Tensor, Leaves, Leaves), Error> {
    let spec = OpSpec::<S, N>::find(&case.op);
    let names = spec.map_or(&["input"][..], |s| s.inputs);
    let (mut leaves, mut bufs): (Leaves, Leaves) = (Vec::new(), Vec::new());
    let mut inputs = Vec::with_capacity(names.len());
    for &name in names {
        let tensor = match case.inputs.get(name) {
            None => None,
            Some(j) => {
                let data: Vec<S> = j.data.iter().map(|&v| S::from_real(v)).collect();
                let t = match BUFFERS.contains(&name) {
                    true => g.input(&j.shape, &data)?,
                    false => g.input_with_grad(&j.shape, &data)?,
                };
                match BUFFERS.contains(&name) {
                    true => bufs.push((name, t)),
                    false => leaves.push((name, t)),
                }
                Some(t)
            }
        };
        inputs.push(tensor);
    }
    let spec = spec.ok_or(Error::Unsupported { op: "unknown op" })?;
    let out = (spec.call)(g, &inputs, &JsonAttrs(case))?;
    Ok((out, leaves, bufs))
}

/// A case's `params` (PyTorch names) as the registry reads them; lists that are not
/// in `params` come from the case's `inputs` (class targets).
struct JsonAttrs<'c>(&'c Case);

impl JsonAttrs<'_> {
    fn get(&self, name: &str) -> Option<&Value> {
        self.0.params.get(name).filter(|v| !v.is_null())
    }
}

impl Attrs for JsonAttrs<'_> {
    fn int(&self, name: &str) -> Result<Option<i64>, Error> {
        self.get(name)
            .map(|v| v.as_i64().ok_or(bad("parameter must be a non-negative integer")))
            .transpose()
    }

    fn ints(&self, name: &str, out: &mut [i64]) -> Result<Option<usize>, Error> {
        match self.get(name) {
            None => {
                let Some(t) = self.0.inputs.get(name) else {
                    return Ok(None);
                };
                for (d, &v) in out.iter_mut().zip(&t.data) {
                    *d = v as i64;
                }
                Ok(Some(t.data.len()))
            }
            Some(Value::Array(a)) => {
                for (d, v) in out.iter_mut().zip(a) {
                    *d = v.as_i64().ok_or(bad("parameter must be non-negative integers"))?;
                }
                Ok(Some(a.len()))
            }
            Some(v) => {
                let v = v
                    .as_i64()
                    .ok_or(bad("parameter must be a non-negative integer or a pair"))?;
                if let Some(d) = out.first_mut() {
                    *d = v;
                }
                Ok(Some(1))
            }
        }
    }

    fn float(&self, name: &str) -> Result<Option<f64>, Error> {
        self.get(name)
            .map(|v| v.as_f64().ok_or(bad("parameter must be a number")))
            .transpose()
    }

    fn float_at(&self, name: &str, k: usize) -> Result<Option<f64>, Error> {
        match self.get(name) {
            None => Ok(self.0.inputs.get(name).and_then(|t| t.data.get(k)).copied()),
            Some(Value::Array(a)) => a
                .get(k)
                .map(|v| v.as_f64().ok_or(bad("parameter must be numbers")))
                .transpose(),
            Some(_) => Err(bad("parameter must be a list of numbers")),
        }
    }

    fn flag(&self, name: &str) -> Result<Option<bool>, Error> {
        self.get(name)
            .map(|v| v.as_bool().ok_or(bad("parameter must be a boolean")))
            .transpose()
    }

    /// Anything but a string counts as absent (the op's default mode).
    fn string(&self, name: &str) -> Result<Option<&str>, Error> {
        Ok(self.get(name).and_then(Value::as_str))
    }
}

/// Runs a whole document.
pub fn run_document(text: &str) -> Result<Vec<CaseResult>, serde_json::Error> {
    let cases: Cases = serde_json::from_str(text)?;
    Ok(cases.cases.iter().map(run_case).collect())
}
