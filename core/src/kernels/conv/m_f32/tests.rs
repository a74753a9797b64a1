//! Every M-profile kernel against the plain generic one, on random shapes: odd sizes,
//! strides 1..3, padding, dilation, groups and depthwise, batches, and sizes that make
//! the kernels split channels or fall back.

use crate::init::Rng;
use crate::kernels::conv::m_f32 as mk;
use crate::kernels::conv::{self as generic, ConvGeom};
use crate::kernels::test_shapes::{geom, random};

fn assert_close(what: &str, g: &ConvGeom, got: &[f32], want: &[f32], terms: usize) {
    assert_eq!(got.len(), want.len());
    let scale = (terms as f32 / 1000.0).max(1.0);
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        let tol = 1e-4 * scale * (1.0 + b.abs());
        assert!((a - b).abs() <= tol, "{what} {g:?} [{i}]: {a} vs {b}");
    }
}

/// Which passes the tiled kernels took (the others fell back to the generic kernel).
#[derive(Debug, PartialEq)]
pub(super) struct Tiled {
    pub fwd: bool,
    pub bwi: bool,
    pub bww: bool,
}

/// Runs all three kernels, tiled and generic, on one geometry with random data; the
/// gradients start non-zero to check that both accumulate.
pub(super) fn check(rng: &mut Rng, g: &ConvGeom) -> Tiled {
    let (cin_g, taps) = (g.c_in / g.groups, g.kh * g.kw);
    let x = random(rng, g.n * g.c_in * g.h * g.w);
    let w = random(rng, g.c_out * cin_g * taps);
    let b = random(rng, g.c_out);
    let gy = random(rng, g.n * g.c_out * g.oh * g.ow);

    let bias = if rng.below(2) == 0 { Some(&b[..]) } else { None };
    let mut y0 = random(rng, gy.len());
    let mut y1 = y0.clone();
    generic::conv2d_forward(g, &x, &w, bias, &mut y0);
    let fwd = mk::conv::forward_tiled(g, &x, &w, bias, &mut y1);
    if !fwd {
        mk::conv2d_forward(g, &x, &w, bias, &mut y1);
    }
    // Same additions in the same order as the generic kernel (padding taps add +0.0):
    // equal values, not just close ones.
    assert_eq!(y1, y0, "forward {g:?}");

    let mut gx0 = random(rng, x.len());
    let mut gx1 = gx0.clone();
    generic::conv2d_backward_input(g, &gy, &w, &mut gx0);
    let bwi = mk::conv::backward_input_tiled(g, &gy, &w, &mut gx1);
    if !bwi {
        mk::conv2d_backward_input(g, &gy, &w, &mut gx1);
    }
    assert_close("backward-input", g, &gx1, &gx0, 1);

    let mut gw0 = random(rng, w.len());
    let mut gw1 = gw0.clone();
    generic::conv2d_backward_weight(g, &gy, &x, &mut gw0);
    let bww = mk::weight::backward_weight_tiled(g, &gy, &x, &mut gw1);
    if !bww {
        mk::conv2d_backward_weight(g, &gy, &x, &mut gw1);
    }
    assert_close("backward-weight", g, &gw1, &gw0, g.n * g.oh * g.ow);
    Tiled { fwd, bwi, bww }
}

pub(super) const ALL: Tiled = Tiled {
    fwd: true,
    bwi: true,
    bww: true,
};

#[test]
fn w1_layers_match_generic() {
    let mut rng = Rng::new(1);
    for n in [1, 3] {
        for (c_in, c_out, hw) in [(1, 8, 28), (8, 16, 14), (16, 32, 7), (16, 32, 6), (1, 8, 12)] {
            let g = geom(n, c_in, c_out, [hw, hw + 3], [3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
            assert_eq!(check(&mut rng, &g), ALL, "{g:?}");
        }
    }
}

#[test]
fn random_shapes_match_generic() {
    let mut rng = Rng::new(7);
    let (mut tested, mut tiled) = (0, [0; 3]);
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
            let t = check(&mut rng, &g);
            for (count, ran) in tiled.iter_mut().zip([t.fwd, t.bwi, t.bww]) {
                *count += ran as usize;
            }
            tested += 1;
        }
    }
    // Forward covers every shape here; backward-weight only stride 1 in both directions
    // (1 in 9 of these), backward-input only those with padding within the kernel's
    // reach.
    assert_eq!(tiled[0], tested);
    assert!(
        tiled[1] > tested / 20,
        "backward-input tiled on {} of {tested}",
        tiled[1]
    );
    assert!(
        tiled[2] > tested / 20,
        "backward-weight tiled on {} of {tested}",
        tiled[2]
    );
}

const fn tiled(fwd: bool, bwi: bool, bww: bool) -> Tiled {
    Tiled { fwd, bwi, bww }
}

#[test]
fn depthwise_matches_generic() {
    let mut rng = Rng::new(3);
    for (c, hw, s) in [(8, [9, 13], [1, 1]), (6, [10, 7], [2, 2]), (5, [17, 17], [1, 2])] {
        let want = tiled(true, s == [1, 1], s == [1, 1]);
        let g = geom(2, c, c, hw, [3, 3], s, [1, 1], [1, 1], c).unwrap();
        assert_eq!(check(&mut rng, &g), want, "{g:?}");
        let g = geom(1, c, 2 * c, hw, [3, 3], s, [1, 1], [1, 1], c).unwrap();
        assert_eq!(check(&mut rng, &g), want, "{g:?}");
    }
}

#[test]
fn mobilenet_depthwise_and_pointwise_take_the_tiles() {
    let mut rng = Rng::new(4);
    for (c_in, c_out, k, groups) in [(32, 32, 3, 32), (16, 16, 3, 16), (16, 32, 1, 1), (32, 16, 1, 1)] {
        let p = k / 2;
        let g = geom(1, c_in, c_out, [14, 14], [k, k], [1, 1], [p, p], [1, 1], groups).unwrap();
        assert_eq!(check(&mut rng, &g), ALL, "{g:?}");
    }
}

#[test]
fn channel_splitting_bands_and_fallbacks_match_generic() {
    let mut rng = Rng::new(5);
    let cases = [
        // Many channels: the band buffer and the weight pack hold only some per pass.
        (geom(1, 70, 9, [12, 11], [3, 3], [1, 1], [1, 1], [1, 1], 1), ALL),
        // W1 at 28x28 backward-input: 8 gradient planes of 30x34 words, one per pass.
        (geom(2, 1, 8, [28, 28], [3, 3], [1, 1], [1, 1], [1, 1], 1), ALL),
        // Planes taller than the buffer: walked in bands of rows, strided and dilated.
        (geom(2, 3, 5, [100, 90], [3, 3], [1, 1], [1, 1], [1, 1], 1), ALL),
        (
            geom(2, 3, 5, [61, 40], [3, 3], [2, 2], [1, 1], [1, 1], 1),
            tiled(true, false, false),
        ),
        (
            geom(1, 3, 6, [50, 33], [3, 3], [1, 2], [1, 1], [2, 1], 1),
            tiled(true, false, false),
        ),
        (geom(1, 2, 5, [45, 37], [3, 3], [1, 1], [2, 2], [2, 2], 1), ALL),
        // A 9x9 kernel: single-tap groups, still tiled.
        (geom(1, 2, 5, [12, 12], [9, 9], [1, 1], [4, 4], [1, 1], 1), ALL),
        // More taps than the weight pack takes for 4 channels: generic forward and
        // backward-input (backward-weight packs no weights).
        (
            geom(1, 2, 4, [16, 16], [13, 13], [1, 1], [6, 6], [1, 1], 1),
            tiled(false, false, true),
        ),
        // A row wider than the band buffer: generic fallback.
        (
            geom(1, 1, 2, [3, 1100], [3, 3], [1, 1], [1, 1], [1, 1], 1),
            tiled(false, false, false),
        ),
        // Padding wider than the kernel reach: backward-input falls back; stride 2: both
        // backward passes do.
        (
            geom(1, 2, 3, [5, 6], [1, 1], [1, 1], [2, 1], [1, 1], 1),
            tiled(true, false, true),
        ),
        (
            geom(2, 3, 4, [9, 8], [3, 3], [2, 2], [1, 1], [1, 1], 1),
            tiled(true, false, false),
        ),
    ];
    for (g, want) in cases {
        let g = g.unwrap();
        assert_eq!(check(&mut rng, &g), want, "{g:?}");
    }
}

#[test]
fn one_channel_row_pairs_match_generic() {
    use crate::kernels::conv::m_f32::conv::row_pairs;
    let mut rng = Rng::new(11);
    // (n, c_in, c_out, [h, w], groups): one output channel per group in forward
    // (c_out / groups == 1) or in backward-input (c_in / groups == 1), rows of whole
    // 7-wide tiles; odd heights leave a last single row, tall planes split into
    // bands of an even number of rows, bias on or off (random in `check`).
    let cases = [
        (1, 1, 8, [28, 28], 1),
        (2, 1, 8, [13, 14], 1),
        (1, 8, 1, [28, 28], 1),
        (2, 3, 1, [9, 7], 1),
        (1, 5, 1, [120, 21], 1),
        (2, 4, 4, [11, 14], 4),
        (1, 6, 3, [7, 35], 3),
        (1, 1, 3, [1, 7], 1),
    ];
    for (n, c_in, c_out, hw, groups) in cases {
        let g = geom(n, c_in, c_out, hw, [3, 3], [1, 1], [1, 1], [1, 1], groups).unwrap();
        assert!(row_pairs([3, 3], [1, 1], g.dil, g.ow), "{g:?}");
        assert_eq!(check(&mut rng, &g), ALL, "{g:?}");
    }
    // Not whole tiles, or dilated rows: the one-row tile, still tiled.
    for (hw, d) in [([10, 10], [1, 1]), ([12, 14], [2, 1]), ([12, 14], [1, 2])] {
        let g = geom(2, 1, 2, hw, [3, 3], [1, 1], d, d, 1).unwrap();
        assert!(!row_pairs([3, 3], [1, 1], g.dil, g.ow), "{g:?}");
        assert_eq!(check(&mut rng, &g), ALL, "{g:?}");
    }
}

#[test]
fn backward_weight_partial_channel_blocks_and_padding_rows_match_generic() {
    let mut rng = Rng::new(13);
    // Output channels per group that leave a last block of 1..3 (zero gradients for
    // the missing channels), with padding below, equal to and beyond the kernel's
    // reach (rows of `w + pad` words, or the full padded pitch), and dilated rows
    // whose first and last taps skip the padding rows.
    for (c_out, groups) in [(1, 1), (2, 1), (3, 1), (5, 1), (7, 1), (6, 2), (9, 3)] {
        for (p, d) in [
            ([0, 0], [1, 1]),
            ([1, 1], [1, 1]),
            ([2, 2], [2, 2]),
            ([3, 3], [1, 1]),
            ([2, 0], [2, 1]),
        ] {
            let g = geom(2, 2 * groups, c_out, [9, 11], [3, 3], [1, 1], p, d, groups).unwrap();
            let bwi = p[0] <= 2 * d[0] && p[1] <= 2 * d[1];
            assert_eq!(check(&mut rng, &g), tiled(true, bwi, true), "{g:?}");
        }
    }
}
