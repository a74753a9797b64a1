//! Softmax and log-softmax along one dimension of a row-major tensor seen as
//! `[outer, len, inner]`: element `(o, k, i)` is at `(o * len + k) * inner + i`.
//! Each slice is shifted by its maximum first, so large logits do not overflow.

use crate::scalar::Scalar;

/// `y = softmax(x)` (or `log_softmax(x)` when `log`) along the middle dimension.
pub fn softmax_forward<S: Scalar>(outer: usize, len: usize, inner: usize, x: &[S], y: &mut [S], log: bool) {
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * len + k) * inner + i;
            let m = (0..len)
                .map(|k| x[at(k)])
                .fold(S::MIN, |a, v| if v > a { v } else { a });
            let mut sum = S::acc_zero();
            for k in 0..len {
                sum = S::acc_add(sum, (x[at(k)] - m).exp());
            }
            let sum = S::from_acc(sum);
            if log {
                let lse = m + sum.ln();
                for k in 0..len {
                    y[at(k)] = x[at(k)] - lse;
                }
            } else {
                for k in 0..len {
                    y[at(k)] = (x[at(k)] - m).exp().div(sum);
                }
            }
        }
    }
}

/// `gx += ` the input gradient from the output `y` and its gradient `gy`:
/// softmax `y * (gy - sum(gy * y))`, log-softmax `gy - exp(y) * sum(gy)`.
pub fn softmax_backward<S: Scalar>(
    outer: usize,
    len: usize,
    inner: usize,
    gy: &[S],
    y: &[S],
    gx: &mut [S],
    log: bool,
) {
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * len + k) * inner + i;
            let mut dot = S::acc_zero();
            for k in 0..len {
                dot = match log {
                    true => S::acc_add(dot, gy[at(k)]),
                    false => S::mac(dot, gy[at(k)], y[at(k)]),
                };
            }
            let dot = S::from_acc(dot);
            for k in 0..len {
                let j = at(k);
                gx[j] += match log {
                    true => gy[j] - y[j].exp() * dot,
                    false => y[j] * (gy[j] - dot),
                };
            }
        }
    }
}
