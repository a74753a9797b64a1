//! Shared by the hostile_*.rs tests: model files built with the engine's own encoder
//! (no ONNX needed), safetensors data, and the `torchlet` binary run with a deadline.

#![allow(dead_code)] // each test file uses its own part

use safetensors::Dtype;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use torchlet::model::spec::{AttrValue, GraphSpec, InputSpec, NodeSpec, TensorSpec};
use torchlet::model::{encode, DimSpec, TensorKind, ValueRef};

/// What one run of the command did.
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

/// Runs `torchlet args`, killed after `deadline` (the test then fails saying so).
pub fn torchlet(args: &[&str], deadline: Duration) -> Ran {
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_torchlet"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > deadline {
            child.kill().unwrap();
            let _ = child.wait();
            panic!("torchlet {args:?} still running after {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = child.wait_with_output().unwrap();
    Ran {
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
        took: start.elapsed(),
    }
}

/// `torchlet args` must fail as a refusal (exit code 1 or clap's 2: no abort, no
/// panic, which exit 134 and 101), within 10 s; its stderr.
pub fn refused(args: &[&str]) -> String {
    let r = torchlet(args, Duration::from_secs(10));
    assert!(
        matches!(r.code, Some(1) | Some(2)),
        "torchlet {args:?}: exit {:?}\n{}{}",
        r.code,
        r.stdout,
        r.stderr
    );
    r.stderr
}

/// `torchlet args` must succeed within 10 s; its stdout and stderr.
pub fn works(args: &[&str]) -> (String, String) {
    let r = torchlet(args, Duration::from_secs(10));
    assert_eq!(r.code, Some(0), "torchlet {args:?}:\n{}{}", r.stdout, r.stderr);
    (r.stdout, r.stderr)
}

/// A fresh file path in this test process's scratch folder.
pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("torchlet-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

pub fn node(op: &str, name: &str, inputs: &[ValueRef], attrs: Vec<(&str, AttrValue)>) -> NodeSpec {
    NodeSpec {
        op: op.into(),
        name: name.into(),
        inputs: inputs.iter().map(|&r| Some(r)).collect(),
        attrs: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    }
}

pub fn param(name: &str, dims: Vec<usize>) -> TensorSpec {
    let n: usize = dims.iter().product();
    TensorSpec {
        name: name.into(),
        kind: TensorKind::Param { trainable: true },
        data: (0..n).map(|i| ((i * 7) % 13) as f32 / 13.0 - 0.4).collect(),
        dims,
        int8: None,
    }
}

/// An NCHW input of `c` channels and free H, W (at least 1).
pub fn image_input(c: usize) -> InputSpec {
    InputSpec {
        name: "x".into(),
        dims: vec![
            DimSpec::Free { min: 1 },
            DimSpec::Fixed(c),
            DimSpec::Free { min: 1 },
            DimSpec::Free { min: 1 },
        ],
    }
}

/// A conv2d node over `input` with weight tensor `w` (and bias `b`), `pad` each side.
pub fn conv(name: &str, input: ValueRef, w: usize, b: Option<usize>, pad: i64) -> NodeSpec {
    let mut ins = vec![input, ValueRef::Tensor(w)];
    ins.extend(b.map(ValueRef::Tensor));
    node(
        "conv2d",
        name,
        &ins,
        vec![("padding", AttrValue::Ints(vec![pad, pad]))],
    )
}

/// conv3x3(1 -> 2, padding `pad`): a normal model at pad 1, an allocation bomb at 32,767.
pub fn conv_model(pad: i64) -> GraphSpec {
    GraphSpec {
        inputs: vec![image_input(1)],
        tensors: vec![
            param("conv.weight", vec![2, 1, 3, 3]),
            param("conv.bias", vec![2]),
        ],
        nodes: vec![conv("conv", ValueRef::Input(0), 0, Some(1), pad)],
        outputs: vec![ValueRef::Node(0)],
    }
}

/// Nearest Resize by `factor` then conv `k x k` (1 -> 1, same padding): by 1,000, an
/// allocation bomb at 64x64 and a work bomb at 8x8 with a 31x31 kernel.
pub fn resize_model(factor: f64, k: usize) -> GraphSpec {
    GraphSpec {
        inputs: vec![image_input(1)],
        tensors: vec![param("conv.weight", vec![1, 1, k, k])],
        nodes: vec![
            node(
                "interpolate",
                "up",
                &[ValueRef::Input(0)],
                vec![
                    ("scale_factor", AttrValue::Floats(vec![factor, factor])),
                    ("mode", AttrValue::Str("nearest".into())),
                ],
            ),
            conv("conv", ValueRef::Node(0), 0, None, (k / 2) as i64),
        ],
        outputs: vec![ValueRef::Node(1)],
    }
}

/// A lone softmax over the channels: a model with no parameters.
pub fn softmax_model() -> GraphSpec {
    GraphSpec {
        inputs: vec![image_input(3)],
        tensors: vec![],
        nodes: vec![node(
            "softmax",
            "sm",
            &[ValueRef::Input(0)],
            vec![("dim", AttrValue::Int(1))],
        )],
        outputs: vec![ValueRef::Node(0)],
    }
}

/// Writes `spec` as a model file; its path.
pub fn model_file(name: &str, spec: &GraphSpec) -> PathBuf {
    let p = scratch(name);
    std::fs::write(&p, encode(spec).unwrap()).unwrap();
    p
}

/// Writes a safetensors file of `(name, dtype, shape, bytes)`.
pub fn tensors_file(name: &str, items: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) -> PathBuf {
    let p = scratch(name);
    let views: Vec<_> = items
        .iter()
        .map(|(n, d, s, b)| {
            (
                *n,
                safetensors::tensor::TensorView::new(*d, s.clone(), b).unwrap(),
            )
        })
        .collect();
    std::fs::write(&p, safetensors::serialize(views, None).unwrap()).unwrap();
    p
}

pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn i64_bytes(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// `n` samples of 1 x `h` x `w` ramps as `x`, and `labels` as `y` (one per position,
/// [n, h, w], int64), for the conv models.
pub fn data_file(name: &str, n: usize, h: usize, w: usize, labels: &[i64]) -> PathBuf {
    let x: Vec<f32> = (0..n * h * w).map(|i| (i % 17) as f32 / 17.0).collect();
    tensors_file(
        name,
        &[
            ("x", Dtype::F32, vec![n, 1, h, w], f32_bytes(&x)),
            ("y", Dtype::I64, vec![n, h, w], i64_bytes(labels)),
        ],
    )
}

/// An input file of one tensor `x` of `dims` (zeros).
pub fn input_file(name: &str, dims: &[usize]) -> PathBuf {
    let n: usize = dims.iter().product();
    tensors_file(
        name,
        &[("x", Dtype::F32, dims.to_vec(), f32_bytes(&vec![0.0; n]))],
    )
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}
