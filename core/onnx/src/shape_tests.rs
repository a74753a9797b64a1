//! Shapes of activations at import: Split and Slice of a computed tensor become slices,
//! a channel shuffle becomes one node, and the rank-5 tensors in between are refused
//! anywhere else, by node.

use crate::limits_tests::{float_input, ints, model, node, refused_at};
use crate::{import, Options};
use onnx_protobuf::{attribute_proto::AttributeType, AttributeProto, Message, ModelProto};

fn int_attr(name: &str, v: i64) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = AttributeType::INT.into();
    a.i = v;
    a
}

fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = AttributeType::INTS.into();
    a.ints = v.to_vec();
    a
}

/// `nodes` over a graph input `x` of `dims`, with `out` as the graph's output.
fn graph(
    dims: &[i64],
    inits: Vec<onnx_protobuf::TensorProto>,
    nodes: Vec<onnx_protobuf::NodeProto>,
    out: &str,
) -> Vec<u8> {
    let mut m = ModelProto::parse_from_bytes(&model(inits, nodes)).unwrap();
    let g = m.graph.mut_or_insert_default();
    g.input = vec![float_input("x", dims)];
    let mut o = onnx_protobuf::ValueInfoProto::new();
    o.name = out.into();
    g.output = vec![o];
    m.write_to_bytes().unwrap()
}

fn ops(bytes: &[u8]) -> Vec<String> {
    let spec = import(bytes, None, &Options::default()).unwrap();
    spec.nodes.iter().map(|n| n.op.clone()).collect()
}

#[test]
fn a_channel_shuffle_is_one_node() {
    let nodes = vec![
        node("Reshape", &["x", "five"], "r5", vec![]),
        node(
            "Transpose",
            &["r5"],
            "t",
            vec![ints_attr("perm", &[0, 2, 1, 3, 4])],
        ),
        node("Reshape", &["t", "four"], "y", vec![]),
    ];
    let inits = vec![
        ints("five", &[5], &[1, 2, 3, 4, 5]),
        ints("four", &[4], &[1, 6, 4, 5]),
    ];
    assert_eq!(ops(&graph(&[1, 6, 4, 5], inits, nodes, "y")), ["channel_shuffle"]);
}

#[test]
fn a_rank_5_reshape_read_by_anything_else_is_refused() {
    let nodes = vec![
        node("Reshape", &["x", "five"], "r5", vec![]),
        node("Relu", &["r5"], "y", vec![]),
    ];
    let inits = vec![ints("five", &[5], &[1, 2, 3, 4, 5])];
    let (index, why) = refused_at(&graph(&[1, 6, 4, 5], inits, nodes, "y"));
    assert_eq!(index, 1);
    assert!(why.contains("only as a channel shuffle"), "{why}");
    // Groups that do not multiply to the channels are no shuffle either.
    let nodes = vec![node("Reshape", &["x", "five"], "y", vec![])];
    let inits = vec![ints("five", &[5], &[1, 2, 2, 4, 5])];
    let (index, why) = refused_at(&graph(&[1, 6, 4, 5], inits, nodes, "y"));
    assert_eq!(index, 0);
    assert!(why.contains("only as a channel shuffle"), "{why}");
}

#[test]
fn split_and_slice_of_activations_are_slices() {
    let mut split = node("Split", &["x", "sizes"], "a", vec![int_attr("axis", 1)]);
    split.output = vec!["a".into(), "b".into()];
    let cat = vec![
        split,
        node("Slice", &["b", "s0", "s1", "ax", "st"], "c", vec![]),
        node("Concat", &["a", "c"], "y", vec![int_attr("axis", 1)]),
    ];
    let inits = vec![
        ints("sizes", &[2], &[2, 4]),
        ints("s0", &[1], &[1]),
        ints("s1", &[1], &[i64::MAX]),
        ints("ax", &[1], &[1]),
        ints("st", &[1], &[2]),
    ];
    // [1, 6, 4, 5] -> a [1, 2, 4, 5], b [1, 4, 4, 5] -> c = b[:, 1::2] [1, 2, 4, 5].
    let bytes = graph(&[1, 6, 4, 5], inits, cat, "y");
    assert_eq!(ops(&bytes), ["slice", "slice", "slice", "cat"]);
    let spec = import(&bytes, None, &Options::default()).unwrap();
    let shapes = crate::infer::shapes(&spec, &[vec![1, 6, 4, 5]]).unwrap();
    assert_eq!(shapes.last().unwrap(), &vec![1, 4, 4, 5]);
    // Split sizes that overflow, or a zero step, are errors naming the node.
    let mut split = node("Split", &["x", "sizes"], "a", vec![int_attr("axis", 1)]);
    split.output = vec!["a".into(), "b".into()];
    let inits = vec![ints("sizes", &[2], &[i64::MAX, i64::MAX])];
    let (index, _) = refused_at(&graph(&[1, 6, 4, 5], inits, vec![split], "a"));
    assert_eq!(index, 0);
    let inits = vec![
        ints("s0", &[1], &[0]),
        ints("s1", &[1], &[3]),
        ints("ax", &[1], &[1]),
        ints("st", &[1], &[0]),
    ];
    let slice = node("Slice", &["x", "s0", "s1", "ax", "st"], "y", vec![]);
    let (index, why) = refused_at(&graph(&[1, 6, 4, 5], inits, vec![slice], "y"));
    assert_eq!(index, 0);
    assert!(why.contains("step of 0"), "{why}");
}

#[test]
fn one_d_pooling_and_unsqueeze_of_activations_are_views_around_2d_ops() {
    let nodes = vec![
        node(
            "MaxPool",
            &["x"],
            "p",
            vec![ints_attr("kernel_shape", &[2]), ints_attr("strides", &[2])],
        ),
        node("Unsqueeze", &["p", "ax"], "u", vec![]),
        node("Squeeze", &["u", "ax"], "y", vec![]),
    ];
    let inits = vec![ints("ax", &[1], &[1])];
    let bytes = graph(&[2, 3, 9], inits, nodes, "y");
    assert_eq!(
        ops(&bytes),
        ["unsqueeze", "max_pool2d", "squeeze", "unsqueeze", "squeeze"]
    );
    let spec = import(&bytes, None, &Options::default()).unwrap();
    let shapes = crate::infer::shapes(&spec, &[vec![2, 3, 9]]).unwrap();
    assert_eq!(shapes[1], vec![2, 3, 1, 4]);
    assert_eq!(shapes[3], vec![2, 1, 3, 4]);
    assert_eq!(shapes.last().unwrap(), &vec![2, 3, 4]);
}
