//! Integer exp/ln/sqrt/tanh/sigmoid of Q16.16 against f64 references (libm precision
//! from std), over dense grids. Bounds are in LSB (2^-16) of the result, or relative
//! where the result is large.

use torchlet::fixed::take_saturated;
use torchlet::{Scalar, Q16};

fn grid(lo: f64, hi: f64, n: usize) -> impl Iterator<Item = Q16> {
    (0..=n).map(move |i| Q16::from_f64(lo + (hi - lo) * i as f64 / n as f64))
}

/// Largest error in LSB of `f` against `reference`, relative to `max(1, |ref|)`.
fn worst(xs: impl Iterator<Item = Q16>, f: impl Fn(Q16) -> Q16, reference: impl Fn(f64) -> f64) -> f64 {
    xs.map(|x| {
        let want = reference(x.to_f64());
        let got = f(x).to_f64();
        (got - want).abs() * 65536.0 / want.abs().max(1.0)
    })
    .fold(0.0, f64::max)
}

#[test]
fn exp_is_within_one_lsb_or_2e5_relative() {
    take_saturated();
    let e = worst(grid(-12.0, 10.39, 200_000), Q16::exp, f64::exp);
    assert!(e <= 1.0, "exp worst {e} LSB (relative to max(1, |y|))");
    assert_eq!(Q16::ONE, Q16(0).exp());
    assert_eq!(Q16(0), Q16::from_int(-20).exp());
    assert!(!take_saturated());
    assert_eq!(Q16::MAX, Q16::from_int(11).exp());
    assert!(take_saturated());
}

#[test]
fn ln_is_within_one_lsb() {
    take_saturated();
    let e = worst((1..=4_000_000).step_by(7).map(Q16), Q16::ln, f64::ln);
    let e2 = worst(grid(1.0, 32767.0, 200_000), Q16::ln, f64::ln);
    assert!(e <= 1.0 && e2 <= 1.0, "ln worst {e} / {e2} LSB");
    assert_eq!(Q16(0), Q16::ONE.ln());
    assert!(!take_saturated());
    assert_eq!(Q16::MIN, Q16(0).ln());
    assert!(take_saturated());
}

#[test]
fn sqrt_is_correctly_rounded() {
    take_saturated();
    for raw in (0..i32::MAX).step_by(9_973).chain([0, 1, 2, 3, 65536, i32::MAX]) {
        let x = Q16(raw);
        let want = (x.to_f64().sqrt() * 65536.0).round() as i32;
        assert_eq!(x.sqrt().0, want, "sqrt({raw} LSB)");
    }
    assert!(!take_saturated());
}

#[test]
fn tanh_and_sigmoid_are_within_one_lsb_and_never_saturate() {
    take_saturated();
    let e = worst(grid(-40.0, 40.0, 400_000), Q16::tanh, f64::tanh);
    assert!(e <= 1.0, "tanh worst {e} LSB");
    let s = worst(grid(-40.0, 40.0, 400_000), Q16::sigmoid, |x| {
        1.0 / (1.0 + (-x).exp())
    });
    assert!(s <= 1.0, "sigmoid worst {s} LSB");
    for x in [Q16::MIN, Q16::MAX, Q16(0)] {
        let _ = (x.tanh(), x.sigmoid());
    }
    assert_eq!(Q16::MAX.tanh(), Q16::ONE);
    assert_eq!(Q16::MIN.tanh(), -Q16::ONE);
    assert_eq!(Q16(0).sigmoid(), Q16(1 << 15));
    assert!(!take_saturated());
}

#[test]
fn transcendentals_are_bit_exact_regressions() {
    // Pinned raw outputs: any change to the integer algorithms (which would break the
    // cross-target determinism hashes) shows up here first.
    let xs = [-65536 * 5, -12345, 0, 1, 77777, 65536 * 3];
    let got: Vec<[i32; 4]> = xs
        .iter()
        .map(|&r| {
            let x = Q16(r);
            [x.exp().0, x.tanh().0, x.sigmoid().0, Q16(r.abs() + 1).ln().0]
        })
        .collect();
    let want: Vec<[i32; 4]> = xs
        .iter()
        .map(|&r| {
            let x = Q16(r).to_f64();
            let ln_arg = Q16(r.abs() + 1).to_f64();
            let rq = |v: f64| (v * 65536.0).round() as i32;
            [
                rq(x.exp()),
                rq(x.tanh()),
                rq(1.0 / (1.0 + (-x).exp())),
                rq(ln_arg.ln()),
            ]
        })
        .collect();
    for (g, w) in got.iter().zip(&want) {
        for k in 0..4 {
            assert!((g[k] - w[k]).abs() <= 1, "{got:?} vs {want:?}");
        }
    }
    assert_eq!(got, PINNED.to_vec());
}
/// Raw outputs `[exp(x), tanh(x), sigmoid(x), ln(|x| + 1 LSB)]` of the integer
/// algorithms at the pinned points (each also within 1 LSB of the f64 reference above).
const PINNED: [[i32; 4]; 6] = [
    [442, -65530, 439, 105476],
    [54284, -12201, 29691, -109397],
    [65536, 0, 32768, -726817],
    [65537, 1, 32768, -681391],
    [214730, 54367, 50211, 11224],
    [1316326, 65212, 62428, 71999],
];
