//! Backward-weight of the M-profile `f32` convolution: `gw += correlate(gy, x)`.
//!
//! - Stride 1 only (strided convolutions use the generic kernel). The input planes are
//!   copied in bands, zero-padded, as in the forward pass (`Band`, `band.rs`); the output
//!   gradient of `OB` channels is copied for the band interleaved, `[position][o]`,
//!   with the input's row pitch and zeros in the padding columns, so that one run of
//!   positions covers the whole band with one pointer for the gradients and one for
//!   the inputs (the padding columns cost `(w + 2 * pad - ow) / (w + 2 * pad)` of the
//!   multiply-adds, 2/9 at 7x7, but save all per-row work).
//! - A register tile is `OB` output channels x one tap group (`KW` taps of a kernel row
//!   that read neighbouring words, or one tap) of one input channel: `OB * KW` sums.
//!   Along the positions it takes `PX` per step: `OB * PX` gradient loads
//!   and `PX` new input loads (the window's other `KW - 1` words are carried over in
//!   registers from the step before) feed `OB * PX * KW` multiply-adds.
//! - The sums cover a whole band before they are added to `gw`, so their order differs
//!   from the generic kernel's: results agree to rounding.

use super::band::Band;
use super::tile::unroll;
use super::{BUF_WORDS, GY_WORDS, OB};
use crate::kernels::conv::{self as generic, ConvGeom};

/// Gradient words per step of every dot tile (`OB * PX`): the gradient buffer is an
/// array of such arrays, so the loops walk it without index checks.
const STEP: usize = 16;

/// Defines `fn $name(gyb, xr, n) -> [[f32; KW]; OB]`: the tile's sums over `n`
/// positions, `gyb[p * OB + o] * xr[p + kx]` (`gyb` flattened).
macro_rules! dot_tile {
    ($name:ident, $ob:literal, $kw:literal, $px:literal,
     os = [$($o:literal),*], ps = [$($p:literal),*], kxs = [$($kx:literal),*],
     carry = [$($c:literal),*]) => {
        #[inline(never)]
        fn $name(gyb: &[[f32; STEP]], xr: &[f32], n: usize) -> [[f32; $kw]; $ob] {
            const WIN: usize = $px + $kw - 1;
            const _: () = assert!($ob * $px == STEP);
            let mut a = [[0.0f32; $kw]; $ob];
            let xr = &xr[..n + $kw - 1];
            let full = n / $px * $px;
            let mut xw = [0.0f32; WIN];
            unroll!([$($c),*], C => { xw[C] = xr[C]; });
            let mut xs = &xr[$kw - 1..][..full];
            for gq in &gyb[..full / $px] {
                // A fixed-size array: its length is a type, no index below is checked.
                let Some((xn, rest)) = xs.split_first_chunk::<$px>() else {
                    break;
                };
                xs = rest;
                unroll!([$($p),*], P => { xw[$kw - 1 + P] = xn[P]; });
                unroll!([$($p),*], P => {
                    unroll!([$($o),*], O => {
                        let gp = gq[P * $ob + O];
                        unroll!([$($kx),*], KX => { a[O][KX] += gp * xw[P + KX]; });
                    });
                });
                unroll!([$($c),*], C => { xw[C] = xw[C + $px]; });
            }
            let flat = gyb.as_flattened();
            for p in full..n {
                unroll!([$($o),*], O => {
                    let gp = flat[p * $ob + O];
                    unroll!([$($kx),*], KX => { a[O][KX] += gp * xr[p + KX]; });
                });
            }
            a
        }
    };
}

dot_tile!(
    dots_4_k3,
    4,
    3,
    4,
    os = [0, 1, 2, 3],
    ps = [0, 1, 2, 3],
    kxs = [0, 1, 2],
    carry = [0, 1]
);
dot_tile!(
    dots_4_k1,
    4,
    1,
    4,
    os = [0, 1, 2, 3],
    ps = [0, 1, 2, 3],
    kxs = [0],
    carry = []
);
dot_tile!(
    dots_1_k3,
    1,
    3,
    16,
    os = [0],
    ps = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    kxs = [0, 1, 2],
    carry = [0, 1]
);
dot_tile!(
    dots_1_k1,
    1,
    1,
    16,
    os = [0],
    ps = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
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
/// not cover (stride above 1, a row wider than the buffers).
pub(crate) fn backward_weight_tiled(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) -> bool {
    let (cin, cout, op, ip) = (g.c_in / g.groups, g.c_out / g.groups, g.oh * g.ow, g.h * g.w);
    let taps = g.kh * g.kw;
    let (hw, k, out) = ([g.h, g.w], [g.kh, g.kw], [g.oh, g.ow]);
    let band = Band::new(hw, g.pad, g.stride, g.dil, k, out, BUF_WORDS, 1);
    let stride1 = g.stride == [1, 1];
    let Some(band) = band.filter(|b| stride1 && taps > 0 && OB * b.row <= GY_WORDS) else {
        return false;
    };
    // A band's gradient rows are laid out with the input's row pitch, zeros beyond
    // `ow`: then one run of positions covers the whole band, without per-row work.
    let pitch = band.row;
    let band = band.cap_rows(GY_WORDS / (OB * pitch));
    let kw = if g.kw == 3 && g.dil[1] == 1 { 3 } else { 1 };
    let nin = (BUF_WORDS / band.chan).min(cin);
    let mut buf = [0.0f32; BUF_WORDS];
    let mut gyb = [[0.0f32; STEP]; GY_WORDS / STEP];
    for n in 0..g.n {
        for grp in 0..g.groups {
            let mut oy0 = 0;
            while oy0 < g.oh {
                let oy1 = (oy0 + band.band_out).min(g.oh);
                let rows = oy1 - oy0;
                // Positions of the band: every row but the last with its padding.
                let npos = (rows - 1) * pitch + g.ow;
                let mut c0 = 0;
                while c0 < cin {
                    let ni = nin.min(cin - c0);
                    let first = (n * g.c_in + grp * cin + c0) * ip;
                    band.fill(&mut buf, &x[first..], ni, oy0);
                    let mut o0 = 0;
                    while o0 < cout {
                        let ob = if cout - o0 >= OB { OB } else { 1 };
                        let oc = grp * cout + o0;
                        let words = npos * ob;
                        fill_gradients(
                            &mut gyb.as_flattened_mut()[..words],
                            gy,
                            (n * g.c_out + oc) * op + oy0 * g.ow,
                            op,
                            g.ow,
                            pitch,
                            ob,
                        );
                        for i in 0..ni {
                            for t0 in (0..taps).step_by(kw) {
                                let off = band.tap_offset(t0 / g.kw, t0 % g.kw, g.dil);
                                let xr = &buf[i * band.chan + off..(i + 1) * band.chan];
                                let at = |o: usize| ((oc + o) * cin + c0 + i) * taps + t0;
                                let gq = &gyb[..words.div_ceil(STEP)];
                                match (ob, kw) {
                                    (OB, 3) => add(gw, &dots_4_k3(gq, xr, npos), at),
                                    (OB, _) => add(gw, &dots_4_k1(gq, xr, npos), at),
                                    (_, 3) => add(gw, &dots_1_k3(gq, xr, npos), at),
                                    _ => add(gw, &dots_1_k1(gq, xr, npos), at),
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

/// Copies `ob` gradient planes (`plane` words apart, from `gy[first..]`) into `gyb`
/// interleaved, `gyb[(r * pitch + ox) * ob + o]`, with zeros for `ox >= ow`.
fn fill_gradients(
    gyb: &mut [f32],
    gy: &[f32],
    first: usize,
    plane: usize,
    ow: usize,
    pitch: usize,
    ob: usize,
) {
    let rows = gyb.len().div_ceil(pitch * ob);
    for r in 0..rows {
        let at = r * pitch * ob;
        let len = (gyb.len() - at).min(pitch * ob);
        let dst = &mut gyb[at..][..len];
        if ob == OB {
            let src: [&[f32]; OB] = core::array::from_fn(|o| &gy[first + o * plane + r * ow..][..ow]);
            let (data, pad) = dst.split_at_mut(ow * OB);
            // Constant channel indices: a loop over them would index `src` at run time.
            for (ox, cell) in data.chunks_exact_mut(OB).enumerate() {
                unroll!([0, 1, 2, 3], O => { cell[O] = src[O][ox]; });
            }
            pad.fill(0.0);
        } else {
            let (data, pad) = dst.split_at_mut(ow);
            data.copy_from_slice(&gy[first + r * ow..][..ow]);
            pad.fill(0.0);
        }
    }
}

/// `gw[at(o) + t] += sums[o][t]`.
fn add<const B: usize, const K: usize>(gw: &mut [f32], sums: &[[f32; K]; B], at: impl Fn(usize) -> usize) {
    for (o, row) in sums.iter().enumerate() {
        for (dst, s) in gw[at(o)..][..K].iter_mut().zip(row) {
            *dst += s;
        }
    }
}
