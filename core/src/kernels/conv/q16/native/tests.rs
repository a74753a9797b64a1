//! The host path against the split kernels it replaces: the same bits and the same
//! saturation flag, on random geometries (strides, padding, dilation, groups, batch)
//! and operand sizes; and which calls it takes (so the fallback is not what is tested).

use super::super::{backward_input_split, backward_weight_split, forward_split};
use super::*;
use crate::fixed::take_saturated;
use crate::init::Rng;
use crate::kernels::test_shapes::geom;

/// A raw value of magnitude below `2^bits`.
fn raw(r: &mut Rng, bits: u32) -> Q16 {
    let v = (r.next_u64() & ((1u64 << bits) - 1)) as i64;
    let v = if r.next_u64() & 1 == 0 { v } else { -v };
    Q16(v.clamp(i32::MIN as i64, i32::MAX as i64) as i32)
}

fn vals(r: &mut Rng, len: usize, bits: u32) -> Vec<Q16> {
    (0..len).map(|_| raw(r, bits)).collect()
}

fn random_geom(r: &mut Rng, big: bool) -> ConvGeom {
    loop {
        let groups = 1 + r.below(3);
        let chans = if big { 12 } else { 3 };
        let (c_in, c_out) = (groups * (1 + r.below(chans)), groups * (1 + r.below(chans)));
        let (kh, kw) = (1 + r.below(4), 1 + r.below(4));
        let side = if big { 30 } else { 9 };
        let (h, w) = (1 + r.below(side), 1 + r.below(side));
        let stride = if r.below(2) == 0 {
            [1, 1]
        } else {
            [1 + r.below(3), 1 + r.below(3)]
        };
        let pad = [r.below(4), r.below(4)];
        let dil = [1 + r.below(2), 1 + r.below(2)];
        // The batch is drawn once a geometry is valid, as it always was.
        if let Some(mut g) = geom(1, c_in, c_out, [h, w], [kh, kw], stride, pad, dil, groups) {
            g.n = 1 + r.below(3);
            return g;
        }
    }
}

/// Runs all three passes both ways; returns which passes took the host path.
fn check(r: &mut Rng, g: &ConvGeom, bits: [u32; 3]) -> [bool; 3] {
    let (xl, wl, yl) = (
        g.n * g.c_in * g.h * g.w,
        g.c_out * g.c_in / g.groups * g.kh * g.kw,
        g.n * g.c_out * g.oh * g.ow,
    );
    let (x, w, gy) = (vals(r, xl, bits[0]), vals(r, wl, bits[1]), vals(r, yl, bits[2]));
    let b = vals(r, g.c_out, bits[2]);
    let (gx0, gw0) = (vals(r, xl, bits[0]), vals(r, wl, bits[1]));
    let mut took = [false; 3];

    let (mut want, mut got) = (vec![Q16(7); yl], vec![Q16(7); yl]);
    take_saturated();
    forward_split(g, &x, &w, Some(&b), &mut want);
    let flag = take_saturated();
    took[0] = forward(g, &x, &w, Some(&b), &mut got);
    assert_eq!(took[0] && take_saturated(), took[0] && flag, "forward flag {g:?}");
    assert!(!took[0] || got == want, "forward {g:?} bits {bits:?}");

    let (mut want, mut got) = (gx0.clone(), gx0.clone());
    backward_input_split(g, &gy, &w, &mut want);
    let flag = take_saturated();
    took[1] = backward_input(g, &gy, &w, &mut got);
    assert_eq!(
        took[1] && take_saturated(),
        took[1] && flag,
        "backward-input flag {g:?}"
    );
    assert!(!took[1] || got == want, "backward-input {g:?} bits {bits:?}");
    assert!(took[1] || got == gx0, "backward-input wrote before falling back");

    let (mut want, mut got) = (gw0.clone(), gw0.clone());
    backward_weight_split(g, &gy, &x, &mut want);
    let flag = take_saturated();
    took[2] = backward_weight(g, &gy, &x, &mut got);
    assert_eq!(
        took[2] && take_saturated(),
        took[2] && flag,
        "backward-weight flag {g:?}"
    );
    assert!(!took[2] || got == want, "backward-weight {g:?} bits {bits:?}");
    assert!(took[2] || got == gw0, "backward-weight wrote before falling back");
    took
}

#[test]
fn host_path_matches_the_split_kernels() {
    let mut r = Rng::new(0xC0FF_EE12_3456_789A);
    let mut taken = [0usize; 3];
    for bits in [[17, 17, 17], [22, 16, 24], [24, 20, 26], [28, 26, 28]] {
        for i in 0..150 {
            let g = random_geom(&mut r, i % 4 == 0);
            for (t, took) in taken.iter_mut().zip(check(&mut r, &g, bits)) {
                *t += took as usize;
            }
        }
    }
    // Most calls take the host path (backward-input only at stride 1).
    assert!(
        taken[0] > 450 && taken[1] > 200 && taken[2] > 450,
        "host path taken {taken:?}"
    );
}

#[test]
fn saturating_outputs_raise_the_flag_on_the_host_path() {
    // Operands up to 2^24 raw (256.0): sums clamp at the rails but fit an i64 exactly.
    let mut r = Rng::new(99);
    let mut clamped = 0;
    for _ in 0..100 {
        let g = random_geom(&mut r, false);
        let took = check(&mut r, &g, [25, 25, 25]);
        let x = vals(&mut r, g.n * g.c_in * g.h * g.w, 25);
        let w = vals(&mut r, g.c_out * g.c_in / g.groups * g.kh * g.kw, 25);
        let mut y = vec![Q16(0); g.n * g.c_out * g.oh * g.ow];
        take_saturated();
        if took[0] && forward(&g, &x, &w, None, &mut y) && take_saturated() {
            clamped += 1;
            assert!(y.iter().any(|v| *v == Q16::MAX || *v == Q16::MIN));
        }
    }
    assert!(clamped > 30, "only {clamped} forward calls clamped");
}

#[test]
fn w1_passes_take_the_host_path() {
    // W1's three convolutions at batch 32, 28x28, with training-sized operands.
    let mut r = Rng::new(5);
    for (c_in, c_out, side) in [(1, 8, 28), (8, 16, 14), (16, 32, 7)] {
        let g = geom(32, c_in, c_out, [side, side], [3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
        assert_eq!(check(&mut r, &g, [18, 16, 24]), [true; 3], "{g:?}");
    }
}

#[test]
fn operands_too_large_for_an_i64_sum_fall_back() {
    let g = geom(1, 4, 2, [4, 4], [3, 3], [1, 1], [0, 0], [1, 1], 1).unwrap();
    // 36 products of 2^31 * 2^31 exceed 2^63: the split kernels' saturating sum.
    let x = vec![Q16::MIN; 64];
    let w = vec![Q16::MIN; 72];
    let mut y = vec![Q16(0); 8];
    assert!(!forward(&g, &x, &w, None, &mut y));
    assert_eq!(form(&x[..1], &w[..1], 1), Some(Form::I64));
    assert_eq!(form(&x[..1], &w[..1], 2), None);
    // 2^16 * 2^16 * 2^21 = 2^53: one term too many for the f64 form.
    let (one, two) = ([Q16(1 << 16)], [Q16(-(1 << 16))]);
    assert_eq!(form(&one, &two, (1 << 21) - 1), Some(Form::F64));
    assert_eq!(form(&one, &two, 1 << 21), Some(Form::I64));
}
