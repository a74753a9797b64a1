//! Broadcast element-wise kernels: `y = f(a, b)` where `a` and `b` broadcast to `y`'s
//! shape (NumPy/PyTorch rules), and the gradients that sum over the broadcast dims.
//!
//! The output's index space is collapsed into at most [`MAX_RANK`] runs of dims that
//! each operand walks with one stride (0 where it is broadcast), so that the inner loop
//! is a plain row: both operands contiguous (same shapes), or one of them a constant
//! (a squeeze-and-excitation scale, a per-channel bias).

use super::elementwise::{grad_map, zip_map};
use crate::scalar::Scalar;
use crate::shape::{Shape, MAX_RANK};

/// How two operands walk an output: collapsed dims, outermost first, and each
/// operand's element stride per dim.
#[derive(Clone, Copy, Debug)]
pub struct Broadcast {
    dims: [usize; MAX_RANK],
    a: [usize; MAX_RANK],
    b: [usize; MAX_RANK],
    rank: usize,
}

/// The strides of `x` read at each dim of `out` (aligned from the right), 0 where `x`
/// has 1 and `out` more.
fn strides(out: &Shape, x: &Shape) -> [usize; MAX_RANK] {
    let mut s = [0; MAX_RANK];
    let mut step = 1;
    for i in 0..out.rank() {
        let d = x.dim_from_end(i);
        let k = out.rank() - 1 - i;
        s[k] = if d == 1 { 0 } else { step };
        step *= d;
    }
    s
}

impl Broadcast {
    /// The walk of `a` and `b` over `out`, which the caller checked is
    /// `a.broadcast(b)` (or a shape both broadcast to).
    pub fn new(out: &Shape, a: &Shape, b: &Shape) -> Broadcast {
        let (sa, sb) = (strides(out, a), strides(out, b));
        let mut walk = Broadcast {
            dims: [1; MAX_RANK],
            a: [0; MAX_RANK],
            b: [0; MAX_RANK],
            rank: 0,
        };
        for (k, &d) in out.dims().iter().enumerate() {
            if d == 1 {
                continue;
            }
            let r = walk.rank;
            // Merge into the previous (outer) run when both operands step through
            // this dim as a continuation of it.
            let merges = r > 0 && sa[k] * d == walk.a[r - 1] && sb[k] * d == walk.b[r - 1];
            if merges {
                walk.dims[r - 1] *= d;
                walk.a[r - 1] = sa[k];
                walk.b[r - 1] = sb[k];
            } else {
                walk.dims[r] = d;
                walk.a[r] = sa[k];
                walk.b[r] = sb[k];
                walk.rank += 1;
            }
        }
        walk
    }

    /// Calls `row(y, a, b, len, a_step, b_step)` for every innermost row: `y` the
    /// output offset (rows are contiguous in the output), `a` and `b` the operands'
    /// offsets, steps 1 or 0. (Not inlined, and `row` behind a pointer: one copy of
    /// the walk in a program, whatever ops and scalar types use it.)
    #[inline(never)]
    pub fn rows(&self, row: &mut dyn FnMut(usize, usize, usize, usize, usize, usize)) {
        if self.rank == 0 {
            return row(0, 0, 0, 1, 0, 0);
        }
        let last = self.rank - 1;
        let len = self.dims[last];
        let outer: usize = self.dims[..last].iter().product();
        let mut idx = [0usize; MAX_RANK];
        let (mut oa, mut ob) = (0usize, 0usize);
        for r in 0..outer {
            row(r * len, oa, ob, len, self.a[last], self.b[last]);
            // Odometer over the outer dims, innermost of them first.
            for k in (0..last).rev() {
                idx[k] += 1;
                oa += self.a[k];
                ob += self.b[k];
                if idx[k] < self.dims[k] {
                    break;
                }
                oa -= self.a[k] * self.dims[k];
                ob -= self.b[k] * self.dims[k];
                idx[k] = 0;
            }
        }
    }
}

/// `x[off + j * step]` for `j < len`, step 1 or 0: a row, or one value repeated.
fn row_of<S: Scalar>(x: &[S], off: usize, step: usize, len: usize) -> &[S] {
    let end = if step == 0 { off + 1 } else { off + len };
    x.get(off..end).unwrap_or(&[])
}

/// `x[off + j * step]`, or zero past the end (never, for a walk of checked shapes).
#[inline(always)]
fn at<S: Scalar>(x: &[S], off: usize, j: usize, step: usize) -> S {
    x.get(off + j * step).copied().unwrap_or(S::ZERO)
}

/// `y = f(a, b)` with `a` and `b` broadcast to `y` by `walk`: contiguous rows as one
/// vectorisable loop, the others (a constant on one side) by their steps.
pub fn zip<S: Scalar>(walk: &Broadcast, a: &[S], b: &[S], y: &mut [S], f: impl Fn(S, S) -> S) {
    walk.rows(&mut |o, ia, ib, len, sa, sb| {
        let Some(y) = y.get_mut(o..o + len) else {
            return;
        };
        if sa == 1 && sb == 1 {
            return zip_map(row_of(a, ia, 1, len), row_of(b, ib, 1, len), y, &f);
        }
        if sa == 1 {
            // A constant second operand (a squeeze-and-excitation scale, a bias).
            let bv = at(b, ib, 0, 0);
            return y
                .iter_mut()
                .zip(row_of(a, ia, 1, len))
                .for_each(|(v, &av)| *v = f(av, bv));
        }
        for (j, v) in y.iter_mut().enumerate() {
            *v = f(at(a, ia, j, sa), at(b, ib, j, sb));
        }
    });
}

/// `gx += h(gy, other)` summed over the dims `x` is broadcast in, where `walk` walks
/// `x` as its first operand and `other` as its second over `gy`'s shape.
pub fn grad<S: Scalar>(walk: &Broadcast, gy: &[S], other: &[S], gx: &mut [S], h: impl Fn(S, S) -> S) {
    walk.rows(&mut |o, ix, io, len, sx, so| {
        let Some(gy) = gy.get(o..o + len) else {
            return;
        };
        let span = if sx == 0 { 1 } else { len };
        match (sx, gx.get_mut(ix..ix + span)) {
            (1, Some(gx)) if so == 1 => grad_map(gy, row_of(other, io, 1, len), gx, &h),
            (1, Some(gx)) => {
                for (j, (d, &g)) in gx.iter_mut().zip(gy).enumerate() {
                    *d += h(g, at(other, io, j, so));
                }
            }
            // A broadcast row of x: the row's sum goes to its one element.
            (_, Some(gx)) => {
                let sum = gy
                    .iter()
                    .enumerate()
                    .fold(S::ZERO, |acc, (j, &g)| acc + h(g, at(other, io, j, so)));
                if let Some(d) = gx.first_mut() {
                    *d += sum;
                }
            }
            _ => {}
        }
    });
}

/// div's gradient for its divisor: `gb -= gy * (a / b) / b`, summed over the dims `b`
/// was broadcast in, `walk` walking `a` then `b` over `gy`'s shape.
pub fn div_grad_b<S: Scalar>(walk: &Broadcast, gy: &[S], a: &[S], b: &[S], gb: &mut [S]) {
    walk.rows(&mut |o, ia, ib, len, sa, sb| {
        for j in 0..len {
            let (Some(&g), Some(&av), Some(&bv)) = (gy.get(o + j), a.get(ia + j * sa), b.get(ib + j * sb))
            else {
                return;
            };
            if let Some(d) = gb.get_mut(ib + j * sb) {
                *d += -(g * av.div(bv)).div(bv);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(d: &[usize]) -> Shape {
        Shape::new(d).unwrap()
    }

    /// The reference: every output index mapped back to each operand by hand.
    fn naive(out: &[usize], x: &[usize], i: usize) -> usize {
        let (mut rem, mut off, mut step) = (i, 0, 1);
        for k in (0..out.len()).rev() {
            let d = out[k];
            let (c, r) = (rem % d, rem / d);
            rem = r;
            let back = out.len() - 1 - k;
            if back < x.len() {
                let xd = x[x.len() - 1 - back];
                if xd != 1 {
                    off += c * step;
                }
                step *= xd;
            }
        }
        off
    }

    #[test]
    fn the_walk_matches_index_arithmetic() {
        let cases: &[(&[usize], &[usize])] = &[
            (&[2, 3, 4, 5], &[2, 3, 1, 1]),
            (&[2, 3, 4, 5], &[3, 1, 1]),
            (&[2, 3, 4, 5], &[1, 3, 4, 1]),
            (&[3, 1], &[4]),
            (&[2, 3], &[2, 3]),
            (&[], &[2, 2]),
            (&[5], &[1, 5]),
            (&[2, 1, 4], &[1, 3, 1]),
        ];
        for &(a, b) in cases {
            let out = s(a).broadcast(&s(b)).unwrap();
            let walk = Broadcast::new(&out, &s(a), &s(b));
            let mut seen = std::vec![];
            walk.rows(&mut |o, ia, ib, len, sa, sb| {
                for j in 0..len {
                    seen.push((o + j, ia + j * sa, ib + j * sb));
                }
            });
            let want: std::vec::Vec<_> = (0..out.numel())
                .map(|i| (i, naive(out.dims(), a, i), naive(out.dims(), b, i)))
                .collect();
            assert_eq!(seen, want, "{a:?} with {b:?}");
        }
    }

    #[test]
    fn a_broadcast_gradient_sums_over_the_broadcast_dims() {
        // y = a * b, a [2, 3], b [3]: gb[j] = sum_i gy[i, j] * a[i, j].
        let (sa, sb) = (s(&[2, 3]), s(&[3]));
        let out = sa.broadcast(&sb).unwrap();
        let a = [1.0f32, 2., 3., 4., 5., 6.];
        let b = [10.0f32, 20., 30.];
        let mut y = [0.0f32; 6];
        zip(&Broadcast::new(&out, &sa, &sb), &a, &b, &mut y, |x, z| x * z);
        assert_eq!(y, [10., 40., 90., 40., 100., 180.]);
        let gy = [1.0f32; 6];
        let mut gb = [0.0f32; 3];
        grad(&Broadcast::new(&out, &sb, &sa), &gy, &a, &mut gb, |g, o| g * o);
        assert_eq!(gb, [5., 7., 9.]);
        let mut ga = [0.0f32; 6];
        grad(&Broadcast::new(&out, &sa, &sb), &gy, &b, &mut ga, |g, o| g * o);
        assert_eq!(ga, [10., 20., 30., 10., 20., 30.]);
        // A column [2, 1] against [2, 3]: each row of the output sums into one element.
        let sc = s(&[2, 1]);
        let mut gc = [0.0f32; 2];
        grad(&Broadcast::new(&out, &sc, &sa), &gy, &a, &mut gc, |g, o| g * o);
        assert_eq!(gc, [6., 15.]);
    }
}
