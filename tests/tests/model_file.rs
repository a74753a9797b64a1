//! The model file's checks: a writer made from the layout table in the docs of
//! `torchlet::model` alone writes the same bytes as `encode`; every truncation, every
//! single-byte corruption and every hand-made bad file (valid checksum, broken
//! content) is an error naming what is wrong, never a panic; a model with several
//! outputs, shared values and every attribute type runs as the same ops called
//! directly.

use torchlet::model::spec::{AttrValue, GraphSpec, InputSpec, NodeSpec, TensorSpec};
use torchlet::model::{check_spec, encode, DimSpec, Model, ModelFile, TensorKind, ValueRef};
use torchlet::{Error, Graph, InterpMode, PadMode, PadParams};

const TAPE: usize = 32;

fn node(op: &str, name: &str, inputs: &[ValueRef], attrs: Vec<(&str, AttrValue)>) -> NodeSpec {
    NodeSpec {
        op: op.into(),
        name: name.into(),
        inputs: inputs.iter().map(|&r| Some(r)).collect(),
        attrs: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    }
}

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 + seed) % 13) as f32 / 13.0 - 0.4)
        .collect()
}

/// conv2d -> leaky_relu -> add (residual: the conv output read twice) -> pad
/// (reflect) -> interpolate (bilinear) -> softmax; outputs the softmax and the add.
fn small() -> GraphSpec {
    use ValueRef::{Input as I, Node as N, Tensor as T};
    let tensor = |name: &str, kind, dims: Vec<usize>, seed| TensorSpec {
        name: name.into(),
        kind,
        data: values(dims.iter().product(), seed),
        dims,
        int8: None,
    };
    GraphSpec {
        inputs: vec![InputSpec {
            name: "x".into(),
            dims: vec![
                DimSpec::Free { min: 1 },
                DimSpec::Fixed(2),
                DimSpec::Free { min: 3 },
                DimSpec::Free { min: 3 },
            ],
        }],
        tensors: vec![
            tensor(
                "conv.weight",
                TensorKind::Param { trainable: true },
                vec![3, 2, 3, 3],
                1,
            ),
            tensor("conv.bias", TensorKind::Param { trainable: false }, vec![3], 2),
            tensor("bn.running_mean", TensorKind::Buffer, vec![3], 3),
        ],
        nodes: vec![
            node(
                "conv2d",
                "conv",
                &[I(0), T(0), T(1)],
                vec![("padding", AttrValue::Ints(vec![1, 1]))],
            ),
            node(
                "leaky_relu",
                "act",
                &[N(0)],
                vec![("negative_slope", AttrValue::Float(0.2))],
            ),
            node("add", "res", &[N(1), N(0)], vec![]),
            node(
                "pad",
                "pad",
                &[N(2)],
                vec![
                    ("pad", AttrValue::Ints(vec![1, 1, 2, 0])),
                    ("mode", AttrValue::Str("reflect".into())),
                ],
            ),
            node(
                "interpolate",
                "up",
                &[N(3)],
                vec![
                    ("size", AttrValue::Ints(vec![7, 6])),
                    ("mode", AttrValue::Str("bilinear".into())),
                    ("align_corners", AttrValue::Flag(true)),
                ],
            ),
            node("softmax", "sm", &[N(4)], vec![("dim", AttrValue::Int(-1))]),
        ],
        outputs: vec![N(5), N(2)],
    }
}

#[test]
fn a_model_with_shared_values_two_outputs_and_every_attribute_kind_runs_as_direct_calls() {
    let spec = small();
    let bytes = encode(&spec).unwrap();
    for (h, w) in [(3, 3), (5, 4)] {
        let x = values(2 * 2 * h * w, 5);
        let mut arena = vec![0.0f32; 16 * 1024];
        let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
        let m = Model::new(&mut g, ModelFile::parse(&bytes).unwrap()).unwrap();
        let xi = g.input(&[2, 2, h, w], &x).unwrap();
        let mut outs = [xi; 2];
        m.forward_into(&mut g, &[xi], &mut outs).unwrap();
        let got: Vec<Vec<f32>> = outs.iter().map(|&t| g.data(t).unwrap().to_vec()).collect();
        // The same ops called directly (the bias and buffer are frozen copies).
        let mut arena2 = vec![0.0f32; 16 * 1024];
        let mut d: Graph<f32, TAPE> = Graph::new(&mut arena2);
        let wt = d.param(&[3, 2, 3, 3]).unwrap();
        d.param_data_mut(wt)
            .unwrap()
            .copy_from_slice(&spec.tensors[0].data);
        let b = d.buffer(&[3]).unwrap();
        d.param_data_mut(b)
            .unwrap()
            .copy_from_slice(&spec.tensors[1].data);
        let xi = d.input(&[2, 2, h, w], &x).unwrap();
        let c = d
            .conv2d(xi, wt, Some(b), torchlet::Conv2dParams::padded(1))
            .unwrap();
        let a = d.leaky_relu(c, 0.2).unwrap();
        let r = d.add(a, c).unwrap();
        let p = PadParams {
            pad: [1, 1, 2, 0],
            mode: PadMode::Reflect,
            value: 0.0,
        };
        let pd = d.pad(r, p).unwrap();
        let up = d
            .interpolate(pd, [7, 6], InterpMode::Bilinear { align_corners: true })
            .unwrap();
        let sm = d.softmax(up, -1).unwrap();
        assert_eq!(got[0], d.data(sm).unwrap());
        assert_eq!(got[1], d.data(r).unwrap());
        assert_eq!(g.shape(outs[0]).unwrap().dims(), &[2, 3, 7, 6]);
        // Backward through both outputs' users works and reaches the trained weight only.
        let loss = g.mean(outs[0], &[], false).unwrap();
        g.backward(loss).unwrap();
        assert!(g.grad(m.param(0).unwrap()).unwrap().is_some());
        assert!(g.grad(m.param(1).unwrap()).unwrap().is_none());
    }
}

// ---- an independent writer, from the layout table in the docs -----------------------

fn pad4(v: &mut Vec<u8>) {
    while !v.len().is_multiple_of(4) {
        v.push(0);
    }
}

fn input_rec(name: &str, dims: &[(u32, u32)]) -> Vec<u8> {
    let mut v = vec![dims.len() as u8, name.len() as u8, 0, 0];
    for &(kind, size) in dims {
        v.extend(kind.to_le_bytes());
        v.extend(size.to_le_bytes());
    }
    v.extend(name.as_bytes());
    pad4(&mut v);
    v
}

fn tensor_rec(name: &str, kind: u8, dims: &[u32], data: &[f32]) -> Vec<u8> {
    let mut v = vec![dims.len() as u8, kind];
    v.extend((name.len() as u16).to_le_bytes());
    for d in dims {
        v.extend(d.to_le_bytes());
    }
    v.extend(name.as_bytes());
    pad4(&mut v);
    for x in data {
        v.extend(x.to_le_bytes());
    }
    v
}

/// An int8 tensor record (kind 3): dims, the scales, the `i8`s, then `pad` as the
/// padding bytes.
fn int8_rec(name: &str, dims: &[u32], scales: &[f32], q: &[i8], pad: u8) -> Vec<u8> {
    let mut v = tensor_rec(name, 3, dims, scales);
    v.extend(q.iter().map(|&q| q as u8));
    while !v.len().is_multiple_of(4) {
        v.push(pad);
    }
    v
}

/// A value reference: kind (1 input, 2 tensor, 3 node) and index.
fn r(kind: u32, k: u32) -> u32 {
    (kind << 24) | k
}

fn node_rec(op: &str, name: &str, refs: &[u32], attrs: &[(u8, &str, Vec<u8>)]) -> Vec<u8> {
    let mut v = vec![refs.len() as u8, attrs.len() as u8, op.len() as u8, 0];
    v.extend((name.len() as u16).to_le_bytes());
    v.extend([0, 0]);
    for w in refs {
        v.extend(w.to_le_bytes());
    }
    v.extend(op.as_bytes());
    v.extend(name.as_bytes());
    pad4(&mut v);
    for (ty, an, val) in attrs {
        v.extend([*ty, an.len() as u8, 0, 0]);
        v.extend((val.len() as u32).to_le_bytes());
        v.extend(an.as_bytes());
        v.extend(val);
        pad4(&mut v);
    }
    v
}

/// Header, records, outputs and checksum.
fn file(counts: [u32; 3], records: &[Vec<u8>], outputs: &[u32]) -> Vec<u8> {
    let mut v = b"TLMD".to_vec();
    v.extend(1u16.to_le_bytes());
    v.extend(0u16.to_le_bytes());
    v.extend(0u32.to_le_bytes());
    for c in counts.into_iter().chain([outputs.len() as u32]) {
        v.extend(c.to_le_bytes());
    }
    for rec in records {
        v.extend(rec);
    }
    for o in outputs {
        v.extend(o.to_le_bytes());
    }
    reseal(&mut v, 4);
    v
}

/// Writes the length field and the checksum (`extra` bytes appended for it first).
fn reseal(v: &mut Vec<u8>, extra: usize) {
    v.resize(v.len() + extra, 0);
    let n = v.len();
    v[8..12].copy_from_slice(&(n as u32).to_le_bytes());
    let crc = torchlet::io::crc32(&v[..n - 4]);
    v[n - 4..].copy_from_slice(&crc.to_le_bytes());
}

/// A one-conv, one-relu file from the independent writer; `node1` replaces the relu.
fn hand_made(node1: Vec<u8>, outputs: &[u32]) -> Vec<u8> {
    let w = values(6 * 9, 1);
    file(
        [1, 2, 2],
        &[
            input_rec("x", &[(1, 1), (0, 2), (1, 3), (1, 3)]),
            tensor_rec("conv.weight", 1, &[3, 2, 3, 3], &w),
            tensor_rec("conv.bias", 0, &[3], &[0.5, -0.5, 0.25]),
            node_rec(
                "conv2d",
                "conv",
                &[r(1, 0), r(2, 0), r(2, 1)],
                &[(
                    2,
                    "padding",
                    [1i64, 1].iter().flat_map(|v| v.to_le_bytes()).collect(),
                )],
            ),
            node1,
        ],
        outputs,
    )
}

fn good() -> Vec<u8> {
    hand_made(node_rec("relu", "act", &[r(3, 0)], &[]), &[r(3, 1)])
}

#[test]
fn the_layout_table_is_what_encode_writes() {
    let spec = GraphSpec {
        inputs: vec![InputSpec {
            name: "x".into(),
            dims: vec![
                DimSpec::Free { min: 1 },
                DimSpec::Fixed(2),
                DimSpec::Free { min: 3 },
                DimSpec::Free { min: 3 },
            ],
        }],
        tensors: vec![
            TensorSpec {
                name: "conv.weight".into(),
                kind: TensorKind::Param { trainable: true },
                dims: vec![3, 2, 3, 3],
                data: values(54, 1),
                int8: None,
            },
            TensorSpec {
                name: "conv.bias".into(),
                kind: TensorKind::Param { trainable: false },
                dims: vec![3],
                data: vec![0.5, -0.5, 0.25],
                int8: None,
            },
        ],
        nodes: vec![
            node(
                "conv2d",
                "conv",
                &[ValueRef::Input(0), ValueRef::Tensor(0), ValueRef::Tensor(1)],
                vec![("padding", AttrValue::Ints(vec![1, 1]))],
            ),
            node("relu", "act", &[ValueRef::Node(0)], vec![]),
        ],
        outputs: vec![ValueRef::Node(1)],
    };
    assert_eq!(encode(&spec).unwrap(), good());
    assert_eq!(ModelFile::parse(&good()).unwrap().to_spec(), spec);
    let s = small();
    assert_eq!(ModelFile::parse(&encode(&s).unwrap()).unwrap().to_spec(), s);
    let g = good();
    let f = ModelFile::parse(&g).unwrap();
    assert_eq!(f.nodes().map(|n| n.op).collect::<Vec<_>>(), ["conv2d", "relu"]);
}

fn err(bytes: &[u8]) -> String {
    match ModelFile::parse(bytes) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn every_truncation_and_every_single_byte_corruption_is_refused() {
    for bytes in [good(), encode(&small()).unwrap()] {
        for n in 0..bytes.len() {
            assert!(
                ModelFile::parse(&bytes[..n]).is_err(),
                "prefix of {n} bytes accepted"
            );
        }
        for i in 0..bytes.len() {
            for mask in 1..=255u8 {
                let mut b = bytes.clone();
                b[i] ^= mask;
                assert!(ModelFile::parse(&b).is_err(), "byte {i} ^ {mask:#x} accepted");
            }
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(
            err(&long),
            "model file: corrupt data: model: bytes after the end of the file"
        );
        assert!(ModelFile::parse_prefix(&long).is_ok());
    }
}

#[test]
fn hand_made_files_with_a_valid_checksum_but_bad_content_name_the_place() {
    let relu = |refs: &[u32]| node_rec("relu", "act", refs, &[]);
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            hand_made(relu(&[r(3, 1)]), &[r(3, 1)]),
            "node 1 (relu \"act\"): corrupt data: model: node reads a node that does not come before it",
        ),
        (
            hand_made(relu(&[r(3, 7)]), &[r(3, 1)]),
            "node 1 (relu \"act\"): corrupt data: model: node reads a node that does not come before it",
        ),
        (
            hand_made(relu(&[r(2, 2)]), &[r(3, 1)]),
            "node 1 (relu \"act\"): corrupt data: model: value reference past the inputs or tensors",
        ),
        (
            hand_made(relu(&[r(1, 1)]), &[r(3, 1)]),
            "node 1 (relu \"act\"): corrupt data: model: value reference past the inputs or tensors",
        ),
        (
            hand_made(relu(&[r(9, 0)]), &[r(3, 1)]),
            "node 1 (relu \"act\"): corrupt data: model: malformed value reference",
        ),
        (
            hand_made(node_rec("lstm", "rnn", &[r(3, 0)], &[]), &[r(3, 1)]),
            "node 1 (lstm \"rnn\"): corrupt data: model: unknown op name (not in OpSpec::ALL)",
        ),
        (
            hand_made(relu(&[r(3, 0), r(3, 0)]), &[r(3, 1)]),
            "node 1 (relu \"act\"): corrupt data: model: node has more inputs than its op takes",
        ),
        (
            hand_made(
                node_rec("relu", "act", &[r(3, 0)], &[(5, "inplace", vec![2])]),
                &[r(3, 1)],
            ),
            "node 1 (relu \"act\"): corrupt data: model: malformed attribute (type, length or value)",
        ),
        (
            hand_made(
                node_rec("relu", "act", &[r(3, 0)], &[(1, "k", vec![0; 7])]),
                &[r(3, 1)],
            ),
            "node 1 (relu \"act\"): corrupt data: model: malformed attribute (type, length or value)",
        ),
        (
            hand_made(
                node_rec("relu", "act", &[r(3, 0)], &[(9, "k", vec![0; 8])]),
                &[r(3, 1)],
            ),
            "node 1 (relu \"act\"): corrupt data: model: malformed attribute (type, length or value)",
        ),
        (
            hand_made(
                node_rec("relu", "act", &[r(3, 0)], &[(6, "mode", vec![0xff])]),
                &[r(3, 1)],
            ),
            "node 1 (relu \"act\"): corrupt data: model: malformed attribute (type, length or value)",
        ),
        (
            hand_made(
                node_rec("relu", "act", &[r(3, 0)], &[(5, "a", vec![1]), (5, "a", vec![0])]),
                &[r(3, 1)],
            ),
            "node 1 (relu \"act\"): corrupt data: model: attribute given twice",
        ),
        (
            hand_made(relu(&[r(3, 0)]), &[r(3, 2)]),
            "output 0: corrupt data: model: node reads a node that does not come before it",
        ),
        (
            hand_made(relu(&[r(3, 0)]), &[0]),
            "output 0: corrupt data: model: malformed value reference",
        ),
        (
            hand_made(relu(&[r(3, 0)]), &[]),
            "model file: corrupt data: model: the model has no output",
        ),
        (
            file(
                [0, 1, 0],
                &[tensor_rec("huge", 1, &[65536, 65536, 65536, 65536], &[])],
                &[r(2, 0)],
            ),
            "tensor 0 \"huge\": corrupt data: model: sizes overflow",
        ),
        (
            file(
                [0, 1, 0],
                &[tensor_rec("big", 1, &[1 << 30, 4], &[1.0])],
                &[r(2, 0)],
            ),
            "tensor 0 \"big\": corrupt data: model: record runs past the end or has non-zero reserved bytes",
        ),
        (
            file([0, 1, 0], &[tensor_rec("t", 7, &[1], &[1.0])], &[r(2, 0)]),
            "tensor 0 \"t\": corrupt data: model: tensor kind is not 0, 1, 2 or 3",
        ),
        (
            file(
                [0, 1, 0],
                &[tensor_rec("t", 1, &[1, 1, 1, 1, 1], &[1.0])],
                &[r(2, 0)],
            ),
            "tensor 0: corrupt data: model: rank above 4",
        ),
        (
            file(
                [1, 0, 0],
                &[input_rec(
                    "x",
                    &[(1, u32::MAX), (1, u32::MAX), (1, u32::MAX), (1, u32::MAX)],
                )],
                &[r(1, 0)],
            ),
            "input 0 \"x\": corrupt data: model: sizes overflow",
        ),
        (
            file([1, 0, 0], &[input_rec("x", &[(2, 1)])], &[r(1, 0)]),
            "input 0 \"x\": corrupt data: model: input dim kind is neither fixed (0) nor free (1)",
        ),
        (
            // More records than a graph's tape can index: refused before any is read.
            file([u32::MAX, 0, 0], &[], &[r(1, 0)]),
            "model file: corrupt data: model: more inputs, tensors and nodes than a graph's tape holds (65,534 records)",
        ),
        (
            file([0, 0, u32::MAX], &[], &[r(1, 0)]),
            "model file: corrupt data: model: more inputs, tensors and nodes than a graph's tape holds (65,534 records)",
        ),
        (
            file([0, 0, 65_534], &[], &[r(1, 0)]),
            "node 0: corrupt data: model: record runs past the end or has non-zero reserved bytes",
        ),
    ];
    for (k, (bytes, want)) in cases.iter().enumerate() {
        assert_eq!(&err(bytes), want, "case {k}");
    }
    // Int8 tensors (kind 3): one finite scale per output channel, then the values.
    let one = |rec: Vec<u8>| file([0, 1, 0], &[rec], &[r(2, 0)]);
    let q = [1i8, -2, 3, -127, 127, 0];
    assert!(ModelFile::parse(&one(int8_rec("w", &[2, 3], &[0.5, 0.25], &q, 0))).is_ok());
    let t = "tensor 0 \"w\": corrupt data: model:";
    let int8_cases: Vec<(Vec<u8>, String)> = vec![
        (
            one(int8_rec("w", &[], &[], &[1], 0)),
            format!("{t} an int8 tensor has rank 0 (it needs dim 0, its output channels)"),
        ),
        (
            one(int8_rec("w", &[2, 3], &[0.5, f32::NAN], &q, 0)),
            format!("{t} an int8 tensor has a scale that is not finite"),
        ),
        (
            one(int8_rec("w", &[2, 3], &[f32::INFINITY, 1.0], &q, 0)),
            format!("{t} an int8 tensor has a scale that is not finite"),
        ),
        (
            one(int8_rec("w", &[2, 3], &[0.5, 0.25], &q, 9)),
            format!("{t} record runs past the end or has non-zero reserved bytes"),
        ),
        (
            one(int8_rec("w", &[2, 3], &[0.5], &[], 0)),
            format!("{t} record runs past the end or has non-zero reserved bytes"),
        ),
        (
            one(int8_rec("w", &[u32::MAX, u32::MAX, u32::MAX, 2], &[], &[], 0)),
            format!("{t} sizes overflow"),
        ),
    ];
    for (k, (bytes, want)) in int8_cases.iter().enumerate() {
        assert_eq!(&err(bytes), want, "int8 case {k}");
    }
    // A name that is not UTF-8.
    let mut v = good();
    let at = v.windows(3).position(|w| w == b"act").unwrap();
    v[at] = 0xff;
    reseal(&mut v, 0);
    assert_eq!(err(&v), "node 1 (relu): corrupt data: model: name is not UTF-8");
    // Header fields behind a valid checksum.
    let mut v = good();
    v[4] = 2;
    reseal(&mut v, 0);
    assert_eq!(err(&v), "model file: model: unknown model format version (got 2)");
    let mut v = good();
    v[6] = 1;
    reseal(&mut v, 0);
    assert_eq!(err(&v), "model file: model: unknown model header flags (got 1)");
    assert_eq!(
        err(b"TLWT\x01\0"),
        "model file: corrupt data: model: bad magic (not a torchlet model file)"
    );
    assert_eq!(
        err(b"TLM"),
        "model file: corrupt data: model: truncated (fewer bytes than the header or its length field says)"
    );
}

#[test]
fn encode_refuses_what_the_parser_would_naming_the_place() {
    let bad = |f: &dyn Fn(&mut GraphSpec)| {
        let mut s = small();
        f(&mut s);
        check_spec(&s).unwrap_err().to_string()
    };
    assert_eq!(
        bad(&|s| s.nodes[1].inputs[0] = Some(ValueRef::Node(4))),
        "node 1 (leaky_relu \"act\"): model: node reads a node that does not come before it (got 4)"
    );
    assert_eq!(
        bad(&|s| s.nodes[3].op = "lstm".into()),
        "node 3 (lstm \"pad\"): model: unknown op name (not in OpSpec::ALL) (got 4)"
    );
    assert_eq!(
        bad(&|s| s.tensors[0].data.pop().map(drop).unwrap_or(())),
        "tensor 0 \"conv.weight\": model: tensor data has 53 values, its dims hold 54"
    );
    assert_eq!(
        bad(&|s| s.nodes[0].attrs.push(("padding".into(), AttrValue::Int(0)))),
        "node 0 (conv2d \"conv\"): model: attribute given twice (got 1)"
    );
    assert_eq!(
        bad(&|s| s.nodes[1].inputs.push(None)),
        "node 1 (leaky_relu \"act\"): model: node has more inputs than its op takes (got 2)"
    );
    assert_eq!(
        bad(&|s| s.outputs.clear()),
        "model file: model: the model has no output (got 0)"
    );
    assert_eq!(
        bad(&|s| s.inputs[0].dims.push(DimSpec::Fixed(1))),
        "input 0 \"x\": model: rank above 4 (got 5)"
    );
    let mut s = small();
    s.tensors[0].data.pop();
    assert!(matches!(
        encode(&s).unwrap_err().error,
        Error::ShapeMismatch { .. }
    ));
}

#[test]
fn a_shape_that_cannot_work_is_found_at_load_naming_its_node() {
    let bytes = encode(&small()).unwrap();
    Model::check::<f32, TAPE>(ModelFile::parse(&bytes).unwrap()).unwrap();
    // A 7x6 output from a 3x3 input is fine; a 4x4 max pool after a 3x3 conv is not.
    let mut spec = small();
    spec.nodes.insert(
        1,
        node(
            "max_pool2d",
            "pool",
            &[ValueRef::Node(0)],
            vec![("kernel_size", AttrValue::Int(4))],
        ),
    );
    for n in &mut spec.nodes[2..] {
        for r in n.inputs.iter_mut().flatten() {
            if let ValueRef::Node(k) = r {
                *k += usize::from(*k >= 1);
            }
        }
    }
    spec.nodes[2].inputs[0] = Some(ValueRef::Node(1));
    for r in &mut spec.outputs {
        if let ValueRef::Node(k) = r {
            *k += 1;
        }
    }
    let bytes = encode(&spec).unwrap();
    let e = Model::check::<f32, TAPE>(ModelFile::parse(&bytes).unwrap()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("node 1 (max_pool2d \"pool\"): max_pool2d:"),
        "{e}"
    );
    // Too small a tape is found too.
    let e = Model::check::<f32, 4>(ModelFile::parse(&bytes).unwrap()).unwrap_err();
    assert!(matches!(e.error, Error::TapeFull { .. }), "{e}");
}

#[test]
fn a_loss_node_reads_its_targets_as_a_list_of_ints_or_floats() {
    use ValueRef::{Input as I, Node as N, Tensor as T};
    for target in [AttrValue::Ints(vec![3, 1]), AttrValue::Floats(vec![3.0, 1.0])] {
        let spec = GraphSpec {
            inputs: vec![InputSpec {
                name: "x".into(),
                dims: vec![DimSpec::Fixed(2), DimSpec::Fixed(3)],
            }],
            tensors: vec![TensorSpec {
                name: "fc.weight".into(),
                kind: TensorKind::Param { trainable: true },
                dims: vec![4, 3],
                data: values(12, 2),
                int8: None,
            }],
            nodes: vec![
                node("linear", "fc", &[I(0), T(0)], vec![]),
                node("cross_entropy", "loss", &[N(0)], vec![("target", target)]),
            ],
            outputs: vec![N(1)],
        };
        let bytes = encode(&spec).unwrap();
        let mut arena = vec![0.0f32; 4096];
        let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
        let m = Model::new(&mut g, ModelFile::parse(&bytes).unwrap()).unwrap();
        let x = g.input(&[2, 3], &values(6, 4)).unwrap();
        let loss = m.forward(&mut g, &[x]).unwrap();
        let got = g.data(loss).unwrap()[0];
        let y = g.linear(x, m.param(0).unwrap(), None).unwrap();
        let want = g.cross_entropy(y, &[3, 1]).unwrap();
        assert_eq!(got.to_bits(), g.data(want).unwrap()[0].to_bits());
    }
}
