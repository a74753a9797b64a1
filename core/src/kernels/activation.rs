//! Per-element formulas of the piecewise activations (relu6, hardswish, hardsigmoid),
//! forward and gradient, as `torch.nn.functional` defines them. NaN propagates in
//! forward (every comparison is false for NaN, so it falls through to the formula).

use crate::scalar::Scalar;

fn six<S: Scalar>() -> S {
    S::from_count(6)
}

fn three<S: Scalar>() -> S {
    S::from_count(3)
}

/// `min(max(x, 0), 6)`.
#[inline]
pub fn relu6<S: Scalar>(x: S) -> S {
    if x < S::ZERO {
        S::ZERO
    } else if x > six() {
        six()
    } else {
        x
    }
}

/// `x * relu6(x + 3) / 6`.
#[inline]
pub fn hardswish<S: Scalar>(x: S) -> S {
    if x <= -three::<S>() {
        S::ZERO
    } else if x >= three() {
        x
    } else {
        (x * (x + three())).div(six())
    }
}

/// hardswish's gradient from its input `x`: 0 up to -3, `g` from 3, `g * (2x + 3) / 6`
/// between (PyTorch's `hardswish_backward`, `x / 3 + 0.5`, whose breakpoints belong
/// to the flat pieces: 0 at exactly -3, `g` at exactly 3).
#[inline]
pub fn hardswish_grad<S: Scalar>(g: S, x: S) -> S {
    if x <= -three::<S>() {
        S::ZERO
    } else if x < three() {
        (g * (x + x + three())).div(six())
    } else {
        g
    }
}

/// `relu6(x + 3) / 6`.
#[inline]
pub fn hardsigmoid<S: Scalar>(x: S) -> S {
    if x <= -three::<S>() {
        S::ZERO
    } else if x >= three() {
        S::ONE
    } else {
        (x + three()).div(six())
    }
}

/// hardsigmoid's gradient from its input `x`: `g / 6` where `-3 < x < 3`.
#[inline]
pub fn hardsigmoid_grad<S: Scalar>(g: S, x: S) -> S {
    if x > -three::<S>() && x < three() {
        g.div(six())
    } else {
        S::ZERO
    }
}
