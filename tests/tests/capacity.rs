//! Capacity and recovery: the tape and the arena filled to the brim give their errors,
//! stale handles and bad calls are refused, and afterwards the next step still works
//! with parameters untouched.

use torchlet::init::Rng;
use torchlet::nn::digits_fcn;
use torchlet::optim::Sgd;
use torchlet::{Error, Graph, Pool2dParams};
use torchlet_tests::train::{plan_bytes, TAPE};

fn step<const N: usize>(
    g: &mut Graph<'_, f32, N>,
    model: &torchlet::nn::Sequential<12>,
    sgd: &mut Sgd,
    h: usize,
    w: usize,
) -> Result<f32, Error> {
    g.zero_grad();
    let img = vec![0.25f32; h * w];
    let x = g.input(&[1, 1, h, w], &img)?;
    let logits = model.forward(g, x)?;
    let loss = g.cross_entropy(logits, &[4])?;
    let l = g.data(loss)?[0];
    g.backward(loss)?;
    sgd.step(g)?;
    g.end_step();
    Ok(l)
}

fn params<const N: usize>(g: &Graph<'_, f32, N>) -> Vec<f32> {
    (0..g.num_params())
        .flat_map(|i| g.data(g.param_handle(i).unwrap()).unwrap().to_vec())
        .collect()
}

#[test]
fn tape_full_is_an_error_and_the_next_step_works() {
    let mut arena = vec![0.0f32; 4096];
    let mut g: Graph<f32, 4> = Graph::new(&mut arena);
    let w = g.param(&[2, 3]).unwrap();
    let x = g.input(&[1, 3], &[1.0, 2.0, 3.0]).unwrap();
    let y = g.linear(x, w, None).unwrap();
    let z = g.relu(y).unwrap();
    assert_eq!(g.tape_len(), 4);
    assert_eq!(
        g.relu(z),
        Err(Error::TapeFull {
            capacity: 4,
            needed: None
        })
    );
    assert_eq!(
        g.input(&[1], &[0.0]),
        Err(Error::TapeFull {
            capacity: 4,
            needed: None
        })
    );
    // The failed calls took no arena: what is in use is exactly the four records.
    assert_eq!(g.arena().used_bytes(), 4 * (12 + 3 + 2 + 2));
    g.backward_with(z, &[1.0, 1.0]).unwrap();
    g.end_step();
    let x = g.input(&[1, 3], &[1.0, 0.0, 0.0]).unwrap();
    assert!(g.linear(x, w, None).is_ok());
}

#[test]
fn arena_to_the_brim_fits_exactly_and_one_word_less_fails_cleanly() {
    let bytes = plan_bytes(1, 28, 28).unwrap();
    // Exactly the plan: a step runs.
    let mut arena = vec![0.0f32; bytes / 4];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let model = digits_fcn(&mut g, &mut Rng::new(1)).unwrap();
    let mut sgd = Sgd::new(&mut g, 0.01, 0.9, 0.0).unwrap();
    step(&mut g, &model, &mut sgd, 28, 28).unwrap();
    assert_eq!(g.arena().high_water_bytes(), bytes);
    assert_eq!(g.arena().capacity_bytes(), bytes);

    // One word less: the step fails with the bytes it needed, loses nothing, and a
    // smaller step afterwards works.
    let mut arena = vec![0.0f32; bytes / 4 - 1];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let model = digits_fcn(&mut g, &mut Rng::new(1)).unwrap();
    let mut sgd = Sgd::new(&mut g, 0.01, 0.9, 0.0).unwrap();
    let before = params(&g);
    match step(&mut g, &model, &mut sgd, 28, 28) {
        Err(Error::ArenaExhausted {
            needed, available, ..
        }) => {
            assert!(needed > available, "{needed} {available}")
        }
        other => panic!("expected ArenaExhausted, got {other:?}"),
    }
    assert_eq!(params(&g), before, "a failed step changed the parameters");
    g.end_step();
    let l = step(&mut g, &model, &mut sgd, 12, 20).unwrap();
    assert!(l.is_finite());
    assert_ne!(params(&g), before, "the next step trained");
}

#[test]
fn bad_calls_are_errors_and_leave_the_graph_usable() {
    let mut arena = vec![0.0f32; 1 << 16];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let model = digits_fcn(&mut g, &mut Rng::new(1)).unwrap();
    let mut sgd = Sgd::new(&mut g, 0.01, 0.0, 0.0).unwrap();
    let before = params(&g);
    // Wrong data length, wrong rank, too small for the network, stale handle,
    // class out of range, non-scalar loss, parameters created mid-step.
    assert!(matches!(
        g.input(&[1, 1, 4, 4], &[0.0; 15]),
        Err(Error::ShapeMismatch { .. })
    ));
    let bad_rank = g.input(&[4, 4], &[0.0; 16]).unwrap();
    let e = model.forward(&mut g, bad_rank).unwrap_err();
    assert!(matches!(e.error, Error::ShapeMismatch { op: "conv2d", .. }));
    assert_eq!((e.layer.index, e.layer.kind), (0, "conv2d"));
    let tiny = g.input(&[1, 1, 3, 3], &[0.0; 9]).unwrap();
    let e = model.forward(&mut g, tiny).unwrap_err();
    assert!(matches!(e.error, Error::ShapeMismatch { op: "max_pool2d", .. }));
    assert_eq!(
        (e.layer.index, e.layer.kind, e.layer.input.dims()),
        (5, "max_pool2d", &[1, 16, 1, 1][..])
    );
    let x = g.input(&[1, 1, 8, 8], &[0.5; 64]).unwrap();
    let logits = model.forward(&mut g, x).unwrap();
    assert!(matches!(
        g.cross_entropy(logits, &[10]),
        Err(Error::InvalidParam {
            op: "cross_entropy",
            ..
        })
    ));
    assert!(matches!(g.backward(logits), Err(Error::NoGradient { .. })));
    assert!(matches!(g.param(&[3]), Err(Error::InvalidState { .. })));
    let p = Pool2dParams {
        stride: [0, 0],
        ..Pool2dParams::square(2)
    };
    assert!(matches!(g.max_pool2d(x, p), Err(Error::InvalidParam { .. })));
    g.end_step();
    assert_eq!(g.relu(x), Err(Error::StaleTensor));
    assert_eq!(params(&g), before);
    assert!(step(&mut g, &model, &mut sgd, 8, 8).is_ok());
}

#[test]
fn meta_plan_equals_the_real_high_water_mark() {
    for (b, h, w) in [(1, 28, 28), (1, 12, 20), (3, 9, 17), (2, 5, 4)] {
        let bytes = plan_bytes(b, h, w).unwrap();
        let mut arena = vec![0.0f32; bytes / 4 + 100];
        let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
        let model = digits_fcn(&mut g, &mut Rng::new(1)).unwrap();
        let mut sgd = Sgd::new(&mut g, 0.01, 0.9, 0.0).unwrap();
        let x = g.input(&vec![b, 1, h, w][..], &vec![0.1; b * h * w]).unwrap();
        let logits = model.forward(&mut g, x).unwrap();
        let loss = g.cross_entropy(logits, &vec![1; b]).unwrap();
        g.backward(loss).unwrap();
        sgd.step(&mut g).unwrap();
        assert_eq!(g.arena().high_water_bytes(), bytes, "batch {b} at {h}x{w}");
    }
}
