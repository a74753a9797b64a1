//! Variable-size inputs: the meta plan equals the real high-water mark (and the real
//! tape length) over many sizes, a W1 training step fits in 64 KiB, fused SGD equals SGD, bad sizes are
//! errors that leave the graph usable, and gradients accumulate across sizes.

use torchlet::init::Rng;
use torchlet::nn::{digits_fcn, Conv2d, Linear, Sequential};
use torchlet::optim::Sgd;
use torchlet::plan::{NoFit, Planner};
use torchlet::{Conv2dParams, Error, Graph, Pool2dParams, Result, Tensor, TraceEvent};
use torchlet_tests::varsize::{w1_plan, w1_planner, TAPE};

fn image(h: usize, w: usize, seed: usize) -> Vec<f32> {
    (0..h * w)
        .map(|i| ((i * 7 + seed * 13) % 17) as f32 / 17.0)
        .collect()
}

/// One real W1 step (fused or with gradient buffers and SGD) in an arena of exactly
/// `bytes`; returns the high-water mark and the loss.
fn real_w1_step(fused: bool, batch: usize, h: usize, w: usize, bytes: usize) -> Result<(usize, f32)> {
    let mut arena = vec![0.0f32; bytes / 4];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    if fused {
        g.set_fused_sgd(0.01)?;
    }
    let model = digits_fcn(&mut g, &mut Rng::new(0))?;
    let mut sgd = Sgd::new(&mut g, 0.01, 0.0, 0.0)?;
    let x = g.input(&[batch, 1, h, w], &image(h * batch, w, h + w))?;
    let logits = model.forward(&mut g, x)?;
    let targets: Vec<usize> = (0..batch).map(|i| (h + i) % 10).collect();
    let loss = g.cross_entropy(logits, &targets)?;
    let l = g.data(loss)?[0];
    g.backward(loss)?;
    if !fused {
        sgd.step(&mut g)?;
    }
    g.end_step();
    Ok((g.arena().high_water_bytes(), l))
}

#[test]
fn w1_plan_equals_the_real_high_water_mark_over_200_sizes() {
    let mut rng = Rng::new(42);
    for k in 0..200 {
        let h = 4 + (rng.next_u64() % 37) as usize;
        let w = 4 + (rng.next_u64() % 37) as usize;
        let batch = 1 + k % 3;
        let fused = k % 2 == 0;
        let plan = w1_plan(fused, batch, h, w).unwrap();
        let (hw, _) = real_w1_step(fused, batch, h, w, plan.step_bytes).unwrap();
        assert_eq!(hw, plan.step_bytes, "{h}x{w} batch {batch} fused {fused}");
        assert!(plan.forward_bytes <= plan.step_bytes && plan.inference_bytes <= plan.forward_bytes);
        if k % 20 == 0 {
            // One word less is refused, with nothing changed (see the bad-input test).
            let e = real_w1_step(fused, batch, h, w, plan.step_bytes - 4).unwrap_err();
            assert!(matches!(e, Error::ArenaExhausted { .. }), "{e}");
        }
    }
}

/// A network whose structure depends on the input size: an extra conv block while the
/// map's smaller side is at least 12 pixels, and a 2x2 adaptive pool head on wide inputs.
fn branchy_setup(g: &mut Graph<'_, f32, 64>) -> Result<(Conv2d, Conv2d, Linear, Linear)> {
    let mut rng = Rng::new(3);
    let p1 = Conv2dParams::padded(1);
    Ok((
        Conv2d::new(g, 1, 4, 3, p1, true, &mut rng)?,
        Conv2d::new(g, 4, 4, 3, p1, true, &mut rng)?,
        Linear::new(g, 4, 3, true, &mut rng)?,
        Linear::new(g, 16, 3, true, &mut rng)?,
    ))
}

fn branchy_forward<const N: usize>(
    g: &mut Graph<'_, f32, N>,
    m: &(Conv2d, Conv2d, Linear, Linear),
    h: usize,
    w: usize,
    data: Option<&[f32]>,
) -> Result<Tensor> {
    let x = match data {
        Some(d) => g.input(&[1, 1, h, w], d)?,
        None => g.input(&[1, 1, h, w], &[])?,
    };
    let y = m.0.forward(g, x)?;
    let mut y = g.relu(y)?;
    let mut size = h.min(w);
    while size >= 12 {
        let b = m.1.forward(g, y)?;
        y = g.relu(b)?;
        y = g.max_pool2d(y, Pool2dParams::square(2))?;
        size /= 2;
    }
    let logits = if w > h {
        let p = g.adaptive_avg_pool2d(y, [2, 2])?;
        let p = g.flatten(p, 1)?;
        m.3.forward(g, p)?
    } else {
        let p = g.adaptive_avg_pool2d(y, [1, 1])?;
        let p = g.flatten(p, 1)?;
        m.2.forward(g, p)?
    };
    g.cross_entropy(logits, if data.is_some() { &[1] } else { &[] })
}

#[test]
fn branching_network_plan_equals_real_over_200_sizes() {
    let planner = Planner::new(branchy_setup, |g, m, h, w| branchy_forward(g, m, h, w, None));
    let mut rng = Rng::new(7);
    let mut distinct_tapes = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let h = 2 + (rng.next_u64() % 60) as usize;
        let w = 2 + (rng.next_u64() % 60) as usize;
        let plan = planner.plan(h, w).unwrap();
        let mut arena = vec![0.0f32; plan.step_bytes / 4];
        let mut g: Graph<f32, 64> = Graph::new(&mut arena);
        let m = branchy_setup(&mut g).unwrap();
        let loss = branchy_forward(&mut g, &m, h, w, Some(&image(h, w, 1))).unwrap();
        assert_eq!(g.arena().high_water_bytes(), plan.forward_bytes, "{h}x{w}");
        distinct_tapes.insert(g.tape_len());
        g.backward(loss).unwrap();
        assert_eq!(g.arena().high_water_bytes(), plan.step_bytes, "{h}x{w}");
        // The plan's record count is the real step's tape: the `N` it needs.
        assert_eq!(g.tape_len(), plan.records, "{h}x{w}");
    }
    assert!(distinct_tapes.len() >= 4, "the branches ran: {distinct_tapes:?}");
}

#[test]
fn a_w1_training_step_at_28x28_fits_in_64_kib() {
    let plan = w1_plan(true, 1, 28, 28).unwrap();
    assert!(plan.step_bytes <= 64 * 1024, "{plan:?}");
    // And it really runs there, many steps, at several sizes.
    let mut arena = vec![0.0f32; 16 * 1024];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    g.set_fused_sgd(0.05).unwrap();
    let model = digits_fcn(&mut g, &mut Rng::new(1)).unwrap();
    let mut first = None;
    let mut last = 0.0;
    for step in 0..30 {
        let (h, w) = [(28, 28), (12, 20), (20, 14)][step % 3];
        let x = g.input(&[1, 1, h, w], &image(h, w, 0)).unwrap();
        let logits = model.forward(&mut g, x).unwrap();
        let loss = g.cross_entropy(logits, &[7]).unwrap();
        last = g.data(loss).unwrap()[0];
        first.get_or_insert(last);
        g.backward(loss).unwrap();
        g.end_step();
    }
    assert!(g.arena().high_water_bytes() <= 64 * 1024);
    assert!(last < first.unwrap() * 0.5, "it learns: {first:?} -> {last}");
}

fn params<const N: usize>(g: &Graph<'_, f32, N>) -> Vec<f32> {
    (0..g.num_params())
        .flat_map(|i| g.data(g.param_handle(i).unwrap()).unwrap().to_vec())
        .collect()
}

#[test]
fn fused_sgd_equals_sgd_with_gradient_buffers() {
    let mut results = Vec::new();
    for fused in [false, true] {
        let mut arena = vec![0.0f32; 64 * 1024];
        let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
        if fused {
            g.set_fused_sgd(0.1).unwrap();
        }
        let model = digits_fcn(&mut g, &mut Rng::new(9)).unwrap();
        let mut sgd = Sgd::new(&mut g, 0.1, 0.0, 0.0).unwrap();
        for (h, w) in [(28, 28), (13, 17), (9, 30)] {
            g.zero_grad();
            let x = g.input(&[2, 1, h, w], &image(2 * h, w, 3)).unwrap();
            let logits = model.forward(&mut g, x).unwrap();
            let loss = g.cross_entropy(logits, &[3, 8]).unwrap();
            g.backward(loss).unwrap();
            if !fused {
                sgd.step(&mut g).unwrap();
            }
            g.end_step();
        }
        results.push(params(&g));
    }
    let max_diff = results[0]
        .iter()
        .zip(&results[1])
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(max_diff < 1e-5, "max difference {max_diff}");
    assert!(
        results[0] != params_of_fresh_model(),
        "the steps changed the parameters"
    );
}

fn params_of_fresh_model() -> Vec<f32> {
    let mut arena = vec![0.0f32; 32 * 1024];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    digits_fcn(&mut g, &mut Rng::new(9)).unwrap();
    params(&g)
}

#[test]
fn bad_sizes_are_errors_that_leave_the_graph_usable() {
    let mut arena = vec![0.0f32; 16 * 1024];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    g.set_fused_sgd(0.05).unwrap();
    let model = digits_fcn(&mut g, &mut Rng::new(2)).unwrap();
    let before = params(&g);
    let persistent = g.arena().used_bytes();
    let try_size = |g: &mut Graph<'_, f32, TAPE>, h: usize, w: usize| -> Result<()> {
        let x = g.input(&[1, 1, h, w], &image(h, w, 0))?;
        let logits = model.forward(g, x)?;
        let loss = g.cross_entropy(logits, &[1])?;
        g.backward(loss)
    };
    // Zero-sized: the first conv names itself and the sizes.
    let e = try_size(&mut g, 0, 5).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { op: "conv2d", .. }), "{e}");
    g.end_step();
    // Too small for the second pool: 2x2 -> 1x1 after the first.
    let e = try_size(&mut g, 2, 2).unwrap_err();
    assert_eq!(
        e,
        Error::ShapeMismatch {
            op: "max_pool2d",
            what: "the input is {found} long with padding, shorter than the kernel's span of {expected}",
            expected: 2,
            found: 1
        }
    );
    assert_eq!(
        e.to_string(),
        "max_pool2d: the input is 1 long with padding, shorter than the kernel's span of 2"
    );
    g.end_step();
    // Larger than the arena: the error counts bytes; nothing changed.
    let e = try_size(&mut g, 64, 64).unwrap_err();
    assert!(
        matches!(e, Error::ArenaExhausted { needed, available, .. } if needed > available),
        "{e}"
    );
    g.end_step();
    assert_eq!(params(&g), before, "parameters untouched");
    assert_eq!(g.arena().used_bytes(), persistent);
    // The next step works.
    try_size(&mut g, 28, 28).unwrap();
    g.end_step();
    assert_ne!(params(&g), before);
}

#[test]
fn backward_out_of_arena_changes_nothing() {
    // With gradient buffers the backward peak is a little above the forward peak:
    // an arena between the two runs the forward and refuses the backward.
    let plan = w1_plan(false, 1, 28, 28).unwrap();
    assert!(plan.forward_bytes < plan.step_bytes, "{plan:?}");
    let mut arena = vec![0.0f32; plan.forward_bytes / 4];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let model = digits_fcn(&mut g, &mut Rng::new(0)).unwrap();
    Sgd::new(&mut g, 0.01, 0.0, 0.0).unwrap();
    let before = params(&g);
    let x = g.input(&[1, 1, 28, 28], &image(28, 28, 5)).unwrap();
    let logits = model.forward(&mut g, x).unwrap();
    let loss = g.cross_entropy(logits, &[2]).unwrap();
    let used = g.arena().used_bytes();
    let e = g.backward(loss).unwrap_err();
    assert!(matches!(e, Error::ArenaExhausted { .. }), "{e}");
    assert_eq!(g.arena().used_bytes(), used);
    assert!(g.data(logits).is_ok(), "the step's tensors are still there");
    for i in 0..g.num_params() {
        let gr = g.grad(g.param_handle(i).unwrap()).unwrap().unwrap();
        assert!(gr.iter().all(|&v| v == 0.0), "parameter gradients untouched");
    }
    assert_eq!(params(&g), before);
}

#[test]
fn gradients_accumulate_across_sizes_before_one_step() {
    let sizes = [(28, 28), (12, 20), (17, 9)];
    let mut arena = vec![0.0f32; 64 * 1024];
    let mut g: Graph<f32, 64> = Graph::new(&mut arena);
    let model = digits_fcn(&mut g, &mut Rng::new(4)).unwrap();
    let grads = |g: &Graph<'_, f32, 64>| -> Vec<f32> {
        (0..g.num_params())
            .flat_map(|i| g.grad(g.param_handle(i).unwrap()).unwrap().unwrap().to_vec())
            .collect()
    };
    let one = |g: &mut Graph<'_, f32, 64>, (h, w): (usize, usize)| {
        let x = g.input(&[1, 1, h, w], &image(h, w, h)).unwrap();
        let logits = model.forward(g, x).unwrap();
        let loss = g.cross_entropy(logits, &[h % 10]).unwrap();
        g.backward(loss).unwrap();
    };
    let mut sum = vec![0.0f32; 6218];
    for &s in &sizes {
        g.zero_grad();
        one(&mut g, s);
        for (a, b) in sum.iter_mut().zip(grads(&g)) {
            *a += b;
        }
        g.end_step();
    }
    // zero_grad once, several forward/backward at different sizes in one step.
    g.zero_grad();
    for &s in &sizes {
        one(&mut g, s);
    }
    let acc = grads(&g);
    let max_diff = acc
        .iter()
        .zip(&sum)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    assert!(max_diff < 1e-5, "{max_diff}");
    assert!(sum.iter().any(|&v| v != 0.0));
}

#[test]
fn planning_cost_does_not_grow_with_the_input_size() {
    // A million by a million pixels: if the meta path touched elements this would not
    // finish; it only does shape arithmetic.
    let big = w1_plan(true, 1, 1_000_000, 1_000_000).unwrap();
    assert!(big.step_bytes > 4_000_000_000_000, "{big:?}");
    let p = w1_planner(true, 1);
    assert_eq!(
        p.largest_square(64 * 1024),
        Ok(p.largest_square(64 * 1024).unwrap())
    );
}

#[test]
fn largest_input_that_fits_is_the_boundary_of_the_plans() {
    let p = w1_planner(true, 1);
    for budget in [40_000, 64 * 1024, 256 * 1024] {
        let side = p.largest_square(budget).unwrap();
        assert!(p.plan(side, side).unwrap().step_bytes <= budget);
        assert!(p.plan(side + 1, side + 1).unwrap().step_bytes > budget);
        let (h, w) = p.largest_scaled(budget, [3, 4]).unwrap();
        assert_eq!(h * 4, w * 3);
        assert!(p.fits(h, w, budget) && !p.fits(h + 3, w + 4, budget));
    }
    let why = p.largest_square(10_000).unwrap_err();
    assert_eq!(
        why,
        NoFit::Parameters {
            bytes: 24_872,
            budget: 10_000
        }
    );
    assert_eq!(
        why.to_string(),
        "parameters alone need 24,872 bytes, the budget is 10,000"
    );
}

#[test]
fn shape_trace_reports_every_op_with_shapes_and_bytes() {
    let mut events: Vec<TraceEvent> = Vec::new();
    let mut record = |e: &TraceEvent| events.push(*e);
    {
        let mut g: Graph<f32, TAPE> = Graph::meta(usize::MAX);
        let model: Sequential<12> = digits_fcn(&mut g, &mut Rng::new(0)).unwrap();
        g.set_trace(Some(&mut record));
        let x = g.input(&[1, 1, 12, 20], &[]).unwrap();
        let logits = model.forward(&mut g, x).unwrap();
        g.cross_entropy(logits, &[]).unwrap();
    }
    let ops: Vec<&str> = events.iter().map(|e| e.op).collect();
    assert_eq!(
        ops,
        [
            "leaf",
            "conv2d",
            "relu_",
            "max_pool2d",
            "conv2d",
            "relu_",
            "max_pool2d",
            "conv2d",
            "relu_",
            "adaptive_avg_pool2d",
            "reshape",
            "linear",
            "cross_entropy"
        ]
    );
    let conv1 = &events[1];
    assert_eq!(conv1.inputs[0].unwrap().dims(), &[1, 1, 12, 20]);
    assert_eq!(conv1.inputs[1].unwrap().dims(), &[8, 1, 3, 3]);
    assert_eq!(conv1.output.dims(), &[1, 8, 12, 20]);
    assert_eq!(conv1.bytes, 8 * 12 * 20 * 4);
    // ReLU in place keeps one bit per element (16 per word); the pool one byte per output.
    assert_eq!(events[2].bytes, (8 * 12 * 20usize).div_ceil(16) * 4);
    assert_eq!(events[3].output.dims(), &[1, 8, 6, 10]);
    assert_eq!(events[3].bytes, (8 * 6 * 10 + 8 * 6 * 10 / 4) * 4);
    assert_eq!(events[10].bytes, 0, "flatten is a view");
    assert_eq!(events[11].output.dims(), &[1, 10]);
}
