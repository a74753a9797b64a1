//! Hostile model files (issue 38): a file that `encode` would never write but whose
//! checksum was sealed again (two tensors of one name, a pad or a stride
//! mutated past what any op records, a NaN scale factor) is refused by
//! `ModelFile::parse`, naming the tensor or node; `encode` refuses the same specs; the
//! values at the limits still load and run.

use torchlet::model::spec::{AttrValue, GraphSpec, InputSpec, NodeSpec, TensorSpec};
use torchlet::model::{encode, DimSpec, Model, ModelFile, Site, TensorKind, ValueRef};
use torchlet::{Error, Graph, PadMode, PadParams};

const TAPE: usize = 32;

fn node(op: &str, name: &str, inputs: &[ValueRef], attrs: Vec<(&str, AttrValue)>) -> NodeSpec {
    NodeSpec {
        op: op.into(),
        name: name.into(),
        inputs: inputs.iter().map(|&r| Some(r)).collect(),
        attrs: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    }
}

/// pad -> conv2d (weight "wa", bias "wb") -> interpolate -> relu, nodes "p", "c",
/// "u", "r".
fn spec(pad: [i64; 4]) -> GraphSpec {
    use ValueRef::{Input as I, Node as N, Tensor as T};
    let tensor = |name: &str, dims: Vec<usize>| TensorSpec {
        name: name.into(),
        kind: TensorKind::Param { trainable: true },
        data: vec![0.1; dims.iter().product()],
        dims,
        int8: None,
    };
    GraphSpec {
        inputs: vec![InputSpec {
            name: "x".into(),
            dims: vec![
                DimSpec::Free { min: 1 },
                DimSpec::Fixed(1),
                DimSpec::Free { min: 3 },
                DimSpec::Free { min: 3 },
            ],
        }],
        tensors: vec![tensor("wa", vec![2, 1, 3, 3]), tensor("wb", vec![2])],
        nodes: vec![
            node("pad", "p", &[I(0)], vec![("pad", AttrValue::Ints(pad.to_vec()))]),
            node(
                "conv2d",
                "c",
                &[N(0), T(0), T(1)],
                vec![("stride", AttrValue::Ints(vec![1, 1]))],
            ),
            node(
                "interpolate",
                "u",
                &[N(1)],
                vec![("scale_factor", AttrValue::Floats(vec![2.0, 2.0]))],
            ),
            node("relu", "r", &[N(2)], vec![]),
        ],
        outputs: vec![N(3)],
    }
}

/// The checksum (and length) sealed again after an edit, as an attacker would.
fn reseal(v: &mut [u8]) {
    let n = v.len();
    v[8..12].copy_from_slice(&(n as u32).to_le_bytes());
    let crc = torchlet::io::crc32(&v[..n - 4]);
    v[n - 4..].copy_from_slice(&crc.to_le_bytes());
}

/// `from` replaced by `to` (same length) at its only place in `bytes`, resealed.
fn edit(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let at: Vec<usize> = (0..=bytes.len() - from.len())
        .filter(|&i| &bytes[i..i + from.len()] == from)
        .collect();
    assert_eq!(at.len(), 1, "{from:?} must occur once");
    let mut v = bytes.to_vec();
    v[at[0]..at[0] + to.len()].copy_from_slice(to);
    reseal(&mut v);
    v
}

fn ints(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn floats(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Runs the file's forward at 1x1x5x5 (a meta graph: only shapes and bytes).
fn forward(bytes: &[u8]) -> Result<Vec<usize>, Error> {
    let mut g: Graph<f32, TAPE> = Graph::meta(usize::MAX);
    let m = Model::new(&mut g, ModelFile::parse(bytes)?)?;
    let x = g.input(&[1, 1, 5, 5], &[])?;
    let y = m.forward(&mut g, &[x])?;
    Ok(g.shape(y)?.dims().to_vec())
}

#[test]
fn two_tensors_of_one_name_are_refused_at_parse_naming_the_second() {
    let good = encode(&spec([1, 1, 1, 1])).unwrap();
    assert_eq!(forward(&good).unwrap(), [1, 2, 10, 10]);
    let bad = edit(&good, b"wb", b"wa");
    let e = ModelFile::parse(&bad).unwrap_err();
    assert_eq!(e.site, Site::Tensor { index: 1, name: "wa" });
    assert_eq!(
        e.to_string(),
        "tensor 1 \"wa\": corrupt data: model: two tensors have this name"
    );
    // encode refuses the spec the file would come from.
    let mut s = spec([1, 1, 1, 1]);
    s.tensors[1].name = "wa".into();
    assert_eq!(
        encode(&s).unwrap_err().site,
        Site::Tensor { index: 1, name: "wa" }
    );
}

#[test]
fn nodes_may_share_a_name_as_the_importer_gives_them() {
    // One ONNX node may become several (a Conv with asymmetric pads: a pad, then the
    // conv2d), which keep its name; node names are labels, tensor names are keys.
    let mut s = spec([1, 1, 1, 1]);
    s.nodes[1].name = "p".into();
    let bytes = encode(&s).unwrap();
    assert_eq!(forward(&bytes).unwrap(), [1, 2, 10, 10]);
    for n in &mut s.nodes {
        n.name.clear();
    }
    assert_eq!(forward(&encode(&s).unwrap()).unwrap(), [1, 2, 10, 10]);
}

#[test]
fn a_mutated_pad_attribute_is_refused_at_parse_naming_the_node() {
    let good = encode(&spec([1, 1, 1, 1])).unwrap();
    for v in [32768, -32769, 1 << 31, (1 << 32) + 1, i64::MAX, i64::MIN] {
        let bad = edit(&good, &ints(&[1, 1, 1, 1]), &ints(&[1, v, 1, 1]));
        let e = ModelFile::parse(&bad).unwrap_err();
        assert_eq!(
            e.site,
            Site::Node {
                index: 0,
                op: "pad",
                name: "p"
            },
            "{v}"
        );
        assert_eq!(
            e.to_string(),
            format!("node 0 (pad \"p\"): model attribute: pad must be four values in -32768..=32767; value (got {v})")
        );
        // And encode refuses it too.
        assert!(encode(&spec([1, v, 1, 1])).is_err());
    }
    // The limits themselves load; the crop of -2 runs.
    for (pad, dims) in [([1, 1, 1, 1], [1, 2, 10, 10]), ([-1, 0, 0, -1], [1, 2, 4, 4])] {
        let bytes = encode(&spec(pad)).unwrap();
        assert_eq!(forward(&bytes).unwrap(), dims, "{pad:?}");
    }
    let edge = encode(&spec([32767, -32768, 0, 0])).unwrap();
    assert!(ModelFile::parse(&edge).is_ok());
}

#[test]
fn mutated_window_and_scale_attributes_are_refused_at_parse() {
    let good = encode(&spec([1, 1, 1, 1])).unwrap();
    for (from, to, want) in [
        (ints(&[1, 1]), ints(&[1, 65536]), "node 1 (conv2d \"c\"): model attribute: a window parameter (stride, padding, dilation, kernel_size, output_padding) must be one or two values in 0..=65535; value (got 65536)"),
        (ints(&[1, 1]), ints(&[-1, 1]), "node 1 (conv2d \"c\"): model attribute: a window parameter (stride, padding, dilation, kernel_size, output_padding) must be one or two values in 0..=65535; value (got -1)"),
        (floats(&[2.0, 2.0]), floats(&[2.0, f64::NAN]), "node 2 (interpolate \"u\"): model attribute: scale_factor must be finite and positive; value (got NaN)"),
        (floats(&[2.0, 2.0]), floats(&[-2.0, 2.0]), "node 2 (interpolate \"u\"): model attribute: scale_factor must be finite and positive; value (got -2)"),
        (floats(&[2.0, 2.0]), floats(&[f64::INFINITY, 2.0]), "node 2 (interpolate \"u\"): model attribute: scale_factor must be finite and positive; value (got inf)"),
    ] {
        // The attribute's value follows its name.
        let name: &[u8] = if from.len() == 16 && want.contains("conv2d") { b"stride" } else { b"scale_factor" };
        let bad = edit(&good, &[name, &from].concat(), &[name, &to].concat());
        assert_eq!(ModelFile::parse(&bad).unwrap_err().to_string(), want);
    }
}

#[test]
fn the_pad_op_refuses_what_it_cannot_record_with_or_without_gradients() {
    let mut arena = vec![0.0f32; 4096];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let x = g.input(&[1, 1, 2, 2], &[1.0; 4]).unwrap();
    let big = PadParams {
        pad: [0, 40_000, 0, 0],
        mode: PadMode::Constant,
        value: 0.0,
    };
    let e = g.pad(x, big).unwrap_err();
    assert_eq!(
        e.to_string(),
        "pad: each pad must be in -32768..=32767; pad (got 40000)"
    );
    let xg = g.input_with_grad(&[1, 1, 2, 2], &[1.0; 4]).unwrap();
    assert_eq!(g.pad(xg, big).unwrap_err(), e);
    // Nothing was allocated by the refusals: the graph goes on.
    let ok = PadParams {
        pad: [1, 0, 0, 1],
        ..big
    };
    let y = g.pad(x, ok).unwrap();
    assert_eq!(g.shape(y).unwrap().dims(), &[1, 1, 3, 3]);
}
