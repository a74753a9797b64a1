//! The one-input-channel 3x3 kernels (`one.rs`) against the generic ones, through the
//! `f32` entry points (on a CPU with AVX2 + FMA they try `one.rs` first).
//!
//! Tolerances: inputs are uniform in [-1, 1]. Forward and backward-input sum at most 9
//! and 9 x 300 products, compared as in `tests.rs` (1e-4 relative). A backward-weight
//! entry sums `batch x plane` products (25,088 for W1 at batch 32) of mean size 1/4;
//! both f32 kernels round each addition to about 6e-8 of a running sum, so they are
//! compared with an f64 sum, within 1e-5 of the sum of the products' sizes: about 40
//! times the expected rounding (`sqrt(N) * 6e-8` of it), and under the size of one
//! wrong or missing product in W1's shape (1/4 against 0.06).

use super::avx2;
use super::conv as fast;
use super::one::covers;
use super::tests::check;
use crate::init::Rng;
use crate::kernels::conv::{self as generic, ConvGeom};
use crate::kernels::test_shapes::{geom, random};

/// `gw` and the sum of the products' sizes per entry, in f64 (any stride).
fn weight_f64(g: &ConvGeom, gy: &[f32], x: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let cout = g.c_out / g.groups;
    let (mut gw, mut size) = (vec![0.0f64; g.c_out * 9], vec![0.0f64; g.c_out * 9]);
    for n in 0..g.n {
        for oc in 0..g.c_out {
            let ic = oc / cout;
            for t in 0..9 {
                let (ky, kx) = (t / 3, t % 3);
                for oy in 0..g.oh {
                    for ox in 0..g.ow {
                        let iy = (oy * g.stride[0] + ky) as isize - g.pad[0] as isize;
                        let ix = (ox * g.stride[1] + kx) as isize - g.pad[1] as isize;
                        if iy < 0 || ix < 0 || iy >= g.h as isize || ix >= g.w as isize {
                            continue;
                        }
                        let a = gy[((n * g.c_out + oc) * g.oh + oy) * g.ow + ox] as f64;
                        let b = x[((n * g.c_in + ic) * g.h + iy as usize) * g.w + ix as usize] as f64;
                        gw[oc * 9 + t] += a * b;
                        size[oc * 9 + t] += (a * b).abs();
                    }
                }
            }
        }
    }
    (gw, size)
}

/// A forward kernel, and a backward one (input or weight gradient).
type Forward = fn(&ConvGeom, &[f32], &[f32], Option<&[f32]>, &mut [f32]);
type Backward = fn(&ConvGeom, &[f32], &[f32], &mut [f32]);

/// Kernels under test: forward, backward-input, backward-weight.
struct Kernels {
    forward: Forward,
    input: Backward,
    weight: Backward,
}

/// The `f32` entry points (16 lanes first where the CPU has AVX-512F).
const FAST: Kernels = Kernels {
    forward: fast::conv2d_forward,
    input: fast::conv2d_backward_input,
    weight: fast::conv2d_backward_weight,
};

/// The 8-lane kernels alone, for shapes [`covers`] takes (they must not decline them).
const EIGHT: Kernels = Kernels {
    forward: |g, x, w, b, y| assert!(avx2::one_forward8(g, x, w, b, y), "{g:?}"),
    // Backward-input declines more than 32 channels per group: the generic kernel
    // stands in there.
    input: |g, gy, w, gx| {
        if !avx2::one_backward_input8(g, gy, w, gx) {
            assert!(g.c_out / g.groups > 32, "{g:?}");
            generic::conv2d_backward_input(g, gy, w, gx);
        }
    },
    weight: |g, gy, x, gw| assert!(avx2::one_backward_weight8(g, gy, x, gw), "{g:?}"),
};

/// `k`'s forward and backward-input against the generic kernels, and its
/// backward-weight against [`weight_f64`].
fn check_f32(rng: &mut Rng, g: &ConvGeom, k: &Kernels) {
    let x = random(rng, g.n * g.c_in * g.h * g.w);
    let w = random(rng, g.c_out * 9);
    let b = random(rng, g.c_out);
    let gy = random(rng, g.n * g.c_out * g.oh * g.ow);
    let close = |what: &str, got: &[f32], want: &[f32]| {
        for (i, (a, b)) in got.iter().zip(want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                "{what} {g:?} [{i}]: {a} vs {b}"
            );
        }
    };
    let (mut y0, mut y1) = (random(rng, gy.len()), vec![0.0; gy.len()]);
    y1.copy_from_slice(&y0);
    generic::conv2d_forward(g, &x, &w, Some(&b), &mut y0);
    (k.forward)(g, &x, &w, Some(&b), &mut y1);
    close("forward", &y1, &y0);
    let (mut gx0, mut gx1) = (random(rng, x.len()), vec![0.0; x.len()]);
    gx1.copy_from_slice(&gx0);
    generic::conv2d_backward_input(g, &gy, &w, &mut gx0);
    (k.input)(g, &gy, &w, &mut gx1);
    close("backward-input", &gx1, &gx0);
    let start = random(rng, w.len());
    let mut gw = start.clone();
    (k.weight)(g, &gy, &x, &mut gw);
    let (want, size) = weight_f64(g, &gy, &x);
    for i in 0..gw.len() {
        let got = (gw[i] - start[i]) as f64;
        let tol = 1e-5 * size[i] + 1e-5;
        assert!(
            (got - want[i]).abs() <= tol,
            "backward-weight {g:?} [{i}]: {got} vs {}",
            want[i]
        );
    }
}

#[test]
fn one_channel_3x3_kernels_match_generic() {
    // W1's conv1 at batch 32 and 1; odd planes, planes of exactly 8 words and of 9, one
    // row, one column, rows of 16 words and of 17 and 33 (16-lane row vectors and a
    // partial one); 1-9 and 300 output channels (blocks of 1-3 left over, several
    // backward-weight chunks); groups of one input channel; and shapes the file declines
    // (padding 0 and 2, planes under 8 words, planes too large for its buffer).
    let mut rng = Rng::new(23);
    for (n, c_in, c_out, hw, p, groups) in [
        (32, 1, 8, [28, 28], [1, 1], 1),
        (1, 1, 8, [28, 28], [1, 1], 1),
        (2, 1, 1, [5, 9], [1, 1], 1),
        (3, 1, 2, [13, 11], [1, 1], 1),
        (2, 1, 3, [1, 8], [1, 1], 1),
        (2, 1, 5, [8, 1], [1, 1], 1),
        (1, 1, 6, [3, 3], [1, 1], 1),
        (4, 1, 7, [2, 4], [1, 1], 1),
        (2, 1, 9, [7, 7], [1, 1], 1),
        (3, 1, 300, [6, 6], [1, 1], 1),
        (2, 3, 6, [9, 10], [1, 1], 3),
        (2, 4, 36, [5, 6], [1, 1], 4),
        (32, 2, 4, [14, 14], [1, 1], 2),
        (2, 1, 4, [1, 7], [1, 1], 1),
        (2, 1, 8, [20, 33], [1, 1], 1),
        (1, 1, 3, [16, 16], [1, 1], 1),
        (2, 1, 10, [11, 17], [1, 1], 1),
        (2, 1, 8, [10, 12], [0, 0], 1),
        (2, 1, 8, [10, 12], [2, 2], 1),
        (1, 1, 2, [64, 64], [1, 1], 1),
    ] {
        let g = geom(n, c_in, c_out, hw, [3, 3], [1, 1], p, [1, 1], groups).unwrap();
        let expect = p == [1, 1] && hw[0] * hw[1] >= 8 && hw[0] < 64;
        assert_eq!(covers(&g), expect, "{g:?}");
        check_f32(&mut rng, &g, &FAST);
        // The 8-lane kernels too where the CPU has AVX-512F (the entry points try the
        // 16-lane ones first).
        if expect && avx2::available() {
            check_f32(&mut rng, &g, &EIGHT);
        }
        // Every path against the generic kernels, where the f32 sums are short enough
        // for `tests.rs`'s tolerance.
        if n * hw[0] * hw[1] <= 2048 {
            check(&mut rng, &g);
        }
    }
}

#[test]
fn one_channel_forward_matches_generic_at_every_output_alignment() {
    // The 16-lane forward starts its tiles where the output is 64-byte aligned: every
    // offset of the output from such a boundary, on W1's plane and on odd ones.
    let mut rng = Rng::new(29);
    for (n, c_out, hw) in [(2, 8, [28, 28]), (2, 5, [7, 9]), (1, 12, [4, 5]), (3, 3, [17, 3])] {
        let g = geom(n, 1, c_out, hw, [3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
        let x = random(&mut rng, g.n * g.h * g.w);
        let w = random(&mut rng, g.c_out * 9);
        let b = random(&mut rng, g.c_out);
        let len = g.n * g.c_out * g.oh * g.ow;
        let mut want = vec![0.0; len];
        generic::conv2d_forward(&g, &x, &w, Some(&b), &mut want);
        for shift in 0..16 {
            let mut buf = random(&mut rng, len + 16);
            let y = &mut buf[shift..][..len];
            fast::conv2d_forward(&g, &x, &w, Some(&b), y);
            for (i, (a, b)) in y.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                    "{g:?} shift {shift} [{i}]: {a} vs {b}"
                );
            }
        }
    }
}

#[test]
fn one_channel_backward_weight_matches_at_every_gradient_alignment() {
    // The 16-lane backward-weight starts its sweep where the output gradient is
    // 64-byte aligned and reads the positions around it with masked loads.
    let mut rng = Rng::new(31);
    for (n, c_out, hw) in [(2, 8, [28, 28]), (2, 5, [7, 9]), (1, 12, [4, 5]), (3, 3, [17, 3])] {
        let g = geom(n, 1, c_out, hw, [3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
        let x = random(&mut rng, g.n * g.h * g.w);
        let len = g.n * g.c_out * g.oh * g.ow;
        for shift in 0..16 {
            let buf = random(&mut rng, len + 16);
            let gy = &buf[shift..][..len];
            let start = random(&mut rng, g.c_out * 9);
            let mut gw = start.clone();
            fast::conv2d_backward_weight(&g, gy, &x, &mut gw);
            let (want, size) = weight_f64(&g, gy, &x);
            for i in 0..gw.len() {
                let got = (gw[i] - start[i]) as f64;
                assert!(
                    (got - want[i]).abs() <= 1e-5 * size[i] + 1e-5,
                    "{g:?} shift {shift} [{i}]: {got} vs {}",
                    want[i]
                );
            }
        }
    }
}

#[test]
fn one_channel_kernels_match_generic_on_random_shapes() {
    // Random planes from 1 to 40 words wide and high (rows shorter and longer than a
    // 16-lane vector, planes with and without whole vectors), 1-20 channels, 1-3
    // samples, one or two groups: the entry points and the 8-lane kernels alone.
    let mut rng = Rng::new(37);
    for _ in 0..40 {
        let hw = [1 + rng.below(40), 1 + rng.below(40)];
        let groups = 1 + rng.below(2);
        let c_out = groups * (1 + rng.below(20));
        let n = 1 + rng.below(3);
        let g = geom(n, groups, c_out, hw, [3, 3], [1, 1], [1, 1], [1, 1], groups).unwrap();
        check_f32(&mut rng, &g, &FAST);
        if covers(&g) && avx2::available() {
            check_f32(&mut rng, &g, &EIGHT);
        }
    }
}

/// `gx += conv_transpose(gy, w)` (one input channel per group) summed in the AVX
/// kernels' order (`one_input.rs`, `one_input16.rs`): per output and kernel column,
/// the channels' products chained with `mul_add`, channel by channel, kernel rows
/// from 2 to 0; then column 1 + column 0 + column 2 (where they read inside the row);
/// then the old value.
fn input_in_kernel_order(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) {
    let (h, wd, cout) = (g.h, g.w, g.c_out / g.groups);
    for n in 0..g.n {
        for grp in 0..g.groups {
            for y in 0..h {
                for x in 0..wd {
                    let mut sets = [0.0f32; 3];
                    for (kx, set) in sets.iter_mut().enumerate() {
                        let Some(ix) = (x + 1).checked_sub(kx).filter(|&c| c < wd) else {
                            continue;
                        };
                        for oc in grp * cout..(grp + 1) * cout {
                            for ky in (0..3).rev() {
                                let Some(iy) = (y + 1).checked_sub(ky).filter(|&r| r < h) else {
                                    continue;
                                };
                                let v = gy[((n * g.c_out + oc) * h + iy) * wd + ix];
                                *set = w[oc * 9 + ky * 3 + kx].mul_add(v, *set);
                            }
                        }
                    }
                    let mut s = sets[1];
                    if x + 1 < wd {
                        s += sets[0];
                    }
                    if x > 0 {
                        s += sets[2];
                    }
                    gx[((n * g.c_in + grp) * h + y) * wd + x] += s;
                }
            }
        }
    }
}

#[test]
fn one_channel_backward_input16_matches_generic_at_row_and_tile_edges() {
    // The 16-lane backward-input alone (where the CPU has AVX-512F): 14 outputs per
    // row vector, so widths below, at and just past 14 and 28 (partial last vectors),
    // and 15, 16, 29, 30 and 32 (vectors of 16 outputs);
    // heights of one tile of 1-7 rows and of several, evenly split (8: 4 + 4, 16:
    // 6 + 5 + 5 or 4 x 4); 1, 8 and 32 channels per group, one or two groups (at 32
    // channels and 15 columns and more its tiles take at most 4 rows, past 22 it
    // declines). It must take every shape the 6-row kernel it replaced took, write
    // nothing where it declines, and sum in that kernel's order.
    if !super::avx512::available() {
        return;
    }
    let mut rng = Rng::new(41);
    let mut case = 0;
    for wd in [1, 2, 5, 13, 14, 15, 16, 17, 27, 28, 29, 30, 32, 43] {
        for h in [1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 14, 16, 20, 28] {
            case += 1;
            let (cout, groups) = [(1, 1), (8, 1), (32, 1), (8, 2), (32, 2), (3, 2)][case % 6];
            let n = 1 + case % 2;
            let g = geom(
                n,
                groups,
                cout * groups,
                [h, wd],
                [3, 3],
                [1, 1],
                [1, 1],
                [1, 1],
                groups,
            )
            .unwrap();
            let gy = random(&mut rng, g.n * g.c_out * g.oh * g.ow);
            let w = random(&mut rng, g.c_out * 9);
            let start = random(&mut rng, g.n * g.c_in * h * wd);
            let mut want = start.clone();
            generic::conv2d_backward_input(&g, &gy, &w, &mut want);
            let mut got = start.clone();
            let took = super::avx512::one_backward_input(&g, &gy, &w, &mut got);
            if covers(&g) && cout * (7 * wd + 18) <= 4096 {
                assert!(took, "{g:?}");
            }
            if !took {
                assert_eq!(got, start, "{g:?}");
                continue;
            }
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{g:?} [{i}]: {a} vs {b}");
            }
            // Bit for bit the sums of the 6-row kernel it replaced and of the 8-lane
            // one: the same products in the same order (the 8-lane kernel drops a
            // column by adding +0 in its place, which may differ in the sign of a zero).
            let mut exact = start.clone();
            input_in_kernel_order(&g, &gy, &w, &mut exact);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&exact), "{g:?}");
            let mut got8 = start.clone();
            assert!(avx2::one_backward_input8(&g, &gy, &w, &mut got8), "{g:?}");
            assert_eq!(bits(&got8), bits(&exact), "{g:?}");
        }
    }
}

#[test]
fn one_channel_backward_input_keeps_an_infinite_gradient_to_its_neighbours() {
    // An infinite output gradient at a row's first or last column reaches the input
    // gradients of its 3x3 neighbourhood only: the flat rows read it again for the
    // next or previous row's other end, where both kernels must drop it (a product by
    // 0 there gave NaN in the 8-lane one).
    if !avx2::available() {
        return;
    }
    let mut rng = Rng::new(7);
    for (wd, h) in [(5, 4), (13, 7), (28, 28)] {
        let g = geom(2, 1, 8, [h, wd], [3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
        let gy = random(&mut rng, g.n * g.c_out * h * wd);
        let w = random(&mut rng, g.c_out * 9);
        for (n, o, r, c, v) in [
            (0, 0, 1, 0, f32::INFINITY),
            (1, 7, h - 1, wd - 1, f32::NEG_INFINITY),
            (1, 3, h / 2, wd - 1, f32::INFINITY),
        ] {
            let at = ((n * g.c_out + o) * h + r) * wd + c;
            let (mut with, mut without) = (gy.clone(), gy.clone());
            with[at] = v;
            without[at] = 0.0;
            let near = |i: usize| {
                let (m, y, x) = (i / (h * wd), i / wd % h, i % wd);
                m == n && y.abs_diff(r) <= 1 && x.abs_diff(c) <= 1
            };
            type Kernel = fn(&ConvGeom, &[f32], &[f32], &mut [f32]) -> bool;
            let mut kernels: Vec<(&str, Kernel)> = vec![("8-lane", avx2::one_backward_input8)];
            if super::avx512::available() {
                kernels.push(("16-lane", super::avx512::one_backward_input));
            }
            for (name, k) in kernels {
                let (mut got, mut want) = (vec![0.0f32; g.n * h * wd], vec![0.0f32; g.n * h * wd]);
                assert!(
                    k(&g, &with, &w, &mut got) && k(&g, &without, &w, &mut want),
                    "{name} {g:?}"
                );
                for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                    if near(i) {
                        assert!(!a.is_finite(), "{name} {g:?} [{i}]: {a}");
                    } else {
                        assert_eq!(a.to_bits(), b.to_bits(), "{name} {g:?} [{i}]: {a} vs {b}");
                    }
                }
            }
        }
    }
}

#[test]
fn one_channel_stride_2_forward_and_weight_match_generic() {
    // W2's stem at 28x28 (batch 32) and 20x14; odd planes, rows of 33 (a partial second
    // chunk of 16 outputs), a last block of 1 channel and 300 channels (several
    // backward-weight chunks), two groups, the smallest output that fills a vector;
    // then shapes `one16_s2.rs` declines (fewer than 16 outputs, a plane too large for
    // its buffer, other paddings).
    if !super::avx512::available() {
        return;
    }
    let mut rng = Rng::new(29);
    for (n, c_in, c_out, hw, p, groups, taken) in [
        (32, 1, 8, [28, 28], [1, 1], 1, true),
        (1, 1, 8, [20, 14], [1, 1], 1, true),
        (2, 1, 3, [7, 33], [1, 1], 1, true),
        (3, 1, 9, [31, 9], [1, 1], 1, true),
        (2, 2, 6, [11, 12], [1, 1], 2, true),
        (1, 1, 300, [8, 8], [1, 1], 1, true),
        (1, 1, 8, [5, 5], [1, 1], 1, false),
        (1, 1, 8, [64, 64], [1, 1], 1, false),
        (1, 1, 8, [28, 28], [0, 0], 1, false),
        (1, 1, 8, [28, 28], [2, 2], 1, false),
    ] {
        let g = geom(n, c_in, c_out, hw, [3, 3], [2, 2], p, [1, 1], groups).unwrap();
        let x = random(&mut rng, n * c_in * hw[0] * hw[1]);
        let w = random(&mut rng, c_out * 9);
        let b = random(&mut rng, c_out);
        let y0 = random(&mut rng, n * c_out * g.oh * g.ow);
        let (mut want, mut got) = (y0.clone(), y0.clone());
        generic::conv2d_forward(&g, &x, &w, Some(&b), &mut want);
        assert_eq!(
            super::avx512::one_forward_s2(&g, &x, &w, Some(&b), &mut got),
            taken,
            "{g:?}"
        );
        let gy = random(&mut rng, y0.len());
        let gw0 = random(&mut rng, w.len());
        let mut gw = gw0.clone();
        assert_eq!(
            super::avx512::one_backward_weight_s2(&g, &gy, &x, &mut gw),
            taken,
            "{g:?}"
        );
        if !taken {
            assert_eq!((got, gw), (y0, gw0), "{g:?}: declined but wrote");
            continue;
        }
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{g:?} [{i}]: {a} vs {b}");
        }
        let (gw_want, size) = weight_f64(&g, &gy, &x);
        for i in 0..gw.len() {
            let got = (gw[i] - gw0[i]) as f64;
            assert!(
                (got - gw_want[i]).abs() <= 1e-5 * size[i] + 1e-5,
                "backward-weight {g:?} [{i}]: {got} vs {}",
                gw_want[i]
            );
        }
    }
}
