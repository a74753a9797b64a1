//! The three passes of `dw8.rs`, written once over a vector type of `L` lanes (8 or
//! 16 channels per block) and instantiated three times: portable (`[f32; 8]` arrays)
//! and, on x86_64, with AVX2 + FMA (8 lanes) and with AVX-512F (16 lanes).
//!
//! The invoking module provides `V` (`L` lanes), `load`, `store`, `splat`, `fma` and
//! `transpose` (`L` x `L`); the macro's first argument is `L`, its optional attributes
//! go on every function (the AVX2 instance passes
//! `#[target_feature(enable = "avx2,fma")]`).

/// Defines `forward`, `backward_input` and `backward_weight` over the invoking module's
/// `V`, `load`, `store`, `splat`, `fma` and `transpose`, with `$lanes` lanes.
macro_rules! dw8_kernels {
    ($lanes:literal $(, #[$attr:meta])*) => {
        use super::{from_lanes_scalar, to_lanes_scalar, weight_lanes, Dw, Place, BUF_WORDS, OUT_WORDS};

        /// Lanes per vector: the channels of one block.
        const L: usize = $lanes;
        /// Words of the padded and of the unpadded buffer: as many pixels as `dw8.rs`
        /// sizes them for, `L` lanes each.
        const BUF: usize = BUF_WORDS / 8 * L;
        const OUT: usize = OUT_WORDS / 8 * L;

        /// The 9 per-lane weight vectors of channels `c0..c0 + nl` (flipped for the
        /// transposed convolution).
        $(#[$attr])*
        #[inline]
        fn weights(w: &[f32], c0: usize, nl: usize, flip: bool) -> [V; 9] {
            let lanes = weight_lanes::<L>(w, c0, nl, flip);
            let mut wv = [splat(0.0); 9];
            for (v, l) in wv.iter_mut().zip(&lanes) {
                *v = load(l);
            }
            wv
        }

        /// `buf[place(q) + l] = src[l * plane + q]` for the `nl` planes of `plane`
        /// pixels: `L` pixels at a time by `L` x `L` transposes when all `L` lanes are filled.
        $(#[$attr])*
        fn to_lanes(src: &[f32], plane: usize, nl: usize, pl: Place, buf: &mut [f32]) {
            let mut q = 0;
            if nl == L {
                let src = &src[..L * plane];
                // Vector position of pixel `q` and its column.
                let (mut pos, mut c) = (pl.off, 0);
                while q + L <= plane {
                    let mut v = [splat(0.0); L];
                    for (l, x) in v.iter_mut().enumerate() {
                        *x = load(&src[l * plane + q..]);
                    }
                    for x in transpose(v) {
                        store(x, &mut buf[pos * L..]);
                        pos += 1;
                        c += 1;
                        if c == pl.w {
                            pos += pl.cols - pl.w;
                            c = 0;
                        }
                    }
                    q += L;
                }
            }
            to_lanes_scalar::<L>(src, plane, nl, pl, buf, q);
        }

        /// `dst[l * plane + q] (+)= buf[place(q) + l]`, the inverse of `to_lanes`.
        $(#[$attr])*
        fn from_lanes(buf: &[f32], pl: Place, dst: &mut [f32], plane: usize, nl: usize, add: bool) {
            let mut q = 0;
            if nl == L {
                let dst = &mut dst[..L * plane];
                let (mut pos, mut c) = (pl.off, 0);
                let one = splat(1.0);
                while q + L <= plane {
                    let mut v = [splat(0.0); L];
                    for x in v.iter_mut() {
                        *x = load(&buf[pos * L..]);
                        pos += 1;
                        c += 1;
                        if c == pl.w {
                            pos += pl.cols - pl.w;
                            c = 0;
                        }
                    }
                    for (l, x) in transpose(v).into_iter().enumerate() {
                        let d = &mut dst[l * plane + q..];
                        // `1 * x + d` is `x + d` rounded once.
                        store(if add { fma(one, x, load(d)) } else { x }, d);
                    }
                    q += L;
                }
            }
            from_lanes_scalar::<L>(buf, pl, dst, plane, nl, add, q);
        }

        /// `P` neighbouring outputs of one row: `init + sum_t wv[t] * buf[at + tap]`,
        /// output `p` reading from `at + p * SX * L`; stored to `out[p * L..]`.
        $(#[$attr])*
        #[inline]
        fn tile<const P: usize, const SX: usize>(buf: &[f32], at: usize, row_words: usize, wv: &[V; 9], init: V, out: &mut [f32]) {
            let mut acc = [init; P];
            for ky in 0..3 {
                // One bounds check per kernel row: the offsets below are constants.
                let row = &buf[at + ky * row_words..][..(P - 1) * SX * L + 3 * L];
                for kx in 0..3 {
                    let wt = wv[ky * 3 + kx];
                    for (p, a) in acc.iter_mut().enumerate() {
                        *a = fma(wt, load(&row[p * SX * L + kx * L..]), *a);
                    }
                }
            }
            for (p, a) in acc.iter().enumerate() {
                store(*a, &mut out[p * L..]);
            }
        }

        /// `out[oy][ox] = init + sum_t wv[t] * buf[oy*sy + ky][ox*SX + kx]` over the
        /// `d.out` pixels (`out` interleaved, unpadded).
        $(#[$attr])*
        fn correlate_sx<const SX: usize>(d: &Dw, buf: &[f32], wv: &[V; 9], init: V, out: &mut [f32]) {
            let [oh, ow] = d.out;
            let row_words = d.cols * L;
            for oy in 0..oh {
                let base = oy * d.s[0] * row_words;
                let orow = &mut out[oy * ow * L..][..ow * L];
                let mut ox = 0;
                while ox + 4 <= ow {
                    tile::<4, SX>(buf, base + ox * SX * L, row_words, wv, init, &mut orow[ox * L..]);
                    ox += 4;
                }
                let (at, o) = (base + ox * SX * L, &mut orow[ox * L..]);
                match ow - ox {
                    3 => tile::<3, SX>(buf, at, row_words, wv, init, o),
                    2 => tile::<2, SX>(buf, at, row_words, wv, init, o),
                    1 => tile::<1, SX>(buf, at, row_words, wv, init, o),
                    _ => {}
                }
            }
        }

        /// [`correlate_sx`] for the shape's column stride.
        $(#[$attr])*
        fn correlate(d: &Dw, buf: &[f32], wv: &[V; 9], init: V, out: &mut [f32]) {
            if d.s[1] == 1 {
                correlate_sx::<1>(d, buf, wv, init, out)
            } else {
                correlate_sx::<2>(d, buf, wv, init, out)
            }
        }

        /// Zeroes `buf` before a block of fewer than `L` channels: the lanes past `nl`
        /// hold the last block's values. (A buffer starts zeroed, and the copies in
        /// write only the interior's first `nl` lanes: the border stays zero.)
        #[inline]
        fn clear_lanes(buf: &mut [f32], nl: usize) {
            if nl < L {
                buf.fill(0.0);
            }
        }

        /// `part[t] += sum gy * x` over the taps of one sample's planes: `xb` padded as
        /// `dw.src_place`, `gy`'s pixels at `gp` in `gb`.
        $(#[$attr])*
        #[inline]
        fn weight_sums(dw: &Dw, xb: &[f32], gb: &[f32], gp: Place, part: &mut [V; 9]) {
            let row_words = dw.cols * L;
            for oy in 0..dw.out[0] {
                let grow = gp.slot(oy * dw.out[1]) * L;
                for ox in 0..dw.out[1] {
                    let g = load(&gb[grow + ox * L..]);
                    let at = oy * dw.s[0] * row_words + ox * dw.s[1] * L;
                    for ky in 0..3 {
                        let row = &xb[at + ky * row_words..][..3 * L];
                        for kx in 0..3 {
                            let a = &mut part[ky * 3 + kx];
                            *a = fma(g, load(&row[kx * L..]), *a);
                        }
                    }
                }
            }
        }

        /// `backward_input` (layout `di`) and `backward_weight` (layout `dw`) in one
        /// walk: each block of `gy` is copied into lanes once for both, while `x`'s
        /// block is in cache. The same bits as the two passes.
        $(#[$attr])*
        pub(in super::super) fn backward_both(di: &Dw, dw: &Dw, gy: &[f32], x: &[f32], w: &[f32], gx: &mut [f32], gw: &mut [f32]) {
            let mut xb = [0.0f32; BUF];
            let mut gb = [0.0f32; BUF];
            let mut ob = [0.0f32; OUT];
            let (ip, op) = (dw.src[0] * dw.src[1], dw.out[0] * dw.out[1]);
            let row_words = di.cols * L;
            for c0 in (0..dw.c).step_by(L) {
                let nl = (dw.c - c0).min(L);
                clear_lanes(&mut xb, nl);
                clear_lanes(&mut gb, nl);
                let wv = weights(w, c0, nl, di.gather);
                let mut acc = [splat(0.0); 9];
                let one = splat(1.0);
                for n in 0..dw.n {
                    let first = n * dw.c + c0;
                    to_lanes(&x[first * ip..], ip, nl, dw.src_place(), &mut xb);
                    let mut part = [splat(0.0); 9];
                    if di.gather {
                        to_lanes(&gy[first * op..], op, nl, di.src_place(), &mut gb);
                        weight_sums(dw, &xb, &gb, di.src_place(), &mut part);
                        correlate(di, &gb, &wv, splat(0.0), &mut ob);
                        from_lanes(&ob, di.out_place(), &mut gx[first * ip..], ip, nl, true);
                    } else {
                        to_lanes(&gy[first * op..], op, nl, dw.out_place(), &mut ob);
                        weight_sums(dw, &xb, &ob, dw.out_place(), &mut part);
                        // The scatter adds to the interior too: clear it.
                        gb[..di.rows * row_words].fill(0.0);
                        for oy in 0..di.out[0] {
                            for ox in 0..di.out[1] {
                                let g = load(&ob[(oy * di.out[1] + ox) * L..]);
                                let at = oy * di.s[0] * row_words + ox * di.s[1] * L;
                                for ky in 0..3 {
                                    let row = &mut gb[at + ky * row_words..][..3 * L];
                                    for kx in 0..3 {
                                        let p = &mut row[kx * L..][..L];
                                        store(fma(wv[ky * 3 + kx], g, load(p)), p);
                                    }
                                }
                            }
                        }
                        from_lanes(&gb, di.src_place(), &mut gx[first * ip..], ip, nl, true);
                    }
                    for (a, p) in acc.iter_mut().zip(part) {
                        *a = fma(one, p, *a);
                    }
                }
                add_sums(&acc, c0, nl, gw);
            }
        }

        /// `gw[(c0 + l) * 9 + t] += acc[t][l]` for lanes `l < nl`.
        $(#[$attr])*
        #[inline]
        fn add_sums(acc: &[V; 9], c0: usize, nl: usize, gw: &mut [f32]) {
            let mut sums = [[0.0f32; L]; 9];
            for (s, a) in sums.iter_mut().zip(acc) {
                store(*a, s);
            }
            for l in 0..nl {
                for (t, s) in sums.iter().enumerate() {
                    gw[(c0 + l) * 9 + t] += s[l];
                }
            }
        }

        /// `y = conv(x, w) + b`, `L` channels of one sample at a time.
        $(#[$attr])*
        pub(in super::super) fn forward(d: &Dw, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) {
            let mut buf = [0.0f32; BUF];
            let mut obuf = [0.0f32; OUT];
            let (ip, op) = (d.src[0] * d.src[1], d.out[0] * d.out[1]);
            for c0 in (0..d.c).step_by(L) {
                let nl = (d.c - c0).min(L);
                clear_lanes(&mut buf, nl);
                let wv = weights(w, c0, nl, false);
                let mut bl = [0.0f32; L];
                if let Some(b) = b {
                    bl[..nl].copy_from_slice(&b[c0..c0 + nl]);
                }
                let init = load(&bl);
                for n in 0..d.n {
                    let first = n * d.c + c0;
                    to_lanes(&x[first * ip..], ip, nl, d.src_place(), &mut buf);
                    correlate(d, &buf, &wv, init, &mut obuf);
                    from_lanes(&obuf, d.out_place(), &mut y[first * op..], op, nl, false);
                }
            }
        }

        /// `gx += conv_transpose(gy, w)`: stride 1 as a correlation of the padded `gy`
        /// with the flipped kernel, other strides by scattering into a padded plane.
        $(#[$attr])*
        pub(in super::super) fn backward_input(d: &Dw, gy: &[f32], w: &[f32], gx: &mut [f32]) {
            let mut buf = [0.0f32; BUF];
            let mut obuf = [0.0f32; OUT];
            let row_words = d.cols * L;
            for c0 in (0..d.c).step_by(L) {
                let nl = (d.c - c0).min(L);
                clear_lanes(&mut buf, nl);
                let wv = weights(w, c0, nl, d.gather);
                for n in 0..d.n {
                    let first = n * d.c + c0;
                    if d.gather {
                        let (gp, xp) = (d.src[0] * d.src[1], d.out[0] * d.out[1]);
                        to_lanes(&gy[first * gp..], gp, nl, d.src_place(), &mut buf);
                        correlate(d, &buf, &wv, splat(0.0), &mut obuf);
                        from_lanes(&obuf, d.out_place(), &mut gx[first * xp..], xp, nl, true);
                        continue;
                    }
                    let (xp, gp) = (d.src[0] * d.src[1], d.out[0] * d.out[1]);
                    // The scatter adds to the interior too: clear it.
                    buf[..d.rows * row_words].fill(0.0);
                    to_lanes(&gy[first * gp..], gp, nl, d.out_place(), &mut obuf);
                    for oy in 0..d.out[0] {
                        for ox in 0..d.out[1] {
                            let g = load(&obuf[(oy * d.out[1] + ox) * L..]);
                            let at = oy * d.s[0] * row_words + ox * d.s[1] * L;
                            for ky in 0..3 {
                                let row = &mut buf[at + ky * row_words..][..3 * L];
                                for kx in 0..3 {
                                    let p = &mut row[kx * L..][..L];
                                    store(fma(wv[ky * 3 + kx], g, load(p)), p);
                                }
                            }
                        }
                    }
                    from_lanes(&buf, d.src_place(), &mut gx[first * xp..], xp, nl, true);
                }
            }
        }

        /// `gw += correlate(gy, x)`: 9 per-lane sums for `L` channels over every pixel of a
        /// sample, in registers, added up over the samples.
        $(#[$attr])*
        pub(in super::super) fn backward_weight(d: &Dw, gy: &[f32], x: &[f32], gw: &mut [f32]) {
            let mut buf = [0.0f32; BUF];
            let mut obuf = [0.0f32; OUT];
            let (ip, op) = (d.src[0] * d.src[1], d.out[0] * d.out[1]);
            for c0 in (0..d.c).step_by(L) {
                let nl = (d.c - c0).min(L);
                clear_lanes(&mut buf, nl);
                // Per-sample sums, added to the batch's: shorter chains of additions.
                let mut acc = [splat(0.0); 9];
                let one = splat(1.0);
                for n in 0..d.n {
                    let mut part = [splat(0.0); 9];
                    let first = n * d.c + c0;
                    to_lanes(&x[first * ip..], ip, nl, d.src_place(), &mut buf);
                    // Lanes past `nl` of `obuf` may hold another block's values; they
                    // only meet the zero lanes of `buf` and are never read out.
                    to_lanes(&gy[first * op..], op, nl, d.out_place(), &mut obuf);
                    weight_sums(d, &buf, &obuf, d.out_place(), &mut part);
                    for (a, p) in acc.iter_mut().zip(part) {
                        *a = fma(one, p, *a);
                    }
                }
                add_sums(&acc, c0, nl, gw);
            }
        }
    };
}
pub(super) use dw8_kernels;
