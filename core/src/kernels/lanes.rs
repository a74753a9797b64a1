//! Long `f32` sums in eight lane-wise chains: one serial chain of additions is bound by
//! the adder's latency, eight independent ones vectorise and pipeline. The order of
//! the additions is fixed (lane `k` takes every value whose index in its run is `k`
//! modulo 8, a run's last `len % 8` values go to a ninth chain, then the chains are
//! added pairwise), so every target computes the same bits.
//!
//! [`Scalar::fold_runs`](crate::scalar::Scalar::fold_runs) and
//! [`Scalar::fold_run_pairs`](crate::scalar::Scalar::fold_run_pairs) use them for `f32`.

const LANES: usize = 8;

/// The eight chains and the tail chain, added in a fixed tree.
#[inline(always)]
fn total(l: [f32; LANES], tail: f32) -> f32 {
    ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])) + tail
}

/// `f` folded over every value of `runs` from 0, in lane-wise chains.
#[inline(always)]
pub fn fold_runs<'a>(runs: impl Iterator<Item = &'a [f32]>, f: impl Fn(f32, f32) -> f32) -> f32 {
    let (mut lanes, mut tail) = ([0.0f32; LANES], 0.0f32);
    for r in runs {
        let mut chunks = r.chunks_exact(LANES);
        for c in &mut chunks {
            for (l, &v) in lanes.iter_mut().zip(c) {
                *l = f(*l, v);
            }
        }
        for &v in chunks.remainder() {
            tail = f(tail, v);
        }
    }
    total(lanes, tail)
}

/// Two sums folded over pairs of equally long runs, in lane-wise chains.
#[inline(always)]
pub fn fold_run_pairs<'a>(
    runs: impl Iterator<Item = (&'a [f32], &'a [f32])>,
    f: impl Fn([f32; 2], f32, f32) -> [f32; 2],
) -> [f32; 2] {
    let (mut a, mut b) = ([0.0f32; LANES], [0.0f32; LANES]);
    let mut tail = [0.0f32; 2];
    for (x, y) in runs {
        let n = x.len().min(y.len());
        let (x, y) = (&x[..n], &y[..n]);
        let (mut xc, mut yc) = (x.chunks_exact(LANES), y.chunks_exact(LANES));
        for (cx, cy) in (&mut xc).zip(&mut yc) {
            for k in 0..LANES {
                [a[k], b[k]] = f([a[k], b[k]], cx[k], cy[k]);
            }
        }
        for (&u, &v) in xc.remainder().iter().zip(yc.remainder()) {
            tail = f(tail, u, v);
        }
    }
    [total(a, tail[0]), total(b, tail[1])]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lane_sums_match_a_serial_sum_over_runs_of_any_length() {
        let v: [f32; 45] = core::array::from_fn(|i| (i as f32 * 0.37).sin());
        let runs = || [&v[..0], &v[0..3], &v[3..20], &v[20..45]].into_iter();
        let serial: f32 = v.iter().sum();
        assert!((fold_runs(runs(), |a, x| a + x) - serial).abs() < 1e-5);
        let sq: f32 = v.iter().map(|x| x * x).sum();
        let pairs = runs().zip(runs());
        let [s, p] = fold_run_pairs(pairs, |[s, p], x, y| [s + x, p + x * y]);
        assert!((s - serial).abs() < 1e-5 && (p - sq).abs() < 1e-5, "{s} {p}");
    }

    #[test]
    fn lane_order_is_fixed() {
        // 1e8 + 1 - 1e8: a serial chain loses the 1, the tree adds lanes 0 and 4 first.
        let mut v = [0.0f32; 16];
        (v[0], v[1], v[4]) = (1e8, 1.0, -1e8);
        assert_eq!(v.iter().fold(0.0f32, |a, &x| a + x), 0.0);
        assert_eq!(fold_runs([&v[..]].into_iter(), |a, x| a + x), 1.0);
    }
}
