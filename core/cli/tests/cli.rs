//! The `torchlet` command end to end on the ONNX zoo (tests/golden/onnx, made by
//! tests/golden/make_onnx_zoo.py with PyTorch and onnxruntime): convert with both
//! exporters' files, run equal to onnxruntime, one training step equal to PyTorch's SGD
//! step, export under state_dict names, and errors that name what is wrong.

use safetensors::{Dtype, SafeTensors};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ZOO: [&str; 13] = [
    "w1",
    "lenet5",
    "mobilenetish",
    "unetish",
    "seq1d",
    "padresize",
    "mlp",
    "pool1d",
    "senet",
    "mobilenet_v3_small",
    "efficientnet_b0",
    "ghostnet",
    "shufflenet_v2",
];
/// The zoo models trained with cross-entropy (the loss `torchlet train` uses).
const CE: [&str; 11] = [
    "w1",
    "mlp",
    "pool1d",
    "lenet5",
    "mobilenetish",
    "seq1d",
    "senet",
    "mobilenet_v3_small",
    "efficientnet_b0",
    "ghostnet",
    "shufflenet_v2",
];

fn zoo(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/golden/onnx")
        .join(file)
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("torchlet-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn torchlet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_torchlet"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let o = torchlet(args);
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "torchlet {args:?}: {}{text}",
        String::from_utf8_lossy(&o.stderr)
    );
    text
}

fn fails(args: &[&str]) -> String {
    let o = torchlet(args);
    assert!(!o.status.success(), "torchlet {args:?} should fail");
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// name -> (dtype, shape, values as f64).
fn tensors(path: &Path) -> BTreeMap<String, (Dtype, Vec<usize>, Vec<f64>)> {
    let bytes = std::fs::read(path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    st.iter()
        .map(|(name, v)| {
            let values = match v.dtype() {
                Dtype::F32 => v
                    .data()
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
                    .collect(),
                Dtype::I64 => v
                    .data()
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f64)
                    .collect(),
                d => panic!("{name}: dtype {d:?}"),
            };
            (name.to_string(), (v.dtype(), v.shape().to_vec(), values))
        })
        .collect()
}

fn write(path: &Path, items: &[(&str, Dtype, &[usize], Vec<u8>)]) {
    let views: Vec<_> = items
        .iter()
        .map(|(n, d, s, b)| {
            (
                *n,
                safetensors::tensor::TensorView::new(*d, s.to_vec(), b).unwrap(),
            )
        })
        .collect();
    std::fs::write(path, safetensors::serialize(views, None).unwrap()).unwrap();
}

fn f32_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| (*x as f32).to_le_bytes()).collect()
}

fn close(name: &str, got: &[f64], want: &[f64], rel: f64, abs: f64) {
    assert_eq!(got.len(), want.len(), "{name}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= abs + rel * w.abs(), "{name}[{i}]: {g} vs {w}");
    }
}

#[test]
fn every_zoo_model_converts_from_both_exporters_and_runs_like_onnxruntime() {
    for name in ZOO {
        let refs = tensors(&zoo(&format!("{name}.ref.safetensors")));
        // The inputs x.K at every size, some never exported.
        let inputs: Vec<_> = refs.iter().filter(|(k, _)| k.starts_with("x.")).collect();
        let input_file = scratch(&format!("{name}.in.safetensors"));
        let items: Vec<_> = inputs
            .iter()
            .map(|(k, (_, s, v))| (k.as_str(), Dtype::F32, s.as_slice(), f32_bytes(v)))
            .collect();
        write(&input_file, &items);
        for exporter in ["ts", "dyn"] {
            let tlm = scratch(&format!("{name}.{exporter}.tlm"));
            let onnx = zoo(&format!("{name}.{exporter}.onnx"));
            ok(&["convert", onnx.to_str().unwrap(), tlm.to_str().unwrap()]);
            let out = scratch(&format!("{name}.{exporter}.out.safetensors"));
            ok(&[
                "run",
                tlm.to_str().unwrap(),
                input_file.to_str().unwrap(),
                out.to_str().unwrap(),
            ]);
            let outs = tensors(&out);
            for (k, _) in &inputs {
                let want = &refs[&k.replace("x.", "ort.")];
                let got = &outs[k.as_str()];
                assert_eq!(got.1, want.1, "{name} {exporter} {k}: shape");
                close(&format!("{name} {exporter} {k}"), &got.2, &want.2, 1e-4, 1e-5);
            }
        }
    }
}

#[test]
fn one_training_step_equals_pytorchs_sgd_step_and_exports_its_state_dict() {
    for name in CE {
        let refs = tensors(&zoo(&format!("{name}.ref.safetensors")));
        let tlm = scratch(&format!("{name}.train.tlm"));
        ok(&[
            "convert",
            zoo(&format!("{name}.ts.onnx")).to_str().unwrap(),
            tlm.to_str().unwrap(),
        ]);
        let (_, xs, xv) = &refs["x.0"];
        let (_, ts, tv) = &refs["t"];
        let t: Vec<u8> = tv.iter().flat_map(|v| (*v as i64).to_le_bytes()).collect();
        let data = scratch(&format!("{name}.data.safetensors"));
        write(
            &data,
            &[("x", Dtype::F32, xs, f32_bytes(xv)), ("y", Dtype::I64, ts, t)],
        );
        let trained = scratch(&format!("{name}.trained.tlm"));
        let batch = xs[0].to_string();
        ok(&[
            "train",
            tlm.to_str().unwrap(),
            data.to_str().unwrap(),
            "--lr",
            "0.1",
            "--steps",
            "1",
            "--batch",
            &batch,
            "-o",
            trained.to_str().unwrap(),
        ]);
        let st = scratch(&format!("{name}.trained.safetensors"));
        ok(&["export", trained.to_str().unwrap(), st.to_str().unwrap()]);
        let got = tensors(&st);
        let want: Vec<_> = refs.iter().filter(|(k, _)| k.starts_with("sgd.")).collect();
        assert_eq!(got.len(), want.len(), "{name}: exported {:?}", got.keys());
        for (k, (dtype, shape, v)) in want {
            let key = &k["sgd.".len()..];
            let (gd, gs, gv) = &got[key];
            assert_eq!((gd, gs), (dtype, shape), "{name} {key}");
            if key.ends_with("num_batches_tracked") {
                // ONNX does not carry the count, so the model file starts from 0: the
                // step counts one batch, as PyTorch's did.
                let before = refs[key].2[0];
                assert_eq!(gv[0], v[0] - before, "{name} {key}");
                assert_eq!(gv[0], 1.0, "{name} {key}");
            } else if let Some((_, _, exact)) = refs.get(&format!("sgd64.{key}")) {
                // As close to the float64 step as PyTorch's float32 step is (see
                // tests/tests/onnx_sgd.rs), or 1e-5.
                for (i, (a, e)) in gv.iter().zip(exact).enumerate() {
                    let slack = 2.0 * (v[i] - e).abs();
                    assert!(
                        (a - e).abs() <= 1e-5 * (1.0 + e.abs()) + slack,
                        "{name} {key}[{i}]: {a} vs {e}"
                    );
                }
            } else {
                close(&format!("{name} {key}"), gv, v, 1e-5, 1e-5);
            }
        }
    }
}

#[test]
fn info_and_plan_report_shapes_and_bytes() {
    let tlm = scratch("w1.info.tlm");
    ok(&[
        "convert",
        zoo("w1.ts.onnx").to_str().unwrap(),
        tlm.to_str().unwrap(),
    ]);
    let info = ok(&["info", tlm.to_str().unwrap(), "--input", "1x1x28x28"]);
    assert!(info.contains("6,218 trainable"), "{info}");
    assert!(
        info.contains("[1, 8, 14, 14]") && info.contains("[1, 10]"),
        "{info}"
    );
    let plan = ok(&[
        "plan",
        tlm.to_str().unwrap(),
        "--input",
        "1x1x28x28",
        "--train",
        "--budget",
        "64KiB",
    ]);
    assert!(plan.contains("training step at 1x1x28x28"), "{plan}");
    assert!(
        plan.contains("largest input of this shape within 65,536 bytes: 1x1x"),
        "{plan}"
    );
    let none = ok(&[
        "plan",
        tlm.to_str().unwrap(),
        "--input",
        "1x1x28x28",
        "--budget",
        "1KiB",
    ]);
    assert!(none.contains("parameters alone need"), "{none}");
    let frozen = scratch("w1.frozen.tlm");
    let out = ok(&[
        "convert",
        zoo("w1.ts.onnx").to_str().unwrap(),
        frozen.to_str().unwrap(),
        "--freeze",
        "0.*",
        "--freeze",
        "3.*",
    ]);
    assert!(out.contains("4 frozen tensors"), "{out}");
    // The same frozen convolution weights as int8: a smaller file whose export holds
    // the dequantized weights (within half a step of the f32 ones) and whose plan,
    // info and forward work as before.
    let int8 = scratch("w1.int8.tlm");
    let out = ok(&[
        "convert",
        zoo("w1.ts.onnx").to_str().unwrap(),
        int8.to_str().unwrap(),
        "--freeze",
        "0.*",
        "--freeze",
        "3.*",
        "--int8-frozen",
    ]);
    assert!(out.contains("4 frozen tensors, 2 int8"), "{out}");
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    // 1,224 weights: 3 bytes saved on each, less 24 scales.
    assert!(size(&int8) + 3 * 1224 - 4 * 24 - 8 <= size(&frozen), "{out}");
    let info = ok(&["info", int8.to_str().unwrap(), "--input", "1x1x28x28"]);
    assert!(info.contains("frozen"), "{info}");
    let (f_st, q_st) = (scratch("w1.frozen.safetensors"), scratch("w1.int8.safetensors"));
    ok(&["export", frozen.to_str().unwrap(), f_st.to_str().unwrap()]);
    ok(&["export", int8.to_str().unwrap(), q_st.to_str().unwrap()]);
    let (f, q) = (tensors(&f_st), tensors(&q_st));
    assert_eq!(f.keys().collect::<Vec<_>>(), q.keys().collect::<Vec<_>>());
    for (name, (dtype, shape, want)) in &f {
        let (qd, qs, got) = &q[name];
        assert_eq!((dtype, shape), (qd, qs), "{name}");
        let max = want.iter().fold(0f64, |m, v| m.max(v.abs()));
        let step = if name.ends_with("weight") && shape.len() == 4 {
            max / 127.0
        } else {
            0.0
        };
        close(name, got, want, 0.0, step * 0.5 + 1e-6);
    }
    let e = fails(&[
        "convert",
        zoo("w1.ts.onnx").to_str().unwrap(),
        scratch("w1.none.tlm").to_str().unwrap(),
        "--int8-frozen",
    ]);
    assert!(e.contains("--int8-frozen: no frozen convolution weight"), "{e}");
}

#[test]
fn refused_ops_and_bad_files_are_errors_that_name_the_cause() {
    let tlm = scratch("lstm.tlm");
    let e = fails(&[
        "convert",
        zoo("refused_lstm.onnx").to_str().unwrap(),
        tlm.to_str().unwrap(),
    ]);
    assert!(e.contains("LSTM") && e.contains("not supported"), "{e}");
    let junk = scratch("junk.tlm");
    std::fs::write(&junk, b"TLMD not really a model").unwrap();
    let e = fails(&["info", junk.to_str().unwrap()]);
    assert!(e.contains("junk.tlm"), "{e}");
    let good = scratch("w1.bad.tlm");
    ok(&[
        "convert",
        zoo("w1.ts.onnx").to_str().unwrap(),
        good.to_str().unwrap(),
    ]);
    let mut bytes = std::fs::read(&good).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&good, &bytes).unwrap();
    let e = fails(&[
        "export",
        good.to_str().unwrap(),
        scratch("x.safetensors").to_str().unwrap(),
    ]);
    assert!(
        e.to_lowercase().contains("checksum") || e.to_lowercase().contains("crc"),
        "{e}"
    );
    let e = fails(&["plan", good.to_str().unwrap(), "--input", "28x28"]);
    assert!(!e.is_empty());
}

/// W2's export after `train` with `args` (3 steps of batch 8 on 16 random 28x28 inputs).
fn fine_tuned(tag: &str, args: &[&str]) -> BTreeMap<String, (Dtype, Vec<usize>, Vec<f64>)> {
    let w2 = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../firmware/assets/w2_pretrained.tlm");
    let data = scratch("w2.finetune.safetensors");
    let x: Vec<f64> = (0..16 * 28 * 28)
        .map(|i| ((i * 7919) % 255) as f64 / 255.0)
        .collect();
    let y: Vec<u8> = (0..16i64).flat_map(|i| (i % 10).to_le_bytes()).collect();
    write(
        &data,
        &[
            ("x", Dtype::F32, &[16, 1, 28, 28], f32_bytes(&x)),
            ("y", Dtype::I64, &[16], y),
        ],
    );
    let (tlm, st) = (
        scratch(&format!("w2.{tag}.tlm")),
        scratch(&format!("w2.{tag}.safetensors")),
    );
    let (w2, data, tlm_s) = (
        w2.to_str().unwrap(),
        data.to_str().unwrap(),
        tlm.to_str().unwrap(),
    );
    let mut cmd = vec![
        "train", w2, data, "--lr", "0.05", "--steps", "3", "--batch", "8", "-o", tlm_s,
    ];
    cmd.extend_from_slice(args);
    if args.is_empty() {
        // The file as it is: no training.
        ok(&["export", w2, st.to_str().unwrap()]);
    } else {
        let out = ok(&cmd);
        assert!(out.contains("parameter values trained"), "{out}");
        ok(&["export", tlm_s, st.to_str().unwrap()]);
    }
    tensors(&st)
}

#[test]
fn train_with_a_fine_tuning_choice_changes_only_the_chosen_tensors() {
    let before = fine_tuned("before", &[]);
    let stats = |k: &str| k.contains("running_") || k.ends_with("num_batches_tracked");
    type Rule = fn(&str, &[usize]) -> bool;
    let choices: [(&str, &[&str], Rule); 3] = [
        ("biases", &["--choice", "biases"], |k, _| {
            k.starts_with("fc.") || k.ends_with(".bias")
        }),
        (
            "norms",
            &["--choice", "biases-norms", "--compact-saves", "--momentum", "0.9"],
            // A BatchNorm scale is the one 1-D weight.
            |k, s| k.starts_with("fc.") || k.ends_with(".bias") || (s.len() == 1 && k.ends_with(".weight")),
        ),
        (
            "last",
            &["--train-only", "blocks.4.*", "--train-only", "fc.*"],
            |k, _| k.starts_with("fc.") || k.starts_with("blocks.4."),
        ),
    ];
    for (tag, args, trains) in choices {
        let after = fine_tuned(tag, args);
        assert_eq!(after.len(), before.len(), "{tag}");
        let mut changed = 0;
        for (k, (_, shape, v)) in &before {
            let got = &after[k].2;
            if trains(k, shape) && !stats(k) {
                assert!(got != v, "{tag}: {k} trains but did not change");
                changed += 1;
            } else {
                assert!(got == v, "{tag}: {k} is frozen but changed");
            }
        }
        assert!(changed >= 2, "{tag}: {changed} tensors trained");
    }
    let w2 = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../firmware/assets/w2_pretrained.tlm");
    let e = fails(&[
        "train",
        w2.to_str().unwrap(),
        scratch("w2.finetune.safetensors").to_str().unwrap(),
        "--lr",
        "0.1",
        "--train-only",
        "features.*",
        "-o",
        scratch("w2.none.tlm").to_str().unwrap(),
    ]);
    assert!(
        e.contains("no parameter trains") && e.contains("features.*"),
        "{e}"
    );
    let e = fails(&[
        "train",
        "x.tlm",
        "x.safetensors",
        "--lr",
        "0.1",
        "--choice",
        "head",
        "--train-only",
        "fc.*",
        "-o",
        "y.tlm",
    ]);
    assert!(e.contains("--train-only") && e.contains("--choice"), "{e}");
}
