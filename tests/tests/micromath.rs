//! The `micromath` feature: torchlet's `f32` `exp`/`ln`/`sqrt`/`tanh`/`sigmoid` become
//! micromath's fast approximations. This bounds their error over a sweep against `f64`
//! references and shows that W1 still trains on the real digits with them.
//!
//! Run: `cargo test --release -p torchlet-tests --features micromath --test micromath -- --nocapture`
//! (without the feature this file compiles to nothing: the default build uses `libm`).
#![cfg(feature = "micromath")]

use torchlet::{fmath, Scalar};
use torchlet_tests::digits::Digits;
use torchlet_tests::train::{train_w1, Recipe, RECIPE};

/// Largest error of `f` against `reference` over `n + 1` points spread evenly on
/// `[lo, hi]` (geometrically when `geometric`), relative to `max(|reference|, floor)`.
fn max_error(
    f: fn(f32) -> f32,
    reference: fn(f64) -> f64,
    lo: f64,
    hi: f64,
    geometric: bool,
    floor: f64,
) -> (f64, f32) {
    let n = 100_000;
    let (mut worst, mut at) = (0.0f64, lo as f32);
    for i in 0..=n {
        let t = i as f64 / n as f64;
        let x = if geometric {
            lo * (hi / lo).powf(t)
        } else {
            lo + (hi - lo) * t
        } as f32;
        let want = reference(x as f64);
        let err = (f(x) as f64 - want).abs() / want.abs().max(floor);
        if err > worst {
            (worst, at) = (err, x);
        }
    }
    (worst, at)
}

#[test]
fn approximation_errors_are_bounded() {
    // (name, measured relative-or-absolute error, bound). The bounds are the measured
    // maxima (printed) rounded up: a change of approximation has to show up here.
    let cases: [(&str, (f64, f32), f64); 7] = [
        // Relative error (floor 1e-30: the references are never that small here).
        (
            "exp on [-80, 80]",
            max_error(fmath::exp, f64::exp, -80.0, 80.0, false, 1e-30),
            2.5e-3,
        ),
        (
            "sqrt on [1e-6, 1e6]",
            max_error(fmath::sqrt, f64::sqrt, 1e-6, 1e6, true, 1e-30),
            6.2e-2,
        ),
        // Absolute error (floor 1). Cross-entropy takes ln of sums >= 1; below 1
        // micromath's ln is much coarser.
        (
            "ln on [1, 1e6]",
            max_error(fmath::ln, f64::ln, 1.0, 1e6, true, 1.0),
            1e-4,
        ),
        (
            "ln on [1e-6, 1]",
            max_error(fmath::ln, f64::ln, 1e-6, 1.0, true, 1.0),
            0.12,
        ),
        (
            "tanh on [-10, 10]",
            max_error(fmath::tanh, f64::tanh, -10.0, 10.0, false, 1.0),
            1.2e-3,
        ),
        (
            "sigmoid on [-30, 30]",
            max_error(
                fmath::sigmoid,
                |x| 1.0 / (1.0 + (-x).exp()),
                -30.0,
                30.0,
                false,
                1.0,
            ),
            6e-4,
        ),
        // The Scalar door uses the same functions.
        (
            "Scalar::exp on [-20, 0]",
            max_error(<f32 as Scalar>::exp, f64::exp, -20.0, 0.0, false, 1e-30),
            2.5e-3,
        ),
    ];
    let mut over = Vec::new();
    for (name, (err, at), bound) in cases {
        eprintln!("micromath {name}: max error {err:.3e} (at {at}), bound {bound:.1e}");
        if err > bound {
            over.push(name);
        }
    }
    assert!(over.is_empty(), "over their bounds: {over:?}");
    // It is really the approximation (libm's sqrt(2) is correctly rounded).
    assert_ne!(fmath::sqrt(2.0), 2f32.sqrt());
}

#[test]
fn w1_still_trains_with_micromath() {
    // Cross-entropy's log-softmax runs on micromath's exp and ln. The recipe of
    // `fixed_train.rs` (README's, 3 epochs): with libm, f32 reaches 92.95% there
    // (measured 2026-11-22); micromath must stay within the same 1.5 points that
    // Q16.16 is held to.
    let digits = Digits::load().unwrap();
    let (train, test) = digits.split();
    let recipe = Recipe { epochs: 3, ..RECIPE };
    let (reports, _) = train_w1(train, test, recipe, |r| {
        eprintln!(
            "micromath f32 epoch {} loss {:.4} held-out {:.2}%",
            r.epoch,
            r.loss,
            r.accuracy * 100.0
        )
    })
    .unwrap();
    let acc = reports.last().unwrap().accuracy;
    assert!(
        acc >= 0.9295 - 0.015,
        "held-out accuracy {:.2}% with micromath",
        acc * 100.0
    );
}
