//! Models from PyTorch in the JS API, as wasm in node: `Model.fromOnnx` (the importer's
//! module, then `Model.load`) on the committed zoo fixtures predicts what onnxruntime
//! computed (tests/golden/onnx/*.ref.safetensors: inputs `x.K`, outputs `ort.K`), trains, and
//! exports a model file, weights and safetensors that load again.
#![cfg(target_arch = "wasm32")]

mod common;

use common::from_onnx;
use safetensors::{Dtype, SafeTensors};
use torchlet_wasm::Model;
use wasm_bindgen::{JsError, JsValue};
use wasm_bindgen_test::wasm_bindgen_test;

const W1_TS: &[u8] = include_bytes!("../../tests/golden/onnx/w1.ts.onnx");
const W1_REF: &[u8] = include_bytes!("../../tests/golden/onnx/w1.ref.safetensors");
const MOB_DYN: &[u8] = include_bytes!("../../tests/golden/onnx/mobilenetish.dyn.onnx");
const MOB_DATA: &[u8] = include_bytes!("../../tests/golden/onnx/mobilenetish.dyn.onnx.data");
const MOB_REF: &[u8] = include_bytes!("../../tests/golden/onnx/mobilenetish.ref.safetensors");

fn message(e: JsError) -> String {
    let v: JsValue = e.into();
    let err: js_sys::Error = v.into();
    err.message().into()
}

/// The message of a model that could not be made.
fn refused(r: Result<Model, JsError>) -> String {
    match r {
        Ok(_) => panic!("the model was accepted"),
        Err(e) => message(e),
    }
}

/// Tensor `name` of a safetensors file: shape and values as f32.
fn tensor(bytes: &[u8], name: &str) -> (Vec<usize>, Vec<f32>) {
    let st = SafeTensors::deserialize(bytes).unwrap();
    let t = st.tensor(name).unwrap();
    let v = match t.dtype() {
        Dtype::F32 => t
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        Dtype::I64 => t
            .data()
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f32)
            .collect(),
        d => panic!("{name}: dtype {d:?}"),
    };
    (t.shape().to_vec(), v)
}

fn softmax_rows(logits: &[f32], classes: usize) -> Vec<f32> {
    let mut out = Vec::new();
    for row in logits.chunks_exact(classes) {
        let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        let z: f64 = row.iter().map(|&v| (v as f64 - m).exp()).sum();
        out.extend(row.iter().map(|&v| ((v as f64 - m).exp() / z) as f32));
    }
    out
}

/// `predict` on every reference input `x.K` equals the softmax of onnxruntime's `ort.K`.
fn predicts_like_onnxruntime(m: &mut Model, reference: &[u8], cases: usize) {
    for k in 0..cases {
        let (xs, x) = tensor(reference, &format!("x.{k}"));
        let (ys, y) = tensor(reference, &format!("ort.{k}"));
        let p = m.predict(&x, xs[0] as f64, xs[2] as f64, xs[3] as f64).unwrap();
        let want = softmax_rows(&y, ys[1]);
        assert_eq!(p.len(), want.len(), "case {k}");
        for (i, (a, b)) in p.iter().zip(&want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5,
                "case {k} {xs:?}, value {i}: {a} vs onnxruntime {b}"
            );
        }
    }
}

/// `steps` SGD steps on the reference batch `x.0` with labels `t`; the losses.
fn train(m: &mut Model, reference: &[u8], steps: usize) -> Vec<f32> {
    let (xs, x) = tensor(reference, "x.0");
    let (_, t) = tensor(reference, "t");
    let labels: Vec<f64> = t.iter().map(|&v| v as u32 as f64).collect();
    (0..steps)
        .map(|_| {
            m.train_step(&x, xs[0] as f64, xs[2] as f64, xs[3] as f64, &labels)
                .unwrap()
                .loss
        })
        .collect()
}

#[wasm_bindgen_test]
fn w1_from_torchscript_onnx_predicts_like_onnxruntime_and_trains() {
    let mut m = from_onnx(W1_TS, JsValue::UNDEFINED, 0.05, 0.0, 0.0, None).unwrap();
    assert_eq!(m.num_parameters(), 6218.0);
    assert_eq!(m.in_channels(), 1);
    // Three sizes, two of them never exported (28x28 was).
    predicts_like_onnxruntime(&mut m, W1_REF, 3);

    // The plan: one entry per node, the last the logits; an arena of exactly the
    // planned bytes trains at that size.
    let plan = m.plan(2.0, 28.0, 28.0).unwrap();
    let layers = plan.layers();
    assert_eq!(layers[0].name(), "conv2d");
    assert_eq!(layers[0].shape(), vec![2, 8, 28, 28]);
    assert_eq!(layers.last().unwrap().shape(), vec![2, 10]);
    assert!(plan.infer_bytes() < plan.train_bytes());
    let mut exact = from_onnx(W1_TS, JsValue::UNDEFINED, 0.05, 0.0, plan.train_bytes(), None).unwrap();
    train(&mut exact, W1_REF, 1);
    assert_eq!(exact.high_water_bytes(), plan.train_bytes());

    let losses = train(&mut m, W1_REF, 8);
    assert!(losses[7] < 0.75 * losses[0], "{losses:?}");
    assert_eq!(m.steps(), 8.0);
}

#[wasm_bindgen_test]
fn dynamo_onnx_with_external_data_and_batch_norm_predicts_in_eval_mode_and_trains() {
    let e = refused(from_onnx(MOB_DYN, JsValue::UNDEFINED, 0.05, 0.0, 0.0, None));
    assert!(e.contains("external"), "{e}");
    let mut m = from_onnx(
        MOB_DYN,
        js_sys::Uint8Array::from(MOB_DATA).into(),
        0.05,
        0.0,
        0.0,
        None,
    )
    .unwrap();
    predicts_like_onnxruntime(&mut m, MOB_REF, 3);
    // Training mode: batch statistics (the running ones move), and the loss falls.
    let losses = train(&mut m, MOB_REF, 8);
    assert!(losses[7] < losses[0], "{losses:?}");

    // exportModel loads again and predicts the same (eval mode: the trained running
    // statistics travel with it).
    let (xs, x) = tensor(MOB_REF, "x.1");
    let (b, h, w) = (xs[0] as f64, xs[2] as f64, xs[3] as f64);
    let before = m.predict(&x, b, h, w).unwrap();
    let mut again = Model::load(m.export_model().unwrap(), 0.05, 0.0, 0.0, None).unwrap();
    assert_eq!(again.predict(&x, b, h, w).unwrap(), before);

    // exportSafetensors: every state_dict entry, trained values, int64 counters.
    let st = m.export_safetensors().unwrap();
    let (_, rm) = tensor(&st, "stem.1.running_mean");
    let (_, rm0) = tensor(MOB_REF, "stem.1.running_mean");
    assert_ne!(rm, rm0, "training mode updates the running statistics");
    let parsed = SafeTensors::deserialize(&st).unwrap();
    let reference = SafeTensors::deserialize(MOB_REF).unwrap();
    let mut want: Vec<String> = reference
        .names()
        .into_iter()
        .filter(|n| *n != "t" && !["x.", "y.", "ort.", "sgd."].iter().any(|p| n.starts_with(p)))
        .map(|n| n.to_string())
        .collect();
    let mut got: Vec<String> = parsed.names().into_iter().map(String::from).collect();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    assert_eq!(
        parsed.tensor("stem.1.num_batches_tracked").unwrap().dtype(),
        Dtype::I64
    );

    // exportWeights / importWeights: a fresh import takes the trained weights.
    let mut fresh = from_onnx(
        MOB_DYN,
        js_sys::Uint8Array::from(MOB_DATA).into(),
        0.05,
        0.0,
        0.0,
        None,
    )
    .unwrap();
    assert_ne!(fresh.predict(&x, b, h, w).unwrap(), before);
    fresh.import_weights(&m.export_weights().unwrap()).unwrap();
    assert_eq!(fresh.predict(&x, b, h, w).unwrap(), before);
}

#[wasm_bindgen_test]
fn bad_model_files_and_inputs_throw_and_leave_the_model_usable() {
    let e = refused(from_onnx(
        b"not onnx at all",
        JsValue::UNDEFINED,
        0.05,
        0.0,
        0.0,
        None,
    ));
    assert!(e.starts_with("not a readable ONNX model"), "{e}");
    let mut m = from_onnx(W1_TS, JsValue::UNDEFINED, 0.05, 0.9, 0.0, None).unwrap();
    let mut tlm = m.export_model().unwrap();
    let e = refused(Model::load(tlm[..tlm.len() - 9].to_vec(), 0.05, 0.0, 0.0, None));
    assert!(!e.is_empty());
    let mid = tlm.len() / 2;
    tlm[mid] ^= 0x55;
    let e = refused(Model::load(tlm, 0.05, 0.0, 0.0, None));
    assert!(e.contains("CRC"), "{e}");
    let e = message(m.predict(&[0.0; 5], 1.0, 28.0, 28.0).unwrap_err());
    assert_eq!(e, "input: data has 5 values, the shape holds 784");
    let e = message(m.train_step(&[0.0; 784], 1.0, 28.0, 28.0, &[10.0]).unwrap_err());
    assert!(e.contains("out of range"), "{e}");
    let e = message(m.import_weights(&[1, 2, 3]).unwrap_err());
    assert!(!e.is_empty());
    // W1 networks have no model file to export.
    let net = Model::w1(0.0, 0.05, 0.0, 0.0).unwrap();
    assert!(message(net.export_model().unwrap_err()).contains("Model.load"));
    // Still usable.
    m.train_step(&[0.5; 784], 1.0, 28.0, 28.0, &[3.0]).unwrap();
    assert_eq!(m.predict(&[0.5; 784], 1.0, 28.0, 28.0).unwrap().len(), 10);
    assert_eq!(m.steps(), 1.0);
}
