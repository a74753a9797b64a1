//! `Graph::add_`: the in-place sum of a residual connection. Same values and gradients
//! as `add`, no new memory, the first operand consumed, and refused (operand intact)
//! where overwriting would be wrong.

use torchlet::{Graph, Tensor};

const DIMS: [usize; 2] = [3, 5];

fn vals(k: f32) -> Vec<f32> {
    (0..15).map(|i| (i as f32 * 0.7 + k).sin()).collect()
}

/// `sum(w * (2a + b))` with `a + b` out of place or in place: the output, the bytes the
/// sum added, and the gradients of the two leaves.
fn run(in_place: bool) -> (Vec<f32>, usize, Vec<f32>, Vec<f32>) {
    let mut arena = vec![0.0f32; 1 << 12];
    let mut g: Graph<f32, 32> = Graph::new(&mut arena);
    let x = g.input_with_grad(&DIMS, &vals(0.0)).unwrap();
    let y = g.input_with_grad(&DIMS, &vals(1.0)).unwrap();
    let a = g.mul_scalar(x, 2.0).unwrap();
    let before = g.arena().used_bytes();
    let s = match in_place {
        true => g.add_(a, y).unwrap(),
        false => g.add(a, y).unwrap(),
    };
    let added = g.arena().used_bytes() - before;
    let out = g.data(s).unwrap().to_vec();
    let w = g.input(&DIMS, &vals(2.0)).unwrap();
    let p = g.mul(s, w).unwrap();
    let loss = g.sum(p, &[0, 1], false).unwrap();
    g.backward(loss).unwrap();
    let grad = |g: &Graph<f32, 32>, t: Tensor| g.grad(t).unwrap().unwrap().to_vec();
    (out, added, grad(&g, x), grad(&g, y))
}

#[test]
fn add_in_place_matches_add_without_new_memory() {
    let (out, added, gx, gy) = run(false);
    let (out_, added_, gx_, gy_) = run(true);
    assert_eq!(added, 15 * 4);
    assert_eq!(added_, 0);
    assert_eq!((out, gx, gy), (out_, gx_, gy_));
}

#[test]
fn add_in_place_refuses_what_it_must_not_overwrite() {
    let mut arena = vec![0.0f32; 1 << 12];
    let mut g: Graph<f32, 32> = Graph::new(&mut arena);
    let p = g.param(&DIMS).unwrap();
    let x = g.input_with_grad(&DIMS, &vals(0.0)).unwrap();
    let short = g.input(&[15], &vals(0.0)).unwrap();
    // A parameter; an input that mul's backward reads; operands of different shapes.
    assert!(g.add_(p, x).is_err());
    let a = g.mul_scalar(x, 1.0).unwrap();
    let m = g.mul(a, a).unwrap();
    assert!(g.add_(a, x).is_err());
    let b = g.mul_scalar(x, 1.0).unwrap();
    assert!(g.add_(b, short).is_err());
    assert_eq!(g.data(a).unwrap(), &vals(0.0)[..], "refused, intact");
    assert_eq!(g.data(b).unwrap(), &vals(0.0)[..], "refused, intact");
    // An operand added to itself doubles, and its handle is consumed.
    let d = g.add_(b, b).unwrap();
    assert!(g.data(b).is_err());
    let want: Vec<f32> = vals(0.0).iter().map(|v| v + v).collect();
    assert_eq!(g.data(d).unwrap(), &want[..]);
    let s = g.sum(d, &[0, 1], false).unwrap();
    let t = g.sum(m, &[0, 1], false).unwrap();
    let l = g.add(s, t).unwrap();
    g.backward(l).unwrap();
    // d/dx of sum(2x) + sum(x^2) = 2 + 2x.
    let gx = g.grad(x).unwrap().unwrap();
    for (gv, v) in gx.iter().zip(vals(0.0)) {
        assert!((gv - (2.0 + 2.0 * v)).abs() < 1e-5, "{gv} vs {}", 2.0 + 2.0 * v);
    }
}
