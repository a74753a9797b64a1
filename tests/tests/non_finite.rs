//! Non-finite values never reach a parameter or optimizer state: inputs refuse NaN
//! and infinities (unless the caller opts out), optimizers and fused SGD refuse
//! gradients and updates that are not finite, with the parameters (and the optimizer
//! state) bit for bit as before, and the next good step trains. A Q16 step reports
//! saturation in its result.

use torchlet::init::Rng;
use torchlet::nn::{digits_fcn, Sequential};
use torchlet::optim::{Adam, Sgd, StepReport};
use torchlet::{Error, Graph, Scalar, Q16};

const TAPE: usize = 32;
const WORDS: usize = 1 << 18;
const B: usize = 2;

/// Every parameter's raw bits, in creation order.
fn bits<S: Scalar>(g: &Graph<'_, S, TAPE>) -> Vec<u32> {
    (0..g.num_params())
        .flat_map(|i| g.data(g.param_handle(i).unwrap()).unwrap().to_vec())
        .map(|v| v.to_bits())
        .collect()
}

/// Two 16 x 16 "digits" in 0..1 from `seed`.
fn pixels(seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    (0..B * 256)
        .map(|_| (rng.next_u32() >> 8) as f32 / (1 << 24) as f32)
        .collect()
}

/// Forward and backward of W1 on `x`: the loss.
fn forward_backward(g: &mut Graph<'_, f32, TAPE>, m: &Sequential<12>, x: &[f32]) -> Result<f32, Error> {
    g.zero_grad();
    let x = g.input(&[B, 1, 16, 16], x)?;
    let logits = m.forward(g, x)?;
    let loss = g.cross_entropy(logits, &[3, 7])?;
    let l = g.data(loss)?[0];
    g.backward(loss)?;
    Ok(l)
}

fn expect_non_finite(r: Result<impl std::fmt::Debug, Error>, op: &str, param: Option<usize>) -> Error {
    let e = r.expect_err("refused");
    match e {
        Error::NonFinite { op: o, param: p, .. } => {
            assert_eq!((o, p), (op, param), "{e}");
        }
        _ => panic!("expected NonFinite, got {e:?}"),
    }
    assert_eq!(e.kind(), "NonFinite");
    eprintln!("{e}");
    e
}

#[test]
fn nan_and_inf_pixels_are_refused_and_the_next_step_trains() {
    let mut arena = vec![0f32; WORDS];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let m = digits_fcn(&mut g, &mut Rng::new(1)).unwrap();
    let mut sgd = Sgd::new(&mut g, 0.05, 0.9, 0.0).unwrap();
    let before = bits(&g);
    for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let mut x = pixels(2);
        x[300] = bad;
        let (tape, used) = (g.tape_len(), g.arena().used_bytes());
        let e = expect_non_finite(g.input(&[B, 1, 16, 16], &x), "input", None);
        assert!(matches!(e, Error::NonFinite { index: 300, .. }), "{e:?}");
        let e = expect_non_finite(
            g.input_with(&[B, 1, 16, 16], |d| d.copy_from_slice(&x)),
            "input_with",
            None,
        );
        assert!(matches!(e, Error::NonFinite { index: 300, .. }), "{e:?}");
        expect_non_finite(g.input_with_grad(&[B, 1, 16, 16], &x), "input_with_grad", None);
        assert_eq!((g.tape_len(), g.arena().used_bytes()), (tape, used));
        g.end_step();
    }
    assert_eq!(bits(&g), before);
    // The next good step trains.
    let loss = forward_backward(&mut g, &m, &pixels(2)).unwrap();
    sgd.step(&mut g).unwrap();
    g.end_step();
    assert!(loss.is_finite());
    assert_ne!(bits(&g), before);
    assert!(bits(&g).iter().all(|&b| f32::from_bits(b).is_finite()));
}

#[test]
fn the_opt_out_lets_a_nan_reach_the_loss_and_the_optimizer_refuses_it() {
    let mut arena = vec![0f32; WORDS];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let w = g.param(&[10, 16]).unwrap();
    g.param_data_mut(w)
        .unwrap()
        .iter_mut()
        .enumerate()
        .for_each(|(i, v)| *v = (i % 7) as f32 * 0.01);
    let mut sgd = Sgd::new(&mut g, 0.1, 0.0, 0.0).unwrap();
    let before = bits(&g);
    g.set_check_finite(false);
    let mut x = [0.5f32; 2 * 16];
    x[5] = f32::NAN;
    let xt = g.input(&[2, 16], &x).unwrap();
    let y = g.linear(xt, w, None).unwrap();
    let loss = g.cross_entropy(y, &[1, 2]).unwrap();
    assert!(
        g.data(loss).unwrap()[0].is_nan(),
        "NaN propagates to the loss, as in PyTorch"
    );
    g.backward(loss).unwrap();
    let e = expect_non_finite(sgd.step(&mut g), "Sgd::step", Some(0));
    assert!(
        matches!(e, Error::NonFinite { what, .. } if what.contains("gradient")),
        "{e:?}"
    );
    assert_eq!(bits(&g), before);
    g.end_step();
    // With the check back on, the same NaN stops at the door.
    g.set_check_finite(true);
    expect_non_finite(g.input(&[2, 16], &x), "input", None);
    // A good step trains.
    g.zero_grad();
    let xt = g.input(&[2, 16], &[0.5; 32]).unwrap();
    let y = g.linear(xt, w, None).unwrap();
    let loss = g.cross_entropy(y, &[1, 2]).unwrap();
    assert!(g.data(loss).unwrap()[0].is_finite());
    g.backward(loss).unwrap();
    sgd.step(&mut g).unwrap();
    assert_ne!(bits(&g), before);
}

/// An optimizer in this test: stepped, its learning rate set.
trait Opt: Copy + std::fmt::Debug {
    const NAME: &'static str;
    fn step(&mut self, g: &mut Graph<'_, f32, TAPE>) -> Result<StepReport, Error>;
    fn lr(&mut self) -> &mut f32;
}

impl Opt for Sgd {
    const NAME: &'static str = "Sgd::step";
    fn step(&mut self, g: &mut Graph<'_, f32, TAPE>) -> Result<StepReport, Error> {
        Sgd::step(self, g)
    }
    fn lr(&mut self) -> &mut f32 {
        &mut self.lr
    }
}

impl Opt for Adam {
    const NAME: &'static str = "Adam::step";
    fn step(&mut self, g: &mut Graph<'_, f32, TAPE>) -> Result<StepReport, Error> {
        Adam::step(self, g)
    }
    fn lr(&mut self) -> &mut f32 {
        &mut self.lr
    }
}

/// Two runs from the same start: one takes a step with an overflowing learning rate
/// (refused) between two good steps, the other only the good steps. The pixels are
/// 0..255 (not normalised, a common slip), so that some gradients exceed 3.4 and
/// `1e38 * grad` overflows `f32` with plain SGD too. The refused step
/// must change nothing: parameters bit-identical right after it, and after the next
/// good step both runs are still bit-identical (so momentum buffers, moments and the
/// step count were left as they were).
fn overflowing_lr_is_refused<O: Opt>(make: impl Fn(&mut Graph<'_, f32, TAPE>) -> O) {
    let run = |refuse: bool| {
        let mut arena = vec![0f32; WORDS];
        let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
        let m = digits_fcn(&mut g, &mut Rng::new(1)).unwrap();
        let mut opt = make(&mut g);
        let raw = |seed| pixels(seed).iter().map(|v| v * 255.0).collect::<Vec<_>>();
        forward_backward(&mut g, &m, &raw(2)).unwrap();
        opt.step(&mut g).unwrap();
        g.end_step();
        let loss = forward_backward(&mut g, &m, &raw(3)).unwrap();
        assert!(loss.is_finite());
        let before = bits(&g);
        if refuse {
            let (lr, state) = (*opt.lr(), format!("{opt:?}"));
            *opt.lr() = 1e38;
            let e = expect_non_finite(opt.step(&mut g), O::NAME, Some(0));
            assert!(
                matches!(e, Error::NonFinite { what, .. } if what.contains("update")),
                "{e:?}"
            );
            assert_eq!(bits(&g), before, "parameters changed by a refused step");
            *opt.lr() = lr;
            assert_eq!(
                format!("{opt:?}"),
                state,
                "optimizer fields changed by a refused step"
            );
        }
        opt.step(&mut g).unwrap();
        g.end_step();
        let after = bits(&g);
        assert_ne!(after, before, "the next good step trains");
        assert!(after.iter().all(|&b| f32::from_bits(b).is_finite()));
        after
    };
    assert_eq!(run(true), run(false));
}

#[test]
fn overflowing_lr_is_refused_by_plain_sgd() {
    overflowing_lr_is_refused(|g| Sgd::new(g, 0.05, 0.0, 0.0).unwrap());
}

#[test]
fn overflowing_lr_is_refused_by_momentum_sgd() {
    overflowing_lr_is_refused(|g| Sgd::new(g, 0.05, 0.9, 1e-4).unwrap());
}

#[test]
fn overflowing_lr_is_refused_by_adam() {
    overflowing_lr_is_refused(|g| Adam::new(g, 1e-3).unwrap());
}

#[test]
fn overflowing_lr_is_refused_by_fused_sgd_before_any_parameter_changes() {
    let mut arena = vec![0f32; WORDS];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    g.set_fused_sgd(0.05).unwrap();
    let m = digits_fcn(&mut g, &mut Rng::new(1)).unwrap();
    let before = bits(&g);
    g.set_fused_sgd(1e38).unwrap();
    // The walk reaches the linear layer first: its weight (parameter 6) is refused
    // before anything is written.
    expect_non_finite(forward_backward(&mut g, &m, &pixels(2)), "fused SGD", Some(6));
    assert_eq!(bits(&g), before);
    g.end_step();
    expect_non_finite(g.set_fused_sgd(f32::INFINITY), "set_fused_sgd", None);
    g.set_fused_sgd(0.05).unwrap();
    let loss = forward_backward(&mut g, &m, &pixels(2)).unwrap();
    g.end_step();
    assert!(loss.is_finite());
    assert_ne!(bits(&g), before, "the next good step trains");
    assert!(bits(&g).iter().all(|&b| f32::from_bits(b).is_finite()));
}

#[test]
fn fused_sgd_refuses_a_nan_loss_and_an_overflowing_hook_update() {
    let mut arena = vec![0f32; WORDS];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    g.set_fused_sgd(0.1).unwrap();
    let w = g.param(&[4, 8]).unwrap();
    g.param_data_mut(w)
        .unwrap()
        .iter_mut()
        .enumerate()
        .for_each(|(i, v)| *v = (i % 5) as f32 * 0.1);
    let before = bits(&g);
    // w read twice: no direct update, the gradient is summed and the hook applies it.
    let step = |g: &mut Graph<'_, f32, TAPE>, x: &[f32]| -> Result<(), Error> {
        let a = g.input(&[2, 8], x)?;
        let y1 = g.linear(a, w, None)?;
        let y2 = g.linear(a, w, None)?;
        let y = g.add(y1, y2)?;
        let loss = g.cross_entropy(y, &[0, 3])?;
        g.backward(loss)
    };
    let mut x = [1.0f32; 16];
    g.set_check_finite(false);
    x[9] = f32::NAN;
    expect_non_finite(step(&mut g, &x), "fused SGD", None);
    assert_eq!(bits(&g), before);
    g.end_step();
    x[9] = 1e30;
    g.set_fused_sgd(1e20).unwrap();
    let e = expect_non_finite(step(&mut g, &x), "fused SGD", Some(0));
    assert!(
        matches!(e, Error::NonFinite { what, .. } if what.contains("update")),
        "{e:?}"
    );
    assert_eq!(bits(&g), before);
    g.end_step();
    g.set_fused_sgd(0.1).unwrap();
    step(&mut g, &[1.0; 16]).unwrap();
    g.end_step();
    assert_ne!(bits(&g), before);
}

#[test]
fn a_q16_step_reports_saturation() {
    let mut arena = vec![Q16(0); WORDS];
    let mut g: Graph<Q16, TAPE> = Graph::new(&mut arena);
    let w = g.param(&[2, 4]).unwrap();
    g.param_data_mut(w).unwrap().fill(Q16::from_f32(0.5));
    let mut sgd = Sgd::new(&mut g, 0.01, 0.0, 0.0).unwrap();
    torchlet::fixed::take_saturated();
    let mut step = |g: &mut Graph<'_, Q16, TAPE>, v: f32| {
        g.zero_grad();
        let x = g.input(&[1, 4], &[Q16::from_f32(v); 4]).unwrap();
        let y = g.linear(x, w, None).unwrap();
        let loss = g.cross_entropy(y, &[1]).unwrap();
        g.backward(loss).unwrap();
        let r = sgd.step(g).unwrap();
        g.end_step();
        r
    };
    assert!(!step(&mut g, 1.0).saturated);
    // 4 * 0.5 * 30000 is past Q16's range: the forward clamps.
    assert!(step(&mut g, 30000.0).saturated);
    assert!(
        !step(&mut g, 1.0).saturated,
        "the flag was cleared by the previous report"
    );
}
