//! `Graph::set_compact_saves`: a BatchNorm with fixed statistics and a trained scale
//! keeps its normalised input in 16 bits instead of its input. What it keeps, that the
//! input is freed and may be overwritten in place, that every gradient but the scale's
//! is unchanged bit for bit and the scale's is close, in f32 and Q16.

use torchlet::{BatchNormParams, Graph, Scalar, Tensor, Q16};

const C: usize = 3;
/// `[3, C, 1, 5]`: 45 values, so the last 16-bit word is half full.
const DIMS: [usize; 4] = [3, C, 1, 5];
const NUMEL: usize = 45;

/// One step's results: extra arena bytes the batch_norm kept beyond its output, the
/// bytes given back by freeing its input, the output, and the gradients of input,
/// scale and shift.
struct Run<S> {
    kept: usize,
    freed: usize,
    out: Vec<S>,
    gx: Vec<S>,
    gw: Vec<S>,
    gb: Vec<S>,
}

fn run<S: Scalar>(compact: bool, in_place: bool) -> Run<S> {
    let mut arena = vec![S::ZERO; 1 << 12];
    let mut g: Graph<S, 64> = Graph::new(&mut arena);
    g.set_compact_saves(compact);
    let [w, b] = [g.param(&[C]).unwrap(), g.param(&[C]).unwrap()];
    let [m, v] = [g.buffer(&[C]).unwrap(), g.buffer(&[C]).unwrap()];
    let set = |g: &mut Graph<S, 64>, t: Tensor, vals: [f32; C]| {
        g.param_data_mut(t)
            .unwrap()
            .copy_from_slice(&vals.map(S::from_f32));
    };
    set(&mut g, w, [1.5, -0.5, 0.75]);
    set(&mut g, b, [0.25, 1.0, -0.5]);
    set(&mut g, m, [0.1, -0.2, 0.3]);
    set(&mut g, v, [2.0, 0.5, 1.0]);
    let vals: Vec<S> = (0..NUMEL)
        .map(|i| S::from_f32((i as f32 * 0.77).sin() * 2.5))
        .collect();
    let weights: Vec<S> = (0..NUMEL)
        .map(|i| S::from_f32((i % 7) as f32 * 0.3 - 0.8))
        .collect();
    let x = g.input_with_grad(&DIMS, &vals).unwrap();
    let a = g.mul_scalar(x, 1.0).unwrap();
    let before = g.arena().used_bytes();
    let eval = BatchNormParams::default();
    let y = match in_place {
        true => g
            .batch_norm_(a, Some(w), Some(b), Some(m), Some(v), eval)
            .unwrap(),
        false => g.batch_norm(a, Some(w), Some(b), Some(m), Some(v), eval).unwrap(),
    };
    let output_bytes = if in_place { 0 } else { NUMEL * 4 };
    let kept = g.arena().used_bytes() - before - output_bytes;
    let used = g.arena().used_bytes();
    if !in_place {
        g.free(a).unwrap();
    }
    let freed = used - g.arena().used_bytes();
    let out = g.data(y).unwrap().to_vec();
    let t = g.input(&DIMS, &weights).unwrap();
    let p = g.mul(y, t).unwrap();
    let loss = g.sum(p, &[0, 1, 2, 3], false).unwrap();
    g.backward(loss).unwrap();
    let grad = |t| g.grad(t).unwrap().unwrap().to_vec();
    Run {
        kept,
        freed,
        out,
        gx: grad(x),
        gw: grad(w),
        gb: grad(b),
    }
}

fn compact_matches_exact<S: Scalar + PartialEq + core::fmt::Debug>(tol: f32) {
    let exact = run::<S>(false, false);
    let compact = run::<S>(true, false);
    let in_place = run::<S>(true, true);
    // Exact: mean and inverse std, the input kept. Compact: 16 bits per value more.
    assert_eq!(exact.kept, 2 * C * 4);
    assert_eq!(compact.kept, (2 * C + NUMEL.div_ceil(2)) * 4);
    assert_eq!(in_place.kept, compact.kept);
    assert_eq!(exact.freed, 0, "the exact scale gradient reads the input");
    assert_eq!(compact.freed, NUMEL * 4, "compact saves let the input go");
    for r in [&compact, &in_place] {
        assert_eq!(r.out, exact.out);
        assert_eq!(r.gx, exact.gx);
        assert_eq!(r.gb, exact.gb);
        assert_eq!(r.gw, in_place.gw);
        for (a, e) in r.gw.iter().zip(&exact.gw) {
            let (a, e) = (a.to_f32(), e.to_f32());
            assert!(
                (a - e).abs() <= tol * (1.0 + e.abs()),
                "scale gradient {a} vs {e}"
            );
        }
    }
    assert_ne!(compact.gw, exact.gw, "the 16-bit values were rounded");
}

#[test]
fn f32_compact_saves_keep_bfloat16_and_free_the_input() {
    compact_matches_exact::<f32>(4e-3);
}

#[test]
fn q16_compact_saves_keep_q8_8_and_free_the_input() {
    compact_matches_exact::<Q16>(2e-2);
}

#[test]
fn in_place_with_a_trained_scale_needs_compact_saves() {
    let mut arena = vec![0.0f32; 1 << 12];
    let mut g: Graph<f32, 64> = Graph::new(&mut arena);
    let w = g.param(&[C]).unwrap();
    let [m, v] = [g.buffer(&[C]).unwrap(), g.buffer(&[C]).unwrap()];
    g.param_data_mut(v).unwrap().fill(1.0);
    let vals = vec![0.5f32; NUMEL];
    let x = g.input_with_grad(&DIMS, &vals).unwrap();
    let a = g.mul_scalar(x, 1.0).unwrap();
    let eval = BatchNormParams::default();
    assert!(g.batch_norm_(a, Some(w), None, Some(m), Some(v), eval).is_err());
    assert_eq!(g.data(a).unwrap(), &vals[..], "refused, the input intact");
    g.set_compact_saves(true);
    assert!(g.compact_saves());
    let y = g.batch_norm_(a, Some(w), None, Some(m), Some(v), eval).unwrap();
    assert!(g.data(a).is_err(), "the input's handle was consumed");
    let s = g.sum(y, &[0, 1, 2, 3], false).unwrap();
    g.backward(s).unwrap();
    // d sum(w * xhat) / dw = sum xhat = 15 * 0.5 per channel (unit variance, zero mean).
    let gw = g.grad(w).unwrap().unwrap();
    for &v in gw {
        assert!((v - 7.5).abs() < 0.05, "{v}");
    }
}
