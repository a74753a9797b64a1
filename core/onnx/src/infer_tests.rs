//! Shape inference on graphs whose sizes would overflow: chains of transposed
//! convolutions at the largest stride, flattening huge dims, absurd attributes from a
//! model file (which the ONNX importer's own limits never saw). Each is an error that
//! names the node, never an overflow.

use crate::infer::{shapes, MAX_DIM};
use torchlet::model::spec::{AttrValue, DimSpec, GraphSpec, InputSpec, NodeSpec, ValueRef};

fn free_input(rank: usize) -> InputSpec {
    InputSpec {
        name: "x".into(),
        dims: vec![DimSpec::Free { min: 1 }; rank],
    }
}

fn node(op: &str, input: ValueRef, attrs: Vec<(&str, AttrValue)>) -> NodeSpec {
    NodeSpec {
        op: op.into(),
        name: format!("/{op}"),
        inputs: vec![Some(input)],
        attrs: attrs.into_iter().map(|(k, v)| (k.into(), v)).collect(),
    }
}

fn graph(rank: usize, nodes: Vec<NodeSpec>) -> GraphSpec {
    GraphSpec {
        inputs: vec![free_input(rank)],
        outputs: vec![ValueRef::Node(nodes.len() - 1)],
        nodes,
        ..GraphSpec::default()
    }
}

/// `count` nodes of `op`, each taking the previous one's output.
fn chain(op: &str, count: usize, attrs: Vec<(&str, AttrValue)>) -> Vec<NodeSpec> {
    (0..count)
        .map(|i| {
            let input = if i == 0 {
                ValueRef::Input(0)
            } else {
                ValueRef::Node(i - 1)
            };
            node(op, input, attrs.clone())
        })
        .collect()
}

#[test]
fn padding_chains_stop_at_the_dim_limit() {
    let pad = vec![("pad", AttrValue::Ints(vec![1 << 30; 4]))];
    let err = shapes(&graph(4, chain("pad", 4, pad)), &[vec![1, 1, 8, 8]]).unwrap_err();
    assert!(err.contains("node 0 (pad") && err.contains("past"), "{err}");
    // Within the limit the same arithmetic goes through.
    let pad = vec![("pad", AttrValue::Ints(vec![1 << 20; 4]))];
    let out = shapes(&graph(4, chain("pad", 4, pad)), &[vec![1, 1, 8, 8]]).unwrap();
    assert_eq!(out[3], [1, 1, 8 + (8 << 20), 8 + (8 << 20)]);
}

#[test]
fn attributes_past_the_inference_range_are_refused() {
    for (name, v) in [
        ("stride", AttrValue::Ints(vec![i64::MAX, 1])),
        ("padding", AttrValue::Int(i64::MIN)),
        ("kernel_size", AttrValue::Ints(vec![1 << 40])),
    ] {
        let g = graph(4, vec![node("max_pool2d", ValueRef::Input(0), vec![(name, v)])]);
        let err = shapes(&g, &[vec![1, 1, 8, 8]]).unwrap_err();
        assert!(err.contains(name) && err.contains("magnitude"), "{err}");
    }
    let g = graph(
        4,
        vec![node(
            "adaptive_avg_pool2d",
            ValueRef::Input(0),
            vec![("output_size", AttrValue::Ints(vec![-3, 2]))],
        )],
    );
    assert!(shapes(&g, &[vec![1, 1, 8, 8]]).unwrap_err().contains("empty"));
}

#[test]
fn flattening_past_the_dim_limit_is_refused() {
    let flatten = vec![("start_dim", AttrValue::Int(1))];
    let g = graph(4, chain("flatten", 1, flatten));
    let big = MAX_DIM / 2;
    let err = shapes(&g, &[vec![1, 4, big, big]]).unwrap_err();
    assert!(err.contains("flatten") && err.contains("past"), "{err}");
    assert_eq!(shapes(&g, &[vec![2, 4, 8, 8]]).unwrap()[0], [2, 256]);
}

#[test]
fn given_sizes_past_the_dim_limit_are_refused() {
    let g = graph(4, chain("relu", 1, vec![]));
    let err = shapes(&g, &[vec![1, 1, usize::MAX, 8]]).unwrap_err();
    assert!(err.contains("input 0"), "{err}");
}

/// Four 3x3 transposed convolutions of one channel in a row, at `stride`.
fn transposed_chain(stride: i64) -> GraphSpec {
    let weight = torchlet::model::spec::TensorSpec {
        name: "w".into(),
        kind: torchlet::model::TensorKind::Param { trainable: true },
        dims: vec![1, 1, 3, 3],
        data: vec![0.0; 9],
        int8: None,
    };
    let mut nodes = chain("conv_transpose2d", 4, vec![("stride", AttrValue::Int(stride))]);
    for n in &mut nodes {
        n.inputs.push(Some(ValueRef::Tensor(0)));
    }
    GraphSpec {
        tensors: vec![weight],
        ..graph(4, nodes)
    }
}

#[test]
fn transposed_convolutions_at_the_largest_stride_stop_at_the_limit() {
    // 4096 -> 268,365,828 -> past 2^28 (and past i64 two nodes later).
    let err = shapes(&transposed_chain(65535), &[vec![1, 1, 4096, 4096]]).unwrap_err();
    assert!(
        err.contains("node 1 (conv_transpose2d") && err.contains("past"),
        "{err}"
    );
    let out = shapes(&transposed_chain(2), &[vec![1, 1, 1, 1]]).unwrap();
    assert_eq!(out[3], [1, 1, 31, 31]);
}
