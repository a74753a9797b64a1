//! Backward-weight of pointwise convolutions (1x1, stride 1, no padding, one group:
//! W2's expand and project layers) with AVX-512F.
//!
//! - `gw[o][i] += sum over samples and positions of gy[o][p] * x[i][p]`: both operands'
//!   rows run along positions, so 16 positions are multiplied lane by lane and the
//!   lanes are summed once per weight, after every sample.
//! - A tile is [`PO`] output x [`PI`] input channels of partial sums held in `zmm`
//!   registers over every sample; a plane's last vector is a masked load of both
//!   operands (zeros past the plane), so nothing past a plane is read. Channel counts
//!   that are not multiples of the tile repeat the last channel and drop those sums.
//! - Tiles walk the input channels for one block of output channels at a time, so that
//!   block's output-gradient rows are read again from L1 on small planes.

use super::avx512::{fma16, load16, load16_first, splat16, store16, F16};
use super::one_weight16::lane_sum;
use crate::kernels::conv::ConvGeom;

/// Output channels per tile.
const PO: usize = 4;
/// Input channels per tile.
const PI: usize = 4;

/// Smallest plane taken: on smaller ones (W2's 4x4) a sample's rows are one or two
/// vectors and the packing kernel of `strip_weight.rs` measured faster.
const MIN_PLANE: usize = 32;

/// `gw += correlate(gy, x)` for 1x1 stride-1 convolutions without padding on planes of
/// [`MIN_PLANE`] positions and more; `false` (nothing written) for other shapes or
/// short slices.
#[target_feature(enable = "avx2,fma,avx512f")]
pub(super) fn backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    let (n, cin, cout, plane) = (g.n, g.c_in, g.c_out, g.h * g.w);
    let short = gy.len() < n * cout * plane || x.len() < n * cin * plane || gw.len() < cout * cin;
    if !super::pw16::pointwise(g) || short || plane < MIN_PLANE {
        return false;
    }
    let rows = Rows { n, cin, cout, plane };
    for o0 in (0..cout).step_by(PO) {
        for i0 in (0..cin).step_by(PI) {
            let sums = rows.tile(gy, x, o0, i0);
            for (k, row) in sums.iter().enumerate().take(cout - o0) {
                for (j, &s) in row.iter().enumerate().take(cin - i0) {
                    gw[(o0 + k) * cin + i0 + j] += s;
                }
            }
        }
    }
    true
}

/// The shape of both operands: `n` samples of `cout` (output gradient) or `cin`
/// (input) planes of `plane` positions.
struct Rows {
    n: usize,
    cin: usize,
    cout: usize,
    plane: usize,
}

impl Rows {
    /// The sums over every sample and position for output channels `o0..o0 + PO` x
    /// input channels `i0..i0 + PI` (channels past the last repeat it).
    #[target_feature(enable = "avx2,fma,avx512f")]
    fn tile(&self, gy: &[f32], x: &[f32], o0: usize, i0: usize) -> [[f32; PI]; PO] {
        let p = self.plane;
        let mut oc = [0usize; PO];
        for (k, o) in oc.iter_mut().enumerate() {
            *o = (o0 + k).min(self.cout - 1) * p;
        }
        let mut ic = [0usize; PI];
        for (k, i) in ic.iter_mut().enumerate() {
            *i = (i0 + k).min(self.cin - 1) * p;
        }
        let mut acc = [[splat16(0.0); PI]; PO];
        let (mut gv, mut xv) = ([splat16(0.0); PO], [splat16(0.0); PI]);
        for s in 0..self.n {
            let gs = &gy[s * self.cout * p..][..self.cout * p];
            let xs = &x[s * self.cin * p..][..self.cin * p];
            let mut gr: [&[f32]; PO] = [&[]; PO];
            for (r, &o) in gr.iter_mut().zip(&oc) {
                *r = &gs[o..][..p];
            }
            let mut xr: [&[f32]; PI] = [&[]; PI];
            for (r, &i) in xr.iter_mut().zip(&ic) {
                *r = &xs[i..][..p];
            }
            let mut q = 0;
            while q + 16 <= p {
                for (g, r) in gv.iter_mut().zip(&gr) {
                    *g = load16(&r[q..]);
                }
                for (x, r) in xv.iter_mut().zip(&xr) {
                    *x = load16(&r[q..]);
                }
                products(&mut acc, &gv, &xv);
                q += 16;
            }
            if q < p {
                for (g, r) in gv.iter_mut().zip(&gr) {
                    *g = load16_first(&r[q..], p - q);
                }
                for (x, r) in xv.iter_mut().zip(&xr) {
                    *x = load16_first(&r[q..], p - q);
                }
                products(&mut acc, &gv, &xv);
            }
        }
        let mut sums = [[0.0f32; PI]; PO];
        for (srow, arow) in sums.iter_mut().zip(&acc) {
            for (s, &a) in srow.iter_mut().zip(arow) {
                let mut l = [0.0f32; 16];
                store16(a, &mut l);
                *s = lane_sum(&l);
            }
        }
        sums
    }
}

/// `acc[k][j] += gv[k] * xv[j]`, lane by lane.
#[target_feature(enable = "avx2,fma,avx512f")]
#[inline]
fn products(acc: &mut [[F16; PI]; PO], gv: &[F16; PO], xv: &[F16; PI]) {
    for (a, &g) in acc.iter_mut().zip(gv) {
        for (av, &x) in a.iter_mut().zip(xv) {
            *av = fma16(g, x, *av);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::init::Rng;
    use crate::kernels::conv::{self as generic};
    use crate::kernels::test_shapes::{geom, random};

    #[test]
    fn pointwise_backward_weight_matches_the_generic_kernel() {
        if !super::super::avx512::available() {
            std::println!("no AVX-512F here: nothing to check");
            return;
        }
        let mut rng = Rng::new(47);
        // W2's expand and project layers on 14x14 and 7x7 planes, tails of 1-15
        // positions, channel counts not multiples of the tile, one channel, batch 1.
        for (n, c_in, c_out, hw) in [
            (32, 8, 32, [14, 14]),
            (32, 16, 64, [7, 7]),
            (3, 5, 7, [8, 5]),
            (1, 1, 1, [6, 6]),
            (2, 3, 9, [9, 9]),
            (1, 13, 6, [17, 2]),
            (4, 64, 16, [4, 8]),
        ] {
            let g = geom(n, c_in, c_out, hw, [1, 1], [1, 1], [0, 0], [1, 1], 1).unwrap();
            let plane = hw[0] * hw[1];
            let gy = random(&mut rng, n * c_out * plane);
            let x = random(&mut rng, n * c_in * plane);
            let gw0 = random(&mut rng, c_out * c_in);
            let mut gw = gw0.clone();
            assert!(super::super::avx512::pointwise_backward_weight(
                &g, &gy, &x, &mut gw
            ));
            let mut want = gw0.clone();
            generic::conv2d_backward_weight(&g, &gy, &x, &mut want);
            let scale = (n * plane) as f32;
            for (a, e) in gw.iter().zip(&want) {
                assert!(
                    (a - e).abs() <= 2e-6 * scale * (1.0 + e.abs()),
                    "{g:?}: {a} vs {e}"
                );
            }
        }
    }

    #[test]
    fn small_planes_other_shapes_and_short_slices_are_declined_without_writing() {
        let mut rng = Rng::new(53);
        let cases = [
            ([4, 4], [1, 1], [1, 1], [0, 0], 1),
            ([6, 6], [3, 3], [1, 1], [1, 1], 1),
            ([6, 6], [1, 1], [2, 2], [0, 0], 1),
            ([6, 6], [1, 1], [1, 1], [0, 0], 2),
        ];
        for (hw, k, s, p, groups) in cases {
            let g = geom(2, 4, 4, hw, k, s, p, [1, 1], groups).unwrap();
            let gy = random(&mut rng, 2 * 4 * g.oh * g.ow);
            let x = random(&mut rng, 2 * 4 * hw[0] * hw[1]);
            let gw0 = random(&mut rng, 4 * 4 / groups * k[0] * k[1]);
            let mut gw = gw0.clone();
            assert!(!super::super::avx512::pointwise_backward_weight(
                &g, &gy, &x, &mut gw
            ));
            assert_eq!(gw, gw0);
        }
        let g = geom(2, 4, 4, [6, 6], [1, 1], [1, 1], [0, 0], [1, 1], 1).unwrap();
        let (gy, x) = (random(&mut rng, 2 * 4 * 36), random(&mut rng, 2 * 4 * 36));
        let gw0 = random(&mut rng, 16);
        let mut gw = gw0.clone();
        assert!(!super::super::avx512::pointwise_backward_weight(
            &g,
            &gy[..287],
            &x,
            &mut gw
        ));
        assert!(!super::super::avx512::pointwise_backward_weight(
            &g,
            &gy,
            &x[..287],
            &mut gw
        ));
        assert!(!super::super::avx512::pointwise_backward_weight(
            &g,
            &gy,
            &x,
            &mut gw[..15]
        ));
        assert_eq!(gw, gw0);
    }
}
