//! Winograd's backward-weight (`winograd_weight.rs`) against the generic kernel, with a
//! bound on the difference relative to `sum |gy| |x|` (the transforms round
//! differently), its non-finite values, and the shapes it declines.

use super::avx2::winograd_backward_weight;
use super::winograd_weight;
use crate::init::Rng;
use crate::kernels::conv::{self as generic, ConvGeom};
use crate::kernels::test_shapes::{geom, random};

/// Bound on `|winograd - generic|` per weight, as a fraction of `sum |gy| |x|` over its
/// products (plus the starting value of `gw`): 2^-18, 64 times `f32`'s unit roundoff.
/// Both kernels add up to `n * h * w` products one after another in `f32` (6272 for
/// W1's conv2 at batch 32: typically `sqrt` of that, some 80 roundoffs of the sum);
/// Winograd's transforms multiply the magnitudes by up to 4 (`B^T d B`, `A gy A^T`)
/// and `G^T M G` adds 16 terms. The worst seen over the shapes below is printed; a
/// wrong transform coefficient gives errors of the order of the sum itself.
const REL: f32 = 1.0 / 262_144.0;

fn abs(v: &[f32]) -> Vec<f32> {
    v.iter().map(|x| x.abs()).collect()
}

fn avx2() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
}

fn g3(n: usize, c_in: usize, c_out: usize, hw: [usize; 2]) -> ConvGeom {
    geom(n, c_in, c_out, hw, [3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap()
}

/// Worst `|winograd - generic| / (|gw0| + sum |gy| |x|)` of `g` (which Winograd must
/// take), `gw` starting from random values.
fn compare(rng: &mut Rng, g: &ConvGeom) -> f32 {
    let x = random(rng, g.n * g.c_in * g.h * g.w);
    let gy = random(rng, g.n * g.c_out * g.oh * g.ow);
    let gw0 = random(rng, g.c_out * g.c_in * 9);
    let mut want = gw0.clone();
    generic::conv2d_backward_weight(g, &gy, &x, &mut want);
    let mut scale = abs(&gw0);
    generic::conv2d_backward_weight(g, &abs(&gy), &abs(&x), &mut scale);
    let mut got = gw0.clone();
    assert!(winograd_backward_weight(g, &gy, &x, &mut got), "{g:?}");
    // 16-lane products (where the CPU has them) give the 8-lane ones bit for bit.
    let mut narrow = gw0.clone();
    assert!(super::avx2::winograd_backward_weight_narrow(
        g,
        &gy,
        &x,
        &mut narrow
    ));
    assert_eq!(got, narrow, "{g:?}");
    let mut worst = 0.0f32;
    for ((a, b), s) in got.iter().zip(&want).zip(&scale) {
        let d = (a - b).abs() / s.max(1e-30);
        assert!(!d.is_nan(), "{g:?}: {a} vs {b}");
        worst = worst.max(d);
    }
    worst
}

#[test]
fn winograd_weight_matches_generic_within_the_bound() {
    if !avx2() {
        return;
    }
    let mut rng = Rng::new(41);
    let mut seen = 0.0f32;
    // W1's conv2 and conv3 at batches 32 and 1, then odd planes (1x1 up), channels
    // that are not multiples of 4 or 8, batches that are not multiples of 8, one
    // channel in or out, many.
    for (n, c_in, c_out, hw) in [
        (32, 8, 16, [14, 14]),
        (32, 16, 32, [7, 7]),
        (1, 8, 16, [14, 14]),
        (1, 16, 32, [7, 7]),
        (9, 5, 7, [13, 11]),
        (3, 3, 6, [1, 1]),
        (2, 4, 5, [1, 6]),
        (7, 6, 3, [2, 3]),
        (8, 1, 9, [5, 9]),
        (10, 7, 1, [9, 5]),
        (16, 2, 2, [3, 4]),
        (5, 17, 13, [6, 11]),
        (37, 13, 11, [7, 5]),
        (4, 40, 8, [4, 4]),
        (2, 8, 64, [15, 1]),
        (3, 10, 24, [9, 9]),
    ] {
        let g = g3(n, c_in, c_out, hw);
        let d = compare(&mut rng, &g);
        assert!(d <= REL, "{g:?}: {d}");
        seen = seen.max(d);
    }
    std::println!("worst relative difference {seen:e} (bound {REL:e})");
}

/// A wrong transform must fail the bound: the same comparison with one tap of the
/// result moved is far outside it (the bound can fail).
#[test]
fn the_bound_catches_a_wrong_weight() {
    if !avx2() {
        return;
    }
    let mut rng = Rng::new(43);
    let g = g3(9, 5, 7, [13, 11]);
    let x = random(&mut rng, g.n * g.c_in * g.h * g.w);
    let gy = random(&mut rng, g.n * g.c_out * g.oh * g.ow);
    let mut want = vec![0.0; g.c_out * g.c_in * 9];
    generic::conv2d_backward_weight(&g, &gy, &x, &mut want);
    let mut scale = vec![0.0; want.len()];
    generic::conv2d_backward_weight(&g, &abs(&gy), &abs(&x), &mut scale);
    let mut got = vec![0.0; want.len()];
    assert!(winograd_backward_weight(&g, &gy, &x, &mut got));
    got.swap(0, 1);
    let d = (got[0] - want[0]).abs() / scale[0];
    assert!(d > 100.0 * REL, "{d}");
}

/// A non-finite value in `x` or `gy` makes Winograd decline (nothing written; its
/// transforms would reach more taps than the direct kernels), and the dispatch gives
/// the strip kernel's weights: non-finite wherever the generic kernel's are (and, as
/// before this kernel, at some edge taps whose products meet the padding).
#[test]
fn non_finite_values_reach_the_weights_the_direct_kernel_reaches() {
    if !avx2() {
        return;
    }
    let mut rng = Rng::new(47);
    let finite = |v: &[f32]| v.iter().map(|f| f.is_finite()).collect::<Vec<_>>();
    for (n, c_in, c_out, hw) in [
        (32, 8, 16, [14, 14]),
        (32, 16, 32, [7, 7]),
        (9, 8, 16, [14, 13]),
        (12, 9, 10, [6, 5]),
    ] {
        let g = g3(n, c_in, c_out, hw);
        assert!(winograd_weight::pays(&g), "{g:?}");
        // One non-finite value at a time, in x or gy: corners, edges, anywhere.
        for (i, v) in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN]
            .into_iter()
            .cycle()
            .take(12)
            .enumerate()
        {
            let mut x = random(&mut rng, g.n * g.c_in * g.h * g.w);
            let mut gy = random(&mut rng, g.n * g.c_out * g.oh * g.ow);
            let plane = g.h * g.w;
            let t = if (i / 4 + i) % 2 == 0 { &mut x } else { &mut gy };
            let planes = t.len() / plane;
            let at = match i % 4 {
                0 => rng.below(planes) * plane,
                1 => rng.below(planes) * plane + plane - 1,
                2 => rng.below(planes) * plane + g.w - 1,
                _ => rng.below(t.len()),
            };
            t[at] = v;
            let gw0 = random(&mut rng, g.c_out * g.c_in * 9);
            let (mut want, mut got) = (gw0.clone(), gw0.clone());
            let (mut routed, mut strip) = (gw0.clone(), gw0.clone());
            generic::conv2d_backward_weight(&g, &gy, &x, &mut want);
            assert!(!winograd_backward_weight(&g, &gy, &x, &mut got), "{g:?} {i}");
            assert_eq!(got, gw0);
            assert!(super::avx2::conv2d_backward_weight(&g, &gy, &x, &mut routed));
            assert!(super::avx2::strip_backward_weight(&g, &gy, &x, &mut strip));
            assert_eq!(finite(&routed), finite(&strip), "{g:?} {i}");
            assert!(want.iter().any(|w| !w.is_finite()), "{g:?} {i}");
            for (j, (&r, &w)) in routed.iter().zip(&want).enumerate() {
                assert!(w.is_finite() || !r.is_finite(), "{g:?} {i}: weight {j}");
            }
        }
    }
}

/// Other convolutions, and shapes the buffers cannot hold, are declined without
/// writing anything.
#[test]
fn declined_shapes_write_nothing() {
    if !avx2() {
        return;
    }
    let mut rng = Rng::new(53);
    for (n, c_in, c_out, hw, k, s, p, d, groups) in [
        (8, 80, 8, [7, 7], [3, 3], [1, 1], [1, 1], [1, 1], 1),
        (8, 8, 200, [7, 7], [3, 3], [1, 1], [1, 1], [1, 1], 1),
        (8, 8, 8, [7, 300], [3, 3], [1, 1], [1, 1], [1, 1], 1),
        (8, 8, 8, [60, 60], [3, 3], [1, 1], [1, 1], [1, 1], 1),
        (8, 8, 8, [7, 7], [3, 3], [2, 2], [1, 1], [1, 1], 1),
        (8, 8, 8, [7, 7], [3, 3], [1, 1], [0, 0], [1, 1], 1),
        (8, 8, 8, [7, 7], [3, 3], [1, 1], [2, 2], [2, 2], 1),
        (8, 8, 8, [7, 7], [3, 3], [1, 1], [1, 1], [1, 1], 2),
        (8, 8, 8, [7, 7], [5, 5], [1, 1], [1, 1], [1, 1], 1),
        (8, 8, 8, [7, 7], [1, 3], [1, 1], [1, 1], [1, 1], 1),
        (0, 8, 8, [7, 7], [3, 3], [1, 1], [1, 1], [1, 1], 1),
    ] {
        let g = geom(n, c_in, c_out, hw, k, s, p, d, groups).unwrap();
        let x = random(&mut rng, g.n * g.c_in * g.h * g.w);
        let gy = random(&mut rng, g.n * g.c_out * g.oh * g.ow);
        let gw0 = random(&mut rng, g.c_out * g.c_in / groups * k[0] * k[1]);
        let mut gw = gw0.clone();
        assert!(!winograd_backward_weight(&g, &gy, &x, &mut gw), "{g:?}");
        assert_eq!(gw, gw0);
    }
}

/// The dispatch routes the measured shapes here (bit for bit this kernel): W1's conv2
/// and conv3 at batch 32, conv2 at batch 1; not conv3 at batch 1 nor fewer channels.
#[test]
fn dispatch_routes_only_the_measured_shapes() {
    if !avx2() {
        return;
    }
    let routed = [
        g3(32, 8, 16, [14, 14]),
        g3(32, 16, 32, [7, 7]),
        g3(1, 8, 16, [14, 14]),
    ];
    for g in &routed {
        assert!(winograd_weight::pays(g), "{g:?}");
    }
    for g in [
        g3(1, 16, 32, [7, 7]),
        g3(32, 4, 16, [14, 14]),
        g3(32, 8, 4, [7, 7]),
    ] {
        assert!(!winograd_weight::pays(&g), "{g:?}");
    }
    let mut rng = Rng::new(59);
    for g in &routed {
        let x = random(&mut rng, g.n * g.c_in * g.h * g.w);
        let gy = random(&mut rng, g.n * g.c_out * g.oh * g.ow);
        let gw0 = random(&mut rng, g.c_out * g.c_in * 9);
        let (mut a, mut b) = (gw0.clone(), gw0.clone());
        assert!(winograd_backward_weight(g, &gy, &x, &mut a));
        assert!(super::avx2::conv2d_backward_weight(g, &gy, &x, &mut b));
        assert_eq!(a, b, "{g:?}");
    }
}
