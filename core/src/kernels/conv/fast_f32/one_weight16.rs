//! `one.rs`'s backward-weight with AVX-512F: `gw[o][t] += sum over positions p of
//! gy[o][p] * x[p + tap t]`, 16 flat positions per vector.
//!
//! - The input is read from `one.rs`'s three zero-bordered copies (`Flat`), or for
//!   stride 2 from `one16_s2.rs`'s six (`one16.rs`'s `Copies`), the output gradient in place.
//! - A tile is up to 8 output channels x the 3 taps of one kernel row: 24 vectors of
//!   16-lane partial sums. Per 16 positions 3 input loads and 8 gradient loads feed
//!   24 multiply-adds, no broadcasts. The partial sums stay in a stack buffer between
//!   samples and are summed across lanes once per call.
//! - The sweep starts where the first channel's gradient is 64-byte aligned (its loads
//!   then stay inside cache lines); the positions before that and after the last whole
//!   vector are read with masked loads (zeros in the other lanes, so nothing is counted
//!   twice).

use super::avx512::{fma16, load16, load16_first, splat16, store16, F16};
use super::one::{Buf, Flat, X_WORDS};
use super::one16::Copies;
use crate::kernels::conv::ConvGeom;

/// Output channels per tile.
const CB: usize = 8;
/// Output channels whose lane sums one pass keeps (9 KiB).
const OC_CHUNK: usize = 16;

/// `gw += correlate(gy, x)` for the convolutions `one.rs` covers, planes of 16 words
/// and more; `false` (nothing written) for other shapes.
#[target_feature(enable = "avx2,fma,avx512f")]
pub(super) fn backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    let Some(f) = Flat::new(g) else {
        return false;
    };
    if f.hw < 16 {
        return false;
    }
    sums(g, Copies::Same(&f), gy, x, gw);
    true
}

/// `gw += correlate(gy, x)` with the taps read from `copies` of each input plane.
#[target_feature(enable = "avx2,fma,avx512f")]
pub(super) fn sums(g: &ConvGeom, copies: Copies, gy: &[f32], x: &[f32], gw: &mut [f32]) {
    let cout = g.c_out / g.groups;
    let (plane, hw) = (g.h * g.w, g.oh * g.ow);
    let mut buf = Buf([0.0f32; X_WORDS]);
    let buf = &mut buf.0[..copies.words()];
    let offs: [usize; 9] = core::array::from_fn(|t| copies.off(t));
    // `[channel][tap][lane]`.
    let mut lanes = [0.0f32; OC_CHUNK * 9 * 16];
    for grp in 0..g.groups {
        for c0 in (0..cout).step_by(OC_CHUNK) {
            let m = OC_CHUNK.min(cout - c0);
            let lanes = &mut lanes[..m * 144];
            lanes.fill(0.0);
            for n in 0..g.n {
                copies.fill(buf, &x[(n * g.c_in + grp) * plane..][..plane]);
                let planes = &gy[(n * g.c_out + grp * cout + c0) * hw..][..m * hw];
                for o0 in (0..m).step_by(CB) {
                    let nb = CB.min(m - o0);
                    let s = Sums16 {
                        hw,
                        offs: &offs,
                        buf,
                        gy: &planes[o0 * hw..][..nb * hw],
                    };
                    let l = &mut lanes[o0 * 144..][..nb * 144];
                    for ky in 0..3 {
                        match nb {
                            8 => s.row::<8>(ky, l),
                            7 => s.row::<7>(ky, l),
                            6 => s.row::<6>(ky, l),
                            5 => s.row::<5>(ky, l),
                            4 => s.row::<4>(ky, l),
                            3 => s.row::<3>(ky, l),
                            2 => s.row::<2>(ky, l),
                            _ => s.row::<1>(ky, l),
                        }
                    }
                }
            }
            for (o, lo) in lanes.chunks_exact(144).enumerate() {
                let at = (grp * cout + c0 + o) * 9;
                for (dst, l) in gw[at..][..9].iter_mut().zip(lo.chunks_exact(16)) {
                    *dst += lane_sum(l);
                }
            }
        }
    }
}

/// The sum of 16 lanes, pairwise (also `pw_weight16.rs`'s).
pub(super) fn lane_sum(l: &[f32]) -> f32 {
    let h: [f32; 8] = core::array::from_fn(|i| l[i] + l[i + 8]);
    ((h[0] + h[4]) + (h[2] + h[6])) + ((h[1] + h[5]) + (h[3] + h[7]))
}

/// Backward-weight tiles over one sample.
struct Sums16<'a> {
    /// Outputs per plane, and where tap `t` reads in `buf` past an output's position.
    hw: usize,
    offs: &'a [usize; 9],
    buf: &'a [f32],
    /// The output-gradient planes of the block's channels.
    gy: &'a [f32],
}

impl Sums16<'_> {
    /// `lanes[o][3 * ky + kx] += gy[o][p] * x[p + tap]` lane-wise over every position,
    /// for `B` channels.
    #[target_feature(enable = "avx2,fma,avx512f")]
    fn row<const B: usize>(&self, ky: usize, lanes: &mut [f32]) {
        let hw = self.hw;
        let offs = [self.offs[3 * ky], self.offs[3 * ky + 1], self.offs[3 * ky + 2]];
        // Positions before the first 64-byte boundary of channel 0's gradient, then
        // whole vectors, then what is left.
        let skew = (self.gy.as_ptr() as usize / 4) % 16;
        let head = (16 - skew) % 16;
        let nv = (hw - head) / 16;
        let mut xs: [&[f32]; 3] = [&[]; 3];
        for (xk, &off) in xs.iter_mut().zip(&offs) {
            *xk = &self.buf[off..][..hw];
        }
        let mut gys: [&[f32]; B] = [&[]; B];
        for (o, gp) in gys.iter_mut().enumerate() {
            *gp = &self.gy[o * hw..][..hw];
        }
        sweep16(&xs, &gys, head, nv, &mut lanes[..B * 144], 3 * ky);
    }
}

/// `lanes[o][t0 + kx] += gys[o][p] * xs[kx][p]` lane-wise over every position `p` of
/// the slices (all of one length): `head` positions, `nv` whole vectors, then the
/// rest, the partial vectors with masked loads. One function, not inlined, so that
/// the 24 accumulators stay in registers from the first load to the last store.
#[target_feature(enable = "avx2,fma,avx512f")]
#[inline(never)]
fn sweep16<const B: usize>(
    xs: &[&[f32]; 3],
    gys: &[&[f32]; B],
    head: usize,
    nv: usize,
    lanes: &mut [f32],
    t0: usize,
) {
    let hw = xs[0].len();
    let mut a = [[splat16(0.0); 3]; B];
    for (o, ao) in a.iter_mut().enumerate() {
        for (kx, av) in ao.iter_mut().enumerate() {
            *av = load16(&lanes[o * 144 + (t0 + kx) * 16..]);
        }
    }
    let end = head + 16 * nv;
    for (p, k) in [(0, head), (end, hw - end)] {
        if k == 0 {
            continue;
        }
        let xv: [F16; 3] = [
            load16_first(&xs[0][p..], k),
            load16_first(&xs[1][p..], k),
            load16_first(&xs[2][p..], k),
        ];
        for (ao, gp) in a.iter_mut().zip(gys) {
            let gv = load16_first(&gp[p..], k);
            for (av, &xk) in ao.iter_mut().zip(&xv) {
                *av = fma16(gv, xk, *av);
            }
        }
    }
    let len = 16 * nv;
    let [x0, x1, x2] = [
        &xs[0][head..][..len],
        &xs[1][head..][..len],
        &xs[2][head..][..len],
    ];
    let mut g: [&[f32]; B] = [&[]; B];
    for (c, gp) in g.iter_mut().zip(gys) {
        *c = &gp[head..][..len];
    }
    for i in 0..nv {
        let p = 16 * i;
        let xv = [load16(&x0[p..]), load16(&x1[p..]), load16(&x2[p..])];
        for (ao, gp) in a.iter_mut().zip(&g) {
            let gv = load16(&gp[p..]);
            for (av, &xk) in ao.iter_mut().zip(&xv) {
                *av = fma16(gv, xk, *av);
            }
        }
    }
    for (o, ao) in a.iter().enumerate() {
        for (kx, &av) in ao.iter().enumerate() {
            store16(av, &mut lanes[o * 144 + (t0 + kx) * 16..]);
        }
    }
}
