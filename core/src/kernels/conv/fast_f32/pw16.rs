//! Pointwise convolutions (1x1, stride 1, no padding, one group: W2's expand and
//! project layers) with AVX-512F, forward and backward-input.
//!
//! - Per sample a matrix product `y[o][p] = start[o][p] + sum_i w(o, i) x[i][p]`, the
//!   start being the bias (forward) or the old value (backward-input accumulates).
//! - Tiles of up to 4 output channels x 4 vectors of 16 positions (16 `zmm`
//!   accumulators); a plane's last vector is masked, so no position is computed twice
//!   and nothing is read past a plane.
//! - Each output's sum starts from its start value and adds the input channels in
//!   order, one rounding per multiply-add, like the strip kernels (`strip.rs`).

use super::avx512::{fma16, load16, load16_first, splat16, store16, store16_first, F16};
use crate::kernels::conv::ConvGeom;

/// What each output's sum starts from.
#[derive(Clone, Copy)]
enum Start<'a> {
    Bias(Option<&'a [f32]>),
    Old,
}

/// One pass: `cout` planes from `cin` planes of `plane` positions; the weight of
/// output `o` and input `i` is `w[o * wo + i * wi]`.
struct Pw {
    n: usize,
    cin: usize,
    cout: usize,
    plane: usize,
    wo: usize,
    wi: usize,
}

/// Whether `g` is a convolution this file (and `pw_weight16.rs`) takes.
pub(super) fn pointwise(g: &ConvGeom) -> bool {
    let plane = g.h * g.w;
    g.kh == 1
        && g.kw == 1
        && g.stride == [1, 1]
        && g.pad == [0, 0]
        && g.groups == 1
        && [g.oh, g.ow] == [g.h, g.w]
        && g.n > 0
        && g.c_in > 0
        && g.c_out > 0
        && plane > 0
}

/// `y = conv(x, w) + b`; `false` (nothing written) for other shapes.
#[target_feature(enable = "avx2,fma,avx512f")]
pub(super) fn forward(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) -> bool {
    let p = Pw {
        n: g.n,
        cin: g.c_in,
        cout: g.c_out,
        plane: g.h * g.w,
        wo: g.c_in,
        wi: 1,
    };
    pointwise(g) && p.run(x, w, Start::Bias(b), y)
}

/// `gx += conv_transpose(gy, w)`: the same product with the weight matrix transposed.
#[target_feature(enable = "avx2,fma,avx512f")]
pub(super) fn backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) -> bool {
    let p = Pw {
        n: g.n,
        cin: g.c_out,
        cout: g.c_in,
        plane: g.h * g.w,
        wo: 1,
        wi: g.c_in,
    };
    pointwise(g) && p.run(gy, w, Start::Old, gx)
}

impl Pw {
    /// Every sample, tile by tile; `false` (nothing written) when a slice is short.
    #[target_feature(enable = "avx2,fma,avx512f")]
    fn run(&self, x: &[f32], w: &[f32], start: Start, y: &mut [f32]) -> bool {
        let (xn, yn) = (self.cin * self.plane, self.cout * self.plane);
        let short = x.len() < self.n * xn
            || y.len() < self.n * yn
            || w.len() < self.cout * self.cin
            || matches!(start, Start::Bias(Some(b)) if b.len() < self.cout);
        if short {
            return false;
        }
        for (xs, ys) in x.chunks_exact(xn).zip(y.chunks_exact_mut(yn)).take(self.n) {
            let mut o0 = 0;
            while o0 < self.cout {
                let b = (self.cout - o0).min(4);
                let mut p0 = 0;
                while p0 < self.plane {
                    let len = (self.plane - p0).min(64);
                    let at = Tile { o0, p0, len };
                    match (b, len.div_ceil(16)) {
                        (4, 4) => self.tile::<4, 4>(xs, w, start, at, ys),
                        (4, 3) => self.tile::<4, 3>(xs, w, start, at, ys),
                        (4, 2) => self.tile::<4, 2>(xs, w, start, at, ys),
                        (4, _) => self.tile::<4, 1>(xs, w, start, at, ys),
                        (3, 4) => self.tile::<3, 4>(xs, w, start, at, ys),
                        (3, 3) => self.tile::<3, 3>(xs, w, start, at, ys),
                        (3, 2) => self.tile::<3, 2>(xs, w, start, at, ys),
                        (3, _) => self.tile::<3, 1>(xs, w, start, at, ys),
                        (2, 4) => self.tile::<2, 4>(xs, w, start, at, ys),
                        (2, 3) => self.tile::<2, 3>(xs, w, start, at, ys),
                        (2, 2) => self.tile::<2, 2>(xs, w, start, at, ys),
                        (2, _) => self.tile::<2, 1>(xs, w, start, at, ys),
                        (_, 4) => self.tile::<1, 4>(xs, w, start, at, ys),
                        (_, 3) => self.tile::<1, 3>(xs, w, start, at, ys),
                        (_, 2) => self.tile::<1, 2>(xs, w, start, at, ys),
                        (_, _) => self.tile::<1, 1>(xs, w, start, at, ys),
                    }
                    p0 += len;
                }
                o0 += b;
            }
        }
        true
    }

    /// Output channels `o0..o0 + B` x positions `p0..p0 + len` (`V` vectors, the last
    /// holding `len - 16 (V - 1)`) of one sample.
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline]
    fn tile<const B: usize, const V: usize>(
        &self,
        xs: &[f32],
        w: &[f32],
        start: Start,
        at: Tile,
        ys: &mut [f32],
    ) {
        let Tile { o0, p0, len } = at;
        let last = len - 16 * (V - 1);
        let get = |s: &[f32], v: usize| match v + 1 < V || last == 16 {
            true => load16(&s[16 * v..]),
            false => load16_first(&s[16 * v..], last),
        };
        let mut acc = [[splat16(0.0); V]; B];
        for (o, a) in acc.iter_mut().enumerate() {
            let row = &ys[(o0 + o) * self.plane + p0..];
            for (v, av) in a.iter_mut().enumerate() {
                *av = match start {
                    Start::Bias(b) => splat16(b.map_or(0.0, |b| b[o0 + o])),
                    Start::Old => get(row, v),
                };
            }
        }
        for i in 0..self.cin {
            let xr = &xs[i * self.plane + p0..];
            let mut xv: [F16; V] = [splat16(0.0); V];
            for (v, xvv) in xv.iter_mut().enumerate() {
                *xvv = get(xr, v);
            }
            for (o, a) in acc.iter_mut().enumerate() {
                let wv = splat16(w[(o0 + o) * self.wo + i * self.wi]);
                for (av, &xvv) in a.iter_mut().zip(&xv) {
                    *av = fma16(wv, xvv, *av);
                }
            }
        }
        for (o, a) in acc.iter().enumerate() {
            let row = &mut ys[(o0 + o) * self.plane + p0..];
            for (v, &av) in a.iter().enumerate() {
                match v + 1 < V || last == 16 {
                    true => store16(av, &mut row[16 * v..]),
                    false => store16_first(av, &mut row[16 * v..], last),
                }
            }
        }
    }
}

/// Where a tile starts and how many positions it has.
#[derive(Clone, Copy)]
struct Tile {
    o0: usize,
    p0: usize,
    len: usize,
}

#[cfg(test)]
mod tests {
    use crate::init::Rng;
    use crate::kernels::conv::{self as generic};
    use crate::kernels::test_shapes::{geom, random};

    /// The products in the kernel's order (start, then input channels in order, one
    /// rounding each): what the kernel must give bit for bit.
    fn in_order(start: f32, terms: impl Iterator<Item = (f32, f32)>) -> f32 {
        terms.fold(start, |acc, (w, x)| w.mul_add(x, acc))
    }

    #[test]
    fn pointwise_matches_the_in_order_sums_bit_for_bit() {
        if !super::super::avx512::available() {
            std::println!("no AVX-512F here: nothing to check");
            return;
        }
        let mut rng = Rng::new(41);
        // W2's expand and project layers (14x14, 7x7, 4x4 planes), tails of 1-15
        // positions, channel counts not multiples of 4, one channel, batch 1.
        for (n, c_in, c_out, hw) in [
            (32, 8, 32, [14, 14]),
            (32, 32, 16, [7, 7]),
            (2, 64, 32, [4, 4]),
            (3, 5, 7, [3, 5]),
            (1, 1, 1, [1, 1]),
            (2, 3, 9, [9, 9]),
            (1, 13, 6, [17, 2]),
        ] {
            let g = geom(n, c_in, c_out, hw, [1, 1], [1, 1], [0, 0], [1, 1], 1).unwrap();
            let plane = hw[0] * hw[1];
            let x = random(&mut rng, n * c_in * plane);
            let w = random(&mut rng, c_out * c_in);
            let b = random(&mut rng, c_out);
            let mut y = vec![f32::NAN; n * c_out * plane];
            assert!(super::super::avx512::pointwise_forward(
                &g,
                &x,
                &w,
                Some(&b),
                &mut y
            ));
            let mut gx = random(&mut rng, x.len());
            let gx0 = gx.clone();
            assert!(super::super::avx512::pointwise_backward_input(
                &g, &y, &w, &mut gx
            ));
            for s in 0..n {
                for p in 0..plane {
                    for o in 0..c_out {
                        let terms = (0..c_in).map(|i| (w[o * c_in + i], x[(s * c_in + i) * plane + p]));
                        let want = in_order(b[o], terms);
                        assert_eq!(y[(s * c_out + o) * plane + p].to_bits(), want.to_bits(), "{g:?}");
                    }
                    for i in 0..c_in {
                        let at = (s * c_in + i) * plane + p;
                        let terms = (0..c_out).map(|o| (w[o * c_in + i], y[(s * c_out + o) * plane + p]));
                        assert_eq!(gx[at].to_bits(), in_order(gx0[at], terms).to_bits(), "{g:?}");
                    }
                }
            }
            // And within rounding of the generic kernel (the layouts are right).
            let mut want = vec![0.0; y.len()];
            generic::conv2d_forward(&g, &x, &w, Some(&b), &mut want);
            for (a, e) in y.iter().zip(&want) {
                assert!((a - e).abs() <= 1e-4 * (1.0 + e.abs()), "{g:?}: {a} vs {e}");
            }
        }
    }

    #[test]
    fn other_shapes_and_short_slices_are_declined_without_writing() {
        let mut rng = Rng::new(43);
        for (k, s, p, groups) in [
            ([3, 3], [1, 1], [1, 1], 1),
            ([1, 1], [2, 2], [0, 0], 1),
            ([1, 1], [1, 1], [0, 0], 2),
        ] {
            let g = geom(2, 4, 4, [5, 5], k, s, p, [1, 1], groups).unwrap();
            let x = random(&mut rng, 2 * 4 * 25);
            let w = random(&mut rng, 4 * 4 / groups * k[0] * k[1]);
            let y0 = random(&mut rng, 2 * 4 * g.oh * g.ow);
            let mut y = y0.clone();
            assert!(!super::super::avx512::pointwise_forward(&g, &x, &w, None, &mut y));
            assert_eq!(y, y0);
        }
        let g = geom(2, 4, 4, [5, 5], [1, 1], [1, 1], [0, 0], [1, 1], 1).unwrap();
        let x = random(&mut rng, 2 * 4 * 25);
        let w = random(&mut rng, 16);
        let y0 = random(&mut rng, 2 * 4 * 25 - 1);
        let mut y = y0.clone();
        assert!(!super::super::avx512::pointwise_forward(&g, &x, &w, None, &mut y));
        assert!(!super::super::avx512::pointwise_forward(
            &g,
            &x,
            &w[..15],
            None,
            &mut y
        ));
        assert_eq!(y, y0);
    }
}
