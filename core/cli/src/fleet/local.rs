//! The local side of a fleet round: received arrays into the model by state_dict name,
//! `local-steps` SGD steps on cyclic mini-batches, the updated arrays back; evaluation.
//!
//! - Every model tensor must be received with its shape, and every received array must be
//!   a model tensor or a `num_batches_tracked` buffer (ONNX does not carry those: they go
//!   back counted up by the steps in training mode). Anything else is refused by name and
//!   the local model stays as it was.
//! - Mini-batch b is rows (b·B) mod N onward, cyclic over the N samples (B = batch-size).
//! - The step is PyTorch's `model.train()` step: mean cross-entropy, SGD (momentum buffer
//!   fresh each round), BatchNorm on batch statistics with its running statistics updated
//!   whatever trains (FedAvg averages them too); frozen tensors are copies in the arena.

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
    let m = trained.build_training(&mut g, file).map_err(|e| e.to_string())?;
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
            let hits = if scores.len() == yb.len() * classes {
                scores
                    .chunks(classes)
                    .zip(&yb)
                    .filter(|(row, &y)| argmax(row) as i64 == y)
                    .count()
            } else {
                0
            };
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

/// The index of the largest value (the first of equals).
fn argmax(row: &[f32]) -> usize {
    row.iter()
        .enumerate()
        .fold(0, |best, (i, v)| if *v > row[best] { i } else { best })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// W1's tensors as a ServerApp would send them (float32, state_dict names).
    fn w1() -> (GraphSpec, Vec<(String, Array)>) {
        let bytes = include_bytes!("../../../../firmware/assets/w1_pretrained.tlm");
        let spec = ModelFile::parse(bytes).map(|f| f.to_spec()).unwrap_or_default();
        let arrays = spec
            .tensors
            .iter()
            .map(|t| {
                let a = Array::from_values(&t.name, &t.dims, &Values::F32(t.data.clone()));
                (t.name.clone(), a.unwrap_or_else(|e| panic!("{e}")))
            })
            .collect();
        (spec, arrays)
    }

    #[test]
    fn received_arrays_replace_the_models_by_name() {
        let (spec, mut arrays) = w1();
        assert!(spec.tensors.len() >= 4);
        let name = arrays[0].0.clone();
        let shape = arrays[0].1.shape.clone();
        let n: usize = shape.iter().product();
        arrays[0].1 = Array::from_values(&name, &shape, &Values::F64(vec![0.25; n])).unwrap();
        let loaded = load(&spec, &arrays).unwrap();
        assert_eq!(loaded.tensors[0].data, vec![0.25f32; n]);
        assert_eq!(loaded.tensors[1].data, spec.tensors[1].data);
        // The reply keeps the received dtype (float64 here) and order.
        let back = reply_arrays(&loaded, &arrays, 0).unwrap();
        assert_eq!(back[0].1.dtype, "float64");
        assert_eq!(
            back.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            arrays.iter().map(|(n, _)| n).collect::<Vec<_>>()
        );
    }

    #[test]
    fn missing_extra_misshapen_or_non_finite_arrays_are_refused_by_name() {
        let (spec, arrays) = w1();
        let name = arrays[1].0.clone();
        let missing: Vec<_> = arrays.iter().filter(|(n, _)| *n != name).cloned().collect();
        let e = load(&spec, &missing).unwrap_err();
        assert!(e.contains(&name) && e.contains("missing"), "{e}");
        let mut extra = arrays.clone();
        extra.push(("fc9.weight".into(), arrays[1].1.clone()));
        let e = load(&spec, &extra).unwrap_err();
        assert!(e.contains("fc9.weight") && e.contains("not in the model"), "{e}");
        let mut wrong = arrays.clone();
        wrong[1].1 = Array::from_values(&name, &[3], &Values::F32(vec![0.0; 3])).unwrap();
        let e = load(&spec, &wrong).unwrap_err();
        assert!(e.contains(&name) && e.contains("shape [3]"), "{e}");
        let mut nan = arrays.clone();
        let shape = arrays[1].1.shape.clone();
        let n: usize = shape.iter().product();
        nan[1].1 = Array::from_values(&name, &shape, &Values::F32(vec![f32::NAN; n])).unwrap();
        let e = load(&spec, &nan).unwrap_err();
        assert!(e.contains(&name) && e.contains("non-finite"), "{e}");
        // An extra num_batches_tracked scalar is kept beside the model and counted.
        let mut nbt = arrays.clone();
        nbt.push((
            "bn.num_batches_tracked".into(),
            Array::from_values("n", &[], &Values::I64(vec![7])).unwrap(),
        ));
        let loaded = load(&spec, &nbt).unwrap();
        let back = reply_arrays(&loaded, &nbt, 5).unwrap();
        assert_eq!(back.last().unwrap().1.values("n").unwrap(), Values::I64(vec![12]));
    }

    #[test]
    fn mini_batches_are_cyclic_over_the_samples() {
        let x = Tensor {
            name: "x".into(),
            shape: vec![5, 1, 1, 1],
            data: vec![0.0, 1.0, 2.0, 3.0, 4.0],
        };
        let data = Data {
            x,
            labels: vec![0, 1, 2, 3, 4],
        };
        // Batch b of B = 3 starts at row (3 b) mod 5: rows 3, 4, 0 for b = 1.
        let start = |b: usize| (b * 3) % 5;
        let (xb, yb) = data.batch(start(1), 3);
        assert_eq!(xb, vec![3.0, 4.0, 0.0]);
        assert_eq!(yb, vec![3, 4, 0]);
        let (xb, _) = data.batch(start(2), 3);
        assert_eq!(xb, vec![1.0, 2.0, 3.0]);
    }

    #[test]
    fn a_round_of_training_changes_the_trained_tensors_and_its_loss_is_finite() {
        let (spec, _) = w1();
        let mut pixels = Vec::new();
        for i in 0..4 * 28 * 28 {
            pixels.push(((i * 37) % 255) as f32 / 255.0);
        }
        let x = Tensor {
            name: "x".into(),
            shape: vec![4, 1, 28, 28],
            data: pixels,
        };
        let data = Data {
            x,
            labels: vec![1, 3, 5, 7],
        };
        let round = Round {
            lr: 0.05,
            momentum: 0.9,
            weight_decay: 0.0,
            steps: 3,
            batch: 2,
        };
        let file = ModelFile::parse(include_bytes!("../../../../firmware/assets/w1_pretrained.tlm")).unwrap();
        let plan = crate::plan::plan_at(file, &[2, 1, 28, 28], 0.9).unwrap();
        let (updated, loss) = train(
            &spec,
            Trained::All,
            plan.step_bytes.div_ceil(4) + 16,
            &data,
            &round,
        )
        .unwrap();
        assert!(loss.is_finite() && loss > 0.0);
        assert_ne!(updated.tensors[0].data, spec.tensors[0].data);
        // Evaluation in batches of 3: its arena planned at that size.
        let plan3 = crate::plan::plan_at(file, &[3, 1, 28, 28], 0.0).unwrap();
        let words = plan3.step_bytes.max(plan3.inference_bytes).div_ceil(4) + 16;
        let (eval_loss, acc) = evaluate(&updated, words, &data, 3).unwrap();
        assert!(eval_loss.is_finite() && (0.0..=1.0).contains(&acc));
    }
}
