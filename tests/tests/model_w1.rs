//! W1 through the model file: W1 ([`nn::digits_fcn`]) written by hand as a `GraphSpec`,
//! encoded, parsed and run by `Model` gives bit for bit the hand-written network's
//! forward output, training step and meta plan, at two input sizes, in f32 and Q16.
//! Saving writes the trained values back by name.

use torchlet::init::Rng;
use torchlet::io;
use torchlet::model::spec::{AttrValue, GraphSpec, InputSpec, NodeSpec, TensorSpec};
use torchlet::model::{encode, DimSpec, Model, ModelFile, Placement, TensorKind, ValueRef};
use torchlet::nn::{self, Sequential};
use torchlet::optim::Sgd;
use torchlet::plan::{Plan, Planner};
use torchlet::{Error, Graph, Scalar, Q16};

const TAPE: usize = 48;
const ARENA: usize = 64 * 1024;
/// (batch, height, width): two sizes in one run.
const SIZES: [(usize, usize, usize); 2] = [(2, 28, 28), (1, 12, 20)];

fn node(op: &str, name: &str, inputs: &[ValueRef], attrs: Vec<(&str, AttrValue)>) -> NodeSpec {
    NodeSpec {
        op: op.into(),
        name: name.into(),
        inputs: inputs.iter().map(|&r| Some(r)).collect(),
        attrs: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    }
}

/// W1 as a spec, with the weights PyTorch's initialisation gives in torchlet
/// (`digits_fcn` with `Rng::new(seed)`), under the PyTorch names of io's W1 names.
pub fn w1_spec(seed: u64) -> GraphSpec {
    let mut arena = vec![0.0f32; ARENA];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    nn::digits_fcn(&mut g, &mut Rng::new(seed)).unwrap();
    let tensors = io::DIGITS_FCN_NAMES
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let t = g.param_handle(i).unwrap();
            TensorSpec {
                name: name.to_string(),
                kind: TensorKind::Param { trainable: true },
                dims: g.shape(t).unwrap().dims().to_vec(),
                data: g.data(t).unwrap().to_vec(),
                int8: None,
            }
        })
        .collect();
    use ValueRef::{Input as I, Node as N, Tensor as T};
    let pad1 = || vec![("padding", AttrValue::Int(1))];
    let pool = || vec![("kernel_size", AttrValue::Ints(vec![2, 2]))];
    GraphSpec {
        inputs: vec![InputSpec {
            name: "x".into(),
            dims: vec![
                DimSpec::Free { min: 1 },
                DimSpec::Fixed(1),
                DimSpec::Free { min: 4 },
                DimSpec::Free { min: 4 },
            ],
        }],
        tensors,
        nodes: vec![
            node("conv2d", "c1", &[I(0), T(0), T(1)], pad1()),
            node("relu", "r1", &[N(0)], vec![]),
            node("max_pool2d", "p1", &[N(1)], pool()),
            node("conv2d", "c2", &[N(2), T(2), T(3)], pad1()),
            node("relu", "r2", &[N(3)], vec![]),
            node("max_pool2d", "p2", &[N(4)], pool()),
            node("conv2d", "c3", &[N(5), T(4), T(5)], pad1()),
            node("relu", "r3", &[N(6)], vec![]),
            node(
                "adaptive_avg_pool2d",
                "gap",
                &[N(7)],
                vec![("output_size", AttrValue::Int(1))],
            ),
            node("flatten", "flat", &[N(8)], vec![("start_dim", AttrValue::Int(1))]),
            node("linear", "fc", &[N(9), T(6), T(7)], vec![]),
        ],
        outputs: vec![N(10)],
    }
}

/// The hand-written W1 in `g` with the spec's values (through `from_f32`, as the model does).
fn hand<S: Scalar, const N: usize>(g: &mut Graph<'_, S, N>, spec: &GraphSpec) -> Sequential<12> {
    let s = nn::digits_fcn(g, &mut Rng::new(99)).unwrap();
    if !g.is_meta() {
        for (i, t) in spec.tensors.iter().enumerate() {
            let h = g.param_handle(i).unwrap();
            for (d, v) in g.param_data_mut(h).unwrap().iter_mut().zip(&t.data) {
                *d = S::from_f32(*v);
            }
        }
    }
    s
}

fn image<S: Scalar>(n: usize) -> Vec<S> {
    (0..n)
        .map(|i| S::from_f32(((i * 7) % 17) as f32 / 17.0))
        .collect()
}

fn bits<S: Scalar>(v: &[S]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Two training steps (forward, cross-entropy, backward, SGD with momentum) at each
/// size; returns every logits vector and the parameters after each step, as bits.
fn train<S: Scalar>(spec: &GraphSpec, bytes: &[u8], loaded: bool) -> Vec<Vec<u32>> {
    let mut arena = vec![S::ZERO; ARENA];
    let mut g: Graph<S, TAPE> = Graph::new(&mut arena);
    let file = ModelFile::parse(bytes).unwrap();
    let (model, seq) = if loaded {
        (Some(Model::new(&mut g, file).unwrap()), None)
    } else {
        (None, Some(hand(&mut g, spec)))
    };
    let mut sgd = Sgd::new(&mut g, 0.05, 0.9, 0.0).unwrap();
    let mut out = Vec::new();
    for (b, h, w) in SIZES {
        g.zero_grad();
        let x = g.input(&[b, 1, h, w], &image(b * h * w)).unwrap();
        let logits = match (&model, &seq) {
            (Some(m), _) => m.forward(&mut g, &[x]).unwrap(),
            (_, Some(s)) => s.forward(&mut g, x).unwrap(),
            _ => unreachable!(),
        };
        out.push(bits(g.data(logits).unwrap()));
        let targets: Vec<usize> = (0..b).map(|k| (3 + k) % 10).collect();
        let loss = g.cross_entropy(logits, &targets).unwrap();
        g.backward(loss).unwrap();
        sgd.step(&mut g).unwrap();
        g.end_step();
        for i in 0..g.num_params() {
            out.push(bits(g.data(g.param_handle(i).unwrap()).unwrap()));
        }
    }
    out
}

#[test]
fn loaded_w1_forward_and_training_equal_the_hand_written_bit_for_bit() {
    let spec = w1_spec(7);
    let bytes = encode(&spec).unwrap();
    assert_eq!(
        train::<f32>(&spec, &bytes, true),
        train::<f32>(&spec, &bytes, false)
    );
    assert_eq!(
        train::<Q16>(&spec, &bytes, true),
        train::<Q16>(&spec, &bytes, false)
    );
}

/// The meta plan of a W1 training step (SGD with momentum) at `h` x `w`.
fn plan<S: Scalar>(spec: &GraphSpec, bytes: &[u8], loaded: bool, h: usize, w: usize) -> Plan {
    type Pair<'b> = (Option<Model<'b>>, Option<Sequential<12>>);
    Planner::new(
        |g: &mut Graph<'static, S, TAPE>| -> torchlet::Result<Pair<'_>> {
            let m = if loaded {
                (Some(Model::new(g, ModelFile::parse(bytes)?)?), None)
            } else {
                (None, Some(hand(g, spec)))
            };
            Sgd::new(g, 0.05, 0.9, 0.0)?;
            Ok(m)
        },
        |g, m: &Pair<'_>, h, w| {
            let x = g.input(&[1, 1, h, w], &[])?;
            let logits = match m {
                (Some(m), _) => m.forward(g, &[x])?,
                (_, Some(s)) => s.forward(g, x)?,
                _ => unreachable!(),
            };
            g.cross_entropy(logits, &[3])
        },
    )
    .plan(h, w)
    .unwrap()
}

#[test]
fn loaded_w1_plans_to_the_byte_as_the_hand_written() {
    let spec = w1_spec(1);
    let bytes = encode(&spec).unwrap();
    for (h, w) in [(28, 28), (12, 20), (4, 4)] {
        let a = plan::<f32>(&spec, &bytes, true, h, w);
        assert_eq!(a, plan::<f32>(&spec, &bytes, false, h, w), "f32 at {h}x{w}");
        let q = plan::<Q16>(&spec, &bytes, true, h, w);
        assert_eq!(q, plan::<Q16>(&spec, &bytes, false, h, w), "Q16 at {h}x{w}");
    }
}

#[test]
fn inputs_outside_the_declared_dims_are_refused_naming_the_input() {
    let spec = w1_spec(1);
    let bytes = encode(&spec).unwrap();
    let mut g: Graph<f32, TAPE> = Graph::meta(usize::MAX);
    let m = Model::new(&mut g, ModelFile::parse(&bytes).unwrap()).unwrap();
    for (dims, msg) in [
        (
            &[1, 3, 28, 28][..],
            "input 0 \"x\": model: an input dim is 3, the model fixes it at 1",
        ),
        (
            &[1, 1, 3, 28],
            "input 0 \"x\": model: an input dim is 3, the model needs at least 4",
        ),
        (
            &[1, 28, 28],
            "input 0 \"x\": model: the input has 3 dims, the model's input 4",
        ),
    ] {
        let x = g.input(dims, &[]).unwrap();
        assert_eq!(m.forward(&mut g, &[x]).unwrap_err().to_string(), msg);
    }
    let e = m.forward(&mut g, &[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "model file: model: the model takes 1 inputs, 0 were given"
    );
    // The graph stays usable: a good input runs.
    let x = g.input(&[1, 1, 4, 4], &[]).unwrap();
    let y = m.forward(&mut g, &[x]).unwrap();
    assert_eq!(g.shape(y).unwrap().dims(), &[1, 10]);
}

#[test]
fn an_error_inside_a_node_names_the_node() {
    let mut spec = w1_spec(1);
    spec.nodes[2].attrs = vec![("kernel_size".into(), AttrValue::Int(50))];
    let bytes = encode(&spec).unwrap();
    let mut g: Graph<f32, TAPE> = Graph::meta(usize::MAX);
    let m = Model::new(&mut g, ModelFile::parse(&bytes).unwrap()).unwrap();
    let x = g.input(&[1, 1, 8, 8], &[]).unwrap();
    let e = m.forward(&mut g, &[x]).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("node 2 (max_pool2d \"p1\"): max_pool2d:"),
        "{e}"
    );
    assert!(matches!(e.error, Error::ShapeMismatch { .. }));
}

#[test]
fn trained_values_go_back_by_name_as_a_model_file_and_as_named_weights() {
    let spec = w1_spec(3);
    let bytes = encode(&spec).unwrap();
    let mut arena = vec![0.0f32; ARENA];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let m = Model::new(&mut g, ModelFile::parse(&bytes).unwrap()).unwrap();
    let mut sgd = Sgd::new(&mut g, 0.05, 0.0, 0.0).unwrap();
    let x = g.input(&[1, 1, 12, 12], &image(144)).unwrap();
    let y = m.forward(&mut g, &[x]).unwrap();
    let loss = g.cross_entropy(y, &[4]).unwrap();
    g.backward(loss).unwrap();
    sgd.step(&mut g).unwrap();
    g.end_step();
    let trained: Vec<Vec<f32>> = (0..8)
        .map(|k| g.data(m.param(k).unwrap()).unwrap().to_vec())
        .collect();
    assert_ne!(trained[7], spec.tensors[7].data);

    // (a) The model file again, with the trained values: it loads them.
    let again = m.to_file_bytes(&g).unwrap();
    assert_eq!(again.len(), bytes.len());
    let f2 = ModelFile::parse(&again).unwrap();
    for (t, want) in f2.tensors().zip(&trained) {
        assert_eq!(&t.values().collect::<Vec<_>>(), want, "{}", t.name);
    }
    let mut small = vec![0u8; bytes.len() - 1];
    assert!(m.write_file(&g, &mut small).is_err());

    // (b) io weights with the PyTorch names: they load into a hand-written W1.
    let w = m.to_weights_bytes(&g).unwrap();
    let parsed = io::Weights::parse(&w).unwrap();
    let names: Vec<&str> = parsed.records().map(|r| r.name).collect();
    assert_eq!(names, io::DIGITS_FCN_NAMES);
    let mut arena2 = vec![0.0f32; ARENA];
    let mut g2: Graph<f32, TAPE> = Graph::new(&mut arena2);
    nn::digits_fcn(&mut g2, &mut Rng::new(5)).unwrap();
    io::load(&mut g2, &w).unwrap();
    for (k, want) in trained.iter().enumerate() {
        assert_eq!(g2.data(g2.param_handle(k).unwrap()).unwrap(), &want[..]);
    }
    // The host converter makes safetensors of them under the PyTorch names.
    let st = torchlet_tests::safetensors::to_safetensors(&w, Some(&[])).unwrap();
    let st = torchlet_tests::safetensors::parse(&st).unwrap();
    assert_eq!(st["fc.bias"].data, trained[7]);
}

#[test]
fn frozen_tensors_can_stay_in_the_file_bytes() {
    let spec = w1_spec(2);
    let bytes = encode(&spec).unwrap();
    let file = ModelFile::parse(&bytes).unwrap();
    let convs_frozen = |t: &torchlet::model::TensorRecord| {
        if t.name.starts_with('c') {
            Placement::InPlace
        } else {
            Placement::Train
        }
    };
    // The generic constructor refuses in-place tensors; `in_place` takes them when the
    // bytes are aligned (a Vec<u8> from the allocator is, in practice; skip if not).
    let mut g0: Graph<f32, TAPE> = Graph::meta(usize::MAX);
    let e = Model::with_placement(&mut g0, file, convs_frozen).unwrap_err();
    assert!(e.to_string().starts_with("tensor 0 \"c1.weight\""), "{e}");
    if !(bytes.as_ptr() as usize).is_multiple_of(4) {
        return;
    }
    let mut arena = vec![0.0f32; ARENA];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let before = g.arena().used_bytes();
    let m = Model::in_place(&mut g, file, convs_frozen).unwrap();
    // Only the head (330 values) and its gradient took arena bytes.
    assert_eq!(g.arena().used_bytes() - before, 2 * 330 * 4);
    let x = g.input(&[1, 1, 16, 16], &image(256)).unwrap();
    let y = m.forward(&mut g, &[x]).unwrap();
    let mut arena2 = vec![0.0f32; ARENA];
    let mut g2: Graph<f32, TAPE> = Graph::new(&mut arena2);
    let m2 = Model::new(&mut g2, file).unwrap();
    let x2 = g2.input(&[1, 1, 16, 16], &image(256)).unwrap();
    let y2 = m2.forward(&mut g2, &[x2]).unwrap();
    assert_eq!(bits(g.data(y).unwrap()), bits(g2.data(y2).unwrap()));
}
