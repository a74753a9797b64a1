//! Q16.16 arithmetic, bit for bit: the rounding rule (half away from zero), saturation
//! and its sticky flag, conversions, and stochastic rounding. Expected raw values are
//! worked out by hand in the comments (raw = real * 65536).

use torchlet::fixed::{saturated, take_saturated};
use torchlet::{Scalar, Q16};

fn q(raw: i32) -> Q16 {
    Q16(raw)
}

#[test]
fn multiply_rounds_half_away_from_zero() {
    take_saturated();
    // 1.5 LSB * 0.5 = 0.75 LSB -> 1; 1 LSB * 0.5 = 0.5 LSB (a tie) -> 1, and -> -1.
    assert_eq!(q(3) * q(1 << 15), q(2)); // 1.5 exactly: tie -> 2
    assert_eq!(q(1) * q(1 << 15), q(1));
    assert_eq!(q(-1) * q(1 << 15), q(-1));
    assert_eq!(q(-3) * q(1 << 15), q(-2));
    // 0.4 LSB -> 0 either sign.
    assert_eq!(q(1) * q(26214), q(0));
    assert_eq!(q(-1) * q(26214), q(0));
    // 2.5 * -1.25 = -3.125 exactly.
    assert_eq!(q(163840) * q(-81920), q(-204800));
    assert!(!saturated());
}

#[test]
fn divide_rounds_half_away_from_zero() {
    take_saturated();
    // 1 LSB / 2 = 0.5 LSB -> 1 (away from zero), -1 LSB / 2 -> -1.
    let two = Q16::from_int(2);
    assert_eq!(q(1).div(two), q(1));
    assert_eq!(q(-1).div(two), q(-1));
    assert_eq!(q(1).div(-two), q(-1));
    // 1 / 3 = 21845.33 LSB -> 21845; 2 / 3 = 43690.67 -> 43691.
    assert_eq!(Q16::ONE.div(Q16::from_int(3)), q(21845));
    assert_eq!(Q16::from_int(2).div(Q16::from_int(3)), q(43691));
    assert_eq!(Q16(0).div(Q16(0)), Q16(0));
    assert!(!saturated());
    assert_eq!(Q16::ONE.div(Q16(0)), Q16::MAX);
    assert!(take_saturated());
    assert_eq!((-Q16::ONE).div(Q16(0)), Q16::MIN);
    assert!(take_saturated());
}

#[test]
fn overflow_saturates_and_raises_the_sticky_flag() {
    take_saturated();
    let big = Q16::from_int(30000);
    assert_eq!(big + big, Q16::MAX);
    assert!(saturated());
    // Sticky: later exact arithmetic does not clear it.
    assert_eq!(Q16::ONE + Q16::ONE, Q16::from_int(2));
    assert!(take_saturated());
    assert!(!saturated());
    assert_eq!(-big - big, Q16::MIN);
    assert!(take_saturated());
    assert_eq!(big * big, Q16::MAX);
    assert!(take_saturated());
    assert_eq!(big * -big, Q16::MIN);
    assert!(take_saturated());
    assert_eq!(-Q16::MIN, Q16::MAX);
    assert!(take_saturated());
    // In range: no flag.
    assert_eq!(Q16::from_int(-32768) + Q16(0), Q16::MIN);
    assert!(!saturated());
}

#[test]
fn accumulator_rounds_once_and_saturates() {
    take_saturated();
    // 3 products of 0.5 LSB each (1 LSB * 0.5): one rounding of 1.5 LSB -> 2 LSB,
    // where rounding every product would give 3.
    let mut acc = Q16::acc_zero();
    for _ in 0..3 {
        acc = Q16::mac(acc, q(1), q(1 << 15));
    }
    assert_eq!(Q16::from_acc(acc), q(2));
    let acc = Q16::acc_add(Q16::acc_zero(), Q16::from_int(-7));
    assert_eq!(Q16::from_acc(acc), Q16::from_int(-7));
    assert!(!saturated());
    let mut acc = Q16::acc_zero();
    for _ in 0..3 {
        acc = Q16::mac(acc, Q16::MAX, Q16::MAX);
    }
    assert_eq!(acc, i64::MAX);
    assert!(take_saturated());
    assert_eq!(Q16::from_acc(acc), Q16::MAX);
}

#[test]
fn from_f32_is_exact_rounding_of_the_real_value() {
    take_saturated();
    assert_eq!(Q16::from_f32(1.0), Q16::ONE);
    assert_eq!(Q16::from_f32(-2.5), q(-163840));
    // 0.1f32 = 0.100000001490116..., * 65536 = 6553.6001 -> 6554.
    assert_eq!(Q16::from_f32(0.1), q(6554));
    assert_eq!(Q16::from_f32(-0.1), q(-6554));
    // Ties: 0.5 LSB and 1.5 LSB away from zero.
    assert_eq!(Q16::from_f32(0.5 / 65536.0), q(1));
    assert_eq!(Q16::from_f32(-0.5 / 65536.0), q(-1));
    assert_eq!(Q16::from_f32(1.5 / 65536.0), q(2));
    assert_eq!(Q16::from_f32(0.49 / 65536.0), q(0));
    assert_eq!(Q16::from_f32(1e-30), q(0));
    assert_eq!(Q16::from_f32(f32::from_bits(1)), q(0)); // smallest subnormal
    assert_eq!(Q16::from_f32(-32768.0), Q16::MIN);
    assert!(!saturated());
    assert_eq!(Q16::from_f32(32768.0), Q16::MAX);
    assert!(take_saturated());
    assert_eq!(Q16::from_f32(f32::INFINITY), Q16::MAX);
    assert!(take_saturated());
    assert_eq!(Q16::from_f32(f32::NEG_INFINITY), Q16::MIN);
    assert!(take_saturated());
    assert_eq!(Q16::from_f32(f32::NAN), q(0));
    assert!(take_saturated());
}

#[test]
fn conversions_agree_with_f64_reference_on_many_values() {
    // Reference: round half away from zero of v * 65536 computed exactly in f64
    // (v * 65536 is exact in f64 for every f32 in range).
    let mut s = 0x1234_5678u32;
    for _ in 0..200_000 {
        s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let v = f32::from_bits(s & 0xC7FF_FFFF); // |v| < 2^16 mostly, any sign
        if !v.is_finite() || v.abs() >= 32767.0 {
            continue;
        }
        let x = v as f64 * 65536.0;
        let want = (x.abs() + 0.5).floor().copysign(x) as i32;
        assert_eq!(Q16::from_f32(v).0, want, "v = {v:e}");
        assert_eq!(Q16::from_f64(v as f64).0, want, "v = {v:e}");
        let back = Q16(want).to_f64();
        assert_eq!(Q16::from_f64(back).0, want);
    }
    take_saturated();
}

#[test]
fn stochastic_rounding_is_unbiased_and_moves_tiny_updates() {
    // 0.05 * (3 LSB) = 0.15 LSB: rounding to nearest gives 0 every time.
    let (lr, g) = (Q16::from_f32(0.05), q(3));
    assert_eq!(lr * g, q(0));
    let mut rng = torchlet::init::Rng::new(7);
    let n = 100_000;
    let mut sum = 0i64;
    for _ in 0..n {
        sum += lr.mul_dithered(g, rng.next_u32()).0 as i64;
    }
    let exact = (lr.0 as f64 * 3.0) / 65536.0 * n as f64; // expected LSBs
    assert!((sum as f64 - exact).abs() < 600.0, "sum {sum} vs {exact}");
    // Negative products too (tolerance: 5 standard deviations, sqrt(n p (1-p)) = 113).
    let mut sum = 0i64;
    for _ in 0..n {
        sum += lr.mul_dithered(-g, rng.next_u32()).0 as i64;
    }
    assert!((sum as f64 + exact).abs() < 600.0, "sum {sum} vs -{exact}");
    // Exact products are never dithered away.
    assert_eq!(
        Q16::from_int(3).mul_dithered(Q16::from_int(2), u32::MAX),
        Q16::from_int(6)
    );
}

#[test]
fn split_multiply_equals_native_multiply() {
    use torchlet::fixed::mul;
    let edge = [
        0,
        1,
        -1,
        0x7FFF,
        0x8000,
        0xFFFF,
        0x10000,
        -0x8000,
        -0x10000,
        i32::MAX,
        i32::MIN,
        i32::MIN + 1,
    ];
    let mut s = 0x9E37_79B9u64;
    let mut next = || {
        s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let r = (s >> 32) as i32;
        // Mix full-range values with small ones (typical weights and activations).
        if s & 1 == 0 {
            r
        } else {
            r >> ((s >> 8) & 31)
        }
    };
    let pairs: Vec<(i32, i32)> = edge
        .iter()
        .flat_map(|&a| edge.iter().map(move |&b| (a, b)))
        .chain((0..1_000_000).map(|_| (next(), next())))
        .collect();
    for (a, b) in pairs {
        assert_eq!(mul::wide_split(a, b), mul::wide_native(a, b), "{a} * {b}");
        assert_eq!(mul::q16_split(a, b), mul::q16_native(a, b), "{a} * {b}");
    }
}
