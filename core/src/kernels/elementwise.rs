//! Element-wise maps and their gradients (activations, add, mul).

use crate::scalar::Scalar;

/// `y = f(x)` element by element.
#[inline]
pub fn map<S: Scalar>(x: &[S], y: &mut [S], f: impl Fn(S) -> S) {
    for (yv, &xv) in y.iter_mut().zip(x) {
        *yv = f(xv);
    }
}

/// `y = f(a, b)` element by element.
#[inline]
pub fn zip_map<S: Scalar>(a: &[S], b: &[S], y: &mut [S], f: impl Fn(S, S) -> S) {
    for ((yv, &av), &bv) in y.iter_mut().zip(a).zip(b) {
        *yv = f(av, bv);
    }
}

/// `gx += f(gy, s)` element by element, `s` a saved value (input or output).
#[inline]
pub fn grad_map<S: Scalar>(gy: &[S], s: &[S], gx: &mut [S], f: impl Fn(S, S) -> S) {
    for ((gv, &g), &sv) in gx.iter_mut().zip(gy).zip(s) {
        *gv += f(g, sv);
    }
}
