//! The MobileNet tiles (`pointwise.rs`, `depthwise.rs`) against the generic kernels:
//! which shapes they take, and their results on odd sizes, padding, batches, groups,
//! channel counts that leave partial blocks, tall planes and strided fallbacks.

use super::tests::{check, ALL};
use super::{depthwise, pointwise};
use crate::init::Rng;
use crate::kernels::conv::{self as generic, ConvGeom};
use crate::kernels::test_shapes::{geom, random};

/// Which of forward, backward-input, backward-weight the 1x1 (`pw`) or the depthwise
/// (`dw`) tiles take for `g`, with the forward and (1x1) backward-input results
/// checked equal to the generic kernels'.
fn takes(rng: &mut Rng, g: &ConvGeom, dw: bool) -> [bool; 3] {
    let (cin_g, taps) = (g.c_in / g.groups, g.kh * g.kw);
    let x = random(rng, g.n * g.c_in * g.h * g.w);
    let w = random(rng, g.c_out * cin_g * taps);
    let b = random(rng, g.c_out);
    let gy = random(rng, g.n * g.c_out * g.oh * g.ow);
    let (mut y0, mut y1) = (random(rng, gy.len()), random(rng, gy.len()));
    generic::conv2d_forward(g, &x, &w, Some(&b), &mut y0);
    let fwd = if dw {
        depthwise::forward(g, &x, &w, Some(&b), &mut y1)
    } else {
        pointwise::forward(g, &x, &w, Some(&b), &mut y1)
    };
    if fwd {
        assert_eq!(y1, y0, "forward {g:?}");
    }
    let mut gx0 = random(rng, x.len());
    let mut gx1 = gx0.clone();
    generic::conv2d_backward_input(g, &gy, &w, &mut gx0);
    let bwi = if dw {
        depthwise::backward_input(g, &gy, &w, &mut gx1)
    } else {
        pointwise::backward_input(g, &gy, &w, &mut gx1)
    };
    if bwi && !dw {
        // The same additions in the same order: equal, not just close.
        assert_eq!(gx1, gx0, "backward-input {g:?}");
    }
    let mut gw = random(rng, w.len());
    let bww = if dw {
        depthwise::backward_weight(g, &gy, &x, &mut gw)
    } else {
        pointwise::backward_weight(g, &gy, &x, &mut gw)
    };
    [fwd, bwi, bww]
}

#[test]
fn pointwise_shapes_match_generic() {
    let mut rng = Rng::new(21);
    // (n, c_in, c_out, [h, w], groups): channel blocks of 1..3 rows, positions not a
    // multiple of 4 (and fewer than 4), more input channels than a packed block
    // (`KC` = 144), groups, batches.
    let cases = [
        (1, 16, 32, [14, 14], 1),
        (2, 6, 5, [9, 7], 1),
        (1, 9, 7, [5, 5], 1),
        (1, 3, 1, [1, 3], 1),
        (2, 1, 2, [3, 2], 1),
        (1, 150, 6, [3, 5], 1),
        (1, 5, 150, [2, 3], 1),
        (2, 8, 6, [6, 6], 2),
        (1, 9, 12, [7, 1], 3),
    ];
    for (n, c_in, c_out, hw, groups) in cases {
        let g = geom(n, c_in, c_out, hw, [1, 1], [1, 1], [0, 0], [1, 1], groups).unwrap();
        assert_eq!(takes(&mut rng, &g, false), [true; 3], "{g:?}");
        assert_eq!(check(&mut rng, &g), ALL, "{g:?}");
    }
    // Stride 2 or padding: not a plain product, left to the other kernels.
    for (s, p) in [([2, 2], [0, 0]), ([1, 1], [1, 1]), ([1, 2], [0, 0])] {
        let g = geom(1, 4, 4, [8, 8], [1, 1], s, p, [1, 1], 1).unwrap();
        assert_eq!(takes(&mut rng, &g, false), [false; 3], "{g:?}");
        check(&mut rng, &g);
    }
}

#[test]
fn depthwise_shapes_match_generic() {
    let mut rng = Rng::new(22);
    // (n, c, [h, w], pad): odd sizes, rows narrower than a tile, odd row counts, planes
    // taller than a band (bands of an even number of rows), padding 0..2.
    let cases = [
        (1, 32, [14, 14], [1, 1]),
        (2, 5, [13, 11], [1, 1]),
        (1, 3, [9, 3], [1, 1]),
        (1, 2, [1, 6], [1, 1]),
        (1, 2, [7, 1], [1, 1]),
        (2, 3, [12, 9], [0, 0]),
        (1, 4, [11, 10], [2, 2]),
        (1, 3, [10, 9], [2, 0]),
        (1, 2, [150, 30], [1, 1]),
        (1, 2, [301, 9], [1, 1]),
    ];
    for (n, c, hw, p) in cases {
        let g = geom(n, c, c, hw, [3, 3], [1, 1], p, [1, 1], c).unwrap();
        assert_eq!(takes(&mut rng, &g, true), [true; 3], "{g:?}");
        assert_eq!(check(&mut rng, &g), ALL, "{g:?}");
    }
    // Padding 3 (beyond the kernel's reach): backward-input is left to the others.
    let g = geom(1, 2, 2, [6, 6], [3, 3], [1, 1], [3, 3], [1, 1], 2).unwrap();
    assert_eq!(takes(&mut rng, &g, true), [true, false, true], "{g:?}");
    check(&mut rng, &g);
    // One output channel per group but two inputs: only backward-weight here.
    let g = geom(2, 4, 2, [9, 9], [3, 3], [1, 1], [1, 1], [1, 1], 2).unwrap();
    assert_eq!(takes(&mut rng, &g, true), [false, false, true], "{g:?}");
    assert_eq!(check(&mut rng, &g), ALL, "{g:?}");
    // Stride 2, dilation 2, a channel multiplier of 2: left to the other kernels.
    for (s, d, m) in [([2, 2], [1, 1], 1), ([1, 1], [2, 2], 1), ([1, 1], [1, 1], 2)] {
        let g = geom(1, 3, 3 * m, [10, 9], [3, 3], s, [1, 1], d, 3).unwrap();
        assert_eq!(takes(&mut rng, &g, true), [false; 3], "{g:?}");
        check(&mut rng, &g);
    }
}
