//! Errors that point at the cause (issue 19): mismatches read from the user's side,
//! the layer of a `Sequential` named, `ArenaExhausted` with op, phase and the planned
//! step, `TapeFull` with the records the step needs; the planner for any step closure
//! and the model summary.

use torchlet::init::Rng;
use torchlet::nn::{digits_fcn, Conv2d, Layer, Linear, Sequential};
use torchlet::optim::Sgd;
use torchlet::plan::{Plan, Planner};
use torchlet::{Conv2dParams, Error, Graph, Phase, Pool2dParams, Result};

#[test]
fn conv_and_linear_mismatches_read_from_the_input_side() {
    let mut buf = vec![0.0f32; 4096];
    let mut g: Graph<f32, 16> = Graph::new(&mut buf);
    let w = g.param(&[4, 1, 3, 3]).unwrap();
    let lw = g.param(&[2, 5]).unwrap();
    let x = g.input(&[1, 3, 5, 5], &[0.0; 75]).unwrap();
    let e = g.conv2d(x, w, None, Conv2dParams::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "conv2d: input has 3 channels, the weight expects 1"
    );
    let v = g.input(&[1, 6], &[0.0; 6]).unwrap();
    let e = g.linear(v, lw, None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "linear: input has 6 features, the weight expects 5"
    );
    assert!(matches!(
        e,
        Error::ShapeMismatch {
            op: "linear",
            expected: 5,
            found: 6,
            ..
        }
    ));
    let r = g.input(&[5, 5], &[0.0; 25]).unwrap();
    let e = g.conv2d(r, w, None, Conv2dParams::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "conv2d: input has 2 dimensions, expected 4 (N, C, H, W)"
    );
    let e = g.input(&[1, 4], &[0.0; 3]).unwrap_err();
    assert_eq!(e.to_string(), "input: data has 3 values, the shape holds 4");
}

#[test]
fn window_params_past_a_word_are_refused_with_or_without_gradients() {
    // Found by fuzzing model files: a forward pass without gradients took a padding of
    // 2^62 (training refused it, inference overflowed in the kernel's index arithmetic).
    let mut buf = vec![0.0f32; 4096];
    let mut g: Graph<f32, 16> = Graph::new(&mut buf);
    let w = g.param(&[2, 1, 3, 3]).unwrap();
    let wt = g.param(&[1, 2, 3, 3]).unwrap();
    let x = g.input(&[1, 1, 5, 5], &[0.5; 25]).unwrap();
    let cases = [
        (
            Conv2dParams {
                padding: [1 << 62, 1],
                ..Default::default()
            },
            "padding must be at most 65535",
        ),
        (
            Conv2dParams {
                stride: [1, 1 << 16],
                ..Default::default()
            },
            "stride must be at most 65535",
        ),
        (
            Conv2dParams {
                dilation: [70_000, 1],
                ..Default::default()
            },
            "dilation must be at most 65535",
        ),
    ];
    for grad in [true, false] {
        for (p, what) in &cases {
            let e = match grad {
                true => g.conv2d(x, w, None, *p),
                false => g.no_grad().conv2d(x, w, None, *p),
            }
            .unwrap_err();
            assert!(matches!(e, Error::InvalidParam { op: "conv2d", .. }), "{e}");
            assert!(e.to_string().contains(what), "{e}");
        }
    }
    let e = g
        .no_grad()
        .max_pool2d(
            x,
            Pool2dParams {
                kernel_size: [1 << 21, 2],
                stride: [2, 2],
                padding: [1 << 20, 0],
                ceil_mode: false,
                count_include_pad: true,
            },
        )
        .unwrap_err();
    assert!(e.to_string().contains("padding must be at most 65535"), "{e}");
    let p = torchlet::ConvTranspose2dParams {
        stride: [1 << 40, 1],
        ..Default::default()
    };
    let e = g.no_grad().conv_transpose2d(x, wt, None, p).unwrap_err();
    assert!(e.to_string().contains("stride must be at most 65535"), "{e}");
    // The graph is still usable: the same conv with sane parameters runs.
    let p = Conv2dParams {
        padding: [2, 1],
        ..Default::default()
    };
    let y = g.conv2d(x, w, None, p).unwrap();
    assert_eq!(g.shape(y).unwrap().dims(), &[1, 2, 7, 5]);
    // And 65535 itself is taken (a meta graph: no data to hold).
    let mut meta: Graph<f32, 16> = Graph::meta(usize::MAX);
    let (w, x) = (
        meta.param(&[2, 1, 3, 3]).unwrap(),
        meta.input(&[1, 1, 5, 5], &[]).unwrap(),
    );
    let p = Conv2dParams {
        padding: [65535, 1],
        ..Default::default()
    };
    let y = meta.no_grad().conv2d(x, w, None, p).unwrap();
    assert_eq!(meta.shape(y).unwrap().dims(), &[1, 2, 131073, 5]);
}

/// conv 1->8, pool, conv 16->32: the second conv cannot take the first's 8 channels.
fn two_convs(g: &mut Graph<'_, f32, 32>) -> Result<Sequential<4>> {
    let mut rng = Rng::new(0);
    let mut s = Sequential::new();
    let p = Conv2dParams::padded(1);
    s.push(Layer::Conv2d(Conv2d::new(g, 1, 8, 3, p, true, &mut rng)?))?;
    s.push(Layer::MaxPool2d(Pool2dParams::square(2)))?;
    s.push(Layer::Conv2d(Conv2d::new(g, 16, 32, 3, p, true, &mut rng)?))?;
    s.push(Layer::Linear(Linear::new(g, 32, 10, true, &mut rng)?))?;
    Ok(s)
}

#[test]
fn a_sequential_error_names_the_layer_and_its_input() {
    let mut buf = vec![0.0f32; 64 * 1024];
    let mut g: Graph<f32, 32> = Graph::new(&mut buf);
    let model = two_convs(&mut g).unwrap();
    // Three channels: the first convolution refuses.
    let x = g.input(&[1, 3, 28, 28], &vec![0.0; 3 * 784]).unwrap();
    let first = model.forward(&mut g, x).unwrap_err();
    assert_eq!(
        first.to_string(),
        "layer 0 (conv2d, input [1, 3, 28, 28]): conv2d: input has 3 channels, the weight expects 1"
    );
    g.end_step();
    // One channel: the second convolution refuses the first's eight.
    let x = g.input(&[1, 1, 28, 28], &[0.0; 784]).unwrap();
    let second = model.forward(&mut g, x).unwrap_err();
    assert_eq!(
        second.to_string(),
        "layer 2 (conv2d, input [1, 8, 14, 14]): conv2d: input has 8 channels, the weight expects 16"
    );
    assert_eq!((second.layer.index, second.layer.kind), (2, "conv2d"));
    assert_ne!(first.to_string(), second.to_string());
    // `?` into the engine's error keeps the cause.
    let plain: Error = second.into();
    assert!(matches!(
        plain,
        Error::ShapeMismatch {
            op: "conv2d",
            expected: 16,
            found: 8,
            ..
        }
    ));
    assert_eq!(second, plain);
    let boxed: Box<dyn std::error::Error> = Box::new(second);
    assert_eq!(boxed.source().unwrap().to_string(), plain.to_string());
}

/// W1's setup and a cross-entropy step at `h x w`, for the planner.
fn w1_setup(g: &mut Graph<'static, f32, 64>) -> Result<Sequential<12>> {
    let m = digits_fcn(g, &mut Rng::new(0))?;
    Sgd::new(g, 0.01, 0.9, 0.0)?;
    Ok(m)
}

fn w1_loss(g: &mut Graph<'_, f32, 64>, m: &Sequential<12>, h: usize, w: usize) -> Result<torchlet::Tensor> {
    let x = g.input_with(&[1, 1, h, w], |d| d.fill(0.5))?;
    let logits = m.forward(g, x)?;
    g.cross_entropy(logits, &[3])
}

fn w1_plan(h: usize, w: usize) -> Plan {
    Planner::new(w1_setup, w1_loss).plan(h, w).unwrap()
}

/// A real W1 step in an arena of `bytes` (told its plan when given one).
fn w1_real(bytes: usize, plan: Option<&Plan>) -> Result<()> {
    let mut buf = vec![0.0f32; bytes / 4];
    let mut g: Graph<f32, 64> = Graph::new(&mut buf);
    if let Some(p) = plan {
        g.set_plan(p);
    }
    let m = digits_fcn(&mut g, &mut Rng::new(0))?;
    let mut sgd = Sgd::new(&mut g, 0.01, 0.9, 0.0)?;
    let loss = w1_loss(&mut g, &m, 28, 28)?;
    g.backward(loss)?;
    sgd.step(&mut g).map(|_| ())
}

#[test]
fn arena_exhausted_says_the_op_the_phase_and_the_planned_step() {
    let plan = w1_plan(28, 28);
    // Parameters fit, the momentum buffers do not: the optimizer's state.
    let params_only = plan.persistent_bytes / 3 * 2;
    let e = w1_real(params_only, Some(&plan)).unwrap_err();
    assert!(
        matches!(e, Error::ArenaExhausted { op: "sgd", phase: Phase::Optimizer, step_bytes: Some(s), .. } if s == plan.step_bytes),
        "{e:?}"
    );
    assert!(e.to_string().ends_with(&format!(
        ", in sgd (optimizer); the whole step needs {} bytes",
        plan.step_bytes
    )));
    // Everything but the first convolution's output: forward, in conv2d.
    let e = w1_real(plan.persistent_bytes + 784 * 4, None).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ArenaExhausted {
                op: "conv2d",
                phase: Phase::Forward,
                step_bytes: None,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("arena exhausted: needed 25088 bytes, 0 bytes available, in conv2d (forward)"),
        "{e}"
    );
    // The forward pass fits, backward does not.
    assert!(plan.forward_bytes < plan.step_bytes);
    let e = w1_real(plan.forward_bytes, Some(&plan)).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ArenaExhausted {
                phase: Phase::Backward,
                ..
            }
        ),
        "{e:?}"
    );
    let Error::ArenaExhausted { op, .. } = e else {
        unreachable!()
    };
    assert!(
        [
            "linear",
            "flatten",
            "adaptive_avg_pool2d",
            "relu",
            "conv2d",
            "max_pool2d",
            "cross_entropy"
        ]
        .contains(&op),
        "{op}"
    );
    // The planned size runs.
    w1_real(plan.step_bytes, Some(&plan)).unwrap();
}

#[test]
fn tape_full_says_how_many_records_the_step_needs() {
    let plan = w1_plan(28, 28);
    // The real count: a step on a tape with room to spare.
    let mut buf = vec![0.0f32; plan.step_bytes / 4];
    let mut g: Graph<f32, 64> = Graph::new(&mut buf);
    let m = digits_fcn(&mut g, &mut Rng::new(0)).unwrap();
    Sgd::new(&mut g, 0.01, 0.9, 0.0).unwrap();
    let loss = w1_loss(&mut g, &m, 28, 28).unwrap();
    g.backward(loss).unwrap();
    assert_eq!(plan.records, g.tape_len());
    // A tape too short, told the plan: the error says what the step needs.
    let mut buf = vec![0.0f32; plan.step_bytes / 4];
    let mut small: Graph<f32, 16> = Graph::new(&mut buf);
    small.set_plan(&plan);
    let m = digits_fcn(&mut small, &mut Rng::new(0)).unwrap();
    let x = small.input(&[1, 1, 28, 28], &[0.5; 784]).unwrap();
    let e = Error::from(m.forward(&mut small, x).unwrap_err());
    assert_eq!(
        e,
        Error::TapeFull {
            capacity: 16,
            needed: Some(plan.records)
        }
    );
    assert_eq!(
        e.to_string(),
        format!("tape full: capacity 16 records, the step needs {}", plan.records)
    );
}

#[test]
fn the_planner_plans_steps_that_run_backward_themselves() {
    let by_loss = w1_plan(20, 24);
    // The same step, running backward itself: the same plan.
    let itself = Planner::new(
        w1_setup,
        |g: &mut Graph<'static, f32, 64>, m: &Sequential<12>, h, w| {
            let loss = w1_loss(g, m, h, w)?;
            g.backward(loss)
        },
    );
    assert_eq!(itself.plan(20, 24).unwrap(), by_loss);
    // backward_with from the logits (no loss op): the plan equals a real run.
    let seeded = Planner::new(
        w1_setup,
        |g: &mut Graph<'static, f32, 64>, m: &Sequential<12>, h, w| {
            let x = g.input_with(&[1, 1, h, w], |d| d.fill(0.5))?;
            let logits = m.forward(g, x)?;
            g.backward_with(logits, &[0.1; 10])
        },
    );
    let plan = seeded.plan(20, 24).unwrap();
    let mut buf = vec![0.0f32; 1 << 16];
    let mut g: Graph<f32, 64> = Graph::new(&mut buf);
    let m = w1_setup_real(&mut g);
    g.reset_high_water();
    let x = g.input_with(&[1, 1, 20, 24], |d| d.fill(0.5)).unwrap();
    let logits = m.forward(&mut g, x).unwrap();
    let forward = g.arena().high_water_bytes();
    g.backward_with(logits, &[0.1; 10]).unwrap();
    assert_eq!(plan.forward_bytes, forward);
    assert_eq!(plan.step_bytes, g.arena().high_water_bytes());
    assert_eq!(plan.records, g.tape_len());
    assert!(plan.inference_bytes < plan.forward_bytes);
}

fn w1_setup_real(g: &mut Graph<'_, f32, 64>) -> Sequential<12> {
    let m = digits_fcn(g, &mut Rng::new(0)).unwrap();
    Sgd::new(g, 0.01, 0.9, 0.0).unwrap();
    m
}

#[test]
fn summary_of_w1_at_28x28() {
    let mut buf = vec![0.0f32; 1 << 16];
    let mut g: Graph<f32, 64> = Graph::new(&mut buf);
    let m = digits_fcn(&mut g, &mut Rng::new(0)).unwrap();
    assert_eq!(g.num_param_tensors(), 8);
    assert_eq!(g.num_params(), 8);
    assert_eq!(g.num_param_elements(), 6218);
    assert_eq!(m.num_param_elements(&g).unwrap(), 6218);
    let s = m.summary(&g, &[1, 1, 28, 28]).unwrap();
    let rows: Vec<(&str, Vec<usize>, usize)> = s
        .rows
        .iter()
        .map(|r| (r.kind, r.output.dims().to_vec(), r.params))
        .collect();
    assert_eq!(
        rows,
        [
            ("conv2d", vec![1, 8, 28, 28], 80),
            ("relu", vec![1, 8, 28, 28], 0),
            ("max_pool2d", vec![1, 8, 14, 14], 0),
            ("conv2d", vec![1, 16, 14, 14], 1168),
            ("relu", vec![1, 16, 14, 14], 0),
            ("max_pool2d", vec![1, 16, 7, 7], 0),
            ("conv2d", vec![1, 32, 7, 7], 4640),
            ("relu", vec![1, 32, 7, 7], 0),
            ("adaptive_avg_pool2d", vec![1, 32, 1, 1], 0),
            ("flatten", vec![1, 32], 0),
            ("linear", vec![1, 10], 330),
        ]
    );
    assert_eq!(s.param_elements, 6218);
    assert_eq!(s.persistent_bytes, 6218 * 8);
    // The summary's step is a real one's: forward, then backward from the output.
    g.reset_high_water();
    let x = g.input(&[1, 1, 28, 28], &[0.5; 784]).unwrap();
    let y = m.forward(&mut g, x).unwrap();
    let mut after_first = 0;
    assert_eq!(s.forward_bytes, g.arena().high_water_bytes());
    g.backward_with(y, &[1.0; 10]).unwrap();
    assert_eq!(s.step_bytes, g.arena().high_water_bytes());
    assert_eq!(s.records, g.tape_len());
    g.end_step();
    let x = g.input(&[1, 1, 28, 28], &[0.5; 784]).unwrap();
    m.forward_with(&mut g, x, |g, _, _| {
        if after_first == 0 {
            after_first = g.arena().used_bytes();
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(s.rows[0].bytes, after_first);
    let text = s.to_string();
    println!("{text}");
    assert!(
        text.contains("conv2d-3                [1, 16, 14, 14]           1,168"),
        "{text}"
    );
    assert!(text.contains("Total params: 6,218"), "{text}");
}
