//! Choosing the parameters that train in the JS API (`Model.setTrainable`), as wasm in
//! node: W2 as PyTorch exported it (tests/golden/w2/w2.onnx) fine-tuned bias-only
//! (TinyTL: biases, BatchNorm affine parameters, the classifier) at batch 1, with the
//! frozen tensors and BatchNorm's running statistics left exactly as they were.
#![cfg(target_arch = "wasm32")]

mod common;

use common::from_onnx;
use safetensors::SafeTensors;
use torchlet::model::name_matches as matches;
use torchlet_wasm::Model;
use wasm_bindgen::{JsError, JsValue};
use wasm_bindgen_test::wasm_bindgen_test;

const W2: &[u8] = include_bytes!("../../tests/golden/w2/w2.onnx");
const W2_REF: &[u8] = include_bytes!("../../tests/golden/w2/w2_reference.safetensors");
/// Parameters of W2 (tests/golden/make_w2.py).
const W2_PARAMS: f64 = 18_602.0;
/// W2's biases, BatchNorm weights and the classifier's weight, by their PyTorch names.
const BIAS_ONLY: [&str; 6] = [
    "*.bias",
    "stem.1.weight",
    "*.conv.1.weight",
    "*.conv.4.weight",
    "*.conv.7.weight",
    "fc.weight",
];
/// BatchNorm channels of W2 (stem 8; blocks 8+8, 32+32+16, 64+64+16, 64+64+32,
/// 128+128+32), two affine values each, plus the classifier's 32x10 + 10.
const BIAS_ONLY_PARAMS: f64 = (2 * 696 + 330) as f64;

fn message(e: JsError) -> String {
    let v: JsValue = e.into();
    let err: js_sys::Error = v.into();
    err.message().into()
}

fn patterns(p: &[&str]) -> Vec<String> {
    p.iter().map(|s| s.to_string()).collect()
}

/// Tensor `name` of a safetensors file as f32 values.
fn values(bytes: &[u8], name: &str) -> Vec<f32> {
    let st = SafeTensors::deserialize(bytes).unwrap();
    let t = st.tensor(name).unwrap();
    t.data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The first reference digit (28x28).
fn digit() -> Vec<f32> {
    values(W2_REF, "input_28x28")[..784].to_vec()
}

#[wasm_bindgen_test]
fn name_patterns() {
    assert!(matches("*.bias", "blocks.1.conv.7.bias"));
    assert!(matches("fc.*", "fc.weight"));
    assert!(matches("blocks.*.conv.4.weight", "blocks.0.conv.4.weight"));
    assert!(matches("stem.1.weight", "stem.1.weight"));
    assert!(!matches("*.bias", "fc.weight"));
    assert!(!matches("*.conv.4.weight", "blocks.0.conv.4.bias"));
    assert!(!matches("fc", "fc.weight"));
}

#[wasm_bindgen_test]
fn bias_only_fine_tuning_of_w2_at_batch_1_trains_only_the_chosen_tensors() {
    let mut m = from_onnx(W2, JsValue::UNDEFINED, 0.05, 0.9, 0.0, None).unwrap();
    assert_eq!(m.trained_parameters(), W2_PARAMS);
    let full = m.plan(1.0, 28.0, 28.0).unwrap().train_bytes();
    let before = m.export_safetensors().unwrap();
    m.set_trainable(patterns(&BIAS_ONLY)).unwrap();
    assert_eq!(m.trained_parameters(), BIAS_ONLY_PARAMS);
    let partial = m.plan(1.0, 28.0, 28.0).unwrap().train_bytes();
    assert!(
        partial < full,
        "bias-only plans {partial} bytes, the full update {full}"
    );

    let x = digit();
    let losses: Vec<f32> = (0..10)
        .map(|_| m.train_step(&x, 1.0, 28.0, 28.0, &[7.0]).unwrap().loss)
        .collect();
    assert!(losses[9] < 0.5 * losses[0], "{losses:?}");
    let after = m.export_safetensors().unwrap();
    for name in [
        "stem.0.weight",
        "blocks.1.conv.0.weight",
        "blocks.4.conv.6.weight",
    ] {
        assert_eq!(values(&after, name), values(&before, name), "{name} is frozen");
    }
    for name in ["stem.1.running_mean", "blocks.2.conv.4.running_var"] {
        assert_eq!(
            values(&after, name),
            values(&before, name),
            "{name}: statistics frozen"
        );
    }
    for name in ["fc.weight", "fc.bias", "stem.1.weight", "blocks.3.conv.7.bias"] {
        assert_ne!(values(&after, name), values(&before, name), "{name} trains");
    }
    // The predictions (eval mode, the same running statistics) moved to the label.
    let p = m.predict(&x, 1.0, 28.0, 28.0).unwrap();
    assert!(p[7] > 0.9, "{p:?}");

    // An empty list trains everything again, from the fine-tuned values.
    m.set_trainable(Vec::new()).unwrap();
    assert_eq!(m.trained_parameters(), W2_PARAMS);
    assert_eq!(m.predict(&x, 1.0, 28.0, 28.0).unwrap(), p);
}

#[wasm_bindgen_test]
fn the_bias_only_plan_is_the_high_water_mark() {
    let mut probe = from_onnx(W2, JsValue::UNDEFINED, 0.05, 0.9, 0.0, None).unwrap();
    probe.set_trainable(patterns(&BIAS_ONLY)).unwrap();
    let bytes = probe.plan(1.0, 20.0, 14.0).unwrap().train_bytes();
    // Loaded with the choice, the arena needs only what that choice needs (less than the
    // full update's tensors and SGD state).
    let e = match from_onnx(W2, JsValue::UNDEFINED, 0.05, 0.9, bytes, None) {
        Ok(_) => panic!("the full update fitted the bias-only arena"),
        Err(e) => message(e),
    };
    assert!(e.contains("arena exhausted"), "{e}");
    let mut m = from_onnx(
        W2,
        JsValue::UNDEFINED,
        0.05,
        0.9,
        bytes,
        Some(patterns(&BIAS_ONLY)),
    )
    .unwrap();
    assert_eq!(m.trained_parameters(), BIAS_ONLY_PARAMS);
    let x = values(W2_REF, "input_20x14")[..280].to_vec();
    m.train_step(&x, 1.0, 20.0, 14.0, &[3.0]).unwrap();
    assert_eq!(m.high_water_bytes(), bytes);
}

#[wasm_bindgen_test]
fn patterns_matching_nothing_throw_and_change_nothing() {
    let mut m = from_onnx(W2, JsValue::UNDEFINED, 0.05, 0.9, 0.0, None).unwrap();
    let x = digit();
    let p = m.predict(&x, 1.0, 28.0, 28.0).unwrap();
    let e = message(
        m.set_trainable(patterns(&["head.*", "*.running_mean"]))
            .unwrap_err(),
    );
    assert!(e.contains("match no parameter"), "{e}");
    assert_eq!(m.trained_parameters(), W2_PARAMS);
    assert_eq!(m.predict(&x, 1.0, 28.0, 28.0).unwrap(), p);
    m.train_step(&x, 1.0, 28.0, 28.0, &[1.0]).unwrap();

    let mut w1 = Model::w1(0.0, 0.05, 0.9, 0.0).unwrap();
    let e = message(w1.set_trainable(patterns(&["*.bias"])).unwrap_err());
    assert!(e.contains("Model.load"), "{e}");
}

#[wasm_bindgen_test]
fn compact_norm_saves_plan_fewer_bytes_and_train_the_same_way() {
    let x = digit();
    let mut steps = Vec::new();
    for compact in [false, true] {
        let mut m = from_onnx(W2, JsValue::UNDEFINED, 0.05, 0.9, 0.0, Some(patterns(&BIAS_ONLY))).unwrap();
        m.set_compact_saves(compact).unwrap();
        let bytes = m.plan(1.0, 28.0, 28.0).unwrap().train_bytes();
        let losses: Vec<f32> = (0..5)
            .map(|_| m.train_step(&x, 1.0, 28.0, 28.0, &[7.0]).unwrap().loss)
            .collect();
        assert_eq!(m.high_water_bytes(), bytes, "compact {compact}");
        // A new choice keeps the setting.
        m.set_trainable(patterns(&["fc.*", "*.conv.7.weight"])).unwrap();
        let kept = m.plan(1.0, 28.0, 28.0).unwrap().train_bytes();
        steps.push((bytes, losses, kept));
    }
    let ((full, exact, kept_full), (half, rounded, kept_half)) = (&steps[0], &steps[1]);
    assert!(half < full, "16-bit saves plan {half} bytes, 32-bit {full}");
    assert!(
        kept_half < kept_full,
        "after setTrainable: {kept_half} vs {kept_full}"
    );
    // Only the scales' gradients are rounded: the losses stay close.
    for (a, b) in exact.iter().zip(rounded) {
        assert!(
            (a - b).abs() <= 0.02 * a.abs().max(1e-3),
            "{exact:?} vs {rounded:?}"
        );
    }
    assert!(rounded[4] < 0.5 * rounded[0], "{rounded:?}");
    let mut w1 = Model::w1(0.0, 0.05, 0.9, 0.0).unwrap();
    let e = message(w1.set_compact_saves(true).unwrap_err());
    assert!(e.contains("Model.load"), "{e}");
}
