//! nn: any one-input op as a layer by name (`OpLayer`), and blocks that are not a
//! straight line (`Block`, `Residual`, `Cat`): same values and gradients as the ops
//! called by hand, and errors for names and parameters the op does not have.

use torchlet::init::Rng;
use torchlet::nn::{Block, Cat, Conv2d, Layer, OpLayer, ParamValue, Residual, Sequential};
use torchlet::{Conv2dParams, Error, Graph, Tensor};

#[test]
fn an_op_layer_calls_the_op_with_its_parameters() {
    let mut arena = vec![0.0f32; 4096];
    let mut g: Graph<f32, 16> = Graph::new(&mut arena);
    let data = [-3.0f32, -0.5, 0.25, 2.0, 7.0, -1.0];
    let x = g.input(&[2, 3], &data).unwrap();
    let leaky = OpLayer::new("leaky_relu")
        .unwrap()
        .with(&[("negative_slope", ParamValue::Float(0.5))])
        .unwrap();
    let y = leaky.forward(&mut g, x).unwrap();
    let want: Vec<f32> = data.iter().map(|v| if *v < 0.0 { v * 0.5 } else { *v }).collect();
    assert_eq!(g.data(y).unwrap(), &want[..]);
    // softmax over dim 0 (columns sum to 1), not the default last dim.
    let sm = Layer::Op(
        OpLayer::new("softmax")
            .unwrap()
            .with(&[("dim", ParamValue::Int(0))])
            .unwrap(),
    );
    let z = sm.forward(&mut g, x).unwrap();
    let z = g.data(z).unwrap().to_vec();
    for c in 0..3 {
        assert!((z[c] + z[3 + c] - 1.0).abs() < 1e-6);
    }
    assert_eq!(sm.name(), "softmax");
    // A list parameter: adaptive pooling to [1, 2].
    let x = g.input(&[1, 1, 2, 4], &[1., 2., 3., 4., 5., 6., 7., 8.]).unwrap();
    let pool = OpLayer::new("adaptive_avg_pool2d")
        .unwrap()
        .with(&[("output_size", ParamValue::Ints([1, 2, 0, 0], 2))])
        .unwrap();
    let p = pool.forward(&mut g, x).unwrap();
    assert_eq!(g.data(p).unwrap(), &[3.5, 5.5]);
    // A string parameter: pad with replicate mode.
    const REPLICATE: ParamValue = ParamValue::Word(*b"replicate\0\0\0\0\0\0", 9);
    let pad = OpLayer::new("pad")
        .unwrap()
        .with(&[("pad", ParamValue::Ints([1, 0, 0, 0], 4)), ("mode", REPLICATE)])
        .unwrap();
    let q = pad.forward(&mut g, x).unwrap();
    assert_eq!(&g.data(q).unwrap()[..5], &[1., 1., 2., 3., 4.]);
}

#[test]
fn an_op_layer_refuses_what_the_op_does_not_have() {
    assert!(matches!(OpLayer::new("conv9d"), Err(Error::Unsupported { .. })));
    // Two tensor inputs: not a layer.
    let e = OpLayer::new("add").unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidParam {
                op: "add",
                value: 2,
                ..
            }
        ),
        "{e}"
    );
    let e = OpLayer::new("softmax")
        .unwrap()
        .with(&[("dims", ParamValue::Int(1))])
        .unwrap_err();
    assert!(
        e.to_string().starts_with("softmax: unknown keyword parameter"),
        "{e}"
    );
    assert!(ParamValue::ints(&[1, 2, 3, 4, 5]).is_err());
    assert!(ParamValue::word("a mode name that is far too long").is_err());
    // A parameter of the wrong kind is refused when the op reads it, and the graph
    // stays usable.
    let mut arena = vec![0.0f32; 1024];
    let mut g: Graph<f32, 8> = Graph::new(&mut arena);
    let x = g.input(&[1, 3], &[1.0, 2.0, 3.0]).unwrap();
    let sm = OpLayer::new("softmax")
        .unwrap()
        .with(&[("dim", ParamValue::Flag(true))])
        .unwrap();
    assert!(sm.forward(&mut g, x).is_err());
    let ok = OpLayer::new("softmax")
        .unwrap()
        .with(&[("dim", ParamValue::Int(-1))])
        .unwrap();
    let ok = ok.forward(&mut g, x).unwrap();
    assert_eq!(g.data(ok).unwrap().len(), 3);
    // A new list replaces the old one; within a list the last entry of a name counts.
    let l = OpLayer::new("leaky_relu")
        .unwrap()
        .with(&[("negative_slope", ParamValue::Float(0.1))])
        .unwrap();
    let l = l
        .with(&[
            ("negative_slope", ParamValue::Float(0.3)),
            ("negative_slope", ParamValue::Float(0.2)),
        ])
        .unwrap();
    let x = g.input(&[1], &[-1.0]).unwrap();
    let y = l.forward(&mut g, x).unwrap();
    assert!((g.data(y).unwrap()[0] + 0.2).abs() < 1e-7);
}

/// Gradients of every parameter after backward of `sum(net(x))`.
fn grads<B: Block<f32, 64>>(g: &mut Graph<'_, f32, 64>, net: &B, x: &[f32], dims: &[usize]) -> Vec<f32> {
    g.zero_grad();
    let x = g.input(dims, x).unwrap();
    let y = net.forward(g, x).unwrap();
    let loss = g.sum(y, &[], false).unwrap();
    g.backward(loss).unwrap();
    let mut out = Vec::new();
    for i in 0..g.num_param_tensors() {
        out.extend_from_slice(g.grad(g.param_handle(i).unwrap()).unwrap().unwrap());
    }
    g.end_step();
    out
}

#[test]
fn residual_and_cat_blocks_equal_the_ops_written_by_hand() {
    let mut arena = vec![0.0f32; 64 * 1024];
    let mut g: Graph<f32, 64> = Graph::new(&mut arena);
    let mut rng = Rng::new(3);
    let same = Conv2dParams::padded(1);
    let c1 = Conv2d::new(&mut g, 2, 2, 3, same, true, &mut rng).unwrap();
    let c2 = Conv2d::new(&mut g, 2, 2, 3, same, true, &mut rng).unwrap();
    let mut body: Sequential<3> = Sequential::new();
    body.push(Layer::Conv2d(c1)).unwrap();
    body.push(Layer::Relu).unwrap();
    body.push(Layer::Conv2d(c2)).unwrap();
    let net = (
        Residual(body),
        Cat {
            a: Layer::Relu,
            b: |g: &mut Graph<'_, f32, 64>, x: Tensor| g.sigmoid(x),
            dim: 1,
        },
    );
    let by_hand = |g: &mut Graph<'_, f32, 64>, x: Tensor| {
        let h = c1.forward(g, x)?;
        let h = g.relu(h)?;
        let h = c2.forward(g, h)?;
        let r = g.add(x, h)?;
        let a = g.relu(r)?;
        let b = g.sigmoid(r)?;
        g.cat(a, b, 1)
    };
    let dims = [1, 2, 5, 4];
    let x: Vec<f32> = (0..40).map(|i| ((i * 7) % 11) as f32 / 5.0 - 1.0).collect();
    let xin = g.input(&dims, &x).unwrap();
    let y = net.forward(&mut g, xin).unwrap();
    assert_eq!(g.shape(y).unwrap().dims(), &[1, 4, 5, 4]);
    let yv = g.data(y).unwrap().to_vec();
    let y2 = by_hand(&mut g, xin).unwrap();
    assert_eq!(g.data(y2).unwrap(), &yv[..]);
    g.end_step();
    let a = grads(&mut g, &net, &x, &dims);
    let b = grads(&mut g, &by_hand, &x, &dims);
    assert_eq!(a.len(), 2 * (2 * 2 * 9 + 2));
    assert!(a.iter().any(|v| *v != 0.0));
    assert_eq!(a, b);
}
