//! Backward-weight of the M-profile `f32` convolution: `gw += correlate(gy, x)`.
//!
//! - The input planes are copied in bands, zero-padded and phase-split, as in the
//!   forward pass ([`Band`]).
//! - A register tile is `OB` output channels x one tap group (`KW` taps of a kernel row
//!   that read neighbouring words, or one tap) of one input channel: `OB * KW` sums.
//!   Along each output row it takes `PX` positions per step: `OB * PX` gradient loads
//!   and `PX` new input loads (the window's other `KW - 1` words are carried over in
//!   registers from the step before) feed `OB * PX * KW` multiply-adds.
//! - The sums cover a whole band before they are added to `gw`, so their order differs
//!   from the generic kernel's: results agree to rounding.

use super::band::Band;
use super::tile::unroll;
use super::{BUF_WORDS, OB};
use crate::kernels::conv::{self as generic, ConvGeom};

/// Where one tile's dot products run: gradient planes and the band of one input plane.
struct Dots<'a> {
    /// Output gradient of the sample, and the offset of the block's first plane.
    gy: &'a [f32],
    gy_first: usize,
    plane: usize,
    ow: usize,
    /// Output rows of the band.
    oy0: usize,
    oy1: usize,
    /// The band of one input channel, the group's offset in it, words per output row.
    xs: &'a [f32],
    off: usize,
    row_step: usize,
}

/// Defines `fn $name(d) -> [[f32; KW]; OB]`: the tile's sums over the band.
macro_rules! dot_tile {
    ($name:ident, $ob:literal, $kw:literal, $px:literal,
     os = [$($o:literal),*], ps = [$($p:literal),*], kxs = [$($kx:literal),*],
     carry = [$($c:literal),*]) => {
        #[inline(never)]
        fn $name(d: &Dots) -> [[f32; $kw]; $ob] {
            const WIN: usize = $px + $kw - 1;
            let mut a = [[0.0f32; $kw]; $ob];
            for oy in d.oy0..d.oy1 {
                let xr = &d.xs[(oy - d.oy0) * d.row_step + d.off..][..d.ow + $kw - 1];
                let mut g = [&d.gy[..0]; $ob];
                unroll!([$($o),*], O => {
                    g[O] = &d.gy[d.gy_first + O * d.plane + oy * d.ow..][..d.ow];
                });
                let full = d.ow / $px * $px;
                let mut xw = [0.0f32; WIN];
                unroll!([$($c),*], C => { xw[C] = xr[C]; });
                for (ox, xn) in (0..full).step_by($px).zip(xr[$kw - 1..].chunks_exact($px)) {
                    unroll!([$($p),*], P => { xw[$kw - 1 + P] = xn[P]; });
                    unroll!([$($o),*], O => {
                        let gv = &g[O][ox..][..$px];
                        unroll!([$($p),*], P => {
                            let gp = gv[P];
                            unroll!([$($kx),*], KX => { a[O][KX] += gp * xw[P + KX]; });
                        });
                    });
                    unroll!([$($c),*], C => { xw[C] = xw[C + $px]; });
                }
                for ox in full..d.ow {
                    unroll!([$($o),*], O => {
                        let gp = g[O][ox];
                        unroll!([$($kx),*], KX => { a[O][KX] += gp * xr[ox + KX]; });
                    });
                }
            }
            a
        }
    };
}

dot_tile!(
    dots_4_k3,
    4,
    3,
    2,
    os = [0, 1, 2, 3],
    ps = [0, 1],
    kxs = [0, 1, 2],
    carry = [0, 1]
);
dot_tile!(
    dots_4_k1,
    4,
    1,
    2,
    os = [0, 1, 2, 3],
    ps = [0, 1],
    kxs = [0],
    carry = []
);
dot_tile!(
    dots_1_k3,
    1,
    3,
    4,
    os = [0],
    ps = [0, 1, 2, 3],
    kxs = [0, 1, 2],
    carry = [0, 1]
);
dot_tile!(
    dots_1_k1,
    1,
    1,
    4,
    os = [0],
    ps = [0, 1, 2, 3],
    kxs = [0],
    carry = []
);

/// `gw += correlate(gy, x)`, as [`generic::conv2d_backward_weight`].
pub fn conv2d_backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) {
    if !backward_weight_tiled(g, gy, x, gw) {
        generic::conv2d_backward_weight(g, gy, x, gw);
    }
}

/// The tiled backward-weight pass; `false`, with `gw` untouched, for a shape it does
/// not cover (a row wider than the band buffer).
pub(crate) fn backward_weight_tiled(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    let band = Band::new(
        [g.h, g.w],
        g.pad,
        g.stride,
        g.dil,
        [g.kh, g.kw],
        [g.oh, g.ow],
        BUF_WORDS,
    );
    let taps = g.kh * g.kw;
    let Some(band) = band.filter(|_| taps > 0) else {
        return false;
    };
    let kw = if g.kw == 3 && g.stride[1] == 1 && g.dil[1] == 1 {
        3
    } else {
        1
    };
    let (cin, cout, op, ip) = (g.c_in / g.groups, g.c_out / g.groups, g.oh * g.ow, g.h * g.w);
    let nin = (BUF_WORDS / band.chan).min(cin);
    let mut buf = [0.0f32; BUF_WORDS];
    for n in 0..g.n {
        for grp in 0..g.groups {
            let mut oy0 = 0;
            while oy0 < g.oh {
                let oy1 = (oy0 + band.band_out).min(g.oh);
                let mut c0 = 0;
                while c0 < cin {
                    let ni = nin.min(cin - c0);
                    band.fill(
                        &mut buf,
                        &x[(n * g.c_in + grp * cin + c0) * ip..],
                        ni,
                        oy0 * band.sy,
                    );
                    let mut o0 = 0;
                    while o0 < cout {
                        let ob = if cout - o0 >= OB { OB } else { 1 };
                        let oc = grp * cout + o0;
                        for i in 0..ni {
                            for t0 in (0..taps).step_by(kw) {
                                let d = Dots {
                                    gy,
                                    gy_first: (n * g.c_out + oc) * op,
                                    plane: op,
                                    ow: g.ow,
                                    oy0,
                                    oy1,
                                    xs: &buf[i * band.chan..][..band.chan],
                                    off: band.tap_offset(t0 / g.kw, t0 % g.kw, g.dil),
                                    row_step: band.sy * band.row,
                                };
                                let at = |o: usize| ((oc + o) * cin + c0 + i) * taps + t0;
                                match (ob, kw) {
                                    (OB, 3) => add(gw, &dots_4_k3(&d), at),
                                    (OB, _) => add(gw, &dots_4_k1(&d), at),
                                    (_, 3) => add(gw, &dots_1_k3(&d), at),
                                    _ => add(gw, &dots_1_k1(&d), at),
                                }
                            }
                        }
                        o0 += ob;
                    }
                    c0 += ni;
                }
                oy0 = oy1;
            }
        }
    }
    true
}

/// `gw[at(o) + t] += sums[o][t]`.
fn add<const B: usize, const K: usize>(gw: &mut [f32], sums: &[[f32; K]; B], at: impl Fn(usize) -> usize) {
    for (o, row) in sums.iter().enumerate() {
        for (dst, s) in gw[at(o)..][..K].iter_mut().zip(row) {
            *dst += s;
        }
    }
}
