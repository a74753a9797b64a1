//! The work count ([`Graph::macs`], [`Plan::macs`]): single ops against counts worked
//! out by hand, the plan's count against a real step's, and a model with no
//! parameters planning its inference.

use torchlet::init::Rng;
use torchlet::nn::{digits_fcn, mobile_fcn, Block, Sequential};
use torchlet::optim::{Adam, Sgd};
use torchlet::plan::{Plan, Planner};
use torchlet::{Conv2dParams, Error, Graph, Pool2dParams, Result};

const TAPE: usize = 256;

/// conv2d `[2, 6, 11, 9]` with weight `[4, 3, 3, 2]` (groups 2), stride (2, 3),
/// padding (1, 0): output `[2, 4, 6, 3]` (rows (11 + 2 - 3) / 2 + 1 = 6, columns
/// (9 - 2) / 3 + 1 = 3), each output element 3 channels x 3 x 2 taps.
const CONV_OUT: u64 = 2 * 4 * 6 * 3;
const CONV_MACS: u64 = CONV_OUT * 3 * 3 * 2;

fn grouped_conv(g: &mut Graph<'_, f32, TAPE>, input_grad: bool) -> Result<torchlet::Tensor> {
    let w = g.param(&[4, 3, 3, 2])?;
    let dims = [2, 6, 11, 9];
    let x = match input_grad {
        true => g.input_with_grad(&dims, &vec![0.5; 2 * 6 * 11 * 9])?,
        false => g.input(&dims, &vec![0.5; 2 * 6 * 11 * 9])?,
    };
    g.reset_macs();
    let p = Conv2dParams {
        stride: [2, 3],
        padding: [1, 0],
        groups: 2,
        ..Default::default()
    };
    g.conv2d(x, w, None, p)
}

#[test]
fn conv2d_with_groups_and_stride_counts_its_multiply_accumulates() {
    for meta in [false, true] {
        let mut buf = vec![0.0f32; 1 << 14];
        let mut g: Graph<f32, TAPE> = match meta {
            true => Graph::meta(usize::MAX),
            false => Graph::new(&mut buf),
        };
        let y = grouped_conv(&mut g, false).unwrap();
        assert_eq!(g.shape(y).unwrap().dims(), &[2, 4, 6, 3]);
        assert_eq!(g.macs(), CONV_MACS, "meta {meta}");
        // Backward with a frozen input: the weight's gradient only, the forward's count
        // again (the seed is written, not counted).
        let seed = vec![1.0; CONV_OUT as usize];
        g.backward_with(y, &seed).unwrap();
        assert_eq!(g.macs(), 2 * CONV_MACS, "meta {meta}");
        g.end_step();
        // An input that asks for a gradient: both passes run.
        let y = grouped_conv(&mut g, true).unwrap();
        g.backward_with(y, &seed).unwrap();
        assert_eq!(g.macs(), 3 * CONV_MACS, "meta {meta}");
    }
}

#[test]
fn linear_and_max_pool2d_count_as_worked_out() {
    for meta in [false, true] {
        let mut buf = vec![0.0f32; 1 << 14];
        let mut g: Graph<f32, TAPE> = match meta {
            true => Graph::meta(usize::MAX),
            false => Graph::new(&mut buf),
        };
        let w = g.param(&[7, 5]).unwrap();
        let b = g.param(&[7]).unwrap();
        let x = g.input(&[3, 5], &[0.25; 15]).unwrap();
        g.reset_macs();
        let y = g.linear(x, w, Some(b)).unwrap();
        assert_eq!(g.macs(), 3 * 5 * 7, "meta {meta}");
        g.backward_with(y, &[1.0; 21]).unwrap();
        // The weight's gradient (3 x 5 x 7) and the bias's (its 7 values read from the
        // 21 output gradients, written into 7).
        assert_eq!(g.macs(), 2 * 3 * 5 * 7 + 21 + 7, "meta {meta}");
        g.end_step();
        // max_pool2d 3x3 stride 2 on [1, 2, 9, 8]: output 4x3, 9 taps each.
        let x = g.input(&[1, 2, 9, 8], &[1.0; 144]).unwrap();
        g.reset_macs();
        let p = Pool2dParams {
            stride: [2, 2],
            ..Pool2dParams::square(3)
        };
        let y = g.max_pool2d(x, p).unwrap();
        assert_eq!(g.shape(y).unwrap().dims(), &[1, 2, 4, 3]);
        assert_eq!(g.macs(), 2 * 4 * 3 * 9, "meta {meta}");
    }
}

#[test]
fn the_count_saturates() {
    // A meta conv of 2^20 images, 2^20 channels in and out, a 1024x1 kernel: 2^70
    // multiply-accumulates, more than a u64 holds.
    let mut g: Graph<f32, TAPE> = Graph::meta(usize::MAX);
    let w = g.param(&[1 << 20, 1 << 20, 1024, 1]).unwrap();
    let x = g.input(&[1 << 20, 1 << 20, 1024, 1], &[]).unwrap();
    g.no_grad().conv2d(x, w, None, Conv2dParams::default()).unwrap();
    assert_eq!(g.macs(), u64::MAX);
    g.set_grad_enabled(false);
    g.relu(x).unwrap();
    assert_eq!(g.macs(), u64::MAX);
}

fn w1_setup(g: &mut Graph<'static, f32, TAPE>) -> Result<(Sequential<12>, Sgd)> {
    let m = digits_fcn(g, &mut Rng::new(0))?;
    let sgd = Sgd::new(g, 0.01, 0.9, 0.0)?;
    Ok((m, sgd))
}

/// A W1 training step at `h x w`, batch 2, SGD included (on a meta graph, a plan).
fn w1_step<const N: usize>(
    g: &mut Graph<'_, f32, N>,
    m: &Sequential<12>,
    sgd: &mut Sgd,
    h: usize,
    w: usize,
) -> Result<()> {
    let x = g.input_with(&[2, 1, h, w], |d| d.fill(0.5))?;
    let logits = m.forward(g, x)?;
    let loss = g.cross_entropy(logits, &[3, 7])?;
    if g.grad_enabled() {
        g.backward(loss)?;
        sgd.step(g)?;
    }
    Ok(())
}

#[test]
fn a_w1_plan_counts_what_a_real_step_counts() {
    let planner = Planner::new(w1_setup, |g, (m, sgd): &(Sequential<12>, Sgd), h, w| {
        w1_step(g, m, &mut sgd.clone(), h, w)
    });
    for (h, w) in [(28, 28), (12, 20), (9, 17)] {
        let plan = planner.plan(h, w).unwrap();
        let mut buf = vec![0.0f32; plan.step_bytes / 4 + 16];
        let mut g: Graph<f32, TAPE> = Graph::new(&mut buf);
        let m = digits_fcn(&mut g, &mut Rng::new(0)).unwrap();
        let mut sgd = Sgd::new(&mut g, 0.01, 0.9, 0.0).unwrap();
        g.reset_macs();
        w1_step(&mut g, &m, &mut sgd, h, w).unwrap();
        assert_eq!(plan.macs, g.macs(), "{h}x{w}");
        g.end_step();
        g.reset_macs();
        g.set_grad_enabled(false);
        w1_step(&mut g, &m, &mut sgd, h, w).unwrap();
        assert_eq!(plan.inference_macs, g.macs(), "{h}x{w}");
    }
    // At 28x28, batch 1: the convolutions and the linear layer are 508,352
    // multiply-accumulates (28*28*8*9 + 14*14*16*72 + 7*7*32*144 + 320, the guide's
    // "about 0.51 M"); the other ops add a few per element, under a tenth more.
    let one = Planner::new(w1_setup, |g, (m, _): &(Sequential<12>, Sgd), h, w| {
        let x = g.input_with(&[1, 1, h, w], |d| d.fill(0.5))?;
        let logits = m.forward(g, x)?;
        g.cross_entropy(logits, &[3])
    });
    let plan = one.plan(28, 28).unwrap();
    assert!((508_352..560_000).contains(&plan.inference_macs), "{plan:?}");
    // Backward does the weight gradients of all four layers and the input gradients of
    // all but the first: about twice the forward again.
    assert!(
        plan.macs > plan.inference_macs * 2 && plan.macs < plan.inference_macs * 4,
        "{plan:?}"
    );
    // The work grows with the input, the bytes of the plans are unchanged.
    assert!(one.plan(56, 56).unwrap().inference_macs > 4 * 508_352);
}

#[test]
fn a_w2_step_with_adam_and_batch_norm_counts_as_planned() {
    let setup = |g: &mut Graph<'static, f32, TAPE>| -> Result<_> {
        let m = mobile_fcn(g, &mut Rng::new(2))?;
        let adam = Adam::new(g, 1e-3)?;
        Ok((m, adam))
    };
    let step =
        |g: &mut Graph<'_, f32, TAPE>, m: &torchlet::nn::MobileFcn, adam: &mut Adam, h, w| -> Result<()> {
            let x = g.input_with(&[2, 1, h, w], |d| {
                d.iter_mut()
                    .enumerate()
                    .for_each(|(i, v)| *v = (i % 7) as f32 * 0.1)
            })?;
            let logits = m.forward(g, x)?;
            let loss = g.cross_entropy(logits, &[1, 2])?;
            if g.grad_enabled() {
                g.backward(loss)?;
                adam.step(g)?;
            }
            Ok(())
        };
    let planner = Planner::new(setup, |g, (m, adam): &(torchlet::nn::MobileFcn, Adam), h, w| {
        step(g, m, &mut adam.clone(), h, w)
    });
    for (h, w) in [(32, 32), (17, 23)] {
        let plan = planner.plan(h, w).unwrap();
        let mut buf = vec![0.0f32; plan.step_bytes / 4 + 16];
        let mut g: Graph<f32, TAPE> = Graph::new(&mut buf);
        let m = mobile_fcn(&mut g, &mut Rng::new(2)).unwrap();
        let mut adam = Adam::new(&mut g, 1e-3).unwrap();
        g.reset_macs();
        step(&mut g, &m, &mut adam, h, w).unwrap();
        assert_eq!(plan.macs, g.macs(), "{h}x{w}");
        g.end_step();
        g.reset_macs();
        g.set_grad_enabled(false);
        g.set_training(false);
        step(&mut g, &m, &mut adam, h, w).unwrap();
        let eval = g.macs();
        assert!(eval > 0 && eval < plan.macs / 2, "{eval} {plan:?}");
    }
}

#[test]
fn a_model_without_parameters_plans_its_inference_and_refuses_training() {
    let planner = Planner::new(
        |_: &mut Graph<'static, f32, TAPE>| Ok(()),
        |g, _: &(), h, w| {
            let x = g.input_with(&[1, 3, h, w], |d| d.fill(0.5))?;
            g.softmax(x, 1)
        },
    );
    let plan = planner.plan_inference(5, 7).unwrap();
    assert_eq!(
        plan,
        Plan {
            records: 2,
            persistent_bytes: 0,
            // The input and the softmax's output.
            inference_bytes: 2 * 3 * 5 * 7 * 4,
            // The softmax reads and writes its 105 elements.
            inference_macs: 2 * 105,
            ..Plan::default()
        }
    );
    let e = planner.plan(5, 7).unwrap_err();
    assert!(matches!(e, Error::NoGradient { .. }), "{e:?}");
    assert!(e.to_string().contains("nothing to train"), "{e}");
    // With parameters, the inference-only plan is the full plan's inference part.
    let w1 = Planner::new(w1_setup, |g, (m, sgd): &(Sequential<12>, Sgd), h, w| {
        w1_step(g, m, &mut sgd.clone(), h, w)
    });
    let full = w1.plan(20, 16).unwrap();
    let inference = w1.plan_inference(20, 16).unwrap();
    assert_eq!(
        inference,
        Plan {
            records: inference.records,
            persistent_bytes: full.persistent_bytes,
            inference_bytes: full.inference_bytes,
            inference_macs: full.inference_macs,
            ..Plan::default()
        }
    );
    assert!(inference.records <= full.records);
}
