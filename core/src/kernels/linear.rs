//! Fully connected layer: `y = x w^T + b` with `x: [B, I]`, `w: [O, I]`, `y: [B, O]`.

use super::{axpy_strided, dot_strided};
use crate::scalar::Scalar;

/// `y[b, o] = dot(x[b], w[o]) + bias[o]`.
pub fn linear_forward<S: Scalar>(
    batch: usize,
    inp: usize,
    out: usize,
    x: &[S],
    w: &[S],
    b: Option<&[S]>,
    y: &mut [S],
) {
    for bi in 0..batch {
        let xr = &x[bi * inp..][..inp];
        for o in 0..out {
            let init = b.map_or(S::acc_zero(), |b| S::acc_add(S::acc_zero(), b[o]));
            y[bi * out + o] = S::from_acc(dot_strided(init, xr, &w[o * inp..][..inp], 1));
        }
    }
}

/// `gx[b] += sum_o gy[b, o] * w[o]`.
pub fn linear_backward_input<S: Scalar>(
    batch: usize,
    inp: usize,
    out: usize,
    gy: &[S],
    w: &[S],
    gx: &mut [S],
) {
    for bi in 0..batch {
        let gxr = &mut gx[bi * inp..][..inp];
        for o in 0..out {
            axpy_strided(gxr, gy[bi * out + o], &w[o * inp..][..inp], 1);
        }
    }
}

/// `gw[o] += sum_b gy[b, o] * x[b]`.
pub fn linear_backward_weight<S: Scalar>(
    batch: usize,
    inp: usize,
    out: usize,
    gy: &[S],
    x: &[S],
    gw: &mut [S],
) {
    for o in 0..out {
        let gwr = &mut gw[o * inp..][..inp];
        for bi in 0..batch {
            axpy_strided(gwr, gy[bi * out + o], &x[bi * inp..][..inp], 1);
        }
    }
}

/// `gb[o] += sum_b gy[b, o]`.
pub fn linear_backward_bias<S: Scalar>(batch: usize, out: usize, gy: &[S], gb: &mut [S]) {
    for (o, g) in gb.iter_mut().enumerate() {
        let mut acc = S::acc_zero();
        for bi in 0..batch {
            acc = S::acc_add(acc, gy[bi * out + o]);
        }
        *g += S::from_acc(acc);
    }
}
