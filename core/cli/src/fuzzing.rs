//! Bodies of the CLI's fuzz targets (core/fuzz), here so that a test replays the kept
//! inputs (`core/fuzz/regressions/<target>/`, `core/cli/tests/fuzz_regressions.rs`)
//! without nightly. Both run the commands in-process through [`crate::run_within`]
//! with budgets of [`CAP`], in a scratch folder that holds the seed files; a panic or
//! an abort is a crash, a refusal is fine. The bodies change the current directory, so
//! give libFuzzer absolute corpus paths:
//!
//! ```text
//! cd core/fuzz
//! cargo +nightly fuzz run -O -a -s none cli_args $PWD/corpus/cli_args $PWD/seeds/cli_args -- \
//!     -rss_limit_mb=2048 -timeout=5 -max_total_time=600 -max_len=4096
//! cargo +nightly fuzz run -O -a -s none model_file_commands $PWD/corpus/model_file_commands \
//!     $PWD/seeds/model_file_commands -- -rss_limit_mb=2048 -timeout=5 -max_total_time=600 -max_len=32768
//! ```

use crate::limits::Limits;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use torchlet::model::spec::{AttrValue, GraphSpec, InputSpec, NodeSpec, TensorSpec};
use torchlet::model::{encode, DimSpec, ModelFile, TensorKind, ValueRef};

/// The budgets of a fuzzed command: 256 MiB and 1e9 multiply-accumulates a step, well
/// inside libFuzzer's `-rss_limit_mb=2048` and `-timeout=5`.
pub const CAP: Limits = Limits {
    max_bytes: 256 << 20,
    max_macs: 1_000_000_000,
};

/// Steps a fuzzed `train` may ask for (each within [`CAP`], but a count of 4e9 of them
/// would be a slow unit by request, not a bug).
const MAX_STEPS: u64 = 64;

/// The scratch folder (made once per process), the current directory of the fuzzed
/// commands, holding `model.tlm`, `softmax.tlm`, `input.safetensors`,
/// `data.safetensors`, `labels2.5.safetensors` and `seq1d.onnx`.
fn scratch() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("torchlet-fuzz-cli-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&d);
        let w = |name: &str, bytes: &[u8]| {
            let _ = std::fs::write(d.join(name), bytes);
        };
        w("model.tlm", &encode(&classifier()).unwrap_or_default());
        w("softmax.tlm", &encode(&softmax()).unwrap_or_default());
        w("input.safetensors", &tensors(&[4, 1, 8, 8], None));
        w(
            "data.safetensors",
            &tensors(&[4, 1, 8, 8], Some(&[0.0, 1.0, 1.0, 0.0])),
        );
        w(
            "labels2.5.safetensors",
            &tensors(&[4, 1, 8, 8], Some(&[0.0, 2.5, 1.0, 0.0])),
        );
        w(
            "seq1d.onnx",
            include_bytes!("../../../tests/golden/onnx/seq1d.ts.onnx"),
        );
        // The commands' relative paths (every fuzzed path is one) land here.
        let _ = std::env::set_current_dir(&d);
        d
    })
}

fn node(op: &str, inputs: &[ValueRef], attrs: Vec<(&str, AttrValue)>) -> NodeSpec {
    NodeSpec {
        op: op.into(),
        name: format!("{op}{}", inputs.len()),
        inputs: inputs.iter().map(|&r| Some(r)).collect(),
        attrs: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    }
}

fn param(name: &str, dims: Vec<usize>) -> TensorSpec {
    let n: usize = dims.iter().product();
    TensorSpec {
        name: name.into(),
        kind: TensorKind::Param { trainable: true },
        data: (0..n).map(|i| ((i * 7) % 13) as f32 / 13.0 - 0.4).collect(),
        dims,
        int8: None,
    }
}

fn image(c: usize) -> InputSpec {
    InputSpec {
        name: "x".into(),
        dims: vec![
            DimSpec::Free { min: 1 },
            DimSpec::Fixed(c),
            DimSpec::Free { min: 3 },
            DimSpec::Free { min: 3 },
        ],
    }
}

/// conv3x3(1 -> 2, pad 1) -> adaptive average pool to 1x1: logits `[N, 2, 1, 1]`.
pub fn classifier() -> GraphSpec {
    use ValueRef::{Input as I, Node as N, Tensor as T};
    GraphSpec {
        inputs: vec![image(1)],
        tensors: vec![
            param("conv.weight", vec![2, 1, 3, 3]),
            param("conv.bias", vec![2]),
        ],
        nodes: vec![
            node(
                "conv2d",
                &[I(0), T(0), T(1)],
                vec![("padding", AttrValue::Ints(vec![1, 1]))],
            ),
            node(
                "adaptive_avg_pool2d",
                &[N(0)],
                vec![("output_size", AttrValue::Ints(vec![1, 1]))],
            ),
        ],
        outputs: vec![N(1)],
    }
}

/// A lone softmax: no parameters.
pub fn softmax() -> GraphSpec {
    GraphSpec {
        inputs: vec![image(1)],
        tensors: vec![],
        nodes: vec![node(
            "softmax",
            &[ValueRef::Input(0)],
            vec![("dim", AttrValue::Int(1))],
        )],
        outputs: vec![ValueRef::Node(0)],
    }
}

/// A safetensors file: `x` of `dims` (a ramp) and, given, `y` (f32 labels, `[N]`).
fn tensors(dims: &[usize], labels: Option<&[f32]>) -> Vec<u8> {
    let n: usize = dims.iter().product();
    let x: Vec<u8> = (0..n)
        .flat_map(|i| ((i % 17) as f32 / 17.0).to_le_bytes())
        .collect();
    let y: Vec<u8> = labels
        .unwrap_or_default()
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let mut views = Vec::new();
    if let Ok(v) = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, dims.to_vec(), &x) {
        views.push(("x", v));
    }
    if let Some(l) = labels {
        if let Ok(v) = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![l.len()], &y) {
            views.push(("y", v));
        }
    }
    safetensors::serialize(views, None).unwrap_or_default()
}

/// Whether `args` ask `train` for more than [`MAX_STEPS`] steps.
fn too_many_steps(args: &[String]) -> bool {
    let over = |v: &str| v.trim().parse::<u64>().is_ok_and(|n| n > MAX_STEPS);
    args.iter()
        .enumerate()
        .any(|(i, a)| match a.strip_prefix("--steps") {
            Some("") => args.get(i + 1).is_some_and(|v| over(v)),
            Some(v) => over(v.trim_start_matches('=')),
            None => false,
        })
}

/// Fuzzes the parser and the handlers: `data` is one argument a line (at most 24), the
/// program name added in front. Paths are relative (a `/` becomes `_`), so a command
/// reads and writes only the scratch folder's seed files and its own outputs.
pub fn cli_args(data: &[u8]) {
    let dir = scratch();
    let text = String::from_utf8_lossy(data);
    let mut args: Vec<String> = vec!["torchlet".into()];
    args.extend(text.split('\n').take(24).map(|a| a.replace(['/', '\\'], "_")));
    if too_many_steps(&args) || std::env::current_dir().ok().as_deref() != Some(dir) {
        return;
    }
    let _ = crate::run_within(&args, CAP);
}

/// Fuzzes model files end to end: the first byte is a mode (bit 0: re-seal the length
/// and CRC, so mutations reach the checks past it; bit 1: also `train`), the rest the
/// model file, run through `info`, `plan`, `run`, `train` and `export` with the budgets
/// of [`CAP`], on an input sized from the file's own input spec.
pub fn model_file_commands(data: &[u8]) {
    let dir = scratch();
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut b = rest.to_vec();
    if mode & 1 == 1 && b.len() >= 28 {
        let n = b.len() as u32;
        b[8..12].copy_from_slice(&n.to_le_bytes());
        let body = b.len() - 4;
        let crc = torchlet::io::crc32(&b[..body]);
        b[body..].copy_from_slice(&crc.to_le_bytes());
    }
    // An input of the file's own shape (free dims 8 or their minimum, up to 64).
    let dims: Vec<usize> = match ModelFile::parse(&b) {
        Ok(f) => match f.inputs().next() {
            Some(i) => i
                .dims()
                .iter()
                .map(|d| match *d {
                    DimSpec::Fixed(n) => n,
                    DimSpec::Free { min } => min.max(8),
                })
                .collect(),
            None => vec![2, 1, 8, 8],
        },
        Err(_) => vec![2, 1, 8, 8],
    };
    if !(3..=4).contains(&dims.len()) || dims.iter().any(|&d| d == 0 || d > 64) {
        return;
    }
    let p = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let (model, input, data_file) = (
        p("fuzz.tlm"),
        p("fuzz.in.safetensors"),
        p("fuzz.data.safetensors"),
    );
    let mut two = dims.clone();
    two[0] = 2;
    if std::fs::write(&model, &b).is_err()
        || std::fs::write(&input, tensors(&dims, None)).is_err()
        || std::fs::write(&data_file, tensors(&two, Some(&[0.0, 1.0]))).is_err()
    {
        return;
    }
    let size: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    let size = size.join("x");
    let (out, trained) = (p("fuzz.out.safetensors"), p("fuzz.trained.tlm"));
    let mut commands: Vec<Vec<&str>> = vec![
        vec!["info", &model, "--input", &size],
        vec!["plan", &model, "--input", &size, "--train", "--budget", "64KiB"],
        vec!["run", &model, &input, &out],
        vec!["export", &model, &out],
    ];
    if mode & 2 == 2 {
        let _ = std::fs::remove_file(&trained);
        commands.push(vec![
            "train", &model, &data_file, "--lr", "0.01", "--steps", "2", "--batch", "2", "-o", &trained,
        ]);
        commands.push(vec!["export", &trained, &out]);
    }
    for c in commands {
        let _ = crate::run_within(std::iter::once("torchlet").chain(c), CAP);
    }
}
