//! Frozen tensors whose data lives outside the arena (`Graph::external`, weights read
//! in place from flash on a microcontroller): the same forward output and head
//! gradients as the same network with ordinary parameters, no arena bytes for them
//! (the meta plan equals the real high-water mark), and errors, never panics, for
//! misuse.

use torchlet::init::Rng;
use torchlet::io;
use torchlet::optim::Sgd;
use torchlet::plan::{NoFit, Planner};
use torchlet::{Conv2dParams, Error, Graph, Pool2dParams, Result, Scalar, Tensor, Q16};

const TAPE: usize = 40;

/// W1's shapes: conv1 w/b, conv2 w/b, conv3 w/b (the frozen part), then the head.
const CONV_SHAPES: [&[usize]; 6] = [&[8, 1, 3, 3], &[8], &[16, 8, 3, 3], &[16], &[32, 16, 3, 3], &[32]];
const HEAD_W: [usize; 2] = [10, 32];

/// Deterministic pseudo-random values in about [-0.4, 0.4].
fn values<S: Scalar>(n: usize, seed: u64) -> Vec<S> {
    let mut r = Rng::new(seed);
    (0..n)
        .map(|_| S::from_f32(((r.next_u64() % 1000) as f32 / 1000.0 - 0.5) * 0.8))
        .collect()
}

fn image<S: Scalar>(h: usize, w: usize) -> Vec<S> {
    (0..h * w)
        .map(|i| S::from_f32(((i * 7) % 17) as f32 / 17.0))
        .collect()
}

/// The frozen conv weights (as if in flash), one `Vec` per tensor.
fn conv_weights<S: Scalar>() -> Vec<Vec<S>> {
    CONV_SHAPES
        .iter()
        .enumerate()
        .map(|(i, d)| values(d.iter().product(), 100 + i as u64))
        .collect()
}

/// W1 with its conv layers either external (frozen, read in place) or ordinary
/// parameters (copied into the arena); the head (linear 32->10 with bias) is always a
/// trainable parameter. Returns the handles in W1's order.
fn build<'a, S: Scalar, const N: usize>(
    g: &mut Graph<'a, S, N>,
    convs: &'a [Vec<S>],
    external: bool,
) -> Result<[Tensor; 8]> {
    let mut t = [None; 8];
    for (i, (d, v)) in CONV_SHAPES.iter().zip(convs).enumerate() {
        t[i] = Some(if external {
            g.external(d, v)?
        } else {
            let p = g.param(d)?;
            if !g.is_meta() {
                g.param_data_mut(p)?.copy_from_slice(v);
            }
            p
        });
    }
    let (w, b) = (g.param(&HEAD_W)?, g.param(&[10])?);
    if !g.is_meta() {
        g.param_data_mut(w)?.copy_from_slice(&values::<S>(320, 7));
        g.param_data_mut(b)?.copy_from_slice(&values::<S>(10, 8));
    }
    t[6] = Some(w);
    t[7] = Some(b);
    Ok(t.map(|x| x.unwrap()))
}

/// W1's forward on an `h x w` image, freeing every activation as soon as the next op
/// has it (so an inference-style frozen part holds one or two maps at a time).
fn forward<S: Scalar, const N: usize>(g: &mut Graph<'_, S, N>, p: &[Tensor; 8], x: Tensor) -> Result<Tensor> {
    let pad1 = Conv2dParams::padded(1);
    let mut y = x;
    for l in 0..3 {
        let c = g.conv2d(y, p[2 * l], Some(p[2 * l + 1]), pad1)?;
        g.free(y)?;
        let r = if g.can_overwrite_tensor(c) {
            g.relu_(c)?
        } else {
            g.relu(c)?
        };
        y = if l < 2 {
            let m = g.max_pool2d(r, Pool2dParams::square(2))?;
            g.free(r)?;
            m
        } else {
            r
        };
    }
    let pooled = g.adaptive_avg_pool2d(y, [1, 1])?;
    g.free(y)?;
    let flat = g.flatten(pooled, 1)?;
    g.linear(flat, p[6], Some(p[7]))
}

/// Logits, the head's gradients (weight, bias) and the arena's high-water mark.
type StepResult<S> = (Vec<S>, Vec<S>, Vec<S>, usize);

/// One training step (forward, cross-entropy, backward) in an arena of `bytes`.
fn step<S: Scalar>(external: bool, h: usize, w: usize, bytes: usize) -> Result<StepResult<S>> {
    let convs = conv_weights::<S>();
    let mut arena = vec![S::ZERO; bytes / 4];
    let mut g: Graph<S, TAPE> = Graph::new(&mut arena);
    let p = build(&mut g, &convs, external)?;
    let x = g.input(&[1, 1, h, w], &image::<S>(h, w))?;
    let logits = forward(&mut g, &p, x)?;
    let out = g.data(logits)?.to_vec();
    let loss = g.cross_entropy(logits, &[3])?;
    g.backward(loss)?;
    let gw = g.grad(p[6])?.unwrap().to_vec();
    let gb = g.grad(p[7])?.unwrap().to_vec();
    g.end_step();
    Ok((out, gw, gb, g.arena().high_water_bytes()))
}

/// The meta plan of the same step (external data are given, but a meta graph maps
/// them without reading or counting them).
fn plan<S: Scalar>(external: bool, h: usize, w: usize) -> Result<(usize, usize)> {
    let convs = conv_weights::<S>();
    let mut g: Graph<S, TAPE> = Graph::meta(usize::MAX);
    let p = build(&mut g, &convs, external)?;
    let persistent = g.arena().used_bytes();
    let x = g.input(&[1, 1, h, w], &[])?;
    let logits = forward(&mut g, &p, x)?;
    let loss = g.cross_entropy(logits, &[3])?;
    g.backward(loss)?;
    Ok((persistent, g.arena().high_water_bytes()))
}

fn same_output_and_head_gradients<S: Scalar + core::fmt::Debug + PartialEq>() {
    for (h, w) in [(12, 20), (22, 15), (8, 8)] {
        let (o1, gw1, gb1, _) = step::<S>(false, h, w, 400_000).unwrap();
        let (o2, gw2, gb2, _) = step::<S>(true, h, w, 400_000).unwrap();
        assert_eq!(o1, o2, "{h}x{w} logits");
        assert_eq!(gw1, gw2, "{h}x{w} head weight gradient");
        assert_eq!(gb1, gb2, "{h}x{w} head bias gradient");
        assert!(gw1.iter().any(|v| *v != S::ZERO), "a gradient that could fail");
    }
}

#[test]
fn external_weights_give_the_same_forward_and_head_gradients_f32() {
    same_output_and_head_gradients::<f32>();
}

#[test]
fn external_weights_give_the_same_forward_and_head_gradients_q16() {
    same_output_and_head_gradients::<Q16>();
}

#[test]
fn external_weights_take_no_arena_bytes_and_the_plan_is_exact() {
    for (h, w) in [(5, 5), (12, 20), (15, 11), (22, 22), (28, 28)] {
        let (persist_ext, plan_ext) = plan::<Q16>(true, h, w).unwrap();
        let (persist_par, plan_par) = plan::<Q16>(false, h, w).unwrap();
        // Only the head (330 values and their gradients) is in the arena.
        assert_eq!(persist_ext, 330 * 2 * 4);
        // Conv parameters in the arena: 5,888 values, their gradients too.
        assert_eq!(persist_par, (5888 + 330) * 2 * 4);
        assert!(plan_ext < plan_par, "{h}x{w}: {plan_ext} vs {plan_par}");
        // The real step in exactly the planned arena reaches exactly the plan...
        let (.., high) = step::<Q16>(true, h, w, plan_ext).unwrap();
        assert_eq!(high, plan_ext, "{h}x{w}");
        // ... and one word less is refused with the engine's error.
        let e = step::<Q16>(true, h, w, plan_ext - 4).unwrap_err();
        assert!(matches!(e, Error::ArenaExhausted { .. }), "{e}");
    }
}

#[test]
fn optimizers_skip_external_tensors_and_never_write_them() {
    let convs = conv_weights::<Q16>();
    let mut arena = vec![Q16::ZERO; 4096];
    let mut g: Graph<Q16, TAPE> = Graph::new(&mut arena);
    let p = build(&mut g, &convs, true).unwrap();
    let before = g.arena().persistent_bytes();
    let mut sgd = Sgd::new(&mut g, 0.1, 0.9, 0.0).unwrap();
    // Momentum state for the head only.
    assert_eq!(g.arena().persistent_bytes() - before, 330 * 4);
    let head_before = g.data(p[6]).unwrap().to_vec();
    let x = g.input(&[1, 1, 10, 10], &image::<Q16>(10, 10)).unwrap();
    let logits = forward(&mut g, &p, x).unwrap();
    let loss = g.cross_entropy(logits, &[1]).unwrap();
    g.backward(loss).unwrap();
    sgd.step(&mut g).unwrap();
    g.end_step();
    assert_ne!(g.data(p[6]).unwrap(), &head_before[..], "the head trained");
    for (i, v) in convs.iter().enumerate() {
        assert_eq!(
            g.data(p[i]).unwrap(),
            &v[..],
            "external {i} unchanged and readable"
        );
        assert_eq!(g.grad(p[i]).unwrap(), None, "no gradient for external {i}");
    }
}

#[test]
fn fused_sgd_and_input_gradients_through_external_weights() {
    // A linear layer with an external weight and an input that wants its gradient:
    // the input gradient is computed from the frozen weight, nothing is written to it.
    let wv: Vec<f32> = values(12, 1);
    let xv: Vec<f32> = values(8, 2);
    let mut grads = vec![];
    for external in [false, true] {
        let mut arena = vec![0.0f32; 1024];
        let mut g: Graph<f32, 16> = Graph::new(&mut arena);
        g.set_fused_sgd(0.5).unwrap();
        let w = if external {
            g.external(&[3, 4], &wv).unwrap()
        } else {
            let w = g.param(&[3, 4]).unwrap();
            g.param_data_mut(w).unwrap().copy_from_slice(&wv);
            w
        };
        let x = g.input_with_grad(&[2, 4], &xv).unwrap();
        let y = g.linear(x, w, None).unwrap();
        let t = g.input(&[2, 3], &[0.0; 6]).unwrap();
        let loss = g.mse_loss(y, t).unwrap();
        g.backward(loss).unwrap();
        grads.push(g.grad(x).unwrap().unwrap().to_vec());
        let after = g.data(w).unwrap().to_vec();
        assert_eq!(
            after == wv,
            external,
            "fused SGD updates a parameter, never an external"
        );
    }
    assert_eq!(grads[0], grads[1]);
}

#[test]
fn misuse_of_external_tensors_is_an_error() {
    let data = [0.5f32; 72];
    let mut arena = vec![0.0f32; 1024];
    let mut g: Graph<f32, 16> = Graph::new(&mut arena);
    // Data length does not match the shape.
    let e = g.external(&[8, 1, 3, 3], &data[..71]).unwrap_err();
    assert_eq!(
        e,
        Error::ShapeMismatch {
            op: "external",
            what: "data has {found} values, the shape holds {expected}",
            expected: 72,
            found: 71
        }
    );
    // A weight of the wrong shape for the op: the op's own error.
    let w = g.external(&[4, 2, 3, 3], &data).unwrap();
    let used = g.arena().used_bytes();
    assert_eq!(used, 0, "external data takes no arena bytes");
    let x = g.input(&[1, 1, 6, 6], &[0.1; 36]).unwrap();
    let e = g.conv2d(x, w, None, Conv2dParams::default()).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { op: "conv2d", .. }), "{e}");
    // Not writable, not loadable, not after a step has started.
    assert!(matches!(g.param_data_mut(w), Err(Error::InvalidParam { .. })));
    assert!(g.relu_(w).is_err());
    let e = g.external(&[2], &data[..2]).unwrap_err();
    assert!(matches!(e, Error::InvalidState { .. }), "{e}");
    g.end_step();
    let mut blob = vec![0u8; 4096];
    let n = io::save(&g, &mut blob).unwrap();
    assert!(matches!(
        io::load(&mut g, &blob[..n]),
        Err(Error::InvalidParam { .. })
    ));
    // Too many external slices for one graph (each apart from the others) ...
    let mut arena2 = vec![0.0f32; 16];
    let mut g: Graph<f32, 32> = Graph::new(&mut arena2);
    let mut last = Ok(());
    for k in 0..20 {
        last = g.external(&[1], &data[2 * k..2 * k + 1]).map(|_| ());
        if last.is_err() {
            break;
        }
    }
    assert!(
        matches!(last, Err(Error::InvalidParam { op: "external", .. })),
        "{last:?}"
    );
    // ... but slices inside one already mapped (the tensors of a model file) take no
    // slot of their own, and read their own values.
    let values: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let mut arena3 = vec![0.0f32; 16];
    let mut g: Graph<f32, 128> = Graph::new(&mut arena3);
    g.external(&[64], &values).unwrap();
    for k in 0..60 {
        let t = g.external(&[2], &values[k..k + 2]).unwrap();
        assert_eq!(g.data(t).unwrap(), &values[k..k + 2]);
    }
}

#[test]
fn the_planner_keeps_native_sizes_that_fit_and_shrinks_the_others() {
    let convs: &'static [Vec<Q16>] = Box::leak(conv_weights::<Q16>().into_boxed_slice());
    let planner = Planner::<Q16, TAPE, _, _>::new(
        |g| build(g, convs, true),
        |g, p, h, w| {
            let x = g.input(&[1, 1, h, w], &[])?;
            let logits = forward(g, p, x)?;
            g.cross_entropy(logits, &[0])
        },
    );
    let budget = 10 * 1024;
    let mut resized = 0;
    for (h, w) in [(8, 8), (12, 7), (22, 22), (22, 6), (16, 20), (28, 28), (13, 13)] {
        let (th, tw) = planner.largest_within(budget, h, w).unwrap();
        if planner.fits(h, w, budget) {
            assert_eq!((th, tw), (h, w), "a native size that fits is kept");
        } else {
            resized += 1;
            assert!(th < h && planner.fits(th, tw, budget), "{h}x{w} -> {th}x{tw}");
            let tw1 = ((w * (th + 1) + h / 2) / h).max(1);
            assert!(
                !planner.fits(th + 1, tw1, budget),
                "{h}x{w}: {th}x{tw} is the largest"
            );
            assert_eq!(tw, ((w * th + h / 2) / h).max(1), "aspect ratio kept");
        }
        // A real step at that size runs in the budget.
        let plan = planner.plan(th, tw).unwrap();
        let (.., high) = step::<Q16>(true, th, tw, budget).unwrap();
        assert_eq!(high, plan.step_bytes);
    }
    assert!(resized >= 3, "the budget makes the large ones shrink ({resized})");
    // Nothing valid fits in a budget below the head's own bytes.
    assert!(matches!(
        planner.largest_within(2000, 22, 22),
        Err(NoFit::Parameters { budget: 2000, .. } | NoFit::SmallestInput { budget: 2000, .. })
    ));
}
