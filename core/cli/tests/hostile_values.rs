//! Values that tell the truth (issue 38, item 5, CLI side): labels that are not whole
//! numbers refused, all-ignored batches skipped, hyperparameters checked, and duplicate
//! tensor names refused by export.

mod support;
use safetensors::Dtype;
use support::*;

fn train_on(m: &str, data: &str, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = ["train", m, data, "--lr", "0.1", "-o"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    a.push(scratch("values.out.tlm").to_str().unwrap().to_string());
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

#[test]
fn float_labels_that_are_not_whole_classes_are_refused_naming_the_first() {
    let m = model_file("labels.tlm", &conv_model(1));
    let x: Vec<f32> = vec![0.5; 2 * 4];
    for (labels, shown) in [
        (vec![0.0f32, 1.0, 2.5, 1.0], "label 2 is 2.5"),
        (vec![0.0, f32::NAN, 1.0, 0.0], "label 1 is NaN"),
        (vec![f32::INFINITY, 0.0, 1.0, 0.0], "label 0 is inf"),
        (
            vec![0.0, 0.0, 0.0, 1e30],
            "label 3 is 1000000015047466200000000000000",
        ),
    ] {
        let labels = [labels, vec![1.0; 4]].concat();
        let d = tensors_file(
            "labels.data.safetensors",
            &[
                ("x", Dtype::F32, vec![2, 1, 2, 2], f32_bytes(&x)),
                ("y", Dtype::F32, vec![2, 2, 2], f32_bytes(&labels)),
            ],
        );
        let a = train_on(s(&m), s(&d), &[]);
        let e = refused(&a.iter().map(|s| s.as_str()).collect::<Vec<_>>());
        assert!(e.contains(shown) && e.contains("\"y\""), "{e}");
    }
    // Whole floats are classes, as before.
    let d = tensors_file(
        "labels.ok.safetensors",
        &[
            ("x", Dtype::F32, vec![2, 1, 2, 2], f32_bytes(&x)),
            (
                "y",
                Dtype::F64,
                vec![2, 2, 2],
                [0.0f64, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
            ),
        ],
    );
    let a = train_on(s(&m), s(&d), &[]);
    let (out, _) = works(&a.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    assert!(out.contains("1 steps of batch 2"), "{out}");
}

#[test]
fn a_batch_whose_labels_are_all_ignored_is_skipped_and_the_model_stays_finite() {
    let m = model_file("ignored.tlm", &conv_model(1));
    // Batch 1: samples 0 and 1 are all -100 (ignore_index), 2 and 3 are classes.
    let mut y = vec![-100i64; 2 * 16];
    y.extend([0i64, 1].repeat(16));
    let d = data_file("ignored.data.safetensors", 4, 4, 4, &y);
    let a = train_on(s(&m), s(&d), &["--batch", "1"]);
    let (out, err) = works(&a.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    assert_eq!(err.matches("step skipped").count(), 2, "{err}");
    assert!(out.contains("4 steps (2 skipped: every label ignored)"), "{out}");
    assert!(!out.contains("NaN"), "{out}");
    let st = scratch("ignored.export.safetensors");
    works(&["export", a[6].as_str(), s(&st)]);
    let bytes = std::fs::read(&st).unwrap();
    let t = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    for (name, v) in t.iter() {
        for c in v.data().chunks_exact(4) {
            let x = f32::from_le_bytes(c.try_into().unwrap());
            assert!(x.is_finite(), "{name}: {x}");
        }
    }
    // Every label ignored: nothing trains, nothing is written.
    let d = data_file("ignored.all.safetensors", 2, 4, 4, &[-100; 32]);
    let a = train_on(s(&m), s(&d), &[]);
    let e = refused(&a.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    assert!(e.contains("every label is ignore_index (-100)"), "{e}");
}

#[test]
fn learning_rates_and_momenta_pytorch_refuses_are_refused_before_reading_data() {
    for (flags, why) in [
        (&["--lr", "-0.1"][..], "--lr -0.1"),
        (&["--lr", "NaN"][..], "--lr NaN"),
        (&["--lr", "inf"][..], "--lr inf"),
        (&["--lr", "0.1", "--momentum", "1"][..], "--momentum 1"),
        (&["--lr", "0.1", "--momentum", "-0.5"][..], "--momentum -0.5"),
        (&["--lr", "0.1", "--momentum", "nan"][..], "--momentum NaN"),
    ] {
        let mut a = vec!["train", "missing.tlm", "missing.safetensors", "-o", "x.tlm"];
        a.extend_from_slice(flags);
        let e = refused(&a);
        assert!(e.contains(why) && !e.contains("missing"), "{flags:?}: {e}");
    }
    let e = refused(&[
        "plan",
        "missing.tlm",
        "--input",
        "1x1x8x8",
        "--choices",
        "--momentum",
        "1.5",
    ]);
    assert!(e.contains("--momentum 1.5"), "{e}");
}

/// Two tensors named alike (the file re-sealed with a correct CRC): refused with the
/// name, not a panic inside safetensors.
#[test]
fn export_of_a_model_file_with_duplicate_tensor_names_is_refused_with_the_name() {
    let mut spec = conv_model(1);
    spec.tensors[0].name = "conv.w".into();
    spec.tensors[1].name = "conv.b".into();
    let mut bytes = torchlet::model::encode(&spec).unwrap();
    let at = bytes.windows(6).position(|w| w == b"conv.b").unwrap();
    bytes[at..at + 6].copy_from_slice(b"conv.w");
    let body = bytes.len() - 4;
    let crc = torchlet::io::crc32(&bytes[..body]);
    bytes[body..].copy_from_slice(&crc.to_le_bytes());
    let m = scratch("dup.tlm");
    std::fs::write(&m, &bytes).unwrap();
    let e = refused(&["export", s(&m), s(&scratch("dup.safetensors"))]);
    assert!(e.contains("\"conv.w\""), "{e}");
}

/// A lone Softmax (no parameters) runs, reports and plans inference; only train says
/// there is nothing to train.
#[test]
fn a_model_with_no_parameters_runs_and_plans_inference_and_only_train_refuses() {
    let m = model_file("softmax.tlm", &softmax_model());
    let x = input_file("softmax.in.safetensors", &[1, 3, 4, 4]);
    let out = scratch("softmax.out.safetensors");
    let (stdout, _) = works(&["run", s(&m), s(&x), s(&out)]);
    assert!(stdout.contains("x [1, 3, 4, 4] -> [1, 3, 4, 4]"), "{stdout}");
    let bytes = std::fs::read(&out).unwrap();
    let t = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let y = t.tensor("x").unwrap();
    // Softmax of equal (zero) logits over 3 channels: a third each.
    for c in y.data().chunks_exact(4) {
        let v = f32::from_le_bytes(c.try_into().unwrap());
        assert!((v - 1.0 / 3.0).abs() < 1e-6, "{v}");
    }
    let (info, _) = works(&["info", s(&m), "--input", "1x3x4x4"]);
    assert!(
        info.contains("[1, 3, 4, 4]") && info.contains("inference (eval mode):"),
        "{info}"
    );
    let (plan, _) = works(&["plan", s(&m), "--input", "1x3x4x4"]);
    assert!(plan.contains("inference at 1x3x4x4:"), "{plan}");
    let e = refused(&["plan", s(&m), "--input", "1x3x4x4", "--train"]);
    assert!(e.contains("nothing to train"), "{e}");
    let d = tensors_file(
        "softmax.data.safetensors",
        &[
            ("x", Dtype::F32, vec![1, 3, 4, 4], f32_bytes(&[0.0; 48])),
            ("y", Dtype::I64, vec![1, 4, 4], i64_bytes(&[0; 16])),
        ],
    );
    let e = refused(&[
        "train",
        s(&m),
        s(&d),
        "--lr",
        "0.1",
        "-o",
        s(&scratch("softmax.t.tlm")),
    ]);
    assert!(e.contains("no trainable parameters: nothing to train"), "{e}");
}
