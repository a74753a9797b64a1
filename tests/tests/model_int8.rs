//! Int8 frozen convolution weights in a model file, on W2 ("mobile-fcn", the file
//! `finetune_w2` runs, `firmware/assets/w2_pretrained.tlm`) with every convolution
//! weight frozen and quantized per output channel:
//! - the file round-trips (`encode(to_spec())` is the same bytes), the weights exports
//!   give the dequantized values, and saving keeps the int8 records;
//! - `Model::in_place` reads the int8 weights in the file's bytes (no arena bytes, no
//!   copy), and the forward and the trained tensors' gradients equal those of the same
//!   model with the dequantized weights copied into the arena;
//! - a real bias-only step reaches exactly its plan at several sizes, and the plan is
//!   the f32 file's;
//! - held-out accuracy on the 2,000 digits stays within half a point of the f32 model.

use torchlet::model::{encode, Model, ModelFile, Placement, TensorKind, TensorRecord, Trained};
use torchlet::optim::Sgd;
use torchlet::{Graph, Tensor};
use torchlet_tests::digits::Digits;

const TAPE: usize = 160;
const F32_FILE: &[u8] = include_bytes!("../../firmware/assets/w2_pretrained.tlm");

/// `bytes` copied to a 4-byte aligned address that lives for the program.
fn aligned(bytes: &[u8]) -> &'static [u8] {
    let mut v = vec![0u8; bytes.len() + 3];
    let at = (4 - v.as_ptr() as usize % 4) % 4;
    v[at..at + bytes.len()].copy_from_slice(bytes);
    &v.leak()[at..at + bytes.len()]
}

/// W2 with every convolution weight frozen and stored as int8.
fn int8_bytes() -> Vec<u8> {
    let mut spec = ModelFile::parse(F32_FILE).unwrap().to_spec();
    for t in spec.tensors.iter_mut().filter(|t| t.dims.len() == 4) {
        t.kind = TensorKind::Param { trainable: false };
    }
    let done = spec.quantize_frozen_conv_weights();
    assert_eq!(done.len(), 15, "W2 has 15 convolutions");
    encode(&spec).unwrap()
}

fn files() -> (ModelFile<'static>, ModelFile<'static>) {
    let f = ModelFile::parse(aligned(F32_FILE)).unwrap();
    let q = ModelFile::parse(aligned(&int8_bytes())).unwrap();
    (f, q)
}

/// Biases + head train; in place (int8 weights in the file) or, with `copy`, every
/// frozen tensor copied into the arena (int8 dequantized, run by the ordinary conv2d).
fn build(g: &mut Graph<'static, f32, TAPE>, f: ModelFile<'static>, copy: bool) -> Model<'static> {
    g.set_training(false);
    let m = match copy {
        true => Model::with_placement(g, f, Trained::Biases.placement(f, Placement::Frozen)),
        false => Model::in_place(g, f, Trained::Biases.placement(f, Placement::InPlace)),
    };
    m.unwrap()
}

fn image(h: usize, w: usize) -> Vec<f32> {
    (0..h * w)
        .map(|i| ((i * 37 % 101) as f32 / 101.0).sin())
        .collect()
}

/// One bias-only step (forward, cross-entropy, backward, SGD with momentum); returns
/// the logits and the arena's high-water bytes.
fn step(
    f: ModelFile<'static>,
    copy: bool,
    h: usize,
    w: usize,
    arena: Option<usize>,
) -> (Vec<f32>, usize, Vec<Vec<f32>>) {
    let mut g: Graph<'static, f32, TAPE> = match arena {
        None => Graph::meta(usize::MAX),
        Some(bytes) => Graph::new(vec![0.0; bytes / 4].leak()),
    };
    let m = build(&mut g, f, copy);
    let mut sgd = Sgd::new(&mut g, 0.01, 0.9, 0.0).unwrap();
    let x = g.input(&[1, 1, h, w], &image(h, w)).unwrap();
    let y = m.forward(&mut g, &[x]).unwrap();
    g.free(x).unwrap();
    let logits = if g.is_meta() {
        vec![]
    } else {
        g.data(y).unwrap().to_vec()
    };
    let loss = g.cross_entropy(y, &[3]).unwrap();
    g.backward(loss).unwrap();
    let grads = match g.is_meta() {
        true => vec![],
        false => (0..f.num_tensors())
            .filter_map(|k| g.grad(m.param(k).unwrap()).unwrap().map(<[f32]>::to_vec))
            .collect(),
    };
    sgd.step(&mut g).unwrap();
    (logits, g.arena().high_water_bytes(), grads)
}

#[test]
fn the_int8_file_round_trips_and_exports_dequantized_values() {
    let bytes = int8_bytes();
    let file = ModelFile::parse(&bytes).unwrap();
    assert_eq!(encode(&file.to_spec()).unwrap(), bytes);
    let f32_file = ModelFile::parse(F32_FILE).unwrap();
    let int8: Vec<TensorRecord> = file.tensors().filter(|t| t.int8).collect();
    assert_eq!(int8.len(), 15);
    for t in &int8 {
        let orig = f32_file.tensor(t.name).unwrap();
        assert_eq!(t.kind, TensorKind::Param { trainable: false });
        assert_eq!(t.shape, orig.shape);
        // Symmetric per channel: every value within half a step of the original.
        let per = t.shape.numel() / t.shape.dim(0);
        for (i, (q, w)) in t.values().zip(orig.values()).enumerate() {
            assert!(
                (q - w).abs() <= 0.5001 * t.scale(i / per),
                "{} {i}: {q} vs {w}",
                t.name
            );
        }
        assert!(!Trained::All.trains(&file, t) && !Trained::Matching(&["*"]).trains(&file, t));
    }
    // Saving: the model file keeps the int8 records; the weights hold the dequantized
    // values (what `torchlet export` writes as safetensors).
    let file = ModelFile::parse(aligned(&bytes)).unwrap();
    let mut g: Graph<'static, f32, TAPE> = Graph::new(vec![0.0; 1 << 16].leak());
    let m = build(&mut g, file, false);
    assert_eq!(m.to_file_bytes(&g).unwrap(), bytes);
    let weights = m.to_weights_bytes(&g).unwrap();
    let w = &int8[0];
    let want: Vec<u8> = w.values().flat_map(f32::to_le_bytes).collect();
    assert!(
        weights.windows(want.len()).any(|s| s == want),
        "{} in the weights",
        w.name
    );
}

#[test]
fn int8_weights_are_read_in_place_and_give_the_dequantized_models_results() {
    let (_, q) = files();
    let mut g: Graph<'static, f32, TAPE> = Graph::new(vec![0.0; 1 << 16].leak());
    let before = g.arena().used_bytes();
    let m = build(&mut g, q, false);
    let range = q.as_bytes().as_ptr_range();
    let mut frozen = 0;
    for t in q.tensors().filter(|t| t.int8) {
        let d = g.data(m.param(t.index).unwrap()).unwrap();
        // Scales and packed weights, in the file's bytes.
        assert_eq!(
            d.len(),
            t.shape.dim(0) + t.shape.numel().div_ceil(4),
            "{}",
            t.name
        );
        assert!(range.contains(&(d.as_ptr() as *const u8)), "{} copied", t.name);
        frozen += 1;
    }
    assert_eq!(frozen, 15);
    // Only the trained tensors (biases and head, with gradients) took arena bytes.
    let trained: usize = q
        .tensors()
        .filter(|t| Trained::Biases.trains(&q, t))
        .map(|t| t.shape.numel())
        .sum();
    assert_eq!(g.arena().used_bytes() - before, 2 * 4 * trained);
    for (h, w) in [(28, 28), (20, 14), (17, 23)] {
        let (y_copy, _, g_copy) = step(q, true, h, w, Some(1 << 22));
        let (y_int8, _, g_int8) = step(q, false, h, w, Some(1 << 22));
        let close = |a: &[f32], b: &[f32], what: &str| {
            let scale = a.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
            assert_eq!(a.len(), b.len());
            for (u, v) in a.iter().zip(b) {
                assert!((u - v).abs() <= 2e-4 * scale, "{what} at {h}x{w}: {u} vs {v}");
            }
        };
        close(&y_copy, &y_int8, "logits");
        assert_eq!(g_copy.len(), g_int8.len());
        assert!(
            g_int8.len() >= 15,
            "the biases below frozen convolutions get gradients"
        );
        for (a, b) in g_copy.iter().zip(&g_int8) {
            close(a, b, "gradient");
        }
    }
}

#[test]
fn a_bias_only_step_reaches_exactly_its_plan() {
    let (f, q) = files();
    for (h, w) in [(28, 28), (22, 22), (20, 14), (16, 16), (9, 13)] {
        let (_, plan, _) = step(q, false, h, w, None);
        let (_, real, _) = step(q, false, h, w, Some(plan));
        assert_eq!(real, plan, "{h}x{w}");
        // Int8 or f32 in place: the same arena bytes.
        assert_eq!(step(f, false, h, w, None).1, plan, "{h}x{w}");
    }
}

/// Held-out accuracy of `f` (eval mode, frozen tensors in place), batch 100.
fn accuracy(f: ModelFile<'static>) -> f32 {
    let digits = Digits::load().unwrap();
    let (_, test) = digits.split();
    let mut g: Graph<'static, f32, TAPE> = Graph::new(vec![0.0; 1 << 20].leak());
    g.set_training(false);
    g.set_grad_enabled(false);
    let m = Model::in_place(&mut g, f, |_| Placement::InPlace).unwrap();
    let (mut correct, (h, w)) = (0, (test[0].h, test[0].w));
    for chunk in test.chunks(100) {
        let x = g
            .input_with(&[chunk.len(), 1, h, w], |dst| {
                for (d, digit) in dst.chunks_exact_mut(h * w).zip(chunk) {
                    for (v, &p) in d.iter_mut().zip(&digit.pixels) {
                        *v = p as f32 / 255.0;
                    }
                }
            })
            .unwrap();
        let y: Tensor = m.forward(&mut g, &[x]).unwrap();
        let labels: Vec<u32> = chunk.iter().map(|d| d.label as u32).collect();
        correct += g.count_correct(y, &labels).unwrap();
        g.end_step();
    }
    correct as f32 / test.len() as f32
}

#[test]
fn held_out_accuracy_stays_within_half_a_point_of_f32() {
    let (f, q) = files();
    let (a32, a8) = (accuracy(f), accuracy(q));
    println!("W2 held-out accuracy (2,000 digits, 28x28): f32 {a32:.4}, int8 convolutions {a8:.4}");
    assert!(a32 >= 0.97, "f32 {a32}");
    assert!((a32 - a8).abs() <= 0.005, "int8 {a8} vs f32 {a32}");
}
