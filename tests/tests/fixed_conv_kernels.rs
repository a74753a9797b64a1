//! The Q16.16 convolution kernels (`core/src/kernels/conv/q16`, reached through `Scalar::Kernels`)
//! against an exact reference: every output must equal, bit for bit,
//! `saturate(base + round_half_away(sum of exact products / 2^16))`, with the sum taken
//! in i128. Random shapes cover strides, padding, dilation, groups and batch > 1, with
//! operand sizes that select each accumulation form (two-multiply, three-multiply and
//! the saturating i64 fallback), and values near saturation raise the sticky flag.

use torchlet::bench::{ConvGeom, KernelSet};
use torchlet::fixed::take_saturated;
use torchlet::{Scalar, Q16};

/// xorshift, deterministic.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// A raw value of magnitude below `2^bits` (`bits` <= 32).
    fn raw(&mut self, bits: u32) -> Q16 {
        let v = self.next() as i64 & ((1i64 << bits) - 1);
        let v = if self.next() & 1 == 0 { v } else { -v };
        Q16(v.clamp(i32::MIN as i64, i32::MAX as i64) as i32)
    }
}

/// `round(v / 2^16)`, ties away from zero.
fn round16(v: i128) -> i128 {
    let a = (v.abs() + (1 << 15)) >> 16;
    if v < 0 {
        -a
    } else {
        a
    }
}

/// Saturates and reports whether it clamped.
fn sat(v: i128) -> (i32, bool) {
    let c = v.clamp(i32::MIN as i128, i32::MAX as i128);
    (c as i32, c != v)
}

/// The input coordinate of output `o`, tap `k` along one axis, if inside.
fn src(o: usize, k: usize, s: usize, p: usize, d: usize, len: usize) -> Option<usize> {
    let i = (o * s + k * d) as isize - p as isize;
    (i >= 0 && (i as usize) < len).then_some(i as usize)
}

/// Exact sums, visiting every (output, input, tap) triple of the convolution once.
fn visit(g: &ConvGeom, mut f: impl FnMut(usize, usize, usize)) {
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    for n in 0..g.n {
        for oc in 0..g.c_out {
            let grp = oc / cout_g;
            for icg in 0..cin_g {
                let ic = grp * cin_g + icg;
                for oy in 0..g.oh {
                    for ox in 0..g.ow {
                        for ky in 0..g.kh {
                            for kx in 0..g.kw {
                                let (Some(iy), Some(ix)) = (
                                    src(oy, ky, g.stride[0], g.pad[0], g.dil[0], g.h),
                                    src(ox, kx, g.stride[1], g.pad[1], g.dil[1], g.w),
                                ) else {
                                    continue;
                                };
                                let yi = ((n * g.c_out + oc) * g.oh + oy) * g.ow + ox;
                                let xi = ((n * g.c_in + ic) * g.h + iy) * g.w + ix;
                                let wi = ((oc * cin_g + icg) * g.kh + ky) * g.kw + kx;
                                f(yi, xi, wi);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Expected `base + round(sum)` per element, and whether any element saturates.
fn finish(base: &[Q16], sums: &[i128]) -> (Vec<Q16>, bool) {
    let mut any = false;
    let out = base
        .iter()
        .zip(sums)
        .map(|(b, &s)| {
            let (v, c) = sat(b.0 as i128 + round16(s));
            any |= c;
            Q16(v)
        })
        .collect();
    (out, any)
}

/// A pass: its name, the expected values and whether any clamps, the kernel's values,
/// and the sums of |product| per element.
type Case<'a> = (&'static str, (Vec<Q16>, bool), Vec<Q16>, &'a [i128]);

fn random_geom(r: &mut Rng) -> ConvGeom {
    loop {
        let groups = 1 + r.below(3);
        let (c_in, c_out) = (groups * (1 + r.below(3)), groups * (1 + r.below(3)));
        let (kh, kw) = (1 + r.below(3), 1 + r.below(4));
        let (h, w) = (1 + r.below(9), 1 + r.below(9));
        let stride = [1 + r.below(2), 1 + r.below(3)];
        let pad = [r.below(3), r.below(3)];
        let dil = [1 + r.below(2), 1 + r.below(2)];
        let span = |len: usize, k: usize, s: usize, p: usize, d: usize| {
            let eff = d * (k - 1) + 1;
            (len + 2 * p >= eff).then(|| (len + 2 * p - eff) / s + 1)
        };
        if let (Some(oh), Some(ow)) = (
            span(h, kh, stride[0], pad[0], dil[0]),
            span(w, kw, stride[1], pad[1], dil[1]),
        ) {
            let n = 1 + r.below(3);
            return ConvGeom {
                n,
                c_in,
                h,
                w,
                c_out,
                kh,
                kw,
                oh,
                ow,
                stride,
                pad,
                dil,
                groups,
            };
        }
    }
}

/// A random geometry for the three-wide row kernels (`kernels/conv/q16`'s
/// `rows3`): 3 columns, column stride and dilation 1; rows wider than their 32-pixel
/// tiles, and more channels than their weight tables hold (16 input channels forward,
/// 32 output channels backward-input, at 3 kernel rows).
fn three_wide_geom(r: &mut Rng) -> ConvGeom {
    loop {
        let groups = 1 + r.below(2);
        let wide = r.below(4) == 0;
        let chans = |r: &mut Rng| groups * (1 + if wide { 14 + r.below(24) } else { r.below(4) });
        let (c_in, c_out) = (chans(r), chans(r));
        let kh = 1 + r.below(5);
        let (h, w) = (1 + r.below(8), 1 + r.below(if wide { 6 } else { 40 }));
        let stride = [1 + r.below(2), 1];
        let pad = [r.below(3), r.below(4)];
        let dil = [1 + r.below(2), 1];
        let eff = dil[0] * (kh - 1) + 1;
        if h + 2 * pad[0] < eff || w + 2 * pad[1] < 3 {
            continue;
        }
        return ConvGeom {
            n: 1 + r.below(3),
            c_in,
            h,
            w,
            c_out,
            kh,
            kw: 3,
            oh: (h + 2 * pad[0] - eff) / stride[0] + 1,
            ow: w + 2 * pad[1] - 2,
            stride,
            pad,
            dil,
            groups,
        };
    }
}

/// One random case; `bits` sets the operand magnitudes (`< 2^bits` raw).
fn check_case(r: &mut Rng, bits: [u32; 3]) -> bool {
    let g = random_geom(r);
    check_geom(r, g, bits)
}

/// [`check_case`] on a given geometry.
fn check_geom(r: &mut Rng, g: ConvGeom, bits: [u32; 3]) -> bool {
    let (xl, wl, yl) = (
        g.n * g.c_in * g.h * g.w,
        g.c_out * g.c_in / g.groups * g.kh * g.kw,
        g.n * g.c_out * g.oh * g.ow,
    );
    let x: Vec<Q16> = (0..xl).map(|_| r.raw(bits[0])).collect();
    let w: Vec<Q16> = (0..wl).map(|_| r.raw(bits[1])).collect();
    let gy: Vec<Q16> = (0..yl).map(|_| r.raw(bits[2])).collect();
    let b: Vec<Q16> = (0..g.c_out).map(|_| r.raw(bits[2])).collect();
    let gx0: Vec<Q16> = (0..xl).map(|_| r.raw(bits[0])).collect();
    let gw0: Vec<Q16> = (0..wl).map(|_| r.raw(bits[1])).collect();

    let (mut sy, mut sx, mut sw) = (vec![0i128; yl], vec![0i128; xl], vec![0i128; wl]);
    // Sums of |product|: where one reaches 2^63 the kernel's i64 sum may have clamped
    // part-way (documented), so such an element is not compared.
    let (mut ay, mut ax, mut aw) = (vec![0i128; yl], vec![0i128; xl], vec![0i128; wl]);
    visit(&g, |yi, xi, wi| {
        let (pxw, pgw, pgx) = (
            x[xi].0 as i128 * w[wi].0 as i128,
            gy[yi].0 as i128 * w[wi].0 as i128,
            gy[yi].0 as i128 * x[xi].0 as i128,
        );
        sy[yi] += pxw;
        sx[xi] += pgw;
        sw[wi] += pgx;
        ay[yi] += pxw.abs();
        ax[xi] += pgw.abs();
        aw[wi] += pgx.abs();
    });
    let op = g.oh * g.ow;
    let ybase: Vec<Q16> = (0..yl).map(|i| b[(i / op) % g.c_out]).collect();
    let cases: [Case; 3] = [
        (
            "forward",
            finish(&ybase, &sy),
            {
                let mut y = vec![Q16(7); yl];
                take_saturated();
                <Q16 as Scalar>::Kernels::conv2d_forward(&g, &x, &w, Some(&b), &mut y);
                y
            },
            &ay,
        ),
        (
            "backward-input",
            finish(&gx0, &sx),
            {
                let mut gx = gx0.clone();
                take_saturated();
                <Q16 as Scalar>::Kernels::conv2d_backward_input(&g, &gy, &w, &mut gx);
                gx
            },
            &ax,
        ),
        (
            "backward-weight",
            finish(&gw0, &sw),
            {
                let mut gw = gw0.clone();
                take_saturated();
                <Q16 as Scalar>::Kernels::conv2d_backward_weight(&g, &gy, &x, &mut gw);
                gw
            },
            &aw,
        ),
    ];
    let mut any_sat = false;
    let mut wide = false;
    for (name, (want, clamps), got, abs) in cases {
        for i in 0..want.len() {
            if abs[i] < 1 << 63 {
                assert_eq!(got[i], want[i], "{name} element {i} {g:?} bits {bits:?}");
            } else {
                wide = true;
            }
        }
        any_sat |= clamps;
    }
    // The flag of the last pass: raised when an output clamped.
    let (_, clamps) = finish(&gw0, &sw);
    let flag = take_saturated();
    assert!(
        flag == clamps || (wide && flag),
        "flag of backward-weight {g:?} bits {bits:?}"
    );
    any_sat
}

#[test]
fn small_operands_are_exact() {
    // |v| < 2: the two-multiply form.
    let mut r = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..300 {
        check_case(&mut r, [17, 17, 17]);
    }
}

#[test]
fn training_sized_operands_are_exact() {
    // Activations up to 64, weights up to 1, loss-scaled gradients up to 256; then
    // sizes where the two-multiply forms must flush every few terms.
    let mut r = Rng(12345);
    for bits in [[22, 16, 24], [19, 18, 19], [18, 17, 20], [20, 16, 18]] {
        for _ in 0..150 {
            check_case(&mut r, bits);
        }
    }
}

#[test]
fn large_operands_are_exact() {
    // Up to 2^12 in magnitude: the three-multiply form or the wide fallback.
    let mut r = Rng(777);
    for _ in 0..200 {
        check_case(&mut r, [28, 26, 28]);
    }
}

#[test]
fn values_near_saturation_clamp_and_raise_the_flag() {
    let mut r = Rng(4242);
    let mut saw = 0;
    for _ in 0..200 {
        if check_case(&mut r, [32, 32, 32]) {
            saw += 1;
        }
    }
    assert!(saw > 100, "only {saw} cases saturated");
}

#[test]
fn three_wide_row_kernels_are_exact() {
    // The row kernels for 3-column windows (forward, and backward-input at stride 1)
    // and the split-gy backward-weight, which take operands like these (see the path
    // tests in core/src/kernels/conv/q16/path.rs): borders, padding wider than the window,
    // rows past one tile, channel chunks (flushes every 1 to 14 channels), batch,
    // groups; then larger and saturating operands (other forms, same results).
    let mut r = Rng(0x51DE_CA75);
    for bits in [
        [17, 17, 17],
        [16, 16, 16],
        [19, 16, 19],
        [18, 17, 18],
        [24, 20, 24],
        [32, 32, 32],
    ] {
        for _ in 0..60 {
            let g = three_wide_geom(&mut r);
            check_geom(&mut r, g, bits);
        }
    }
}

/// A random geometry with planes of 20 to 44 pixels a side: on hosts with a 64-bit
/// multiply (`kernels/conv/q16`'s `native` module) the sums of a plane are taken
/// in bands of rows, and larger channel groups no longer fit its stack buffers (the
/// split kernels then run).
fn large_plane_geom(r: &mut Rng) -> ConvGeom {
    loop {
        let groups = 1 + r.below(2);
        let (c_in, c_out) = (groups * (1 + r.below(4)), groups * (1 + r.below(4)));
        let (kh, kw) = (1 + r.below(3), 1 + r.below(3));
        let (h, w) = (20 + r.below(25), 20 + r.below(25));
        let stride = if r.below(3) == 0 {
            [2, 1 + r.below(2)]
        } else {
            [1, 1]
        };
        let (pad, dil) = ([r.below(3), r.below(3)], [1 + r.below(2), 1 + r.below(2)]);
        let eff = [dil[0] * (kh - 1) + 1, dil[1] * (kw - 1) + 1];
        if h + 2 * pad[0] < eff[0] || w + 2 * pad[1] < eff[1] {
            continue;
        }
        return ConvGeom {
            n: 1 + r.below(3),
            c_in,
            h,
            w,
            c_out,
            kh,
            kw,
            oh: (h + 2 * pad[0] - eff[0]) / stride[0] + 1,
            ow: (w + 2 * pad[1] - eff[1]) / stride[1] + 1,
            stride,
            pad,
            dil,
            groups,
        };
    }
}

#[test]
fn large_planes_are_exact() {
    // Operand sizes for each host form: f64 sums (below 2^53), i64 sums, and sums
    // that clamp at the rails (exact in i64 until the final saturation).
    let mut r = Rng(0x00DD_BA11);
    let mut saturated = 0;
    for bits in [[17, 17, 17], [22, 18, 24], [26, 24, 26]] {
        for _ in 0..25 {
            let g = large_plane_geom(&mut r);
            saturated += check_geom(&mut r, g, bits) as usize;
        }
    }
    assert!(saturated > 5, "only {saturated} cases saturated");
}

#[test]
fn w1_convolutions_at_batch_32_are_exact() {
    // W1's three convolutions at batch 32 and 28x28 (3x3, padding 1), with operands
    // like those of a loss-scaled training step.
    let mut r = Rng(31);
    for (c_in, c_out, side) in [(1, 8, 28), (8, 16, 14), (16, 32, 7)] {
        let g = ConvGeom {
            n: 32,
            c_in,
            h: side,
            w: side,
            c_out,
            kh: 3,
            kw: 3,
            oh: side,
            ow: side,
            stride: [1, 1],
            pad: [1, 1],
            dil: [1, 1],
            groups: 1,
        };
        check_geom(&mut r, g, [18, 16, 24]);
    }
}

/// A random geometry for the split-gy backward-weight (`kernels/conv/q16`'s
/// `weight`): column stride 1, planes from one pixel to larger than its 256-pair
/// buffer (30x30), one to three input channels, windows up to 5 columns.
fn split_gy_geom(r: &mut Rng) -> ConvGeom {
    loop {
        let groups = 1 + r.below(2);
        let (c_in, c_out) = (groups * (1 + r.below(3)), groups * (1 + r.below(3)));
        let (kh, kw) = (1 + r.below(4), 1 + r.below(5));
        let big = r.below(2) == 0;
        let side = |r: &mut Rng| 1 + r.below(if big { 30 } else { 9 });
        let (h, w) = (side(r), side(r));
        let stride = [1 + r.below(2), 1];
        let (pad, dil) = ([r.below(3), r.below(3)], [1 + r.below(2), 1 + r.below(2)]);
        let (eh, ew) = (dil[0] * (kh - 1) + 1, dil[1] * (kw - 1) + 1);
        if h + 2 * pad[0] < eh || w + 2 * pad[1] < ew {
            continue;
        }
        return ConvGeom {
            n: 1 + r.below(3),
            c_in,
            h,
            w,
            c_out,
            kh,
            kw,
            oh: (h + 2 * pad[0] - eh) / stride[0] + 1,
            ow: w + 2 * pad[1] - ew + 1,
            stride,
            pad,
            dil,
            groups,
        };
    }
}

#[test]
fn split_gy_weight_layouts_are_exact() {
    // The backward-weight layouts (masked copies, one whole copy, row chunks with tap
    // groups; see core/src/kernels/conv/q16/weight.rs, whose unit tests check which W1 takes)
    // on small and larger-than-buffer planes, then larger and saturating operands.
    let mut r = Rng(0x00DD_BA11);
    for bits in [
        [17, 17, 17],
        [16, 16, 16],
        [19, 16, 19],
        [24, 20, 24],
        [32, 32, 32],
    ] {
        for _ in 0..60 {
            let g = split_gy_geom(&mut r);
            check_geom(&mut r, g, bits);
        }
    }
}
