//! Copies that move elements between layouts (cat, permute) and reductions over a set
//! of dimensions (sum, mean). Shapes are padded to rank 4 with leading ones.

use crate::scalar::Scalar;

/// `dims` padded to rank 4 with leading ones.
pub fn pad4(dims: &[usize]) -> [usize; 4] {
    let mut d = [1; 4];
    d[4 - dims.len()..].copy_from_slice(dims);
    d
}

/// Row-major strides of `d`.
fn strides(d: [usize; 4]) -> [usize; 4] {
    [d[1] * d[2] * d[3], d[2] * d[3], d[3], 1]
}

/// Calls `f(out, inp)` for every element of the permutation of `inp_dims` by `perm`
/// (output dimension `k` is input dimension `perm[k]`), `out` in output order.
fn permuted(inp_dims: [usize; 4], perm: [usize; 4], mut f: impl FnMut(usize, usize)) {
    let s = strides(inp_dims);
    let od = perm.map(|p| inp_dims[p]);
    let os = perm.map(|p| s[p]);
    let mut out = 0;
    for a in 0..od[0] {
        for b in 0..od[1] {
            for c in 0..od[2] {
                let base = a * os[0] + b * os[1] + c * os[2];
                for d in 0..od[3] {
                    f(out, base + d * os[3]);
                    out += 1;
                }
            }
        }
    }
}

/// `y = x.permute(perm)`.
pub fn permute_forward<S: Scalar>(inp_dims: [usize; 4], perm: [usize; 4], x: &[S], y: &mut [S]) {
    permuted(inp_dims, perm, |o, i| y[o] = x[i]);
}

/// `gx += ` the un-permuted `gy`.
pub fn permute_backward<S: Scalar>(inp_dims: [usize; 4], perm: [usize; 4], gy: &[S], gx: &mut [S]) {
    permuted(inp_dims, perm, |o, i| gx[i] += gy[o]);
}

/// `y = cat(a, b)` along the middle dimension of `[outer, la | lb, inner]`.
pub fn cat_forward<S: Scalar>(
    outer: usize,
    la: usize,
    lb: usize,
    inner: usize,
    a: &[S],
    b: &[S],
    y: &mut [S],
) {
    let (na, nb) = (la * inner, lb * inner);
    if na + nb == 0 {
        return; // an empty output (a zero-sized dim): nothing to copy
    }
    for (o, row) in y.chunks_exact_mut(na + nb).take(outer).enumerate() {
        row[..na].copy_from_slice(&a[o * na..(o + 1) * na]);
        row[na..].copy_from_slice(&b[o * nb..(o + 1) * nb]);
    }
}

/// `g += ` the part of `gy` that came from one side of a cat: `len` of each row of
/// `row` elements, starting at `start`.
pub fn cat_backward<S: Scalar>(row: usize, start: usize, len: usize, gy: &[S], g: &mut [S]) {
    if len == 0 || row == 0 {
        return; // nothing flows back to an empty side
    }
    for (gr, yr) in g.chunks_exact_mut(len).zip(gy.chunks_exact(row)) {
        for (d, &v) in gr.iter_mut().zip(&yr[start..start + len]) {
            *d += v;
        }
    }
}

/// The output index of input element `(a, b, c, d)` when the dimensions whose bit is
/// set in `mask` (bit `k` for padded dimension `k`) are reduced away.
fn reduced(inp_dims: [usize; 4], mask: u32, mut f: impl FnMut(usize, usize)) {
    // Empty: without this the outer loops would still count through the other dims,
    // which an empty tensor may have huge (found by fuzzing). Reached when the output
    // is not empty (a sum over an empty dim), so `Graph::exec` does not skip it.
    if inp_dims.contains(&0) {
        return;
    }
    let keep = |k: usize, v: usize| if mask >> k & 1 == 1 { 0 } else { v };
    let kd = [0, 1, 2, 3].map(|k| keep(k, inp_dims[k]).max(1));
    let ks = strides(kd);
    let mut i = 0;
    for a in 0..inp_dims[0] {
        for b in 0..inp_dims[1] {
            for c in 0..inp_dims[2] {
                let base = keep(0, a) * ks[0] + keep(1, b) * ks[1] + keep(2, c) * ks[2];
                for d in 0..inp_dims[3] {
                    f(base + keep(3, d), i);
                    i += 1;
                }
            }
        }
    }
}

/// `y = sum of x over the masked dimensions`, times `scale` (1 for sum, 1/count for
/// mean, applied once per output).
pub fn reduce_forward<S: Scalar>(
    inp_dims: [usize; 4],
    mask: u32,
    x: &[S],
    y: &mut [S],
    count: Option<usize>,
) {
    y.fill(S::ZERO);
    reduced(inp_dims, mask, |o, i| y[o] += x[i]);
    if let Some(n) = count {
        let n = S::from_count(n);
        for v in y.iter_mut() {
            *v = v.div(n);
        }
    }
}

/// `gx += gy` broadcast back over the masked dimensions (divided by `count` for mean).
pub fn reduce_backward<S: Scalar>(
    inp_dims: [usize; 4],
    mask: u32,
    gy: &[S],
    gx: &mut [S],
    count: Option<usize>,
) {
    let n = count.map(S::from_count);
    reduced(inp_dims, mask, |o, i| {
        gx[i] += match n {
            Some(n) => gy[o].div(n),
            None => gy[o],
        }
    });
}

/// `y[dst..dst + len] = x[src..src + len]` (a block a slice or a channel shuffle moves);
/// nothing where either block would leave its slice (never, for checked shapes).
#[inline]
pub fn copy_block<S: Scalar>(x: &[S], y: &mut [S], src: usize, dst: usize, len: usize) {
    if let (Some(x), Some(y)) = (x.get(src..src + len), y.get_mut(dst..dst + len)) {
        y.copy_from_slice(x);
    }
}

/// `gx[src..src + len] += gy[dst..dst + len]`: [`copy_block`]'s gradient.
#[inline]
pub fn add_block<S: Scalar>(gx: &mut [S], gy: &[S], src: usize, dst: usize, len: usize) {
    if let (Some(gx), Some(gy)) = (gx.get_mut(src..src + len), gy.get(dst..dst + len)) {
        gx.iter_mut().zip(gy).for_each(|(a, &b)| *a += b);
    }
}
