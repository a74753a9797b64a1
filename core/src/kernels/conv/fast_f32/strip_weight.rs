//! Backward-weight of the AVX2 + FMA strip kernels (`strip.rs`): `gw += correlate(gy, x)`
//! for stride-1 convolutions.
//!
//! - Many (input channel, tap) rows: vectors run over output channels. The output
//!   gradient is transposed into `gyT[p][oc]`, 8x8 words at a time (zeros at dropped
//!   strip positions and padding channels); a tile is `R` rows x `8 * V` channels (12
//!   accumulators), summed over every position with one broadcast input word per row,
//!   and over every sample in `gwT` before it is added to `gw`: no horizontal sums.
//! - Few rows (1 channel x 9 taps): transposing costs more than the few products per
//!   element it feeds, so tiles run along positions instead: `B` channels x `T` rows of
//!   8-lane partial sums over a sample's strip. (W1's first layer, padding 1, is
//!   `one.rs`'s, tried first.)

use super::avx2::{fma, load, splat, store, transpose8, F8};
use super::strip::{copy_short, Strip, MAX_K, OB, PLANE_WORDS, T_WORDS};
use crate::kernels::conv::ConvGeom;

/// `gw += correlate(gy, x)` for stride 1; `false` (nothing written) for other shapes.
#[target_feature(enable = "avx2,fma")]
pub(crate) fn conv2d_backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    if super::one::conv2d_backward_weight(g, gy, x, gw) || super::avx512::one_backward_weight_s2(g, gy, x, gw)
    {
        return true;
    }
    if super::winograd_weight::pays(g) && super::winograd_weight::conv2d_backward_weight(g, gy, x, gw) {
        return true;
    }
    strip_backward_weight(g, gy, x, gw)
}

/// The strip kernels' `gw += correlate(gy, x)` for stride 1 (the dispatch's last
/// choice); `false` (nothing written) for other shapes.
#[target_feature(enable = "avx2,fma")]
pub(super) fn strip_backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    if g.stride != [1, 1] {
        return false;
    }
    let k = [g.kh, g.kw];
    let Some(s) = Strip::new([g.h, g.w], g.pad, k, g.dil, [g.oh, g.ow]) else {
        return false;
    };
    let (cin, cout, taps) = (g.c_in / g.groups, g.c_out / g.groups, g.kh * g.kw);
    if taps == 0 {
        return false;
    }
    if taps == 1 && g.pad == [0, 0] && [g.oh, g.ow] == [g.h, g.w] && pointwise(g, gy, x, gw) {
        return true;
    }
    if cin * taps < BY_POSITION_BELOW {
        return weight_by_position(g, &s, gy, x, gw);
    }
    let ocp = cout.next_multiple_of(8);
    if s.len * ocp > T_WORDS {
        return false;
    }
    let chunk = (PLANE_WORDS / s.chan)
        .min(MAX_K / taps)
        .min(T_WORDS / (taps * ocp))
        .min(cin);
    if chunk == 0 {
        return false;
    }
    let mut buf = [0.0f32; PLANE_WORDS];
    let mut gyt = [0.0f32; T_WORDS];
    let mut gwt = [0.0f32; T_WORDS];
    let mut offs = [0usize; MAX_K];
    let (op, ip) = (g.oh * g.ow, g.h * g.w);
    // Dropped positions and padding channels stay zero: only kept ones are written.
    let gyt = &mut gyt[..s.len * ocp];
    for grp in 0..g.groups {
        let mut c0 = 0;
        while c0 < cin {
            let nin = chunk.min(cin - c0);
            let kk = nin * taps;
            s.offsets(nin, k, g.dil, &mut offs);
            let gwt = &mut gwt[..kk * ocp];
            gwt.fill(0.0);
            for n in 0..g.n {
                s.fill(&mut buf, &x[(n * g.c_in + grp * cin + c0) * ip..], nin);
                transpose_gy(
                    &gy[(n * g.c_out + grp * cout) * op..],
                    cout,
                    [g.oh, g.ow],
                    s.row,
                    ocp,
                    gyt,
                );
                let d = Dots {
                    buf: &buf[..nin * s.chan],
                    gyt,
                    ocp,
                    len: s.len,
                };
                let mut ob = 0;
                while ob < ocp {
                    ob += if ocp - ob >= 16 {
                        d.rows::<2>(&offs[..kk], ob, gwt)
                    } else {
                        d.rows::<1>(&offs[..kk], ob, gwt)
                    };
                }
            }
            for oc in 0..cout {
                let at = ((grp * cout + oc) * cin + c0) * taps;
                for (k, dst) in gw[at..][..kk].iter_mut().enumerate() {
                    *dst += gwt[k * ocp + oc];
                }
            }
            c0 += nin;
        }
    }
    true
}

/// `gyT[(oy * row + ox) * ocp + oc] = gy[oc][oy][ox]` for `cout` planes of `out` size:
/// 8 channels x 8 positions at a time through an 8x8 transpose (the last vector of a row
/// reads past it, into the next row or plane, and stores only the row's positions),
/// the rest one word at a time.
#[target_feature(enable = "avx2,fma")]
fn transpose_gy(gy: &[f32], cout: usize, out: [usize; 2], row: usize, ocp: usize, gyt: &mut [f32]) {
    let [oh, ow] = out;
    let op = oh * ow;
    let whole = cout / 8 * 8;
    for oc0 in (0..whole).step_by(8) {
        for oy in 0..oh {
            for ox in (0..ow).step_by(8) {
                let n = (ow - ox).min(8);
                let at = oc0 * op + oy * ow + ox;
                if at + 7 * op + 8 > gy.len() {
                    for (l, o) in (0..n).flat_map(|l| (0..8).map(move |o| (l, o))) {
                        gyt[(oy * row + ox + l) * ocp + oc0 + o] = gy[at + o * op + l];
                    }
                    continue;
                }
                let mut r = [splat(0.0); 8];
                for (o, rv) in r.iter_mut().enumerate() {
                    *rv = load(&gy[at + o * op..]);
                }
                let t = transpose8(r);
                for (l, &tv) in t.iter().enumerate().take(n) {
                    store(tv, &mut gyt[(oy * row + ox + l) * ocp + oc0..]);
                }
            }
        }
    }
    for oc in whole..cout {
        for (oy, r) in gy[oc * op..][..op].chunks_exact(ow).enumerate() {
            for (ox, &v) in r.iter().enumerate() {
                gyt[(oy * row + ox) * ocp + oc] = v;
            }
        }
    }
}

/// Output and input channels of a [`pointwise`] tile.
const PO: usize = 4;
const PI: usize = 3;
/// Words of [`pointwise`]'s stack buffer of packed rows (64 KiB).
const PW_WORDS: usize = 16384;
/// Fewest packed positions per chunk for [`pointwise`] (W2 at batch 32: its 7x7 and
/// larger planes; 4x4 planes of many channels stay with the transposing kernel).
const PW_MIN_RUN: usize = 192;

/// Backward-weight of a 1x1 convolution without padding, a matrix product whose sum
/// runs along both operands' rows: `gw[o][i] += sum over samples and positions of
/// gy[o] * x[i]`.
///
/// - The planes of a chunk of samples are packed, channel by channel, into one long
///   zero-padded row per channel (`gy`'s, then `x`'s), so the sums run over whole
///   vectors with no per-sample or per-plane tails (W2's planes are 4x4 and 7x7).
/// - A tile is `PO` output x `PI` input channels of 8-lane partial sums (12
///   accumulators) over a chunk's rows, summed across lanes into `gw` once per chunk.
///   Channel counts that are not multiples of the tile repeat the last channel and drop
///   those sums.
/// - `false` (nothing written) when a chunk would be shorter than [`PW_MIN_RUN`].
/// - With AVX-512F, `pw_weight16.rs` takes planes of 32 positions and more first.
#[target_feature(enable = "avx2,fma")]
fn pointwise(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    if super::avx512::pointwise_backward_weight(g, gy, x, gw) {
        return true;
    }
    let (cin, cout) = (g.c_in / g.groups, g.c_out / g.groups);
    let p = g.h * g.w;
    let per_row = PW_WORDS / (cin + cout).max(1) / 8 * 8;
    let ns = (per_row / p.max(1)).min(g.n);
    // Short chunks spend more on the sums across lanes than the tiles save.
    if ns * p < PW_MIN_RUN || cin == 0 || cout == 0 {
        return false;
    }
    let mut buf = [0.0f32; PW_WORDS];
    for grp in 0..g.groups {
        for n0 in (0..g.n).step_by(ns) {
            let m = ns.min(g.n - n0);
            let len = (m * p).next_multiple_of(8);
            let rows = buf[..(cin + cout) * len].chunks_exact_mut(len);
            for (r, row) in rows.enumerate() {
                let (src, c, ch) = match r < cout {
                    true => (gy, g.c_out, grp * cout + r),
                    false => (x, g.c_in, grp * cin + r - cout),
                };
                for (k, d) in row[..m * p].chunks_exact_mut(p).enumerate() {
                    d.copy_from_slice(&src[((n0 + k) * c + ch) * p..][..p]);
                }
                row[m * p..].fill(0.0);
            }
            let (gyp, xp) = buf[..(cin + cout) * len].split_at(cout * len);
            for o0 in (0..cout).step_by(PO) {
                let gr: [&[f32]; PO] = core::array::from_fn(|k| &gyp[(o0 + k).min(cout - 1) * len..][..len]);
                for i0 in (0..cin).step_by(PI) {
                    let xr: [&[f32]; PI] =
                        core::array::from_fn(|k| &xp[(i0 + k).min(cin - 1) * len..][..len]);
                    let mut acc = [[splat(0.0); PI]; PO];
                    for q in (0..len).step_by(8) {
                        let xv = xr.map(|r| load(&r[q..]));
                        for (a, r) in acc.iter_mut().zip(&gr) {
                            let gv = load(&r[q..]);
                            for (av, &xv) in a.iter_mut().zip(&xv) {
                                *av = fma(gv, xv, *av);
                            }
                        }
                    }
                    for (k, a) in acc.iter().enumerate().take(cout - o0) {
                        for (j, &av) in a.iter().enumerate().take(cin - i0) {
                            let mut l = [0.0f32; 8];
                            store(av, &mut l);
                            let sum = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
                            gw[(grp * cout + o0 + k) * cin + i0 + j] += sum;
                        }
                    }
                }
            }
        }
    }
    true
}

/// Backward-weight with fewer (input channel, tap) rows than this per group uses
/// [`weight_by_position`]: transposing `gy` costs more than the few products per
/// element it feeds (W1's first layer has 9 rows).
const BY_POSITION_BELOW: usize = 32;

/// Backward-weight for few rows: vectors run along strip positions, a tile is `B`
/// output channels x `T` (input channel, tap) rows of 8-lane partial sums over one
/// sample's strip, summed across lanes at the end. `gy` planes are copied into strips
/// (zeros at dropped positions), no transposition.
#[target_feature(enable = "avx2,fma")]
fn weight_by_position(g: &ConvGeom, s: &Strip, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    let (cin, cout, taps) = (g.c_in / g.groups, g.c_out / g.groups, g.kh * g.kw);
    let stride = s.len.next_multiple_of(8);
    let chunk = (PLANE_WORDS / s.chan).min(MAX_K / taps).min(cin);
    if chunk == 0 || OB * stride > T_WORDS {
        return false;
    }
    let mut buf = [0.0f32; PLANE_WORDS];
    let mut gys = [0.0f32; T_WORDS];
    let mut offs = [0usize; MAX_K];
    let (op, ip) = (g.oh * g.ow, g.h * g.w);
    for grp in 0..g.groups {
        let mut c0 = 0;
        while c0 < cin {
            let nin = chunk.min(cin - c0);
            let kk = nin * taps;
            s.offsets(nin, [g.kh, g.kw], g.dil, &mut offs);
            for n in 0..g.n {
                s.fill(&mut buf, &x[(n * g.c_in + grp * cin + c0) * ip..], nin);
                for o0 in (0..cout).step_by(OB) {
                    let b = OB.min(cout - o0);
                    let oc = grp * cout + o0;
                    let src = &gy[(n * g.c_out + oc) * op..][..b * op];
                    // Kept positions only: the rest stays zero from the start.
                    for (o, plane) in src.chunks_exact(op).enumerate() {
                        for (oy, r) in plane.chunks_exact(g.ow).enumerate() {
                            copy_short(&mut gys[o * stride + oy * s.row..][..g.ow], r);
                        }
                    }
                    let d = Lanes {
                        buf: &buf[..nin * s.chan],
                        gys: &gys[..b * stride],
                        stride,
                    };
                    let mut k0 = 0;
                    while k0 < kk {
                        let t = if kk - k0 >= 3 { 3 } else { 1 };
                        let o = &offs[k0..];
                        let sums = match (b, t) {
                            (OB, 3) => d.tile::<OB, 3>(o),
                            (OB, _) => d.tile::<OB, 1>(o),
                            (_, 3) => d.tile::<1, 3>(o),
                            _ => d.tile::<1, 1>(o),
                        };
                        let step = if b == OB { OB } else { 1 };
                        for (i, row) in sums.iter().enumerate().take(step) {
                            let at = ((oc + i) * cin + c0) * taps + k0;
                            for (dst, v) in gw[at..][..t].iter_mut().zip(row) {
                                *dst += v;
                            }
                        }
                        k0 += t;
                    }
                    // Channels of a short last block one at a time.
                    if b != OB {
                        for i in 1..b {
                            let d = Lanes {
                                buf: &buf[..nin * s.chan],
                                gys: &gys[i * stride..][..stride],
                                stride,
                            };
                            for (k, &off) in offs[..kk].iter().enumerate() {
                                let v = d.tile::<1, 1>(&[off]);
                                gw[((oc + i) * cin + c0) * taps + k] += v[0][0];
                            }
                        }
                    }
                }
            }
            c0 += nin;
        }
    }
    true
}

/// Position-vector tiles of [`weight_by_position`].
struct Lanes<'a> {
    buf: &'a [f32],
    /// Output-gradient strips, `stride` words apart.
    gys: &'a [f32],
    stride: usize,
}

impl Lanes<'_> {
    /// `sums[o][t] = sum_p gys[o][p] * buf[offs[t] + p]` for `B` channels, `T` rows.
    #[target_feature(enable = "avx2,fma")]
    fn tile<const B: usize, const T: usize>(&self, offs: &[usize]) -> [[f32; 3]; OB] {
        let len = self.stride;
        let mut acc = [[splat(0.0); T]; B];
        let mut xs: [&[f32]; T] = [&[]; T];
        for (x, &off) in xs.iter_mut().zip(offs) {
            *x = &self.buf[off..][..len];
        }
        let mut gs: [&[f32]; B] = [&[]; B];
        for (o, gsl) in gs.iter_mut().enumerate() {
            *gsl = &self.gys[o * self.stride..][..len];
        }
        let mut p = 0;
        while p < len {
            let mut xv = [splat(0.0); T];
            for (v, x) in xv.iter_mut().zip(&xs) {
                *v = load(&x[p..]);
            }
            for (a, gsl) in acc.iter_mut().zip(&gs) {
                let gv = load(&gsl[p..]);
                for (av, &x) in a.iter_mut().zip(&xv) {
                    *av = fma(gv, x, *av);
                }
            }
            p += 8;
        }
        let mut sums = [[0.0f32; 3]; OB];
        let mut tmp = [0.0f32; 8];
        for (srow, a) in sums.iter_mut().zip(&acc) {
            for (s, &av) in srow.iter_mut().zip(a) {
                store(av, &mut tmp);
                *s = tmp.iter().sum();
            }
        }
        sums
    }
}

/// Backward-weight tiles over one sample: `gwT[k][oc] += sum_p x[offs[k] + p] * gyT[p][oc]`.
struct Dots<'a> {
    buf: &'a [f32],
    gyt: &'a [f32],
    /// Output channels per `gyT` row (a multiple of 8).
    ocp: usize,
    len: usize,
}

impl Dots<'_> {
    /// Every row for the `8 * V` output channels from `ob`; returns `8 * V`.
    #[target_feature(enable = "avx2,fma")]
    fn rows<const V: usize>(&self, offs: &[usize], ob: usize, gwt: &mut [f32]) -> usize {
        // 12 accumulators: 6 rows x 2 vectors or 12 rows x 1.
        let most = 12 / V;
        let mut k0 = 0;
        while k0 < offs.len() {
            let r = most.min(offs.len() - k0);
            let (o, g) = (&offs[k0..], &mut gwt[k0 * self.ocp..]);
            match r {
                12 => self.tile::<12, V>(o, ob, g),
                11 => self.tile::<11, V>(o, ob, g),
                10 => self.tile::<10, V>(o, ob, g),
                9 => self.tile::<9, V>(o, ob, g),
                8 => self.tile::<8, V>(o, ob, g),
                7 => self.tile::<7, V>(o, ob, g),
                6 => self.tile::<6, V>(o, ob, g),
                5 => self.tile::<5, V>(o, ob, g),
                4 => self.tile::<4, V>(o, ob, g),
                3 => self.tile::<3, V>(o, ob, g),
                2 => self.tile::<2, V>(o, ob, g),
                _ => self.tile::<1, V>(o, ob, g),
            }
            k0 += r;
        }
        8 * V
    }

    #[target_feature(enable = "avx2,fma")]
    fn tile<const R: usize, const V: usize>(&self, offs: &[usize], ob: usize, gwt: &mut [f32]) {
        let mut acc = [[splat(0.0); V]; R];
        let mut xr: [&[f32]; R] = [&[]; R];
        for (r, (a, x)) in acc.iter_mut().zip(xr.iter_mut()).enumerate() {
            for (v, av) in a.iter_mut().enumerate() {
                *av = load(&gwt[r * self.ocp + ob + 8 * v..]);
            }
            *x = &self.buf[offs[r]..][..self.len];
        }
        for (p, grow) in self.gyt.chunks_exact(self.ocp).enumerate() {
            let mut gv: [F8; V] = [splat(0.0); V];
            for (v, g) in gv.iter_mut().enumerate() {
                *g = load(&grow[ob + 8 * v..]);
            }
            for (a, x) in acc.iter_mut().zip(&xr) {
                let xs = splat(x[p]);
                for (av, &g) in a.iter_mut().zip(&gv) {
                    *av = fma(xs, g, *av);
                }
            }
        }
        for (r, a) in acc.iter().enumerate() {
            for (v, &av) in a.iter().enumerate() {
                store(av, &mut gwt[r * self.ocp + ob + 8 * v..]);
            }
        }
    }
}
