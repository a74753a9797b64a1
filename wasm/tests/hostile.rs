//! Hostile input to the JS API (issue 38), as wasm in node: every number JS can pass
//! (0, negative, NaN, Infinity, 2^32, 2^53, fractional) throws a JS `Error` naming
//! the argument, never a trap; arenas and steps are checked against what the module
//! can reach and against the work limit before anything is allocated or run; external
//! data comes by name; a model stays usable after each refusal.
#![cfg(target_arch = "wasm32")]

mod common;

use common::from_onnx;
use js_sys::{Map, Object, Reflect, Uint8Array};
use torchlet_wasm::{limits, safetensors_bytes, Model};
use wasm_bindgen::{JsError, JsValue};
use wasm_bindgen_test::wasm_bindgen_test;

const W1_TS: &[u8] = include_bytes!("../../tests/golden/onnx/w1.ts.onnx");
const W1_DYN: &[u8] = include_bytes!("../../tests/golden/onnx/w1.dyn.onnx");
const W1_DATA: &[u8] = include_bytes!("../../tests/golden/onnx/w1.dyn.onnx.data");

/// Numbers no size may be: with 0, each is refused by every size argument.
const HOSTILE: [f64; 9] = [
    -1.0,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    4_294_967_296.0,
    4_294_967_296.0 + 28.0,
    9_007_199_254_740_992.0,
    2.5,
    -0.5,
];

fn message(e: JsError) -> String {
    let v: JsValue = e.into();
    let err: js_sys::Error = v.into();
    err.message().into()
}

fn refused<T>(r: Result<T, JsError>) -> String {
    match r {
        Ok(_) => panic!("accepted"),
        Err(e) => message(e),
    }
}

/// A good step still trains (the model is usable after the refusals before it).
fn still_trains(m: &mut Model) {
    let steps = m.steps();
    let s = m.train_step(&[0.5; 784], 1.0, 28.0, 28.0, &[3.0]).unwrap();
    assert!(s.loss.is_finite() && s.loss > 0.0);
    assert_eq!(m.steps(), steps + 1.0);
}

#[wasm_bindgen_test]
fn every_size_argument_refuses_every_hostile_number_by_name() {
    let mut m = Model::w1(0.0, 0.05, 0.9, 0.0).unwrap();
    let mut o = from_onnx(W1_TS, JsValue::UNDEFINED, 0.05, 0.9, 0.0, None).unwrap();
    let x = [0.5f32; 784];
    for v in HOSTILE.into_iter().chain([0.0]) {
        for (k, name) in ["batch", "height", "width"].into_iter().enumerate() {
            let mut d = [1.0, 28.0, 28.0];
            d[k] = v;
            let want = format!("{name} must be a whole number from 1 to 4294967295, got ");
            for e in [
                refused(m.train_step(&x, d[0], d[1], d[2], &[3.0])),
                refused(m.predict(&x, d[0], d[1], d[2])),
                refused(m.plan(d[0], d[1], d[2])),
                refused(Model::plan_w1(0.9, d[0], d[1], d[2])),
                refused(o.train_step(&x, d[0], d[1], d[2], &[3.0])),
                refused(o.predict(&x, d[0], d[1], d[2])),
                refused(o.plan(d[0], d[1], d[2])),
            ] {
                assert!(e.starts_with(&want), "{name} = {v}: {e}");
            }
            if k > 0 {
                let e = refused(m.evaluate(&x, 1.0, d[1], d[2], &[3.0]));
                assert!(e.starts_with(&want), "{e}");
            }
        }
        if v != 0.0 {
            let e = refused(m.evaluate(&x, v, 28.0, 28.0, &[3.0]));
            assert!(
                e.starts_with("count must be a whole number from 0 to 4294967295"),
                "{e}"
            );
        }
        if v != 0.0 {
            let e = refused(Model::w1(0.0, 0.05, 0.9, v));
            assert!(
                e.starts_with("arenaBytes must be a whole number from 0 to 4294967295"),
                "{e}"
            );
            let e = refused(Model::from_layers(
                r#"[{"type":"flatten"}]"#,
                v,
                0.0,
                0.05,
                0.9,
                0.0,
            ));
            assert!(
                e.starts_with("inChannels must be a whole number from 1 to 4294967295"),
                "{e}"
            );
        }
    }
    // The numbers as JS prints them, not as wasm-bindgen's u32 would have made them
    // (2^32 + 28 was 28, -1 was 4294967295, NaN was 0).
    assert_eq!(
        refused(m.predict(&x, 1.0, 4_294_967_324.0, 28.0)),
        "height must be a whole number from 1 to 4294967295, got 4294967324"
    );
    assert!(refused(m.predict(&x, f64::NAN, 28.0, 28.0)).ends_with("got NaN"));
    assert!(refused(m.predict(&x, 1.0, f64::NEG_INFINITY, 28.0)).ends_with("got -Infinity"));
    assert!(refused(m.predict(&x, 1.0, 28.0, 1e300)).ends_with("got 1e+300"));
    still_trains(&mut m);
    still_trains(&mut o);
}

#[wasm_bindgen_test]
fn arena_sizes_near_2_pow_32_are_refused_before_any_allocation() {
    // 2^32 - 1 bytes round up to 2^30 words, 4 GiB: always past what it can reach.
    let e = refused(Model::w1(0.0, 0.05, 0.9, 4_294_967_295.0));
    assert!(
        e.starts_with("an arena of 4,294,967,296 bytes is more than the wasm module can still reach, "),
        "{e}"
    );
    // Past what the module can reach; or within it, and then the allocation itself
    // fails in node (an error as well, not a trap).
    let refusal = |e: &str| {
        e.starts_with("an arena of ")
            && (e.contains(" bytes is more than the wasm module can still reach, ")
                || e.contains(" bytes: the allocation failed"))
    };
    for bytes in [4_294_000_000.0, 4_200_000_000.0] {
        let e = refused(Model::w1(0.0, 0.05, 0.9, bytes));
        assert!(refusal(&e), "{e}");
        let e = refused(from_onnx(W1_TS, JsValue::UNDEFINED, 0.05, 0.9, bytes, None));
        assert!(refusal(&e), "{e}");
    }
    for bytes in [
        4_294_967_296.0,
        1e12,
        9_007_199_254_740_992.0,
        1000.5,
        -4.0,
        f64::NAN,
    ] {
        let e = refused(Model::w1(0.0, 0.05, 0.9, bytes));
        assert!(
            e.starts_with("arenaBytes must be a whole number from 0 to 4294967295, got "),
            "{e}"
        );
    }
    let reachable = limits::reachable_bytes();
    assert!(reachable < 1 << 32 && reachable > 1 << 31, "{reachable}");
    // Still usable: the module allocates normally afterwards.
    still_trains(&mut Model::w1(0.0, 0.05, 0.9, 0.0).unwrap());
}

#[wasm_bindgen_test]
fn steps_near_2_pow_32_elements_are_refused_by_their_plan() {
    let mut m = Model::w1(0.0, 0.05, 0.9, 0.0).unwrap();
    let mut o = from_onnx(W1_TS, JsValue::UNDEFINED, 0.05, 0.9, 0.0, None).unwrap();
    // 2^32 elements: the input's element count overflows wasm32's usize.
    for (b, h, w) in [
        (1.0, 65536.0, 65536.0),
        (4_294_967_295.0, 28.0, 28.0),
        (65536.0, 256.0, 256.0),
    ] {
        for e in [
            refused(m.train_step(&[0.5; 784], b, h, w, &[3.0])),
            refused(m.predict(&[0.5; 784], b, h, w)),
            refused(o.predict(&[0.5; 784], b, h, w)),
        ] {
            assert!(!e.is_empty(), "[{b}, {h}, {w}]");
        }
        for e in [
            refused(m.plan(b, h, w)),
            refused(o.plan(b, h, w)),
            refused(Model::plan_w1(0.9, b, h, w)),
        ] {
            assert!(!e.is_empty());
        }
    }
    // A step that plans (the shapes count) but needs more than the arena: refused by
    // its meta plan before it starts, naming both.
    let e = refused(m.train_step(&vec![0.5; 512 * 512], 1.0, 512.0, 512.0, &[3.0]));
    assert!(
        e.starts_with("arena exhausted: a training step at [1, 1, 512, 512] needs ")
            && e.contains("(its meta plan), the arena has "),
        "{e}"
    );
    let e = refused(o.predict(&vec![0.5; 2048 * 2048], 1.0, 2048.0, 2048.0));
    assert!(
        e.starts_with("arena exhausted: a prediction at [1, 1, 2048, 2048] needs "),
        "{e}"
    );
    // evaluate's count x channels x height x width overflows: refused, not wrapped.
    let e = refused(m.evaluate(&[0.5; 784], 4_294_967_295.0, 65535.0, 65535.0, &[3.0]));
    assert!(!e.is_empty());
    still_trains(&mut m);
    still_trains(&mut o);
}

#[wasm_bindgen_test]
fn labels_that_are_not_class_indices_are_refused_not_truncated() {
    let mut m = Model::w1(0.0, 0.05, 0.9, 0.0).unwrap();
    let x = [0.5f32; 784];
    for (l, shown) in [
        (2.5, "2.5"),
        (f64::NAN, "NaN"),
        (-1.0, "-1"),
        (f64::INFINITY, "Infinity"),
        (4_294_967_296.0, "4294967296"),
    ] {
        assert_eq!(
            refused(m.train_step(&x, 1.0, 28.0, 28.0, &[l])),
            format!("labels[0] must be a class index (a whole number from 0), got {shown}")
        );
        let e = refused(m.evaluate(&[x, x].concat(), 2.0, 28.0, 28.0, &[1.0, l]));
        assert!(e.starts_with("labels[1] must be a class index"), "{e}");
    }
    assert_eq!(m.steps(), 0.0, "no refused step trained");
    let e = refused(m.train_step(&x, 1.0, 28.0, 28.0, &[10.0]));
    assert_eq!(e, "cross_entropy: target class index out of range (got 10)");
    still_trains(&mut m);
}

#[wasm_bindgen_test]
fn learning_rates_momenta_and_seeds_are_checked_as_pytorch_checks_them() {
    for lr in [-0.1, f64::NAN, f64::INFINITY, 1e39] {
        let e = refused(Model::w1(0.0, lr, 0.9, 0.0));
        assert!(
            e.starts_with("lr must be a finite number of at least 0, got "),
            "{e}"
        );
        let e = refused(from_onnx(W1_TS, JsValue::UNDEFINED, lr, 0.9, 0.0, None));
        assert!(e.starts_with("lr must be"), "{e}");
    }
    for mom in [-0.1, 1.0, 1.5, f64::NAN] {
        let e = refused(Model::w1(0.0, 0.05, mom, 0.0));
        assert!(e.starts_with("momentum must be in [0, 1), got "), "{e}");
        let e = refused(Model::plan_w1(mom, 1.0, 28.0, 28.0));
        assert!(e.starts_with("momentum must be in [0, 1)"), "{e}");
    }
    for seed in [-1.0, 0.5, f64::NAN, 9_007_199_254_740_992.0] {
        let e = refused(Model::w1(seed, 0.05, 0.9, 0.0));
        assert!(
            e.starts_with("seed must be a whole number from 0 to 9007199254740991"),
            "{e}"
        );
    }
    // lr 0 trains nothing but is valid, as in PyTorch; a momentum just below 1 is kept
    // below 1 as a 32-bit float.
    Model::w1(0.0, 0.0, 0.0, 0.0).unwrap();
    Model::w1(0.0, 0.05, 0.999_999_999_9, 0.0).unwrap();
    let mut m = Model::w1(0.0, 0.05, 0.9, 0.0).unwrap();
    let e = message(m.set_lr(f64::NAN).unwrap_err());
    assert_eq!(e, "lr must be a finite number of at least 0, got NaN");
    assert_eq!(m.lr(), 0.05);
    m.set_lr(0.01).unwrap();
    assert_eq!(m.lr(), 0.01);
    for max in [-1.0, f64::NAN, 0.5, 1e16] {
        assert!(message(m.set_max_macs(max).unwrap_err()).starts_with("maxMacs must be a whole number"));
    }
    assert_eq!(m.max_macs(), limits::DEFAULT_MAX_MACS as f64);
    still_trains(&mut m);
}

/// `w1.dyn.onnx` with its last two external initializers moved to a second file,
/// `w1.dyn.onnx.dat2` (the same bytes: offsets and lengths stay valid).
fn two_file_w1() -> Vec<u8> {
    let (from, to) = (b"w1.dyn.onnx.data", b"w1.dyn.onnx.dat2");
    let mut bytes = W1_DYN.to_vec();
    let at: Vec<usize> = (0..bytes.len() - from.len())
        .filter(|&i| &bytes[i..i + from.len()] == from)
        .collect();
    assert_eq!(at.len(), 4, "the fixture's external initializers");
    for &i in &at[2..] {
        bytes[i..i + to.len()].copy_from_slice(to);
    }
    bytes
}

fn object(entries: &[(&str, &[u8])]) -> JsValue {
    let o = Object::new();
    for (k, v) in entries {
        Reflect::set(&o, &JsValue::from_str(k), &Uint8Array::from(*v)).unwrap();
    }
    o.into()
}

#[wasm_bindgen_test]
fn external_data_comes_by_name_and_an_unknown_location_is_refused_naming_it() {
    let x = [0.5f32; 784];
    let one = from_onnx(W1_DYN, Uint8Array::from(W1_DATA).into(), 0.05, 0.9, 0.0, None);
    let want = one.unwrap().predict(&x, 1.0, 28.0, 28.0).unwrap();
    // The one-file model, by name (an object or a Map) or as one Uint8Array.
    let by_name = object(&[("w1.dyn.onnx.data", W1_DATA)]);
    let mut m = from_onnx(W1_DYN, by_name, 0.05, 0.9, 0.0, None).unwrap();
    assert_eq!(m.predict(&x, 1.0, 28.0, 28.0).unwrap(), want);
    let map = Map::new();
    map.set(&"w1.dyn.onnx.data".into(), &Uint8Array::from(W1_DATA));
    let mut m = from_onnx(W1_DYN, map.into(), 0.05, 0.9, 0.0, None).unwrap();
    assert_eq!(m.predict(&x, 1.0, 28.0, 28.0).unwrap(), want);

    // Initializers in two files: each by its name.
    let two = two_file_w1();
    let both = object(&[("w1.dyn.onnx.data", W1_DATA), ("w1.dyn.onnx.dat2", W1_DATA)]);
    let mut m = from_onnx(&two, both, 0.05, 0.9, 0.0, None).unwrap();
    assert_eq!(m.predict(&x, 1.0, 28.0, 28.0).unwrap(), want);
    still_trains(&mut m);
    // A location not among those given: refused, naming it and the names given.
    let e = refused(from_onnx(&two, by_name_only(), 0.05, 0.9, 0.0, None));
    assert_eq!(
        e,
        "fromOnnx: external data \"w1.dyn.onnx.dat2\" is not among those given (\"w1.dyn.onnx.data\")"
    );
    let e = refused(from_onnx(
        W1_DYN,
        object(&[("../w1.dyn.onnx.data", W1_DATA), ("/etc/passwd", b"x")]),
        0.05,
        0.9,
        0.0,
        None,
    ));
    assert!(
        e.starts_with("fromOnnx: external data \"w1.dyn.onnx.data\" is not among those given"),
        "{e}"
    );
    // One Uint8Array is one file: a model of two files is refused.
    let e = refused(from_onnx(
        &two,
        Uint8Array::from(W1_DATA).into(),
        0.05,
        0.9,
        0.0,
        None,
    ));
    assert!(
        e.starts_with("fromOnnx: the model stores its initializers in 2 files"),
        "{e}"
    );
    assert!(e.contains("\"w1.dyn.onnx.dat2\""), "{e}");
    let e = refused(from_onnx(W1_DYN, JsValue::UNDEFINED, 0.05, 0.9, 0.0, None));
    assert!(
        e.starts_with("fromOnnx: the model's initializers are stored in \"w1.dyn.onnx.data\""),
        "{e}"
    );
    // What is not bytes by name.
    for bad in [
        JsValue::from(3),
        JsValue::from_str("w1.dyn.onnx.data"),
        js_sys::Array::new().into(),
    ] {
        let e = refused(from_onnx(W1_DYN, bad, 0.05, 0.9, 0.0, None));
        assert!(
            e.starts_with("externalData must be undefined, a Uint8Array, or an object"),
            "{e}"
        );
    }
    let o = Object::new();
    Reflect::set(&o, &"w1.dyn.onnx.data".into(), &JsValue::from(7)).unwrap();
    let e = refused(from_onnx(W1_DYN, o.into(), 0.05, 0.9, 0.0, None));
    assert_eq!(e, "externalData[\"w1.dyn.onnx.data\"] must be a Uint8Array");
}

fn by_name_only() -> JsValue {
    object(&[("w1.dyn.onnx.data", W1_DATA)])
}

#[wasm_bindgen_test]
fn a_state_dict_with_two_tensors_of_one_name_is_refused_naming_it() {
    use safetensors::Dtype;
    let t = |name: &str| (name.to_string(), vec![1], Dtype::F32, 1f32.to_le_bytes().to_vec());
    let ok = safetensors_bytes(&[t("a.weight"), t("a.bias")]).unwrap();
    assert!(!ok.is_empty());
    let e = safetensors_bytes(&[t("a.weight"), t("a.bias"), t("a.weight")]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "exportSafetensors: two tensors are named \"a.weight\"; a state_dict holds one tensor per name"
    );
}

#[wasm_bindgen_test]
fn a_model_with_no_parameters_loads_predicts_and_plans_and_only_training_is_refused() {
    use torchlet::model::spec::{AttrValue, GraphSpec, InputSpec, NodeSpec};
    use torchlet::model::{encode, DimSpec, ValueRef};
    // A lone softmax as a model file (what `torchlet convert` makes of one), and an
    // average pool as layers.
    let spec = GraphSpec {
        inputs: vec![InputSpec {
            name: "x".into(),
            dims: vec![DimSpec::Free { min: 1 }, DimSpec::Fixed(3)],
        }],
        tensors: vec![],
        nodes: vec![NodeSpec {
            op: "softmax".into(),
            name: "/Softmax".into(),
            inputs: vec![Some(ValueRef::Input(0))],
            attrs: vec![("dim".into(), AttrValue::Int(1))],
        }],
        outputs: vec![ValueRef::Node(0)],
    };
    let mut soft = Model::load(encode(&spec).unwrap(), 0.05, 0.9, 0.0, None).unwrap();
    let p = soft
        .predict(&[0.0, 0.0, 0.0, 1.0, 1.0, 1.0], 2.0, 1.0, 1.0)
        .unwrap();
    assert!(p.iter().all(|v| (v - 1.0 / 3.0).abs() < 1e-6), "{p:?}");
    let plan = soft.plan(2.0, 1.0, 1.0).unwrap();
    assert_eq!(plan.train_bytes(), 0.0, "nothing to train");
    assert!(plan.infer_bytes() > 0.0);
    assert_eq!(plan.layers().len(), 1);
    let mut pool = Model::from_layers(
        r#"[{"type":"avg_pool2d","kernel_size":2},{"type":"flatten"}]"#,
        1.0,
        0.0,
        0.05,
        0.9,
        0.0,
    )
    .unwrap();
    assert_eq!(pool.num_parameters(), 0.0);
    assert_eq!(pool.predict(&[1.0; 16], 1.0, 4.0, 4.0).unwrap().len(), 4);
    let plan = pool.plan(1.0, 4.0, 4.0).unwrap();
    assert_eq!((plan.train_bytes(), plan.layers().len()), (0.0, 2));
    let mut img = [0.0f32; 16];
    img[..2].copy_from_slice(&[9.0, 9.0]); // the top-left window: class 0
    assert_eq!(pool.evaluate(&img, 1.0, 4.0, 4.0, &[0.0]).unwrap(), 1.0);
    for m in [&mut soft, &mut pool] {
        let e = refused(m.train_step(&[1.0; 16], 1.0, 4.0, 4.0, &[0.0]));
        assert!(e.starts_with("trainStep: nothing to train"), "{e}");
    }
}

#[wasm_bindgen_test]
fn a_step_over_max_macs_is_refused_before_it_starts() {
    let mut m = Model::w1(0.0, 0.05, 0.9, 0.0).unwrap();
    let plan = Model::plan_w1(0.9, 1.0, 28.0, 28.0).unwrap();
    assert!(plan.train_macs() > plan.infer_macs() && plan.infer_macs() > 400_000.0);
    m.set_max_macs(plan.train_macs() - 1.0).unwrap();
    let e = refused(m.train_step(&[0.5; 784], 1.0, 28.0, 28.0, &[3.0]));
    assert!(
        e.starts_with("a training step at [1, 1, 28, 28] takes ") && e.contains("more than maxMacs"),
        "{e}"
    );
    assert_eq!(m.steps(), 0.0);
    m.predict(&[0.5; 784], 1.0, 28.0, 28.0).unwrap();
    m.set_max_macs(plan.train_macs()).unwrap();
    still_trains(&mut m);
}

/// A node the engine refuses (W1's first MaxPool, kernel 2, with pads 2: more than half
/// the kernel, which PyTorch refuses too) is imported (the importer leaves the engine's
/// check to the engine's module) and refused by `Model.load`, naming the ONNX node.
#[wasm_bindgen_test]
fn an_engine_refusal_names_the_onnx_node() {
    let pads = b"\x0a\x04pads@\x00@\x00@\x00@\x00";
    let mut bad = W1_TS.to_vec();
    let at = bad
        .windows(pads.len())
        .position(|w| w == pads)
        .expect("MaxPool's pads");
    for k in 0..4 {
        bad[at + 7 + 2 * k] = 2;
    }
    let file = torchlet_wasm_onnx::onnx_to_model(&bad, JsValue::UNDEFINED).unwrap();
    let e = refused(Model::load(file, 0.05, 0.9, 0.0, None));
    assert_eq!(
        e,
        "node 2 (max_pool2d \"/2/MaxPool\"): max_pool2d: padding must be at most half the kernel size (got 2)"
    );
    assert_eq!(
        refused(from_onnx(&bad, JsValue::UNDEFINED, 0.05, 0.9, 0.0, None)),
        e
    );
}
