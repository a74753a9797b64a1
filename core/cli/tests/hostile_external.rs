//! Hostile ONNX files through `torchlet convert`, end to end through the built binary:
//! external data that points outside the model's folder (an absolute path, `../`, a
//! symlink, `/proc/self/environ`), at a FIFO or a device, past the end of its file or
//! with a huge declared length are refused quickly, naming the tensor and the location,
//! and write nothing; initializers over two external files convert exactly as from one;
//! duplicate names and graphs the engine refuses at every size are refused at convert,
//! naming what is wrong. The models are built here with onnx-protobuf: one `Conv`
//! (weight and bias as initializers) over an input `[1, C, H, W]` with free H and W.

use onnx_protobuf::{
    attribute_proto::AttributeType, tensor_proto::DataLocation, tensor_shape_proto::dimension,
    tensor_shape_proto::Dimension, type_proto, AttributeProto, GraphProto, Message, ModelProto, NodeProto,
    OperatorSetIdProto, StringStringEntryProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a refusal may take: far more than it does (milliseconds), far less than a
/// read that blocks or runs through `/dev/zero`.
const QUICK: Duration = Duration::from_secs(20);

/// A fresh folder `<tag>/model` (the model's) inside a fresh `<tag>` that also holds
/// `secret.bin`, 256 bytes (more than the test conv's weight takes) that a model must
/// never be able to read.
fn folders(tag: &str) -> (PathBuf, PathBuf) {
    let top = std::env::temp_dir().join(format!("torchlet-hostile-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&top);
    let model = top.join("model");
    std::fs::create_dir_all(&model).unwrap();
    std::fs::write(top.join("secret.bin"), [0x5au8; 256]).unwrap();
    (top, model)
}

/// `torchlet convert model out`, killed if it takes longer than [`QUICK`]: (success,
/// stderr, seconds taken).
fn convert(model: &Path, out: &Path) -> (bool, String, f64) {
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_torchlet"))
        .arg("convert")
        .arg(model)
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > QUICK {
            let _ = child.kill();
            let _ = child.wait();
            panic!("convert {} did not finish in {QUICK:?}", model.display());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    (o.status.success(), err, start.elapsed().as_secs_f64())
}

/// Converting `model` must fail with every one of `words` in the message, quickly,
/// and write no output file.
fn refused(model: &Path, words: &[&str]) -> String {
    let out = model.with_extension("tlm");
    let (ok, err, secs) = convert(model, &out);
    assert!(!ok, "{} converted", model.display());
    for w in words {
        assert!(err.contains(w), "{w:?} missing from: {err}");
    }
    assert!(secs < QUICK.as_secs_f64());
    assert!(!out.exists(), "an output was written");
    err
}

/// A new file name `dir/<stem><k>.onnx`: every case keeps its own file (so that a run
/// leaves them all behind, to try on another build).
fn fresh(dir: &Path, stem: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    dir.join(format!("{stem}{}.onnx", NEXT.fetch_add(1, Ordering::Relaxed)))
}

/// A float tensor with inline data.
fn inline(name: &str, dims: &[i64], data: &[f32]) -> TensorProto {
    let mut t = TensorProto::new();
    t.name = name.into();
    t.dims = dims.to_vec();
    t.data_type = 1;
    t.raw_data = data.iter().flat_map(|v| v.to_le_bytes()).collect();
    t
}

/// A float tensor of `dims` whose data is external: `location`, `offset`, `length`
/// (absent when `None`).
fn external(name: &str, dims: &[i64], location: &str, offset: u64, length: Option<u64>) -> TensorProto {
    let mut t = TensorProto::new();
    t.name = name.into();
    t.dims = dims.to_vec();
    t.data_type = 1;
    t.data_location = DataLocation::EXTERNAL.into();
    let mut entry = |k: &str, v: String| {
        let mut e = StringStringEntryProto::new();
        e.key = k.into();
        e.value = v;
        t.external_data.push(e);
    };
    entry("location", location.into());
    entry("offset", offset.to_string());
    if let Some(n) = length {
        entry("length", n.to_string());
    }
    t
}

fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = AttributeType::INTS.into();
    a.ints = v.to_vec();
    a
}

fn int_attr(name: &str, v: i64) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = AttributeType::INT.into();
    a.i = v;
    a
}

fn node(op: &str, name: &str, inputs: &[&str], output: &str, attrs: Vec<AttributeProto>) -> NodeProto {
    let mut n = NodeProto::new();
    n.op_type = op.into();
    n.name = name.into();
    n.input = inputs.iter().map(|s| s.to_string()).collect();
    n.output = vec![output.into()];
    n.attribute = attrs;
    n
}

/// A float value `[1, c, "H", "W"]` (graph inputs and outputs).
fn value(name: &str, c: i64) -> ValueInfoProto {
    let dim = |v: dimension::Value| {
        let mut d = Dimension::new();
        d.value = Some(v);
        d
    };
    let mut shape = TensorShapeProto::new();
    shape.dim = vec![
        dim(dimension::Value::DimValue(1)),
        dim(dimension::Value::DimValue(c)),
        dim(dimension::Value::DimParam("H".into())),
        dim(dimension::Value::DimParam("W".into())),
    ];
    let mut tt = type_proto::Tensor::new();
    tt.elem_type = 1;
    tt.shape = Some(shape).into();
    let mut ty = TypeProto::new();
    ty.value = Some(type_proto::Value::TensorType(tt));
    let mut v = ValueInfoProto::new();
    v.name = name.into();
    v.type_ = Some(ty).into();
    v
}

/// A model over input `x` (`c` channels) whose last node writes `y`.
fn graph(c: i64, inits: Vec<TensorProto>, nodes: Vec<NodeProto>) -> Vec<u8> {
    let mut g = GraphProto::new();
    g.name = "hostile".into();
    g.input = vec![value("x", c)];
    g.output = vec![value("y", 1)];
    g.initializer = inits;
    g.node = nodes;
    let mut m = ModelProto::new();
    m.ir_version = 8;
    let mut op = OperatorSetIdProto::new();
    op.version = 17;
    m.opset_import = vec![op];
    m.graph = Some(g).into();
    m.write_to_bytes().unwrap()
}

/// The test's conv: 2 input channels, 3 outputs, 3x3 kernel, padding 1.
const W_DIMS: [i64; 4] = [3, 2, 3, 3];
const W_BYTES: u64 = 3 * 2 * 3 * 3 * 4;

fn weight_values() -> Vec<f32> {
    (0..54).map(|i| (i as f32 - 27.0) / 40.0).collect()
}

fn bias_values() -> Vec<f32> {
    vec![0.5, -0.25, 0.125]
}

fn le(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn conv(inputs: &[&str]) -> NodeProto {
    node(
        "Conv",
        "conv",
        inputs,
        "y",
        vec![ints_attr("pads", &[1, 1, 1, 1])],
    )
}

/// The conv model with weight `w` (and the inline bias), written as `dir/model.onnx`.
fn conv_model(dir: &Path, w: TensorProto) -> PathBuf {
    let b = inline("conv.bias", &[3], &bias_values());
    let path = fresh(dir, "model");
    std::fs::write(
        &path,
        graph(2, vec![w, b], vec![conv(&["x", "conv.weight", "conv.bias"])]),
    )
    .unwrap();
    path
}

/// The conv model whose weight is external at `location` (offset 0, its true length).
fn weight_at(dir: &Path, location: &str) -> PathBuf {
    conv_model(dir, external("conv.weight", &W_DIMS, location, 0, Some(W_BYTES)))
}

#[test]
fn absolute_location_is_refused() {
    let (top, model) = folders("absolute");
    let secret = top.join("secret.bin");
    let m = weight_at(&model, secret.to_str().unwrap());
    refused(
        &m,
        &[
            "absolute path not allowed",
            "conv.weight",
            secret.to_str().unwrap(),
        ],
    );
}

#[test]
fn dot_dot_escape_is_refused() {
    let (_top, model) = folders("dotdot");
    let m = weight_at(&model, "../secret.bin");
    refused(
        &m,
        &[
            "external data path escapes model directory",
            "conv.weight",
            "../secret.bin",
        ],
    );
}

#[test]
fn symlink_leading_out_is_refused() {
    let (top, model) = folders("symlink");
    std::os::unix::fs::symlink(top.join("secret.bin"), model.join("weights.bin")).unwrap();
    let m = weight_at(&model, "weights.bin");
    refused(&m, &["external data path escapes model directory", "weights.bin"]);
    // A symlinked folder leading out too.
    std::os::unix::fs::symlink(&top, model.join("up")).unwrap();
    let m = weight_at(&model, "up/secret.bin");
    refused(
        &m,
        &["external data path escapes model directory", "up/secret.bin"],
    );
}

#[test]
fn proc_self_environ_is_refused() {
    let (_top, model) = folders("environ");
    let m = weight_at(&model, "/proc/self/environ");
    refused(&m, &["absolute path not allowed", "/proc/self/environ"]);
    std::os::unix::fs::symlink("/proc/self/environ", model.join("env.bin")).unwrap();
    let m = weight_at(&model, "env.bin");
    refused(&m, &["external data path escapes model directory", "env.bin"]);
}

#[test]
fn fifo_is_refused_without_blocking() {
    let (_top, model) = folders("fifo");
    let made = Command::new("mkfifo")
        .arg(model.join("pipe.bin"))
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo");
    let m = weight_at(&model, "pipe.bin");
    refused(&m, &["is not a regular file", "conv.weight", "pipe.bin"]);
}

#[test]
fn device_file_is_refused() {
    let (_top, model) = folders("device");
    let m = weight_at(&model, "/dev/zero");
    refused(&m, &["absolute path not allowed", "/dev/zero"]);
    std::os::unix::fs::symlink("/dev/zero", model.join("zero.bin")).unwrap();
    let m = weight_at(&model, "zero.bin");
    refused(&m, &["external data path escapes model directory", "zero.bin"]);
    // Neither a folder inside the model's.
    std::fs::create_dir(model.join("dir.bin")).unwrap();
    let m = weight_at(&model, "dir.bin");
    refused(&m, &["is not a regular file", "dir.bin"]);
}

#[test]
fn offset_and_length_past_the_end_are_refused() {
    let (_top, model) = folders("past-end");
    std::fs::write(model.join("w.bin"), le(&weight_values())).unwrap();
    let m = conv_model(
        &model,
        external("conv.weight", &W_DIMS, "w.bin", 8, Some(W_BYTES)),
    );
    refused(
        &m,
        &[
            "bytes 8..224 are past the end of the file (216 bytes)",
            "conv.weight",
        ],
    );
    let m = conv_model(&model, external("conv.weight", &W_DIMS, "w.bin", 1 << 62, None));
    refused(&m, &["past the end of the file (216 bytes)", "w.bin"]);
}

#[test]
fn huge_declared_length_is_refused_before_any_allocation() {
    let (_top, model) = folders("huge");
    std::fs::write(model.join("w.bin"), le(&weight_values())).unwrap();
    let m = conv_model(
        &model,
        external("conv.weight", &W_DIMS, "w.bin", 0, Some(1 << 62)),
    );
    refused(
        &m,
        &["declares 4611686018427387904 bytes", "take 216", "conv.weight"],
    );
}

#[test]
fn two_external_files_convert_exactly_as_one_and_as_inline_data() {
    let (_top, model) = folders("two-files");
    let (w, b) = (le(&weight_values()), le(&bias_values()));
    let out = |name: &str| model.join(name);
    let write = |name: &str, inits: Vec<TensorProto>| {
        let path = out(name);
        let bytes = graph(2, inits, vec![conv(&["x", "conv.weight", "conv.bias"])]);
        std::fs::write(&path, bytes).unwrap();
        let tlm = path.with_extension("tlm");
        let (ok, err, _) = convert(&path, &tlm);
        assert!(ok, "{name}: {err}");
        std::fs::read(tlm).unwrap()
    };
    std::fs::write(out("w.bin"), &w).unwrap();
    std::fs::write(out("b.bin"), &b).unwrap();
    std::fs::write(out("one.bin"), [w.clone(), b.clone()].concat()).unwrap();
    let two = write(
        "two.onnx",
        vec![
            external("conv.weight", &W_DIMS, "w.bin", 0, Some(W_BYTES)),
            external("conv.bias", &[3], "b.bin", 0, None),
        ],
    );
    let one = write(
        "one.onnx",
        vec![
            external("conv.weight", &W_DIMS, "one.bin", 0, Some(W_BYTES)),
            external("conv.bias", &[3], "one.bin", W_BYTES, Some(12)),
        ],
    );
    let plain = write(
        "inline.onnx",
        vec![
            inline("conv.weight", &W_DIMS, &weight_values()),
            inline("conv.bias", &[3], &bias_values()),
        ],
    );
    assert_eq!(two, one);
    assert_eq!(two, plain);
}

#[test]
fn duplicate_names_are_refused_naming_them() {
    let (_top, model) = folders("duplicates");
    let (w, b) = (
        inline("conv.weight", &W_DIMS, &weight_values()),
        inline("conv.bias", &[3], &bias_values()),
    );
    // Two initializers named conv.weight: the second would silently replace the first.
    let bytes = graph(
        2,
        vec![w.clone(), inline("conv.weight", &[3], &bias_values()), b.clone()],
        vec![conv(&["x", "conv.weight", "conv.bias"])],
    );
    let path = fresh(&model, "dup");
    std::fs::write(&path, bytes).unwrap();
    refused(
        &path,
        &["\"conv.weight\" is used as an initializer name more than once"],
    );
    // Two nodes writing y.
    let relu = node("Relu", "relu", &["x"], "y", vec![]);
    let bytes = graph(
        2,
        vec![w.clone(), b.clone()],
        vec![relu, conv(&["x", "conv.weight", "conv.bias"])],
    );
    let path = fresh(&model, "dup");
    std::fs::write(&path, bytes).unwrap();
    refused(
        &path,
        &[
            "node 1 (Conv \"conv\")",
            "its output \"y\" is already the output of node 0",
        ],
    );
    // A node output that redefines an initializer.
    let relu = node("Relu", "relu", &["x"], "conv.bias", vec![]);
    let bytes = graph(
        2,
        vec![w.clone(), b.clone()],
        vec![relu, conv(&["x", "conv.weight", "conv.bias"])],
    );
    let path = fresh(&model, "dup");
    std::fs::write(&path, bytes).unwrap();
    refused(
        &path,
        &[
            "node 0 (Relu \"relu\")",
            "\"conv.bias\" is already an initializer",
        ],
    );
    // Two nodes of one name.
    let relu = node("Relu", "conv", &["x"], "r", vec![]);
    let bytes = graph(
        2,
        vec![w, b],
        vec![relu, conv(&["r", "conv.weight", "conv.bias"])],
    );
    let path = fresh(&model, "dup");
    std::fs::write(&path, bytes).unwrap();
    refused(&path, &["node 1 (Conv \"conv\")", "node 0 has the same name"]);
}

/// The initializers and the node of a one-node model.
type Case = (Vec<TensorProto>, NodeProto);

/// A model of one node `op` named `bad` over `c` input channels, written to `dir`.
fn one_node(dir: &Path, c: i64, inits: Vec<TensorProto>, n: NodeProto) -> PathBuf {
    let path = fresh(dir, &n.op_type);
    std::fs::write(&path, graph(c, inits, vec![n])).unwrap();
    path
}

#[test]
fn graphs_the_engine_refuses_at_every_size_are_refused_at_convert_naming_the_node() {
    let (_top, model) = folders("bad-graph");
    let values = |n: usize| vec![0.25f32; n];
    let conv_with = |w_dims: &[i64], b: Option<usize>, attrs: Vec<AttributeProto>| {
        let n: i64 = w_dims.iter().product();
        let mut inits = vec![inline("w", w_dims, &values(n as usize))];
        let mut ins = vec!["x", "w"];
        if let Some(k) = b {
            inits.push(inline("b", &[k as i64], &values(k)));
            ins.push("b");
        }
        (inits, node("Conv", "bad", &ins, "y", attrs))
    };
    let cases: Vec<(&str, i64, Case, &str)> = vec![
        // 3 input channels in groups of 2.
        (
            "groups not dividing the input channels",
            3,
            conv_with(&[4, 1, 3, 3], None, vec![int_attr("group", 2)]),
            "groups must divide input and output channels",
        ),
        // 3 groups of one input channel each, but 4 output channels.
        (
            "groups not dividing the output channels",
            3,
            conv_with(&[4, 1, 3, 3], None, vec![int_attr("group", 3)]),
            "groups must divide input and output channels",
        ),
        (
            "a bias of the wrong length",
            2,
            conv_with(&[3, 2, 3, 3], Some(5), vec![]),
            "bias has 5 values, the layer has 3 output channels",
        ),
        (
            "a 0x0 kernel",
            2,
            conv_with(&[3, 2, 0, 0], None, vec![]),
            "conv2d",
        ),
        (
            "padding past what the engine records (the importer refuses it already)",
            2,
            conv_with(&[3, 2, 3, 3], None, vec![ints_attr("pads", &[70000; 4])]),
            "exceed 65535",
        ),
    ];
    let pool = |pads: i64| {
        let attrs = vec![ints_attr("kernel_shape", &[2, 2]), ints_attr("pads", &[pads; 4])];
        (vec![], node("MaxPool", "bad", &["x"], "y", attrs))
    };
    let cases = cases.into_iter().chain([(
        "pool pads at least the kernel",
        2,
        pool(2),
        "padding must be at most half the kernel size",
    )]);
    for (what, c, (inits, n), words) in cases {
        let path = one_node(&model, c, inits, n.clone());
        let e = refused(&path, &[&format!("node 0 ({} \"bad\")", n.op_type), words]);
        assert!(!e.contains("no input size"), "{what}: {e}");
    }
    // A pool padded by half its kernel is fine (PyTorch's limit).
    let (inits, n) = pool(1);
    let path = one_node(&model, 2, inits, n);
    let (ok, err, _) = convert(&path, &path.with_extension("tlm"));
    assert!(ok, "{err}");
}
