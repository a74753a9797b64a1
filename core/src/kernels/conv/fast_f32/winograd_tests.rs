//! The Winograd kernels (`winograd.rs`) against the generic ones, with a bound on the
//! difference relative to `sum |w| |x|` (the transforms round differently).

use super::winograd;
use crate::init::Rng;
use crate::kernels::conv::{self as generic, ConvGeom};
use crate::kernels::test_shapes::{geom, random};

/// Bound on `|winograd - generic|` per output, as a fraction of `sum |w| |x|` over its
/// window (plus `|bias|` or the starting value of the gradient): 2^-18, 64 times `f32`'s
/// unit roundoff. The generic kernel rounds each of its `9 * channels` sums (its own
/// error is typically `sqrt(9 c)` roundings of that sum, at most `9 c`); Winograd's
/// transforms add a few roundings of values up to 4 times the inputs (`B^T d B`), 2.25
/// times the weights (`G g G^T`) and 9 times the products (`A^T M A`). The worst seen
/// over the shapes below is about 3e-7 (5 roundoffs); a wrong transform coefficient
/// gives errors of the order of the sum itself.
const REL: f32 = 1.0 / 262_144.0;

fn abs(v: &[f32]) -> Vec<f32> {
    v.iter().map(|x| x.abs()).collect()
}

/// Largest `|got - want| / scale` (`scale` the magnitude sum, floored at a tiny value).
fn worst(got: &[f32], want: &[f32], scale: &[f32]) -> f32 {
    let mut w = 0.0f32;
    for ((a, b), s) in got.iter().zip(want).zip(scale) {
        let d = (a - b).abs() / s.max(1e-30);
        assert!(!d.is_nan(), "{a} vs {b}");
        w = w.max(d);
    }
    w
}

/// Forward and backward-input of `g` (which Winograd must take) against the generic
/// kernels; returns the worst relative difference of each.
fn compare(rng: &mut Rng, g: &ConvGeom) -> [f32; 2] {
    let x = random(rng, g.n * g.c_in * g.h * g.w);
    let w = random(rng, g.c_out * g.c_in * 9);
    let b = random(rng, g.c_out);
    let gy = random(rng, g.n * g.c_out * g.oh * g.ow);
    let gx0 = random(rng, x.len());

    let b = g.c_out.is_multiple_of(2).then_some(&b[..]);
    let mut want = vec![0.0; gy.len()];
    generic::conv2d_forward(g, &x, &w, b, &mut want);
    let mut scale = vec![0.0; gy.len()];
    let b_abs = b.map(abs);
    generic::conv2d_forward(g, &abs(&x), &abs(&w), b_abs.as_deref(), &mut scale);
    let mut got = vec![f32::NAN; gy.len()];
    assert!(
        super::avx2::winograd_forward(g, &x, &w, b, &mut got, true),
        "{g:?}"
    );
    let fwd = worst(&got, &want, &scale);
    // 16-lane products (where the CPU has them) give the 8-lane ones bit for bit.
    let mut narrow = vec![f32::NAN; gy.len()];
    assert!(super::avx2::winograd_forward(g, &x, &w, b, &mut narrow, false));
    assert_eq!(got, narrow, "{g:?}");

    let mut want = gx0.clone();
    generic::conv2d_backward_input(g, &gy, &w, &mut want);
    let mut scale = abs(&gx0);
    generic::conv2d_backward_input(g, &abs(&gy), &abs(&w), &mut scale);
    let mut got = gx0.clone();
    assert!(
        super::avx2::winograd_backward_input(g, &gy, &w, &mut got, true),
        "{g:?}"
    );
    let bwd = worst(&got, &want, &scale);
    let mut narrow = gx0.clone();
    assert!(super::avx2::winograd_backward_input(
        g,
        &gy,
        &w,
        &mut narrow,
        false
    ));
    assert_eq!(got, narrow, "{g:?}");
    [fwd, bwd]
}

fn avx2() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
}

#[test]
fn winograd_matches_generic_within_the_bound() {
    if !avx2() {
        return;
    }
    let mut rng = Rng::new(23);
    let mut seen = 0.0f32;
    // W1's conv2 and conv3 at batches 32 and 1, then odd planes (1x1 up), leftover
    // channels (not multiples of 4), batches that leave 1-7 samples in the last group
    // of 8 or 1-15 in the last of 16, one channel in or out, many channels (more than
    // 16 in: chunks of input channels in the 16-lane path; more than 32: 8-sample
    // groups only).
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
        (4, 40, 8, [4, 4]),
        (2, 8, 64, [15, 1]),
        (25, 5, 7, [9, 7]),
        (20, 32, 16, [7, 7]),
        (17, 33, 6, [5, 5]),
        (18, 24, 3, [5, 6]),
        (19, 20, 8, [3, 7]),
    ] {
        let g = geom(n, c_in, c_out, hw, [3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
        let [f, b] = compare(&mut rng, &g);
        assert!(f <= REL && b <= REL, "{g:?}: forward {f}, backward-input {b}");
        seen = seen.max(f).max(b);
    }
    std::println!("worst relative difference {seen:e} (bound {REL:e})");
}

/// W1's conv3 at batch 32 goes through Winograd in the dispatch (bit for bit the
/// Winograd kernel), and conv2 with AVX-512F; batch 1, too few channels and planes 16
/// wide keep the strip kernels.
#[test]
fn dispatch_routes_only_the_measured_shapes() {
    if !avx2() {
        return;
    }
    let g3 = |n, c_in, c_out, hw| geom(n, c_in, c_out, hw, [3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
    let conv3 = g3(32, 16, 32, [7, 7]);
    assert!(winograd::pays(&conv3));
    let conv2 = g3(32, 8, 16, [14, 14]);
    let wide = std::is_x86_feature_detected!("avx512f");
    assert_eq!(winograd::pays(&conv2), wide);
    for g in [
        g3(32, 8, 16, [16, 16]),
        g3(1, 16, 32, [7, 7]),
        g3(9, 16, 32, [7, 7]),
        g3(32, 4, 32, [7, 7]),
    ] {
        assert!(!winograd::pays(&g), "{g:?}");
    }
    let mut rng = Rng::new(29);
    let g = conv3;
    let x = random(&mut rng, g.n * g.c_in * g.h * g.w);
    let w = random(&mut rng, g.c_out * g.c_in * 9);
    let gy = random(&mut rng, g.n * g.c_out * g.oh * g.ow);
    let (mut y0, mut y1) = (vec![0.0; gy.len()], vec![1.0; gy.len()]);
    assert!(super::avx2::winograd_forward(&g, &x, &w, None, &mut y0, true));
    super::conv::conv2d_forward(&g, &x, &w, None, &mut y1);
    assert_eq!(y0, y1);
    let (mut gx0, mut gx1) = (x.clone(), x.clone());
    assert!(super::avx2::winograd_backward_input(&g, &gy, &w, &mut gx0, true));
    super::conv::conv2d_backward_input(&g, &gy, &w, &mut gx1);
    assert_eq!(gx0, gx1);
}

/// Shapes the buffers cannot hold, and other convolutions, are declined without
/// writing anything.
#[test]
fn declined_shapes_write_nothing() {
    if !avx2() {
        return;
    }
    let mut rng = Rng::new(31);
    for (n, c_in, c_out, hw, k, s, p, d, groups) in [
        (8, 80, 8, [7, 7], [3, 3], [1, 1], [1, 1], [1, 1], 1),
        (8, 8, 200, [7, 7], [3, 3], [1, 1], [1, 1], [1, 1], 1),
        (8, 8, 8, [7, 300], [3, 3], [1, 1], [1, 1], [1, 1], 1),
        (8, 8, 8, [7, 7], [3, 3], [2, 2], [1, 1], [1, 1], 1),
        (8, 8, 8, [7, 7], [3, 3], [1, 1], [0, 0], [1, 1], 1),
        (8, 8, 8, [7, 7], [3, 3], [1, 1], [2, 2], [2, 2], 1),
        (8, 8, 8, [7, 7], [3, 3], [1, 1], [1, 1], [1, 1], 2),
        (8, 8, 8, [7, 7], [5, 5], [1, 1], [1, 1], [1, 1], 1),
    ] {
        let g = geom(n, c_in, c_out, hw, k, s, p, d, groups).unwrap();
        let x = random(&mut rng, g.n * g.c_in * g.h * g.w);
        let w = random(&mut rng, g.c_out * g.c_in / groups * k[0] * k[1]);
        let y0 = random(&mut rng, g.n * g.c_out * g.oh * g.ow);
        let mut y = y0.clone();
        assert!(
            !super::avx2::winograd_forward(&g, &x, &w, None, &mut y, true),
            "{g:?}"
        );
        assert_eq!(y, y0);
        let mut gx = x.clone();
        assert!(
            !super::avx2::winograd_backward_input(&g, &y0, &w, &mut gx, true),
            "{g:?}"
        );
        assert_eq!(gx, x);
    }
}

/// A non-finite input gives a non-finite output exactly where the direct convolution
/// does (the outputs whose windows hold it), in its own sample only.
#[test]
fn non_finite_inputs_reach_the_outputs_the_direct_convolution_reaches() {
    if !avx2() {
        return;
    }
    let mut rng = Rng::new(37);
    for (n, c_in, c_out, hw) in [(32, 16, 32, [7, 7]), (9, 8, 16, [14, 13])] {
        let g = geom(n, c_in, c_out, hw, [3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
        let mut x = random(&mut rng, g.n * g.c_in * g.h * g.w);
        let w = random(&mut rng, g.c_out * g.c_in * 9);
        let mut gy = random(&mut rng, g.n * g.c_out * g.oh * g.ow);
        // Corners, edges and the middle of planes, in several samples and channels.
        for (i, v) in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN]
            .into_iter()
            .cycle()
            .take(12)
            .enumerate()
        {
            let at = rng.below(x.len());
            x[if i < 3 { i * g.h * g.w * 5 } else { at }] = v;
            let at = rng.below(gy.len());
            gy[at] = v;
        }
        let finite = |v: &[f32]| v.iter().map(|f| f.is_finite()).collect::<Vec<_>>();
        let (mut y0, mut y1) = (vec![0.0; gy.len()], vec![0.0; gy.len()]);
        generic::conv2d_forward(&g, &x, &w, None, &mut y0);
        assert!(super::avx2::winograd_forward(&g, &x, &w, None, &mut y1, true));
        assert_eq!(finite(&y1), finite(&y0), "{g:?}");
        assert!(y0.iter().any(|v| !v.is_finite()));
        let (mut gx0, mut gx1) = (vec![0.0; x.len()], vec![0.0; x.len()]);
        generic::conv2d_backward_input(&g, &gy, &w, &mut gx0);
        assert!(super::avx2::winograd_backward_input(&g, &gy, &w, &mut gx1, true));
        assert_eq!(finite(&gx1), finite(&gx0), "{g:?}");
    }
}
