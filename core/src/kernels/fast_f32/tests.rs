//! Every specialised kernel against the plain generic one, on random shapes: odd sizes,
//! strides 1..3, padding, dilation, groups and depthwise, batches, and sizes that make
//! the kernels split channels or fall back.

use super::conv;
use crate::init::Rng;
use crate::kernels::conv::{self as generic, ConvGeom};

fn random(rng: &mut Rng, len: usize) -> Vec<f32> {
    (0..len).map(|_| rng.uniform(-1.0, 1.0)).collect()
}

/// A valid geometry, or `None` when the kernel does not fit the padded input.
#[allow(clippy::too_many_arguments)]
fn geom(
    n: usize,
    c_in: usize,
    c_out: usize,
    hw: [usize; 2],
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 2],
    d: [usize; 2],
    groups: usize,
) -> Option<ConvGeom> {
    let out = |i: usize| {
        let span = (k[i] - 1) * d[i] + 1;
        (hw[i] + 2 * p[i]).checked_sub(span).map(|v| v / s[i] + 1)
    };
    Some(ConvGeom {
        n,
        c_in,
        h: hw[0],
        w: hw[1],
        c_out,
        kh: k[0],
        kw: k[1],
        oh: out(0)?,
        ow: out(1)?,
        stride: s,
        pad: p,
        dil: d,
        groups,
    })
}

fn assert_close(what: &str, g: &ConvGeom, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        let tol = 1e-4 * (1.0 + b.abs());
        assert!((a - b).abs() <= tol, "{what} {g:?} [{i}]: {a} vs {b}");
    }
}

/// Runs all three kernels, fast and generic, on one geometry with random data; the
/// gradients start non-zero to check that both accumulate.
fn check(rng: &mut Rng, g: &ConvGeom) {
    let (cin_g, taps) = (g.c_in / g.groups, g.kh * g.kw);
    let x = random(rng, g.n * g.c_in * g.h * g.w);
    let w = random(rng, g.c_out * cin_g * taps);
    let b = random(rng, g.c_out);
    let gy = random(rng, g.n * g.c_out * g.oh * g.ow);

    let bias = if rng.below(2) == 0 { Some(&b[..]) } else { None };
    let mut y0 = random(rng, gy.len());
    let mut y1 = y0.clone();
    generic::conv2d_forward(g, &x, &w, bias, &mut y0);
    conv::conv2d_forward(g, &x, &w, bias, &mut y1);
    assert_close("forward", g, &y1, &y0);

    let mut gx0 = random(rng, x.len());
    let mut gx1 = gx0.clone();
    generic::conv2d_backward_input(g, &gy, &w, &mut gx0);
    conv::conv2d_backward_input(g, &gy, &w, &mut gx1);
    assert_close("backward-input", g, &gx1, &gx0);

    let mut gw0 = random(rng, w.len());
    let mut gw1 = gw0.clone();
    generic::conv2d_backward_weight(g, &gy, &x, &mut gw0);
    conv::conv2d_backward_weight(g, &gy, &x, &mut gw1);
    assert_close("backward-weight", g, &gw1, &gw0);
}

#[test]
fn w1_layers_match_generic() {
    let mut rng = Rng::new(1);
    for n in [1, 3] {
        for (c_in, c_out, hw) in [(1, 8, 28), (8, 16, 14), (16, 32, 7), (16, 32, 6), (1, 8, 12)] {
            let g = geom(n, c_in, c_out, [hw, hw + 3], [3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
            check(&mut rng, &g);
        }
    }
}

#[test]
fn random_shapes_match_generic() {
    let mut rng = Rng::new(7);
    let mut tested = 0;
    while tested < 400 {
        let groups = [1, 1, 2, 3][rng.below(4)];
        let c_in = groups * (1 + rng.below(5));
        let c_out = groups * (1 + rng.below(6));
        let k = [1 + rng.below(4), 1 + rng.below(4)];
        let s = [1 + rng.below(3), 1 + rng.below(3)];
        let p = [rng.below(3), rng.below(3)];
        let d = [1 + rng.below(2), 1 + rng.below(2)];
        let hw = [1 + rng.below(19), 1 + rng.below(19)];
        let n = 1 + rng.below(2);
        if let Some(g) = geom(n, c_in, c_out, hw, k, s, p, d, groups) {
            check(&mut rng, &g);
            tested += 1;
        }
    }
}

#[test]
fn depthwise_matches_generic() {
    let mut rng = Rng::new(3);
    for (c, hw, s) in [(8, [9, 13], [1, 1]), (6, [10, 7], [2, 2]), (5, [17, 17], [1, 2])] {
        let g = geom(2, c, c, hw, [3, 3], s, [1, 1], [1, 1], c).unwrap();
        check(&mut rng, &g);
        let g = geom(1, c, 2 * c, hw, [3, 3], s, [1, 1], [1, 1], c).unwrap();
        check(&mut rng, &g);
    }
}

#[test]
fn channel_splitting_and_fallbacks_match_generic() {
    let mut rng = Rng::new(5);
    // Many channels: the plane buffer holds only some of them per pass.
    let g = geom(1, 70, 9, [12, 11], [3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
    check(&mut rng, &g);
    // One plane larger than the buffer: generic fallback.
    let g = geom(1, 1, 2, [100, 90], [3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
    check(&mut rng, &g);
    // More taps than the tiled kernels take: generic fallback.
    let g = geom(1, 2, 3, [12, 12], [9, 9], [1, 1], [4, 4], [1, 1], 1).unwrap();
    check(&mut rng, &g);
    // Padding wider than the kernel reach: backward-input falls back.
    let g = geom(1, 2, 3, [5, 6], [1, 1], [1, 1], [2, 1], [1, 1], 1).unwrap();
    check(&mut rng, &g);
}
