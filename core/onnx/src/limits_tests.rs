//! The importer's size limits: constant folding refuses to build huge constants (small
//! crafted graphs whose shape arithmetic would grow without bound; found by fuzzing, a
//! 4.5 KB file made the importer hold 1.8 GB), and absurd dims of graph inputs and
//! tensors are refused before any shape is computed from them. Each is an error, and
//! the import stays fast.

use crate::{import, Error, Options};
use onnx_protobuf::{
    attribute_proto::AttributeType, AttributeProto, GraphProto, Message, ModelProto, NodeProto,
    OperatorSetIdProto, TensorProto,
};

/// An INT64 constant tensor.
pub(crate) fn ints(name: &str, dims: &[i64], data: &[i64]) -> TensorProto {
    let mut t = TensorProto::new();
    t.name = name.into();
    t.dims = dims.to_vec();
    t.data_type = 7;
    t.int64_data = data.to_vec();
    t
}

pub(crate) fn node(op: &str, inputs: &[&str], output: &str, attrs: Vec<AttributeProto>) -> NodeProto {
    let mut n = NodeProto::new();
    n.op_type = op.into();
    n.name = output.into();
    n.input = inputs.iter().map(|s| s.to_string()).collect();
    n.output = vec![output.into()];
    n.attribute = attrs;
    n
}

fn tensor_attr(name: &str, t: TensorProto) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = AttributeType::TENSOR.into();
    a.t = Some(t).into();
    a
}

fn int_attr(name: &str, v: i64) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = AttributeType::INT.into();
    a.i = v;
    a
}

/// A model of `nodes` over the initializers `inits` (no graph inputs or outputs: the
/// walk over the nodes is what is tested).
pub(crate) fn model(inits: Vec<TensorProto>, nodes: Vec<NodeProto>) -> Vec<u8> {
    let mut g = GraphProto::new();
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

/// A float graph input `name` of fixed `dims`.
pub(crate) fn float_input(name: &str, dims: &[i64]) -> onnx_protobuf::ValueInfoProto {
    use onnx_protobuf::{
        tensor_shape_proto::{dimension, Dimension},
        type_proto, TensorShapeProto, TypeProto, ValueInfoProto,
    };
    let mut shape = TensorShapeProto::new();
    shape.dim = dims
        .iter()
        .map(|&v| {
            let mut d = Dimension::new();
            d.value = Some(dimension::Value::DimValue(v));
            d
        })
        .collect();
    let mut tt = type_proto::Tensor::new();
    tt.elem_type = 1;
    tt.shape = Some(shape).into();
    let mut ty = TypeProto::new();
    ty.value = Some(type_proto::Value::TensorType(tt));
    let mut x = ValueInfoProto::new();
    x.name = name.into();
    x.type_ = Some(ty).into();
    x
}

/// The import's error, which must be about folding at node `index`.
pub(crate) fn refused_at(bytes: &[u8]) -> (usize, String) {
    match import(bytes, None, &Options::default()) {
        Err(Error::Node { index, why, .. }) => (index, why),
        other => panic!("expected a refused node, got {other:?}"),
    }
}

#[test]
fn constant_of_shape_past_the_limit_is_refused() {
    let shape = ints("shape", &[2], &[2048, 1024]);
    let bytes = model(
        vec![shape],
        vec![node("ConstantOfShape", &["shape"], "big", vec![])],
    );
    let (index, why) = refused_at(&bytes);
    assert_eq!(index, 0);
    assert!(why.contains("[2048, 1024]") && why.contains("may fold"), "{why}");
}

#[test]
fn concat_doubling_stops_at_the_limit() {
    // x_{k+1} = concat(x_k, x_k): 2^k elements after k nodes.
    let mut nodes = vec![node(
        "Constant",
        &[],
        "x0",
        vec![tensor_attr("value", ints("", &[1], &[7]))],
    )];
    for k in 0..40 {
        let (a, b) = (format!("x{k}"), format!("x{}", k + 1));
        nodes.push(node("Concat", &[&a, &a], &b, vec![int_attr("axis", 0)]));
    }
    let (index, why) = refused_at(&model(vec![], nodes));
    // 2^20 elements are still foldable; 2^21 are not.
    assert_eq!(index, 21);
    assert!(why.contains("may fold"), "{why}");
}

#[test]
fn many_large_constants_exhaust_the_import_budget() {
    let shape = ints("shape", &[1], &[1 << 20]);
    let nodes = (0..8)
        .map(|k| node("ConstantOfShape", &["shape"], &format!("c{k}"), vec![]))
        .collect();
    let (index, why) = refused_at(&model(vec![shape], nodes));
    assert_eq!(index, 4);
    assert!(why.contains("in all"), "{why}");
}

#[test]
fn a_gather_whose_output_is_the_product_of_two_large_constants_is_refused() {
    // data [1024, 1024] (zeros), indices 1024 x 1024 zeros: the output would be
    // 1024 x 1024 x 1024 elements.
    let shape = ints("shape", &[2], &[1024, 1024]);
    let nodes = vec![
        node("ConstantOfShape", &["shape"], "data", vec![]),
        node("Cast", &["data"], "idx", vec![int_attr("to", 7)]),
        node("Gather", &["data", "idx"], "out", vec![int_attr("axis", 0)]),
    ];
    let (index, why) = refused_at(&model(vec![shape], nodes));
    assert_eq!(index, 2);
    assert!(why.contains("may fold"), "{why}");
}

#[test]
fn a_reshape_whose_target_overflows_is_an_error() {
    let empty = ints("empty", &[0], &[]);
    let target = ints("target", &[2], &[1 << 40, 1 << 40]);
    let nodes = vec![node("Reshape", &["empty", "target"], "r", vec![])];
    let (_, why) = refused_at(&model(vec![empty, target], nodes));
    assert!(why.contains("overflows"), "{why}");
}

#[test]
fn a_graph_input_dim_past_the_limit_is_refused() {
    let dims = [1i64, 1, 1 << 40];
    let x = float_input("x", &dims);
    let mut m = ModelProto::parse_from_bytes(&model(vec![], vec![])).unwrap();
    m.graph.mut_or_insert_default().input = vec![x];
    match import(&m.write_to_bytes().unwrap(), None, &Options::default()) {
        Err(Error::Model(why)) => assert!(why.contains("dim 2 of 1099511627776"), "{why}"),
        other => panic!("expected a refused input, got {other:?}"),
    }
}

#[test]
fn a_tensor_with_a_huge_dim_after_a_zero_is_refused() {
    let t = ints("t", &[0, 1 << 40], &[]);
    let nodes = vec![node("Identity", &["t"], "u", vec![])];
    match import(&model(vec![t], nodes), None, &Options::default()) {
        Err(e) => assert!(e.to_string().contains("absurdly large"), "{e}"),
        Ok(_) => panic!("a [0, 2^40] tensor imported"),
    }
}

#[test]
fn squeezing_an_axis_whose_size_is_not_one_is_refused() {
    // Before, [0, 3] squeezed on axis 0 became a [3] constant with no values, which
    // the arithmetic after it indexed out of bounds.
    let t = ints("t", &[0, 3], &[]);
    let one = ints("one", &[], &[1]);
    let nodes = vec![
        node("Squeeze", &["t"], "s", vec![]),
        node("Add", &["s", "one"], "sum", vec![]),
    ];
    let mut n = nodes;
    n[0].attribute = vec![{
        let mut a = AttributeProto::new();
        a.name = "axes".into();
        a.type_ = AttributeType::INTS.into();
        a.ints = vec![0];
        a
    }];
    let mut m = ModelProto::parse_from_bytes(&model(vec![t, one], n)).unwrap();
    m.opset_import[0].version = 11;
    match import(&m.write_to_bytes().unwrap(), None, &Options::default()) {
        Err(Error::Node { index: 0, why, .. }) => assert!(why.contains("axis 0, whose size is 0"), "{why}"),
        other => panic!("expected node 0 refused, got {other:?}"),
    }
}

#[test]
fn slices_with_extreme_steps_or_of_empty_axes_fold_without_overflow() {
    // Found by fuzzing with overflow checks: a step of i64::MIN overflowed, and a
    // negative step on an empty axis clamped with its bounds the wrong way round.
    use crate::arr::Arr;
    let x = Arr {
        dims: vec![4],
        data: vec![10, 11, 12, 13],
    };
    let empty: Arr<i64> = Arr {
        dims: vec![0],
        data: vec![],
    };
    let cases: [(&Arr<i64>, [i64; 3], &[i64]); 5] = [
        (&x, [-1, i64::MIN, i64::MIN], &[13]),
        (&x, [0, i64::MAX, i64::MAX], &[10]),
        (&x, [3, -9, -2], &[13, 11]),
        (&x, [i64::MIN, i64::MAX, 3], &[10, 13]),
        (&empty, [-1, i64::MIN, -1], &[]),
    ];
    for (a, [start, end, step], want) in cases {
        let y = a.slice(&[start], &[end], &[0], &[step]).unwrap();
        assert_eq!(
            (y.dims, &y.data[..]),
            (vec![want.len()], want),
            "{start}..{end} by {step}"
        );
    }
}

#[test]
fn window_attributes_past_a_word_are_refused() {
    // x: [1, 1, 8, 8] into Conv (weight [1, 1, 3, 3]) with pads of 2^62.
    let dims = [1i64, 1, 8, 8];
    let x = float_input("x", &dims);
    let mut w = TensorProto::new();
    w.name = "w".into();
    w.dims = vec![1, 1, 3, 3];
    w.data_type = 1;
    w.float_data = vec![0.1; 9];
    let ints_attr = |name: &str, v: Vec<i64>| {
        let mut a = AttributeProto::new();
        a.name = name.into();
        a.type_ = AttributeType::INTS.into();
        a.ints = v;
        a
    };
    for (pads, strides) in [(1i64 << 62, 1i64), (1, 65536)] {
        let conv = node(
            "Conv",
            &["x", "w"],
            "y",
            vec![
                ints_attr("pads", vec![pads; 4]),
                ints_attr("strides", vec![strides; 2]),
            ],
        );
        let mut m = ModelProto::parse_from_bytes(&model(vec![w.clone()], vec![conv])).unwrap();
        m.graph.mut_or_insert_default().input = vec![x.clone()];
        match import(&m.write_to_bytes().unwrap(), None, &Options::default()) {
            Err(Error::Node { index: 0, why, .. }) => assert!(why.contains("exceed 65535"), "{why}"),
            other => panic!("expected the Conv refused, got {other:?}"),
        }
    }
}
