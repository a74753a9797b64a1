//! `Graph::no_grad`: ops without gradients chosen at compile time (so a program that
//! runs frozen layers only through it links none of their backward code). Checked
//! here: the same values as the ordinary ops, outputs that never require a gradient
//! even from inputs that do, no saved values (less arena than a recorded op), the
//! same meta plan as a real step, and a head trained on top of a `no_grad` trunk
//! getting exactly the gradients it gets on top of the ordinary ops.

use torchlet::{Conv2dParams, Error, Graph, InterpMode, Pool2dParams, Result, Tensor};

const TAPE: usize = 32;

fn ramp(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7 + seed * 3) % 23) as f32 - 11.0) / 13.0)
        .collect()
}

/// conv 1->4 (weights `w`, bias `b`), relu_, max-pool, resize, global pool, flatten:
/// through `no_grad` or through the ordinary ops.
fn trunk<const N: usize>(
    g: &mut Graph<'_, f32, N>,
    x: Tensor,
    w: Tensor,
    b: Tensor,
    frozen: bool,
) -> Result<Tensor> {
    let p = Conv2dParams::padded(1);
    let mode = InterpMode::Bilinear { align_corners: false };
    if frozen {
        let mut ng = g.no_grad();
        let c = ng.conv2d(x, w, Some(b), p)?;
        let r = ng.relu_(c)?;
        let m = ng.max_pool2d(r, Pool2dParams::square(2))?;
        let z = ng.interpolate(m, [3, 5], mode)?;
        let a = ng.adaptive_avg_pool2d(z, [1, 1])?;
        ng.flatten(a, 1)
    } else {
        let c = g.conv2d(x, w, Some(b), p)?;
        let r = g.relu_(c)?;
        let m = g.max_pool2d(r, Pool2dParams::square(2))?;
        let z = g.interpolate(m, [3, 5], mode)?;
        let a = g.adaptive_avg_pool2d(z, [1, 1])?;
        g.flatten(a, 1)
    }
}

/// Builds conv weights (parameters, so they require gradients) and a linear head,
/// runs the trunk and the head's loss, and returns (features, loss, head gradients,
/// conv weight gradient, arena high-water bytes).
#[allow(clippy::type_complexity)]
fn run(frozen: bool) -> Result<(Vec<f32>, f32, Vec<f32>, Option<Vec<f32>>, usize)> {
    let mut buf = vec![0.0f32; 1 << 14];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut buf);
    let w = g.param(&[4, 1, 3, 3])?;
    let b = g.param(&[4])?;
    let hw = g.param(&[3, 4])?;
    g.param_data_mut(w)?.copy_from_slice(&ramp(36, 1));
    g.param_data_mut(b)?.copy_from_slice(&ramp(4, 2));
    g.param_data_mut(hw)?.copy_from_slice(&ramp(12, 3));
    g.reset_high_water();
    let x = g.input_with_grad(&[1, 1, 7, 9], &ramp(63, 4))?;
    let feats = trunk(&mut g, x, w, b, frozen)?;
    let logits = g.linear(feats, hw, None)?;
    let loss = g.cross_entropy(logits, &[2])?;
    let features = g.data(feats)?.to_vec();
    let l = g.data(loss)?[0];
    g.backward(loss)?;
    let head = g.grad(hw)?.map(<[f32]>::to_vec).unwrap_or_default();
    let conv = g.grad(w)?.map(<[f32]>::to_vec);
    let conv = conv.filter(|gw| gw.iter().any(|&v| v != 0.0));
    Ok((features, l, head, conv, g.arena().high_water_bytes()))
}

#[test]
fn no_grad_ops_compute_the_same_values_and_stop_gradients() -> Result<()> {
    let (f_frozen, l_frozen, head_frozen, conv_frozen, hw_frozen) = run(true)?;
    let (f_full, l_full, head_full, conv_full, hw_full) = run(false)?;
    assert_eq!(f_frozen, f_full, "same forward values");
    assert_eq!(l_frozen.to_bits(), l_full.to_bits(), "same loss");
    assert_eq!(head_frozen, head_full, "same head gradient");
    assert!(head_frozen.iter().any(|&v| v != 0.0), "the head got a gradient");
    assert!(
        conv_full.is_some(),
        "ordinary ops: the conv weight gets a gradient"
    );
    assert!(conv_frozen.is_none(), "no_grad trunk: the conv weight gets none");
    // No saved values (ReLU mask, max-pool argmax) and no trunk gradients.
    assert!(
        hw_frozen < hw_full,
        "no_grad used {hw_frozen} bytes, ordinary ops {hw_full}"
    );
    Ok(())
}

#[test]
fn no_grad_outputs_never_require_a_gradient() -> Result<()> {
    let mut buf = vec![0.0f32; 4096];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut buf);
    let w = g.param(&[2, 1, 3, 3])?;
    let x = g.input_with_grad(&[1, 1, 5, 5], &ramp(25, 5))?;
    let y = g.no_grad().conv2d(x, w, None, Conv2dParams::padded(1))?;
    assert_eq!(g.op_name(y)?, "leaf", "nothing recorded for backward");
    let t = g.input(&[1, 2, 5, 5], &[0.0; 50])?;
    let loss = g.mse_loss(y, t)?;
    assert!(
        matches!(g.backward(loss), Err(Error::NoGradient { .. })),
        "a loss computed only from a no_grad output has no gradient path"
    );
    Ok(())
}

#[test]
fn no_grad_meta_plan_equals_the_real_high_water_mark() -> Result<()> {
    for (h, w) in [(7, 9), (12, 20), (22, 6)] {
        let step = |g: &mut Graph<'_, f32, TAPE>| -> Result<usize> {
            let cw = g.param(&[4, 1, 3, 3])?;
            let cb = g.param(&[4])?;
            let hw = g.param(&[3, 4])?;
            g.reset_high_water();
            let x = g.input(&[1, 1, h, w], &if g.is_meta() { vec![] } else { ramp(h * w, 6) })?;
            let feats = trunk(g, x, cw, cb, true)?;
            let logits = g.linear(feats, hw, None)?;
            let loss = g.cross_entropy(logits, &[1])?;
            g.backward(loss)?;
            Ok(g.arena().high_water_bytes())
        };
        let mut meta: Graph<f32, TAPE> = Graph::meta(usize::MAX);
        let planned = step(&mut meta)?;
        let mut buf = vec![0.0f32; 1 << 14];
        let mut real: Graph<f32, TAPE> = Graph::new(&mut buf);
        let used = step(&mut real)?;
        assert_eq!(planned, used, "{h}x{w}: plan vs real high-water");
        assert!(used > 0);
    }
    Ok(())
}
