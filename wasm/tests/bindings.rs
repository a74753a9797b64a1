//! The JS-facing API, run as wasm in node (`cargo test --target wasm32-unknown-unknown`,
//! runner wasm-bindgen-test-runner): errors become JS `Error`s with the engine's
//! message, a failed call leaves the model usable, plans match real steps, and the
//! model learns.
#![cfg(target_arch = "wasm32")]

use torchlet_wasm::Model;
use wasm_bindgen::{JsError, JsValue};
use wasm_bindgen_test::wasm_bindgen_test;

/// The `message` of the JS `Error` a call threw.
fn message(e: JsError) -> String {
    let v: JsValue = e.into();
    let err: js_sys::Error = v.into();
    err.message().into()
}

/// A horizontal (class 0) or vertical (class 1) bar at `pos` in an h x w image.
fn bar(h: usize, w: usize, vertical: bool, pos: usize) -> Vec<f32> {
    let mut x = vec![0.0f32; h * w];
    for i in 0..h {
        for j in 0..w {
            if (vertical && j == pos % w) || (!vertical && i == pos % h) {
                x[i * w + j] = 1.0;
            }
        }
    }
    x
}

#[wasm_bindgen_test]
fn w1_has_its_parameters_and_an_auto_sized_arena() {
    let m = Model::w1(0.0, 0.01, 0.9, 0.0).unwrap();
    assert_eq!(m.num_parameters(), 6218.0);
    assert_eq!(m.in_channels(), 1);
    let plan = Model::plan_w1(0.9, 32.0, 28.0, 28.0).unwrap();
    assert!(m.arena_bytes() >= plan.train_bytes());
    assert!(m.arena_bytes() < plan.train_bytes() + 4.0);
}

#[wasm_bindgen_test]
fn plan_lists_layer_shapes_and_equals_the_real_high_water_mark() {
    let plan = Model::plan_w1(0.9, 1.0, 12.0, 20.0).unwrap();
    let shapes: Vec<Vec<u32>> = plan.layers().iter().map(|l| l.shape()).collect();
    let names: Vec<String> = plan.layers().iter().map(|l| l.name()).collect();
    assert_eq!(names[0], "conv2d");
    assert_eq!(shapes[0], vec![1, 8, 12, 20]);
    assert_eq!(shapes[2], vec![1, 8, 6, 10]);
    assert_eq!(shapes[5], vec![1, 16, 3, 5]);
    assert_eq!(shapes.last().unwrap(), &vec![1, 10]);
    assert!(plan.infer_bytes() < plan.train_bytes());
    assert!(plan.persistent_bytes() >= 2.0 * 6218.0 * 4.0);
    let json = plan.to_json();
    assert!(
        json.contains("\"layers\":[{\"name\":\"conv2d\",\"shape\":[1, 8, 12, 20]}"),
        "{json}"
    );

    // An arena of exactly the planned size trains at that size, and reaches exactly it.
    let mut m = Model::w1(1.0, 0.01, 0.9, plan.train_bytes()).unwrap();
    m.train_step(&bar(12, 20, true, 3), 1.0, 12.0, 20.0, &[1.0])
        .unwrap();
    assert_eq!(m.high_water_bytes(), plan.train_bytes());
    // A bigger input does not fit: the engine says how much it needed, and the model
    // still works at the smaller size afterwards.
    let e = message(
        m.train_step(&bar(28, 28, true, 3), 1.0, 28.0, 28.0, &[1.0])
            .unwrap_err(),
    );
    assert!(
        e.starts_with("arena exhausted: a training step at [1, 1, 28, 28] needs ")
            && e.contains(" bytes (its meta plan), the arena has "),
        "{e}"
    );
    m.train_step(&bar(12, 20, false, 3), 1.0, 12.0, 20.0, &[0.0])
        .unwrap();
    assert_eq!(m.steps(), 2.0);
}

#[wasm_bindgen_test]
fn bad_inputs_throw_the_engine_message_and_leave_the_model_usable() {
    let mut m = Model::w1(2.0, 0.01, 0.9, 0.0).unwrap();
    let e = message(m.train_step(&[0.0; 783], 1.0, 28.0, 28.0, &[3.0]).unwrap_err());
    assert_eq!(e, "input: data has 783 values, the shape holds 784");
    let e = message(m.predict(&[0.0; 4], 1.0, 2.0, 2.0).unwrap_err());
    assert!(e.starts_with("max_pool2d") || e.starts_with("conv2d"), "{e}");
    let e = message(m.train_step(&[0.0; 784], 1.0, 28.0, 28.0, &[10.0]).unwrap_err());
    assert_eq!(e, "cross_entropy: target class index out of range (got 10)");
    let e = message(
        m.train_step(&[0.0; 784], 1.0, 28.0, 28.0, &[1.0, 2.0])
            .unwrap_err(),
    );
    assert_eq!(e, "cross_entropy: 2 targets for a batch of 1");
    let e = message(m.evaluate(&[0.0; 784], 2.0, 28.0, 28.0, &[1.0, 2.0]).unwrap_err());
    assert!(e.contains("data length"), "{e}");
    assert!(m.loss().is_nan(), "no step succeeded yet");
    // Still usable, at any size.
    let s = m
        .train_step(&bar(12, 20, true, 1), 1.0, 12.0, 20.0, &[1.0])
        .unwrap();
    assert!(s.loss.is_finite());
    let p = m.predict(&bar(9, 7, true, 1), 1.0, 9.0, 7.0).unwrap();
    assert_eq!(p.len(), 10);
    assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-5);
    assert!(p.iter().all(|&v| v > 0.0));
}

#[wasm_bindgen_test]
fn bad_specs_and_sizes_are_refused() {
    let e = message(
        Model::from_layers("[{\"type\":\"conv9d\"}]", 1.0, 0.0, 0.1, 0.0, 0.0)
            .err()
            .unwrap(),
    );
    assert!(e.starts_with("layer spec: unknown variant `conv9d`"), "{e}");
    let e = message(
        Model::from_layers(
            "[{\"type\":\"linear\",\"out_features\":3}]",
            1.0,
            0.0,
            0.1,
            0.0,
            0.0,
        )
        .err()
        .unwrap(),
    );
    assert!(e.contains("input width is unknown"), "{e}");
    let e = message(Model::w1(0.0, 0.01, 0.9, 100.0).err().unwrap());
    assert!(e.starts_with("arena exhausted"), "{e}");
    let e = message(Model::w1(0.0, 0.01, 0.9, -1.0).err().unwrap());
    assert!(e.starts_with("arenaBytes must be"), "{e}");
    let e = message(Model::plan_w1(0.9, 1.0, 0.0, 5.0).err().unwrap());
    assert!(!e.is_empty());
}

#[wasm_bindgen_test]
fn a_layer_spec_network_learns_bars_at_mixed_sizes() {
    let spec = r#"[
        {"type":"conv2d","out_channels":4,"kernel_size":3,"padding":1},
        {"type":"relu"},
        {"type":"conv2d","out_channels":8,"kernel_size":3,"padding":1},
        {"type":"relu"},
        {"type":"global_avg_pool2d"},
        {"type":"flatten"},
        {"type":"linear","out_features":2}
    ]"#;
    let mut m = Model::from_layers(spec, 1.0, 7.0, 0.1, 0.9, 0.0).unwrap();
    assert_eq!(m.num_parameters(), (4 * 9 + 4 + 8 * 4 * 9 + 8 + 2 * 8 + 2) as f64);
    let plan = m.plan(2.0, 10.0, 6.0).unwrap();
    assert_eq!(plan.layers().last().unwrap().shape(), vec![2, 2]);
    let sizes = [(10usize, 6usize), (7, 13), (16, 16)];
    for step in 0..300 {
        let (h, w) = sizes[step % sizes.len()];
        let mut x = bar(h, w, false, step);
        x.extend(bar(h, w, true, step + 1));
        m.train_step(&x, 2.0, h as f64, w as f64, &[0.0, 1.0]).unwrap();
    }
    // Held-out: positions and a size not trained on.
    let (h, w) = (11usize, 9usize);
    let mut x = Vec::new();
    let mut labels = Vec::new();
    for pos in 0..6 {
        x.extend(bar(h, w, pos % 2 == 1, pos + 2));
        labels.push((pos % 2) as f64);
    }
    let acc = m.evaluate(&x, 6.0, h as f64, w as f64, &labels).unwrap();
    assert_eq!(
        acc,
        1.0,
        "bars not learned: accuracy {acc}, last loss {}",
        m.loss()
    );
}

#[wasm_bindgen_test]
fn plans_equal_real_steps_over_many_sizes_and_batches() {
    for &(b, h, w) in &[
        (1usize, 4usize, 4usize),
        (1, 9, 5),
        (3, 12, 20),
        (2, 22, 17),
        (1, 28, 28),
        (4, 7, 31),
    ] {
        let plan = Model::plan_w1(0.9, b as f64, h as f64, w as f64).unwrap();
        let x = vec![0.25f32; b * h * w];
        let labels: Vec<f64> = (0..b).map(|i| i as f64).collect();
        // A prediction on a fresh model reaches exactly the inference plan...
        let mut m = Model::w1(3.0, 0.01, 0.9, plan.train_bytes()).unwrap();
        m.predict(&x, b as f64, h as f64, w as f64).unwrap();
        assert_eq!(m.high_water_bytes(), plan.infer_bytes(), "infer {b}x{h}x{w}");
        // ...and a training step exactly the training plan, in an arena of that size.
        m.train_step(&x, b as f64, h as f64, w as f64, &labels).unwrap();
        assert_eq!(m.high_water_bytes(), plan.train_bytes(), "train {b}x{h}x{w}");
        assert_eq!(m.arena_bytes(), plan.train_bytes());
    }
}

#[wasm_bindgen_test]
fn weights_round_trip_and_corrupt_blobs_are_refused() {
    let mut a = Model::w1(5.0, 0.05, 0.9, 0.0).unwrap();
    for step in 0..20 {
        a.train_step(
            &bar(12, 20, step % 2 == 1, step),
            1.0,
            12.0,
            20.0,
            &[(step % 2) as f64],
        )
        .unwrap();
    }
    let blob = a.export_weights().unwrap();
    assert_eq!(&blob[..4], b"TLWT");
    let img = bar(14, 9, true, 4);
    let pa = a.predict(&img, 1.0, 14.0, 9.0).unwrap();

    // Another model (other seed) predicts differently until it imports the weights.
    let mut b = Model::w1(6.0, 0.05, 0.9, 0.0).unwrap();
    assert_ne!(b.predict(&img, 1.0, 14.0, 9.0).unwrap(), pa);
    b.import_weights(&blob).unwrap();
    assert_eq!(
        b.predict(&img, 1.0, 14.0, 9.0).unwrap(),
        pa,
        "bit-identical after import"
    );
    assert_eq!(b.export_weights().unwrap(), blob);

    // Corrupt blobs throw the engine's message and leave the model as it was.
    let mut flipped = blob.clone();
    flipped[blob.len() / 2] ^= 0x40;
    let e = message(b.import_weights(&flipped).unwrap_err());
    assert!(e.starts_with("corrupt data"), "{e}");
    let e = message(b.import_weights(&blob[..100]).unwrap_err());
    assert!(e.starts_with("corrupt data"), "{e}");
    let e = message(b.import_weights(b"not weights at all").unwrap_err());
    assert!(e.starts_with("corrupt data"), "{e}");
    assert_eq!(
        b.predict(&img, 1.0, 14.0, 9.0).unwrap(),
        pa,
        "untouched after refused imports"
    );

    // Weights of another network are refused by shape.
    let small = Model::from_layers(
        r#"[{"type":"conv2d","out_channels":2,"kernel_size":3},{"type":"global_avg_pool2d"},
            {"type":"flatten"},{"type":"linear","out_features":10}]"#,
        1.0,
        0.0,
        0.1,
        0.0,
        0.0,
    )
    .unwrap();
    let e = message(b.import_weights(&small.export_weights().unwrap()).unwrap_err());
    assert!(!e.is_empty());
    assert_eq!(b.predict(&img, 1.0, 14.0, 9.0).unwrap(), pa);
}

#[wasm_bindgen_test]
fn batch_norm_group_norm_and_dropout_layers_train_and_predict_in_eval_mode() {
    let spec = r#"[
        {"type":"conv2d","out_channels":4,"kernel_size":3,"padding":1},
        {"type":"batch_norm2d"},
        {"type":"relu"},
        {"type":"conv2d","out_channels":8,"kernel_size":3,"padding":1},
        {"type":"group_norm","num_groups":2},
        {"type":"relu"},
        {"type":"dropout","p":0.2},
        {"type":"global_avg_pool2d"},
        {"type":"flatten"},
        {"type":"linear","out_features":2}
    ]"#;
    let mut m = Model::from_layers(spec, 1.0, 7.0, 0.1, 0.9, 0.0).unwrap();
    let plan = m.plan(2.0, 10.0, 6.0).unwrap();
    let names: Vec<String> = plan.layers().iter().map(|l| l.name()).collect();
    assert_eq!(names[1], "batch_norm");
    assert_eq!(names[4], "group_norm");
    assert_eq!(names[6], "dropout");
    let sizes = [(10usize, 6usize), (7, 13), (16, 16)];
    for step in 0..300 {
        let (h, w) = sizes[step % sizes.len()];
        let mut x = bar(h, w, false, step);
        x.extend(bar(h, w, true, step + 1));
        m.train_step(&x, 2.0, h as f64, w as f64, &[0.0, 1.0]).unwrap();
    }
    // Eval mode: the running statistics (batch 1 works), no dropout (deterministic).
    let img = bar(11, 9, true, 4);
    let p = m.predict(&img, 1.0, 11.0, 9.0).unwrap();
    assert_eq!(m.predict(&img, 1.0, 11.0, 9.0).unwrap(), p);
    let (h, w) = (11usize, 9usize);
    let (mut x, mut labels) = (Vec::new(), Vec::new());
    for pos in 0..6 {
        x.extend(bar(h, w, pos % 2 == 1, pos + 2));
        labels.push((pos % 2) as f64);
    }
    let acc = m.evaluate(&x, 6.0, h as f64, w as f64, &labels).unwrap();
    assert_eq!(
        acc,
        1.0,
        "bars not learned: accuracy {acc}, last loss {}",
        m.loss()
    );
    // An arena of exactly the planned size trains at that size and reaches exactly it.
    let plan = m.plan(2.0, 10.0, 6.0).unwrap();
    let mut exact = Model::from_layers(spec, 1.0, 7.0, 0.1, 0.9, plan.train_bytes()).unwrap();
    let mut x = bar(10, 6, false, 1);
    x.extend(bar(10, 6, true, 2));
    exact.train_step(&x, 2.0, 10.0, 6.0, &[0.0, 1.0]).unwrap();
    assert_eq!(exact.high_water_bytes(), plan.train_bytes());
    // Training batch norm with one value per channel is refused; the model stays usable.
    let one = r#"[{"type":"batch_norm2d"},{"type":"global_avg_pool2d"},{"type":"flatten"},
        {"type":"linear","out_features":2}]"#;
    let mut b = Model::from_layers(one, 1.0, 0.0, 0.1, 0.0, 0.0).unwrap();
    let e = message(b.train_step(&[0.5], 1.0, 1.0, 1.0, &[0.0]).unwrap_err());
    assert!(
        e.starts_with("batch_norm: training needs more than one value"),
        "{e}"
    );
    b.train_step(&[0.5, 1.0], 2.0, 1.0, 1.0, &[0.0, 1.0]).unwrap();
    b.predict(&[0.5], 1.0, 1.0, 1.0).unwrap();
    for (bad, want) in [
        (
            r#"[{"type":"batch_norm2d","num_features":3}]"#,
            "3 channels given",
        ),
        (r#"[{"type":"group_norm","num_groups":2}]"#, "num_groups"),
        (r#"[{"type":"dropout","p":1.5}]"#, "p must be a probability"),
    ] {
        let e = message(Model::from_layers(bad, 1.0, 0.0, 0.1, 0.0, 0.0).err().unwrap());
        assert!(e.contains(want), "{e}");
    }
}

#[wasm_bindgen_test]
fn conv1d_conv_transpose2d_and_rectangular_conv2d_specs() {
    // Rectangular conv2d (int or pair sizes) and a transposed convolution upsampling x2.
    let spec = r#"[
        {"type":"conv2d","out_channels":3,"kernel_size":[3,1],"padding":[1,0]},
        {"type":"relu"},
        {"type":"conv_transpose2d","out_channels":4,"kernel_size":2,"stride":[2,2]},
        {"type":"relu"},
        {"type":"global_avg_pool2d"},
        {"type":"flatten"},
        {"type":"linear","out_features":2}
    ]"#;
    let mut m = Model::from_layers(spec, 1.0, 7.0, 0.1, 0.9, 0.0).unwrap();
    assert_eq!(m.num_parameters(), (3 * 3 + 3 + 3 * 4 * 4 + 4 + 2 * 4 + 2) as f64);
    for &(b, h, w) in &[(2usize, 10usize, 6usize), (1, 7, 13)] {
        let plan = m.plan(b as f64, h as f64, w as f64).unwrap();
        let shapes: Vec<Vec<u32>> = plan.layers().iter().map(|l| l.shape()).collect();
        assert_eq!(shapes[0], vec![b as u32, 3, h as u32, w as u32]);
        assert_eq!(shapes[2], vec![b as u32, 4, 2 * h as u32, 2 * w as u32]);
        let mut fresh = Model::from_layers(spec, 1.0, 7.0, 0.1, 0.9, plan.train_bytes()).unwrap();
        let labels: Vec<f64> = (0..b).map(|i| (i % 2) as f64).collect();
        let s = fresh
            .train_step(&vec![0.5; b * h * w], b as f64, h as f64, w as f64, &labels)
            .unwrap();
        assert!(s.loss.is_finite());
        assert_eq!(fresh.high_water_bytes(), plan.train_bytes(), "{b}x{h}x{w}");
    }
    m.train_step(&bar(10, 6, true, 2), 1.0, 10.0, 6.0, &[1.0])
        .unwrap();

    // conv1d: each sample a sequence of 8 values; a pulse in the first half is class 0.
    let spec = r#"[
        {"type":"conv1d","out_channels":4,"kernel_size":3,"padding":1},
        {"type":"relu"},
        {"type":"conv1d","out_channels":2,"kernel_size":8},
        {"type":"flatten"}
    ]"#;
    let mut m = Model::from_layers(spec, 1.0, 3.0, 0.1, 0.9, 0.0).unwrap();
    let plan = m.plan(2.0, 1.0, 8.0).unwrap();
    let shapes: Vec<Vec<u32>> = plan.layers().iter().map(|l| l.shape()).collect();
    assert_eq!(
        shapes,
        vec![vec![2, 4, 8], vec![2, 4, 8], vec![2, 2, 1], vec![2, 2]]
    );
    let pulse = |p: usize| {
        (0..8)
            .map(|i| if i == p { 1.0 } else { 0.0 })
            .collect::<Vec<f32>>()
    };
    for step in 0..200 {
        let mut x = pulse(step % 4);
        x.extend(pulse(4 + (step / 4) % 4));
        m.train_step(&x, 2.0, 1.0, 8.0, &[0.0, 1.0]).unwrap();
    }
    let x: Vec<f32> = (0..8).flat_map(pulse).collect();
    let labels: Vec<f64> = (0..8).map(|p| (p >= 4) as u32 as f64).collect();
    let acc = m.evaluate(&x, 8.0, 1.0, 8.0, &labels).unwrap();
    assert_eq!(
        acc,
        1.0,
        "pulses not learned: accuracy {acc}, last loss {}",
        m.loss()
    );

    // Bad sizes: a three-element kernel size, an output_padding not below the stride.
    let e = message(
        Model::from_layers(
            r#"[{"type":"conv2d","out_channels":2,"kernel_size":[3,3,3]}]"#,
            1.0,
            0.0,
            0.1,
            0.0,
            0.0,
        )
        .err()
        .unwrap(),
    );
    assert!(e.starts_with("layer spec:"), "{e}");
    let bad = r#"[{"type":"conv_transpose2d","out_channels":2,"kernel_size":3,"output_padding":1},
        {"type":"global_avg_pool2d"},{"type":"flatten"}]"#;
    // Refused when the default arena is planned, or else on the first call.
    let e = match Model::from_layers(bad, 1.0, 0.0, 0.1, 0.0, 0.0) {
        Err(e) => message(e),
        Ok(mut m) => message(m.predict(&[0.0; 16], 1.0, 4.0, 4.0).unwrap_err()),
    };
    assert!(e.contains("conv_transpose2d: output_padding"), "{e}");
}

#[wasm_bindgen_test]
fn any_one_input_op_is_a_layer_by_its_name() {
    let spec = r#"[{"type": "conv2d", "out_channels": 4, "kernel_size": 3, "padding": 1},
        {"type": "hardswish"}, {"type": "global_avg_pool2d"}, {"type": "flatten"},
        {"type": "linear", "out_features": 3}, {"type": "softmax", "dim": 1}]"#;
    let mut m = Model::from_layers(spec, 1.0, 0.0, 0.1, 0.0, 0.0).unwrap();
    let names: Vec<String> = m
        .plan(2.0, 6.0, 6.0)
        .unwrap()
        .layers()
        .iter()
        .map(|l| l.name())
        .collect();
    assert_eq!(names[1], "hardswish");
    assert_eq!(names[5], "softmax");
    // predict's own softmax over the layer's probabilities (each in (0, 1)) keeps
    // every class within [1/(1+2e), e/(e+2)].
    let p = m.predict(&[0.5; 2 * 36], 2.0, 6.0, 6.0).unwrap();
    assert_eq!(p.len(), 6);
    for v in p {
        assert!(v > 0.155 && v < 0.577, "{v}");
    }
    let bad = r#"[{"type": "softmax", "dims": 1}]"#;
    let e = message(Model::from_layers(bad, 1.0, 0.0, 0.1, 0.0, 0.0).err().unwrap());
    assert!(e.starts_with("layer spec: softmax: parameter dims"), "{e}");
    let e = message(
        Model::from_layers(r#"[{"type": "cat"}]"#, 1.0, 0.0, 0.1, 0.0, 0.0)
            .err()
            .unwrap(),
    );
    assert!(e.contains("unknown variant `cat`"), "{e}");
}
