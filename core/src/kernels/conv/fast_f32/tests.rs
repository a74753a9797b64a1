//! Every specialised kernel against the plain generic one, on random shapes: odd sizes,
//! strides 1..3, padding, dilation, groups and depthwise, batches, and sizes that make
//! the kernels split channels or fall back.

use super::conv;
use crate::init::Rng;
use crate::kernels::conv::{self as generic, ConvGeom};
use crate::kernels::test_shapes::{geom, random};

fn assert_close(what: &str, g: &ConvGeom, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        let tol = 1e-4 * (1.0 + b.abs());
        assert!((a - b).abs() <= tol, "{what} {g:?} [{i}]: {a} vs {b}");
    }
}

/// The three kernels of one path: forward, backward-input, backward-weight.
type Fwd = fn(&ConvGeom, &[f32], &[f32], Option<&[f32]>, &mut [f32]) -> bool;
type Bwd = fn(&ConvGeom, &[f32], &[f32], &mut [f32]) -> bool;

/// Every path: the dispatching entry points (whatever this CPU selects), the portable
/// tiled kernels, and on x86_64 the AVX2 + FMA strip kernels called directly (they answer
/// `false` when the CPU lacks AVX2/FMA or the shape is not theirs).
fn paths() -> Vec<(&'static str, Fwd, Bwd, Bwd)> {
    let mut v: Vec<(&'static str, Fwd, Bwd, Bwd)> = vec![
        (
            "dispatch",
            |g, x, w, b, y| {
                conv::conv2d_forward(g, x, w, b, y);
                true
            },
            |g, gy, w, gx| {
                conv::conv2d_backward_input(g, gy, w, gx);
                true
            },
            |g, gy, x, gw| {
                conv::conv2d_backward_weight(g, gy, x, gw);
                true
            },
        ),
        (
            "portable",
            |g, x, w, b, y| {
                conv::conv2d_forward_portable(g, x, w, b, y);
                true
            },
            |g, gy, w, gx| {
                conv::conv2d_backward_input_portable(g, gy, w, gx);
                true
            },
            |g, gy, x, gw| {
                conv::conv2d_backward_weight_portable(g, gy, x, gw);
                true
            },
        ),
    ];
    #[cfg(target_arch = "x86_64")]
    v.push((
        "avx2",
        super::avx2::conv2d_forward,
        super::avx2::conv2d_backward_input,
        super::avx2::conv2d_backward_weight,
    ));
    // After the AVX2 path, so it keeps its index where it exists.
    v.push((
        "dw8",
        super::dw8::conv2d_forward,
        super::dw8::conv2d_backward_input,
        super::dw8::conv2d_backward_weight,
    ));
    #[cfg(target_arch = "x86_64")]
    v.push((
        "dw8-avx2",
        super::dw8::avx2_only::conv2d_forward,
        super::dw8::avx2_only::conv2d_backward_input,
        super::dw8::avx2_only::conv2d_backward_weight,
    ));
    #[cfg(target_arch = "x86_64")]
    v.push((
        "dw16",
        super::dw8::avx16_only::conv2d_forward,
        super::dw8::avx16_only::conv2d_backward_input,
        super::dw8::avx16_only::conv2d_backward_weight,
    ));
    v.push((
        "dw8-portable",
        super::dw8::portable_only::conv2d_forward,
        super::dw8::portable_only::conv2d_backward_input,
        super::dw8::portable_only::conv2d_backward_weight,
    ));
    // Last.
    v.push((
        "depthwise",
        super::depthwise::conv2d_forward,
        super::depthwise::conv2d_backward_input,
        super::depthwise::conv2d_backward_weight,
    ));
    v
}

/// Runs all three kernels of every path and the generic ones on one geometry with random
/// data; outputs and gradients start non-zero to check overwrite and accumulation.
/// Returns how many of the three kernels each path handled itself.
pub(super) fn check(rng: &mut Rng, g: &ConvGeom) -> Vec<usize> {
    let (cin_g, taps) = (g.c_in / g.groups, g.kh * g.kw);
    let x = random(rng, g.n * g.c_in * g.h * g.w);
    let w = random(rng, g.c_out * cin_g * taps);
    let b = random(rng, g.c_out);
    let gy = random(rng, g.n * g.c_out * g.oh * g.ow);
    let bias = if rng.below(2) == 0 { Some(&b[..]) } else { None };
    let y_start = random(rng, gy.len());
    let gx_start = random(rng, x.len());
    let gw_start = random(rng, w.len());

    let mut y0 = y_start.clone();
    generic::conv2d_forward(g, &x, &w, bias, &mut y0);
    let mut gx0 = gx_start.clone();
    generic::conv2d_backward_input(g, &gy, &w, &mut gx0);
    let mut gw0 = gw_start.clone();
    generic::conv2d_backward_weight(g, &gy, &x, &mut gw0);

    let gb_start = random(rng, g.c_out);
    let (mut gb0, mut gb1, mut gb2) = (gb_start.clone(), gb_start.clone(), gb_start);
    generic::conv2d_backward_bias(g, &gy, &mut gb0);
    crate::kernels::conv::bias::conv2d_backward_bias(g, &gy, &mut gb1);
    assert_close("bias", g, &gb1, &gb0);
    <crate::kernels::set::F32 as crate::kernels::KernelSet<f32>>::conv2d_backward_bias(g, &gy, &mut gb2);
    assert_close("bias (f32 kernel set)", g, &gb2, &gb0);

    let mut handled = Vec::new();
    for (name, fwd, bwi, bww) in paths() {
        let mut count = 0;
        let mut y1 = y_start.clone();
        if fwd(g, &x, &w, bias, &mut y1) {
            assert_close(&format!("{name} forward"), g, &y1, &y0);
            count += 1;
        } else {
            assert_eq!(y1, y_start, "{name} forward declined but wrote");
        }
        let mut gx1 = gx_start.clone();
        if bwi(g, &gy, &w, &mut gx1) {
            assert_close(&format!("{name} backward-input"), g, &gx1, &gx0);
            count += 1;
        } else {
            assert_eq!(gx1, gx_start, "{name} backward-input declined but wrote");
        }
        let mut gw1 = gw_start.clone();
        if bww(g, &gy, &x, &mut gw1) {
            assert_close(&format!("{name} backward-weight"), g, &gw1, &gw0);
            count += 1;
        } else {
            assert_eq!(gw1, gw_start, "{name} backward-weight declined but wrote");
        }
        handled.push(count);
    }
    handled
}

/// Whether this machine runs the AVX2 + FMA path, by `std`'s own detection.
pub(super) fn cpu_has_avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

#[cfg(target_arch = "x86_64")]
#[test]
fn cpuid_detection_agrees_with_std() {
    assert_eq!(super::avx2::available(), cpu_has_avx2_fma());
}

#[test]
fn w1_layers_match_generic() {
    let mut rng = Rng::new(1);
    for n in [1, 3] {
        for (c_in, c_out, hw) in [(1, 8, 28), (8, 16, 14), (16, 32, 7), (16, 32, 6), (1, 8, 12)] {
            let g = geom(n, c_in, c_out, [hw, hw + 3], [3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
            let handled = check(&mut rng, &g);
            // W1's layers take the AVX2 path wherever the CPU has it (the last path).
            let want = if cpu_has_avx2_fma() { 3 } else { 0 };
            if cfg!(target_arch = "x86_64") {
                assert_eq!(handled[2], want, "{g:?}");
            }
        }
    }
}

#[test]
fn random_shapes_match_generic() {
    let mut rng = Rng::new(7);
    let (mut tested, mut special) = (0, 0);
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
            special += check(&mut rng, &g).get(2).copied().unwrap_or(0);
            tested += 1;
        }
    }
    // Stride-1 shapes are common among these: the AVX2 kernels must have run on many.
    if cpu_has_avx2_fma() {
        assert!(special > 100, "AVX2 path ran {special} times");
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
fn strided_depthwise_path_matches_generic() {
    let mut rng = Rng::new(11);
    let mut handled = 0;
    // W2's strided depthwise layers, then odd sizes, paddings, strides, dilations, batches.
    for (n, c, hw, k, s, p, d) in [
        (3, 32, [14, 14], [3, 3], [2, 2], [1, 1], [1, 1]),
        (2, 64, [7, 7], [3, 3], [2, 2], [1, 1], [1, 1]),
        (1, 5, [9, 13], [3, 3], [2, 1], [0, 2], [1, 1]),
        (2, 3, [11, 8], [3, 2], [1, 3], [2, 1], [1, 2]),
        (3, 4, [15, 17], [5, 5], [3, 2], [2, 3], [1, 1]),
        (1, 2, [10, 9], [3, 3], [2, 2], [3, 0], [2, 2]),
        (2, 1, [1, 5], [1, 3], [2, 2], [0, 1], [1, 1]),
    ] {
        let g = geom(n, c, c, hw, k, s, p, d, c).unwrap();
        // The depthwise path is the last.
        handled += check(&mut rng, &g).last().copied().unwrap_or(0);
    }
    assert_eq!(handled, 3 * 7);
    // Not its shapes: stride 1, channel multipliers, grouped, too large a plane.
    for (c_in, c_out, groups, hw, s) in [
        (4, 4, 4, [9, 9], [1, 1]),
        (4, 8, 4, [9, 9], [2, 2]),
        (4, 4, 2, [9, 9], [2, 2]),
        (2, 2, 2, [70, 70], [2, 2]),
    ] {
        let g = geom(2, c_in, c_out, hw, [3, 3], s, [1, 1], [1, 1], groups).unwrap();
        assert_eq!(check(&mut rng, &g).last(), Some(&0), "{g:?}");
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

/// How many of the three kernels path `name` handled on `g` (checked against the
/// generic kernels, with every other path).
fn handled_by(rng: &mut Rng, g: &ConvGeom, name: &str) -> usize {
    let at = paths().iter().position(|p| p.0 == name).unwrap();
    check(rng, g)[at]
}

/// Depthwise 3x3 shapes `dw8` takes, `(n, c, [h, w], stride, padding)`: W2's layers
/// (smaller batches), then odd sizes, strides per axis, paddings 0..2, channel counts
/// that are not multiples of 8, one channel.
type DwShape = (usize, usize, [usize; 2], [usize; 2], [usize; 2]);
const DW8_SHAPES: [DwShape; 18] = [
    (2, 8, [14, 14], [1, 1], [1, 1]),
    // Blocks of 16 channels (16 lanes with AVX-512F) on odd shapes.
    (2, 16, [9, 11], [1, 1], [0, 0]),
    (1, 48, [16, 16], [2, 2], [1, 1]),
    (3, 16, [13, 6], [1, 2], [0, 2]),
    (2, 32, [1, 1], [1, 1], [1, 1]),
    (3, 32, [14, 14], [2, 2], [1, 1]),
    (2, 64, [7, 7], [1, 1], [1, 1]),
    (2, 64, [7, 7], [2, 2], [1, 1]),
    (3, 128, [4, 4], [1, 1], [1, 1]),
    (2, 13, [9, 11], [1, 1], [0, 0]),
    (1, 5, [10, 7], [2, 2], [2, 2]),
    (3, 11, [13, 6], [1, 2], [0, 2]),
    (2, 9, [5, 12], [2, 1], [2, 0]),
    (2, 1, [3, 3], [1, 1], [1, 1]),
    (1, 17, [16, 16], [2, 2], [1, 1]),
    (1, 3, [14, 14], [1, 1], [2, 2]),
    (4, 6, [1, 1], [1, 1], [1, 1]),
    (2, 7, [3, 20], [2, 2], [0, 1]),
];

#[test]
fn channel_interleaved_depthwise_matches_generic() {
    let mut rng = Rng::new(13);
    for (n, c, hw, s, p) in DW8_SHAPES {
        let g = geom(n, c, c, hw, [3, 3], s, p, [1, 1], c).unwrap();
        assert_eq!(handled_by(&mut rng, &g, "dw8"), 3, "{g:?}");
        assert_eq!(handled_by(&mut rng, &g, "dw8-portable"), 3, "{g:?}");
    }
}

/// With AVX-512F, 16 channels per block: each lane's arithmetic is the 8-lane
/// kernel's, so every pass gives the same bits (partial blocks too, which the
/// dispatch leaves to 8 lanes).
#[cfg(target_arch = "x86_64")]
#[test]
fn depthwise_on_16_lanes_is_the_8_lane_kernel_bit_for_bit() {
    use super::dw8::{avx16_only as lanes16, avx2_only as lanes8};
    if !super::avx512::available() {
        return;
    }
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    let mut rng = Rng::new(23);
    let mut wide = 0;
    for (n, c, hw, s, p) in DW8_SHAPES {
        let g = geom(n, c, c, hw, [3, 3], s, p, [1, 1], c).unwrap();
        let x = random(&mut rng, n * c * hw[0] * hw[1]);
        let w = random(&mut rng, c * 9);
        let b = random(&mut rng, c);
        let gy = random(&mut rng, n * c * g.oh * g.ow);
        let (y0, gx0, gw0) = (
            random(&mut rng, gy.len()),
            random(&mut rng, x.len()),
            random(&mut rng, w.len()),
        );
        let (mut y16, mut y8) = (y0.clone(), y0.clone());
        assert!(lanes16::conv2d_forward(&g, &x, &w, Some(&b), &mut y16));
        assert!(lanes8::conv2d_forward(&g, &x, &w, Some(&b), &mut y8));
        assert_eq!(bits(&y16), bits(&y8), "forward {g:?}");
        let (mut gx16, mut gx8) = (gx0.clone(), gx0.clone());
        assert!(lanes16::conv2d_backward_input(&g, &gy, &w, &mut gx16));
        assert!(lanes8::conv2d_backward_input(&g, &gy, &w, &mut gx8));
        assert_eq!(bits(&gx16), bits(&gx8), "backward-input {g:?}");
        let (mut gw16, mut gw8) = (gw0.clone(), gw0.clone());
        assert!(lanes16::conv2d_backward_weight(&g, &gy, &x, &mut gw16));
        assert!(lanes8::conv2d_backward_weight(&g, &gy, &x, &mut gw8));
        assert_eq!(bits(&gw16), bits(&gw8), "backward-weight {g:?}");
        wide += usize::from(c % 16 == 0);
    }
    assert_eq!(wide, 8);
}

#[test]
fn channel_interleaved_depthwise_declines_other_shapes() {
    let mut rng = Rng::new(17);
    // (c_in, c_out, groups, hw, k, s, p, d, passes taken)
    for (c_in, c_out, groups, hw, k, s, p, d, want) in [
        (8, 8, 8, [9, 9], [3, 3], [1, 1], [1, 1], [2, 2], 0),
        (8, 8, 8, [9, 9], [5, 5], [1, 1], [2, 2], [1, 1], 0),
        (8, 8, 8, [9, 9], [3, 2], [1, 1], [1, 1], [1, 1], 0),
        (8, 8, 8, [9, 9], [3, 3], [3, 3], [1, 1], [1, 1], 0),
        (8, 8, 8, [9, 9], [3, 3], [1, 3], [1, 1], [1, 1], 0),
        (8, 16, 8, [9, 9], [3, 3], [1, 1], [1, 1], [1, 1], 0),
        (8, 8, 4, [9, 9], [3, 3], [1, 1], [1, 1], [1, 1], 0),
        (8, 8, 1, [9, 9], [3, 3], [1, 1], [1, 1], [1, 1], 0),
        // Padded planes larger than the buffer (20x20 and 5x72 > 18x18).
        (8, 8, 8, [18, 18], [3, 3], [1, 1], [1, 1], [1, 1], 0),
        (8, 8, 8, [3, 70], [3, 3], [2, 2], [1, 1], [1, 1], 0),
        // Padding 3 at stride 1: forward and backward-weight only (backward-input would
        // pad the gradient by 2 - 3).
        (8, 8, 8, [6, 6], [3, 3], [1, 1], [3, 3], [1, 1], 2),
        (8, 8, 8, [6, 6], [3, 3], [1, 1], [1, 3], [1, 1], 2),
    ] {
        let g = geom(2, c_in, c_out, hw, k, s, p, d, groups).unwrap();
        assert_eq!(handled_by(&mut rng, &g, "dw8"), want, "{g:?}");
        assert_eq!(handled_by(&mut rng, &g, "dw8-portable"), want, "{g:?}");
    }
}

#[test]
fn pointwise_planes_read_in_place_match_generic() {
    // 1x1 kernels without padding read the source planes in place except where a last
    // tile would read past the source (the last sample): both forms, plane sizes that
    // are and are not multiples of 8, several channel chunks and groups.
    let mut rng = Rng::new(11);
    for (n, c_in, c_out, hw, groups) in [
        (3, 16, 32, [7, 7], 1),
        (2, 32, 16, [4, 4], 1),
        (3, 8, 8, [5, 3], 2),
        (1, 3, 5, [1, 1], 1),
        (2, 64, 8, [14, 14], 1),
    ] {
        let g = geom(n, c_in, c_out, hw, [1, 1], [1, 1], [0, 0], [1, 1], groups).unwrap();
        let handled = check(&mut rng, &g);
        if cfg!(target_arch = "x86_64") && cpu_has_avx2_fma() {
            assert!(handled[2] >= 2, "{g:?}: {handled:?}");
        }
    }
}

#[test]
fn pointwise_weight_gradient_over_packed_chunks_matches_generic() {
    // 1x1 backward-weight packs chunks of samples into long rows: several chunks, a
    // last partial one, packed lengths that are not multiples of 8, channel counts
    // that are not multiples of the 4 x 3 tile, and groups.
    let mut rng = Rng::new(12);
    for (n, c_in, c_out, hw, groups) in [
        (32, 16, 64, [7, 7], 1),
        (5, 7, 5, [14, 14], 1),
        (9, 16, 16, [9, 9], 2),
        (40, 3, 10, [7, 7], 1),
        (4, 1, 1, [15, 15], 1),
    ] {
        let g = geom(n, c_in, c_out, hw, [1, 1], [1, 1], [0, 0], [1, 1], groups).unwrap();
        let handled = check(&mut rng, &g);
        if cfg!(target_arch = "x86_64") && cpu_has_avx2_fma() {
            assert!(handled[2] >= 2, "{g:?}: {handled:?}");
        }
    }
}

#[test]
fn packed_3x3_strip_tiles_match_generic() {
    // The 3x3 strip tiles with packed weights, and the row tiles of the forward pass
    // (rows of 8 or more outputs; rows of 8 to 28 outputs cover every overlap of a
    // row's last vector): odd plane sizes (strips of every tile width), paddings 0..2,
    // batches (at least 256 output positions, where the weights are packed), output
    // channel counts that leave blocks of 1-3
    // (and one channel, which takes the widest tiles), groups, more output channels
    // than the pack holds for all input channels at once (chunks), and too many for it
    // to hold even one input channel (the unpacked tiles).
    let mut rng = Rng::new(17);
    for (n, c_in, c_out, hw, p, groups) in [
        (3, 1, 8, [28, 28], [1, 1], 1),
        (2, 8, 1, [13, 11], [1, 1], 1),
        (2, 5, 7, [9, 17], [0, 2], 1),
        (2, 3, 6, [5, 23], [2, 0], 1),
        (6, 4, 4, [6, 8], [1, 1], 1),
        (6, 2, 9, [3, 16], [1, 1], 1),
        (6, 6, 10, [7, 7], [1, 1], 2),
        (3, 4, 8, [9, 10], [1, 1], 2),
        (8, 12, 300, [6, 6], [1, 1], 1),
        (1, 2, 1000, [4, 5], [1, 1], 1),
        // Batch 1 on a small plane: too few positions to pack (the unpacked tiles).
        (1, 16, 32, [3, 5], [1, 1], 1),
    ] {
        let g = geom(n, c_in, c_out, hw, [3, 3], [1, 1], p, [1, 1], groups).unwrap();
        let handled = check(&mut rng, &g);
        if cfg!(target_arch = "x86_64") && cpu_has_avx2_fma() {
            assert!(handled[2] >= 2, "{g:?}: {handled:?}");
        }
    }
}

#[test]
fn transposed_output_gradients_match_generic() {
    // Backward-weight transposes the output gradient 8 channels x 8 positions at a
    // time: rows that are not multiples of 8, the last plane's last row (read word by
    // word rather than past the end), channel counts that leave 1-7 channels over,
    // groups, batches.
    let mut rng = Rng::new(19);
    for (n, c_in, c_out, hw, p, groups) in [
        (2, 5, 8, [5, 9], [1, 1], 1),
        (3, 4, 11, [6, 6], [0, 0], 1),
        (1, 6, 16, [3, 13], [1, 2], 1),
        (2, 8, 32, [7, 7], [1, 1], 2),
        (1, 4, 15, [8, 8], [1, 1], 1),
    ] {
        let g = geom(n, c_in, c_out, hw, [3, 3], [1, 1], p, [1, 1], groups).unwrap();
        let handled = check(&mut rng, &g);
        if cfg!(target_arch = "x86_64") && cpu_has_avx2_fma() {
            assert_eq!(handled[2], 3, "{g:?}: {handled:?}");
        }
    }
}

/// `gx += `, `gw += ` in one walk against the two passes, bit for bit.
type Both = fn(&ConvGeom, &[f32], &[f32], &[f32], &mut [f32], &mut [f32]) -> bool;

#[test]
fn depthwise_backward_in_one_walk_is_the_two_passes() {
    use super::dw8::{self, portable_only as portable};
    let mut rng = Rng::new(19);
    let both = [
        (
            dw8::conv2d_backward_input as Bwd,
            dw8::conv2d_backward_weight as Bwd,
            dw8::conv2d_backward_both as Both,
        ),
        #[cfg(target_arch = "x86_64")]
        (
            dw8::avx2_only::conv2d_backward_input,
            dw8::avx2_only::conv2d_backward_weight,
            dw8::avx2_only::conv2d_backward_both,
        ),
        #[cfg(target_arch = "x86_64")]
        (
            dw8::avx16_only::conv2d_backward_input,
            dw8::avx16_only::conv2d_backward_weight,
            dw8::avx16_only::conv2d_backward_both,
        ),
        (
            portable::conv2d_backward_input,
            portable::conv2d_backward_weight,
            portable::conv2d_backward_both,
        ),
    ];
    // The last shape's backward-input is not dw8's (padding 3 at stride 1).
    let declined = (2, 8, [6, 6], [1, 1], [3, 3]);
    for (n, c, hw, s, p) in DW8_SHAPES.into_iter().chain([declined]) {
        let g = geom(n, c, c, hw, [3, 3], s, p, [1, 1], c).unwrap();
        let x = random(&mut rng, n * c * hw[0] * hw[1]);
        let w = random(&mut rng, c * 9);
        let gy = random(&mut rng, n * c * g.oh * g.ow);
        let (gx0, gw0) = (random(&mut rng, x.len()), random(&mut rng, w.len()));
        for (input, weight, at_once) in both {
            let (mut gx, mut gw) = (gx0.clone(), gw0.clone());
            let apart = input(&g, &gy, &w, &mut gx) & weight(&g, &gy, &x, &mut gw);
            let (mut gx1, mut gw1) = (gx0.clone(), gw0.clone());
            assert_eq!(at_once(&g, &gy, &x, &w, &mut gx1, &mut gw1), apart, "{g:?}");
            if !apart {
                (gx, gw) = (gx0.clone(), gw0.clone());
            }
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!((bits(&gx1), bits(&gw1)), (bits(&gx), bits(&gw)), "{g:?}");
        }
    }
}
