//! The local side of a fleet round: received arrays into the model by state_dict name,
//! `local-steps` SGD steps on cyclic mini-batches, the updated arrays back; evaluation.
//!
//! - Every model tensor must be received with its shape, and every received array must be
//!   a model tensor or a `num_batches_tracked` buffer (ONNX does not carry those: they go
//!   back counted up by the steps in training mode). Anything else is refused by name and
//!   the local model stays as it was.
//! - Mini-batch b is rows (b·B) mod N onward, cyclic over the N samples (B = batch-size).
//! - The step is `torchlet train`'s: mean cross-entropy, SGD (momentum buffer fresh each
//!   round), training mode with `--choice all`, a device's fine-tuning step otherwise.

use crate::files::Tensor;
use crate::plan::{loss, target_count, TAPE};
use torchlet::model::spec::GraphSpec;
use torchlet::model::{encode, Model, ModelFile, Trained};
use torchlet::optim::Sgd;
use torchlet::Graph;
use torchlet_fleet::{Array, Values};

/// Samples: `x` rows of `per_x` values, one label per row (or per position).
pub struct Data {
    pub x: Tensor,
    pub labels: Vec<i64>,
}

/// SGD settings of one round (the ServerApp's config).
pub struct Round {
    pub lr: f32,
    pub momentum: f32,
    pub weight_decay: f32,
    pub steps: usize,
    pub batch: usize,
}

impl Data {
    pub fn n(&self) -> usize {
        self.x.shape.first().copied().unwrap_or(0)
    }

    /// Rows `start, start+1, ...` (cyclic), `count` of them, with their labels.
    fn batch(&self, start: usize, count: usize) -> (Vec<f32>, Vec<i64>) {
        let n = self.n().max(1);
        let per_x = self.x.data.len() / n;
        let per_y = self.labels.len() / n;
        let (mut xb, mut yb) = (
            Vec::with_capacity(count * per_x),
            Vec::with_capacity(count * per_y),
        );
        for k in 0..count {
            let i = (start + k) % n;
            xb.extend_from_slice(&self.x.data[i * per_x..(i + 1) * per_x]);
            yb.extend_from_slice(&self.labels[i * per_y..(i + 1) * per_y]);
        }
        (xb, yb)
    }
}

/// The spec with the received arrays in place of its tensors, or the first problem, named.
pub fn load(spec: &GraphSpec, arrays: &[(String, Array)]) -> Result<GraphSpec, String> {
    let mut out = spec.clone();
    for t in &spec.tensors {
        if !arrays.iter().any(|(n, _)| *n == t.name) {
            return Err(format!(
                "array {} is missing (the model has it, shape {:?})",
                t.name, t.dims
            ));
        }
    }
    for (name, array) in arrays {
        let Some(t) = out.tensors.iter_mut().find(|t| t.name == *name) else {
            if name.ends_with("num_batches_tracked") && array.shape.is_empty() {
                continue;
            }
            return Err(format!("array {name} is not in the model"));
        };
        // A state_dict scalar ([], num_batches_tracked) may be [1] in a model file.
        let one = |d: &[usize]| d.is_empty() || d == [1];
        let scalar_as_one = one(&array.shape) && one(&t.dims);
        if array.shape != t.dims && !scalar_as_one {
            return Err(format!(
                "array {name}: shape {:?} where the model has {:?}",
                array.shape, t.dims
            ));
        }
        if t.int8.is_some() {
            return Err(format!(
                "array {name}: the model holds it as int8, it cannot be replaced"
            ));
        }
        let values = array.values(name).map_err(|e| e.to_string())?;
        if !values.all_finite() {
            return Err(format!("array {name} has a non-finite value"));
        }
        t.data = values.to_f32();
    }
    Ok(out)
}

/// `round.steps` SGD steps of `spec` on `data`: the updated spec and the mean loss.
pub fn train(
    spec: &GraphSpec,
    trained: Trained<'static>,
    arena_words: usize,
    data: &Data,
    round: &Round,
) -> Result<(GraphSpec, f64), String> {
    let bytes = encode(spec).map_err(|e| e.to_string())?;
    let file = ModelFile::parse(&bytes).map_err(|e| e.to_string())?;
    let mut arena = vec![0.0f32; arena_words];
    let mut g: Graph<'_, f32, TAPE> = Graph::new(&mut arena);
    let m = trained.build(&mut g, file).map_err(|e| e.to_string())?;
    let mut sgd =
        Sgd::new(&mut g, round.lr, round.momentum, round.weight_decay).map_err(|e| e.to_string())?;
    let n = data.n();
    let batch = round.batch.clamp(1, n.max(1));
    let mut dims = data.x.shape.clone();
    dims[0] = batch;
    let mut total = 0.0f64;
    for b in 0..round.steps {
        let (xb, yb) = data.batch((b * batch) % n, batch);
        let r = (|| {
            g.zero_grad();
            let xt = g.input(&dims, &xb)?;
            let logits = m.forward(&mut g, &[xt])?;
            let expected = target_count(&g, logits)?;
            if expected != yb.len() {
                return Err(torchlet::Error::ShapeMismatch {
                    op: "fleet",
                    what: "y holds {found} targets per batch, the model's output needs {expected}",
                    expected,
                    found: yb.len(),
                });
            }
            let l = loss(&mut g, logits, &yb)?;
            let v = g.data(l)?[0];
            g.backward(l)?;
            sgd.step(&mut g)?;
            Ok(v)
        })();
        g.end_step();
        total += f64::from(r.map_err(|e| format!("step {}: {e}", b + 1))?);
    }
    let out = m.to_file_bytes(&g).map_err(|e| e.to_string())?;
    let file = ModelFile::parse(&out).map_err(|e| e.to_string())?;
    Ok((file.to_spec(), total / round.steps.max(1) as f64))
}

/// Mean cross-entropy and accuracy of `spec` on `data` (eval mode, batches of `batch`).
pub fn evaluate(
    spec: &GraphSpec,
    arena_words: usize,
    data: &Data,
    batch: usize,
) -> Result<(f64, f64), String> {
    let bytes = encode(spec).map_err(|e| e.to_string())?;
    let file = ModelFile::parse(&bytes).map_err(|e| e.to_string())?;
    let mut arena = vec![0.0f32; arena_words];
    let mut g: Graph<'_, f32, TAPE> = Graph::new(&mut arena);
    let m = Model::new(&mut g, file).map_err(|e| e.to_string())?;
    g.set_training(false);
    g.set_grad_enabled(false);
    let n = data.n();
    let batch = batch.clamp(1, n.max(1));
    let (mut loss_sum, mut correct, mut count) = (0.0f64, 0usize, 0usize);
    let mut start = 0;
    while start < n {
        let size = batch.min(n - start);
        let (xb, yb) = data.batch(start, size);
        let mut dims = data.x.shape.clone();
        dims[0] = size;
        let r = (|| {
            let xt = g.input(&dims, &xb)?;
            let logits = m.forward(&mut g, &[xt])?;
            let l = loss(&mut g, logits, &yb)?;
            let classes = g.shape(logits)?.dims().get(1).copied().unwrap_or(1).max(1);
            let v = g.data(l)?[0];
            let scores = g.data(logits)?;
            // Accuracy for [N, C] logits (one target per sample).
            let hits = (scores.len() == yb.len() * classes)
                .then(|| {
                    scores
                        .chunks(classes)
                        .zip(&yb)
                        .filter(|(row, &y)| {
                            let best = row
                                .iter()
                                .enumerate()
                                .fold(0, |b, (i, v)| if *v > row[b] { i } else { b });
                            best as i64 == y
                        })
                        .count()
                })
                .unwrap_or(0);
            Ok::<_, torchlet::Error>((v, hits))
        })();
        g.end_step();
        let (v, hits) = r.map_err(|e| format!("evaluation: {e}"))?;
        loss_sum += f64::from(v) * size as f64;
        correct += hits;
        count += size;
        start += size;
    }
    Ok((
        loss_sum / count.max(1) as f64,
        correct as f64 / count.max(1) as f64,
    ))
}

/// The arrays to send back: every received one, in order, in its received dtype and shape:
/// the model's updated values, and `num_batches_tracked` counted up by `counted` steps
/// (PyTorch counts one per training-mode forward; the engine does not keep it).
pub fn reply_arrays(
    spec: &GraphSpec,
    received: &[(String, Array)],
    counted: i64,
) -> Result<Vec<(String, Array)>, String> {
    received
        .iter()
        .map(|(name, array)| {
            let got = array.values(name).map_err(|e| e.to_string())?;
            let values = match spec.tensors.iter().find(|t| t.name == *name) {
                _ if name.ends_with("num_batches_tracked") => match got {
                    Values::I64(v) => Values::I64(v.iter().map(|x| x.saturating_add(counted)).collect()),
                    Values::F64(v) => Values::F64(v.iter().map(|x| x + counted as f64).collect()),
                    Values::F32(v) => Values::F32(v.iter().map(|x| x + counted as f32).collect()),
                },
                Some(t) => match got {
                    Values::F64(_) => Values::F64(t.data.iter().map(|&x| f64::from(x)).collect()),
                    Values::I64(_) => Values::I64(t.data.iter().map(|&x| x.round() as i64).collect()),
                    Values::F32(_) => Values::F32(t.data.clone()),
                },
                None => got,
            };
            Array::from_values(name, &array.shape, &values)
                .map(|a| (name.clone(), a))
                .map_err(|e| e.to_string())
        })
        .collect()
}
