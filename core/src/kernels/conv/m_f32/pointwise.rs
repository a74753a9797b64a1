//! 1x1 convolutions (stride 1, no padding: MobileNet's pointwise layers) as matrix
//! products, all three passes, on the register tiles of `micro.rs`.
//!
//! - Forward `y[o] = b[o] + sum_i w[o, i] x[i]` and backward-input
//!   `gx[i] += sum_o w[o, i] gy[o]` (planes of `h * w` positions) are one product: 4
//!   output planes x 4 positions per tile, the weights of the 4 planes packed
//!   `[j][r]` on the stack, the planes read in place. Same additions in the same order
//!   as the generic kernels (start value, then channel by channel), so equal results.
//! - Backward-weight `gw[o, i] += sum_p gy[o, p] x[i, p]`: dot products of 4 output
//!   gradient planes with 2 input planes, read in place, 4 positions per step; sums
//!   over the batch, then added to `gw` (an order other than the generic kernel's:
//!   results agree to rounding).
//! - Blocks of fewer than 4 (or 2) channels run the same tiles with zeros or a repeated
//!   row, and keep only the valid sums; the last `len % 4` positions take a scalar loop.

use super::micro::{dots4x2, gemm4x4};
use super::PACK_WORDS;
use crate::kernels::conv::ConvGeom;

/// Whether the shape is a 1x1 convolution with stride 1 and no padding (any groups).
fn covers(g: &ConvGeom) -> bool {
    let sizes = g.oh == g.h && g.ow == g.w && g.c_in >= g.groups && g.c_out >= g.groups;
    g.kh == 1 && g.kw == 1 && g.stride == [1, 1] && g.pad == [0, 0] && sizes
}

/// Reduction channels per packed block of the products (`PACK_WORDS / 4`).
const KC: usize = PACK_WORDS / 4;

/// Where the factor `a(j, r)` of [`planes_product`] sits in the weights: at
/// `w[j * sj + r * sr]`.
struct Factor<'a> {
    w: &'a [f32],
    sj: usize,
    sr: usize,
}

/// `out[r] = start(r) + sum_j a(j, r) * src[j]` for `m` planes `out[r]` and `k` planes
/// `src[j]` of `plane` words each; `bias = Some(b)` overwrites, `start(r) = b[r]` (0
/// without `b`), `None` adds to `out[r]`. Data, not closures, say what the pass is: one
/// copy of the code serves forward and backward-input (flash is scarce).
#[inline(never)]
fn planes_product(
    out: &mut [f32],
    m: usize,
    src: &[f32],
    k: usize,
    plane: usize,
    a: &Factor,
    bias: Option<Option<&[f32]>>,
) {
    let a = |j: usize, r: usize| a.w[j * a.sj + r * a.sr];
    let start = |r: usize| bias.map(|b| b.map_or(0.0, |b| b[r]));
    let mut pack = [0.0f32; PACK_WORDS];
    let tiles = plane / 4;
    let mut r0 = 0;
    while r0 < m {
        let rows = (m - r0).min(4);
        let mut j0 = 0;
        while j0 < k {
            let kc = (k - j0).min(KC);
            for (j, cell) in pack[..4 * kc].chunks_exact_mut(4).enumerate() {
                for (r, v) in cell.iter_mut().enumerate() {
                    *v = if r < rows { a(j0 + j, r0 + r) } else { 0.0 };
                }
            }
            let first = |r: usize| if j0 == 0 { start(r0 + r) } else { None };
            // The start of every tile of this block when it overwrites: its values, row
            // by row (missing rows: zeros, never stored).
            let init = first(0).map(|_| {
                let mut t = [0.0f32; 16];
                for (r, row) in t.chunks_exact_mut(4).enumerate().take(rows) {
                    row.fill(first(r).unwrap_or(0.0));
                }
                t
            });
            let b = &src[j0 * plane..];
            for t in 0..tiles {
                let p = 4 * t;
                if rows == 4 {
                    gemm4x4(
                        &mut out[r0 * plane + p..],
                        plane,
                        init.as_ref(),
                        &pack,
                        &b[p..],
                        plane,
                        kc,
                    );
                } else {
                    // A last block of fewer rows: a tile on the stack, valid rows copied.
                    let mut tile = [0.0f32; 16];
                    for r in 0..rows {
                        tile[4 * r..][..4].copy_from_slice(&out[(r0 + r) * plane + p..][..4]);
                    }
                    gemm4x4(&mut tile, 4, init.as_ref(), &pack, &b[p..], plane, kc);
                    for r in 0..rows {
                        out[(r0 + r) * plane + p..][..4].copy_from_slice(&tile[4 * r..][..4]);
                    }
                }
            }
            // The last positions, one by one, in the same order.
            for p in 4 * tiles..plane {
                for r in 0..rows {
                    let o = &mut out[(r0 + r) * plane + p];
                    let mut s = first(r).unwrap_or(*o);
                    for j in 0..kc {
                        s += pack[4 * j + r] * b[j * plane + p];
                    }
                    *o = s;
                }
            }
            j0 += kc;
        }
        r0 += rows;
    }
}

/// The forward pass; `false`, with `y` untouched, for a shape it does not cover.
pub(crate) fn forward(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) -> bool {
    if !covers(g) {
        return false;
    }
    let (cin, cout, plane) = (g.c_in / g.groups, g.c_out / g.groups, g.h * g.w);
    for n in 0..g.n {
        for grp in 0..g.groups {
            let oc = grp * cout;
            let out = &mut y[(n * g.c_out + oc) * plane..][..cout * plane];
            let src = &x[(n * g.c_in + grp * cin) * plane..][..cin * plane];
            let a = Factor {
                w: &w[oc * cin..],
                sj: 1,
                sr: cin,
            };
            let bias = Some(b.map(|b| &b[oc..]));
            planes_product(out, cout, src, cin, plane, &a, bias);
        }
    }
    true
}

/// The backward-input pass; `false`, with `gx` untouched, for a shape it does not cover.
pub(crate) fn backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
    if !covers(g) {
        return false;
    }
    let (cin, cout, plane) = (g.c_in / g.groups, g.c_out / g.groups, g.h * g.w);
    for n in 0..g.n {
        for grp in 0..g.groups {
            let (ic, oc) = (grp * cin, grp * cout);
            let out = &mut gx[(n * g.c_in + ic) * plane..][..cin * plane];
            let src = &gy[(n * g.c_out + oc) * plane..][..cout * plane];
            let a = Factor {
                w: &w[oc * cin..],
                sj: cin,
                sr: 1,
            };
            planes_product(out, cin, src, cout, plane, &a, None);
        }
    }
    true
}

/// The backward-weight pass; `false`, with `gw` untouched, for a shape it does not
/// cover.
pub(crate) fn backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    if !covers(g) {
        return false;
    }
    let (cin, cout, plane) = (g.c_in / g.groups, g.c_out / g.groups, g.h * g.w);
    let steps = plane / 4;
    for grp in 0..g.groups {
        let (ic, oc) = (grp * cin, grp * cout);
        for o0 in (0..cout).step_by(4) {
            for i0 in (0..cin).step_by(2) {
                // Missing channels of a last block repeat the block's first one.
                let (ro, ri) = ((cout - o0).min(4), (cin - i0).min(2));
                let mut acc = [0.0f32; 8];
                for n in 0..g.n {
                    let gp = |o: usize| {
                        &gy[(n * g.c_out + oc + o0 + if o < ro { o } else { 0 }) * plane..][..plane]
                    };
                    let xp =
                        |i: usize| &x[(n * g.c_in + ic + i0 + if i < ri { i } else { 0 }) * plane..][..plane];
                    let (gr, xr) = ([gp(0), gp(1), gp(2), gp(3)], [xp(0), xp(1)]);
                    dots4x2(&mut acc, gr, xr, steps);
                    for p in 4 * steps..plane {
                        for (o, go) in gr.iter().enumerate() {
                            for (i, xi) in xr.iter().enumerate() {
                                acc[o * 2 + i] += go[p] * xi[p];
                            }
                        }
                    }
                }
                for o in 0..ro {
                    for i in 0..ri {
                        gw[(oc + o0 + o) * cin + i0 + i] += acc[o * 2 + i];
                    }
                }
            }
        }
    }
    true
}
