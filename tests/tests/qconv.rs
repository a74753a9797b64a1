//! Frozen int8 convolutions (`core/src/kernels/conv/q8`, `g.no_grad().conv2d_q8`):
//! - every output bit for bit against an i128 reference of the documented formula
//!   `sat(round_half_away(sum(x_raw * q) * mult / 2^shift) + bias_raw)`, on random
//!   shapes (stride, padding, dilation, groups, batch > 1), inputs up to the rails,
//!   products per output above the kernel's 256-product flush, and the saturation flag;
//! - the per-channel quantizer (scale normalisation, rounding, all-zero channels,
//!   errors);
//! - op errors (they name `conv2d_q8` and leave the graph usable), and a meta plan of
//!   a frozen int8 stack equal to the real high-water mark, byte for byte the same as
//!   with Q16 `conv2d` on external weights.
//!
//! The comparison with Q16 convolutions on W1's real pretrained weights is in
//! `qconv_w1.rs`.

use torchlet::fixed::{quantize_per_channel, take_saturated, QConv2dWeights, QScale};
use torchlet::fixed::{MAX_KERNEL_WIDTH, MAX_TERMS};
use torchlet::init::Rng;
use torchlet::plan::{Plan, Planner};
use torchlet::{Conv2dParams, Error, Graph, Pool2dParams, Result, Tensor, Q16};

/// A raw value of magnitude below `2^bits`, or a rail.
fn raw(r: &mut Rng, bits: u32) -> i32 {
    match r.below(16) {
        0 => i32::MIN,
        1 => i32::MAX,
        _ => {
            let v = r.next_u64() as i64 & ((1i64 << bits) - 1);
            let v = if r.next_u64() & 1 == 0 { v } else { -v };
            v.clamp(i32::MIN as i64, i32::MAX as i64) as i32
        }
    }
}

/// One convolution: shapes, params and the quantized weights' parts.
struct Case {
    x_dims: [usize; 4],
    w_dims: [usize; 4],
    p: Conv2dParams,
    x: Vec<Q16>,
    q: Vec<i8>,
    scales: Vec<QScale>,
    bias: Option<Vec<Q16>>,
}

impl Case {
    fn weights(&self) -> QConv2dWeights<'_> {
        QConv2dWeights::new(self.w_dims, &self.q, &self.scales, self.bias.as_deref()).expect("valid weights")
    }
}

/// The input coordinate of output `o`, tap `k`, if inside.
fn src(o: usize, k: usize, s: usize, p: usize, d: usize, len: usize) -> Option<usize> {
    let i = (o * s + k * d) as isize - p as isize;
    (i >= 0 && (i as usize) < len).then_some(i as usize)
}

fn out_len(len: usize, k: usize, s: usize, p: usize, d: usize) -> Option<usize> {
    let eff = d * (k - 1) + 1;
    (len + 2 * p >= eff).then(|| (len + 2 * p - eff) / s + 1)
}

/// The formula, in i128: expected outputs and whether any clamps.
fn reference(c: &Case) -> (Vec<Q16>, bool) {
    let [n, c_in, h, w] = c.x_dims;
    let [c_out, cin_g, kh, kw] = c.w_dims;
    let (p, groups) = (c.p, c.p.groups);
    let oh = out_len(h, kh, p.stride[0], p.padding[0], p.dilation[0]).unwrap();
    let ow = out_len(w, kw, p.stride[1], p.padding[1], p.dilation[1]).unwrap();
    let cout_g = c_out / groups;
    let (mut out, mut any) = (vec![], false);
    for b in 0..n {
        for oc in 0..c_out {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut s: i128 = 0;
                    for icg in 0..cin_g {
                        let ic = oc / cout_g * cin_g + icg;
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let (Some(iy), Some(ix)) = (
                                    src(oy, ky, p.stride[0], p.padding[0], p.dilation[0], h),
                                    src(ox, kx, p.stride[1], p.padding[1], p.dilation[1], w),
                                ) else {
                                    continue;
                                };
                                let xv = c.x[((b * c_in + ic) * h + iy) * w + ix].0 as i128;
                                s += xv * c.q[((oc * cin_g + icg) * kh + ky) * kw + kx] as i128;
                            }
                        }
                    }
                    let sc = c.scales[oc];
                    let prod = s * sc.mult as i128;
                    let d = 1i128 << sc.shift;
                    let mag = (prod.abs() + d / 2) / d;
                    let bias = c.bias.as_ref().map_or(0, |b| b[oc].0) as i128;
                    let v = if prod < 0 { -mag } else { mag } + bias;
                    let cl = v.clamp(i32::MIN as i128, i32::MAX as i128);
                    any |= cl != v;
                    out.push(Q16(cl as i32));
                }
            }
        }
    }
    (out, any)
}

/// Runs the op on a fresh graph: output values and the saturation flag.
fn run(c: &Case) -> Result<(Vec<Q16>, bool)> {
    let mut buf = vec![Q16(0); 1 << 16];
    let mut g: Graph<Q16, 8> = Graph::new(&mut buf);
    let x = g.input(&c.x_dims, &c.x)?;
    take_saturated();
    let y = g.no_grad().conv2d_q8(x, &c.weights(), c.p)?;
    let sat = take_saturated();
    assert_eq!(g.op_name(y)?, "leaf", "no gradient path is recorded");
    Ok((g.data(y)?.to_vec(), sat))
}

fn random_case(r: &mut Rng) -> Case {
    loop {
        let groups = 1 + r.below(3);
        let (c_in, c_out) = (groups * (1 + r.below(3)), groups * (1 + r.below(3)));
        let (kh, kw) = (1 + r.below(3), 1 + r.below(4));
        let (n, h, w) = (1 + r.below(2), 1 + r.below(9), 1 + r.below(9));
        let stride = [1 + r.below(2), 1 + r.below(3)];
        let padding = [r.below(3), r.below(3)];
        let dilation = [1 + r.below(2), 1 + r.below(2)];
        if out_len(h, kh, stride[0], padding[0], dilation[0]).is_none()
            || out_len(w, kw, stride[1], padding[1], dilation[1]).is_none()
        {
            continue;
        }
        let bits = [8, 16, 20, 24, 31, 32][r.below(6)];
        let cin_g = c_in / groups;
        let x = (0..n * c_in * h * w).map(|_| Q16(raw(r, bits))).collect();
        let q = (0..c_out * cin_g * kh * kw).map(|_| r.next_u64() as i8).collect();
        // Shifts from 16 (large results: clamps) to 45 (small ones).
        let scales = (0..c_out)
            .map(|_| QScale {
                mult: r.next_u64() as u16,
                shift: 16 + r.below(30) as u8,
            })
            .collect();
        let bias = (r.below(2) == 0).then(|| (0..c_out).map(|_| Q16(raw(r, 31))).collect());
        return Case {
            x_dims: [n, c_in, h, w],
            w_dims: [c_out, cin_g, kh, kw],
            p: Conv2dParams {
                stride,
                padding,
                dilation,
                groups,
            },
            x,
            q,
            scales,
            bias,
        };
    }
}

#[test]
fn random_shapes_match_the_exact_formula_bit_for_bit() -> Result<()> {
    let mut r = Rng::new(0x9E37_79B9_7F4A_7C15);
    let (mut saturating, mut clean) = (0, 0);
    for i in 0..600 {
        let c = random_case(&mut r);
        let (want, want_sat) = reference(&c);
        let (got, sat) = run(&c)?;
        assert_eq!(got, want, "case {i}: x {:?} w {:?} {:?}", c.x_dims, c.w_dims, c.p);
        assert_eq!(sat, want_sat, "case {i}: saturation flag");
        if want_sat {
            saturating += 1;
        } else {
            clean += 1;
        }
    }
    // Both kinds must have been exercised for the flag check to mean anything.
    assert!(
        saturating > 50 && clean > 50,
        "saturating {saturating}, clean {clean}"
    );
    Ok(())
}

/// All inputs on a rail (or one LSB off it), all weights at -128 or 127, with more
/// products per output than one 256-product flush and the widest kernel allowed.
#[test]
fn rails_and_long_sums_are_exact() -> Result<()> {
    let xs = [i32::MIN, i32::MAX, i32::MIN + 0xFFFF, -1];
    let qs = [-128i8, 127];
    // (x dims, w dims, padding): 40 channels x 3x3 = 360 products per output; a
    // 2 x 256 kernel (256-product rows); 1 x 1 over 300 channels.
    let shapes = [
        ([1, 40, 4, 5], [3, 40, 3, 3], 1),
        ([1, 1, 2, 256], [2, 1, 2, 256], 0),
        ([2, 300, 2, 2], [2, 300, 1, 1], 0),
    ];
    for (x_dims, w_dims, pad) in shapes {
        for &xv in &xs {
            for &qv in &qs {
                for shift in [16u8, 40, 62] {
                    let n_x: usize = x_dims.iter().product();
                    let n_w: usize = w_dims.iter().product();
                    let c = Case {
                        x_dims,
                        w_dims,
                        p: Conv2dParams::padded(pad),
                        x: vec![Q16(xv); n_x],
                        q: vec![qv; n_w],
                        scales: vec![QScale { mult: 65535, shift }; w_dims[0]],
                        bias: Some(vec![Q16(-3); w_dims[0]]),
                    };
                    let (want, want_sat) = reference(&c);
                    let (got, sat) = run(&c)?;
                    assert_eq!(got, want, "x {xv} q {qv} shift {shift} dims {w_dims:?}");
                    assert_eq!(sat, want_sat, "x {xv} q {qv} shift {shift}: flag");
                    // Shift 16 makes every sum of rail values clamp; 62 none.
                    if shift == 16 && xv != -1 {
                        assert!(sat, "x {xv} q {qv}: expected a clamp");
                    }
                    if shift == 62 {
                        assert!(!sat, "x {xv} q {qv}: no clamp expected");
                    }
                }
            }
        }
    }
    Ok(())
}

#[test]
fn quantizer_normalises_scales_and_rounds_to_the_nearest_step() -> Result<()> {
    // Channel 0: a ramp; 1: all zero; 2: tiny; 3: just under the largest scale.
    let mut w: Vec<f32> = (0..9).map(|i| (i as f32 - 4.0) * 0.137).collect();
    w.extend([0.0; 9]);
    w.extend((0..9).map(|i| (i as f32 - 3.0) * 1e-9));
    w.extend((0..9).map(|i| (i as f32 - 8.0) * 15.8));
    let (mut q, mut s) = (vec![0i8; 36], vec![QScale::default(); 4]);
    quantize_per_channel(&w, 4, &mut q, &mut s)?;
    assert_eq!(s[1].mult, 0, "all-zero channel");
    assert!(q[9..18].iter().all(|&v| v == 0));
    for c in [0, 2, 3] {
        let sc = s[c];
        assert!(
            (32768..=65535).contains(&sc.mult),
            "channel {c}: normalised multiplier {sc:?}"
        );
        let ch = &w[c * 9..][..9];
        let amax = ch.iter().fold(0.0f64, |m, &v| m.max(v.abs() as f64));
        // The stored scale is within 2^-16 (relative) of max|w| / 127.
        assert!(
            (sc.to_f64() / (amax / 127.0) - 1.0).abs() <= 1.0 / 65536.0,
            "channel {c}: {sc:?}"
        );
        let qs = &q[c * 9..][..9];
        assert_eq!(
            qs.iter().map(|v| v.unsigned_abs()).max(),
            Some(127),
            "channel {c} uses the range"
        );
        for (&qi, &wi) in qs.iter().zip(ch) {
            // Nearest step of the stored scale.
            let err = (qi as f64 * sc.to_f64() - wi as f64).abs();
            assert!(
                err <= sc.to_f64() / 2.0 * (1.0 + 1e-12),
                "channel {c}: w {wi} q {qi} err {err}"
            );
        }
    }
    // The weights it produced are valid for the op.
    QConv2dWeights::new([4, 1, 3, 3], &q, &s, None)?;
    Ok(())
}

#[test]
fn quantizer_rejects_bad_input() {
    let (mut q, mut s) = (vec![0i8; 4], vec![QScale::default(); 2]);
    let shape = |r: Result<()>| matches!(r, Err(Error::ShapeMismatch { .. }));
    let param = |r: Result<()>| matches!(r, Err(Error::InvalidParam { .. }));
    assert!(
        shape(quantize_per_channel(&[1.0; 4], 0, &mut q, &mut s)),
        "cout 0"
    );
    assert!(
        shape(quantize_per_channel(&[1.0; 3], 2, &mut q[..3], &mut s)),
        "cout does not divide"
    );
    assert!(shape(quantize_per_channel(&[], 2, &mut q[..0], &mut s)), "empty");
    assert!(
        shape(quantize_per_channel(&[1.0; 4], 2, &mut q[..3], &mut s)),
        "q_out length"
    );
    assert!(
        shape(quantize_per_channel(&[1.0; 4], 2, &mut q, &mut s[..1])),
        "scale_out length"
    );
    assert!(
        param(quantize_per_channel(
            &[1.0, f32::NAN, 0.0, 0.0],
            2,
            &mut q,
            &mut s
        )),
        "NaN"
    );
    assert!(
        param(quantize_per_channel(
            &[1.0, 0.0, f32::INFINITY, 0.0],
            2,
            &mut q,
            &mut s
        )),
        "inf"
    );
    assert_eq!(
        quantize_per_channel(&[1.0, 0.0, 127.0, 0.0], 2, &mut q, &mut s),
        Err(Error::InvalidParam {
            op: "quantize_per_channel",
            what: "max |weight| of 127 or more (scale would reach 1); channel",
            value: 1,
        })
    );
    // Just below the limit works.
    assert_eq!(
        quantize_per_channel(&[1.0, 0.0, 126.99, 0.0], 2, &mut q, &mut s),
        Ok(())
    );
    assert_eq!((q[2], s[1].shift), (127, 16));
}

#[test]
fn weights_validation_names_what_is_wrong() {
    let q = [1i8; 18];
    let s = [QScale {
        mult: 40000,
        shift: 20,
    }; 2];
    let b = [Q16(0); 2];
    let new =
        |dims, q: &[i8], s: &[QScale], b: Option<&[Q16]>| QConv2dWeights::new(dims, q, s, b).map(|_| ());
    assert_eq!(new([2, 1, 3, 3], &q, &s, Some(&b)), Ok(()));
    let what = |r: Result<()>| match r {
        Err(Error::ShapeMismatch { what, .. } | Error::InvalidParam { what, .. }) => what,
        other => panic!("expected an error, got {other:?}"),
    };
    assert_eq!(
        what(new([2, 1, 3, 0], &q, &s, None)),
        "zero-sized weight dimension"
    );
    assert_eq!(
        what(new([2, 1, 3, 2], &q, &s, None)),
        "weights length vs out * in/groups * kh * kw"
    );
    assert_eq!(
        what(new([2, 1, 3, 3], &q, &s[..1], None)),
        "scales length vs output channels"
    );
    assert_eq!(
        what(new([2, 1, 3, 3], &q, &s, Some(&b[..1]))),
        "bias length vs output channels"
    );
    let bad_shift = [QScale { mult: 1, shift: 20 }, QScale { mult: 1, shift: 15 }];
    assert_eq!(
        new([2, 1, 3, 3], &q, &bad_shift, None),
        Err(Error::InvalidParam {
            op: "QConv2dWeights",
            what: "scale shift outside 16..=62",
            value: 15
        })
    );
    let bad_shift = [QScale { mult: 1, shift: 63 }; 2];
    assert!(new([2, 1, 3, 3], &q, &bad_shift, None).is_err());
    assert_eq!(
        what(new([1, 1, 1, MAX_KERNEL_WIDTH + 1], &q, &s[..1], None)),
        "kernel width above 256"
    );
    assert!(what(new([1, MAX_TERMS, 1, 2], &q, &s[..1], None)).starts_with("products per output"));
    assert!(what(new([1, usize::MAX, 2, 2], &q, &s[..1], None)).starts_with("products per output"));
}

/// A `static` in flash: built and checked at compile time, read in place.
static Q3: [i8; 9] = [1, 2, 3, -4, -5, -6, 7, 8, 127];
static S3: [QScale; 1] = [QScale {
    mult: 32768,
    shift: 22,
}];
static B3: [Q16; 1] = [Q16(1 << 16)];
static W3: QConv2dWeights<'static> = match QConv2dWeights::new([1, 1, 3, 3], &Q3, &S3, Some(&B3)) {
    Ok(w) => w,
    Err(_) => panic!("invalid frozen weights"),
};

#[test]
fn op_errors_name_the_op_and_leave_the_graph_usable() -> Result<()> {
    let mut buf = vec![Q16(0); 4096];
    let mut g: Graph<Q16, 16> = Graph::new(&mut buf);
    let x1 = g.input(&[1, 1, 4, 4], &[Q16(1 << 16); 16])?;
    let x2 = g.input(&[1, 2, 4, 4], &[Q16(0); 32])?;
    let x3 = g.input(&[1, 4, 4], &[Q16(0); 16])?;
    let (tape, used) = (g.tape_len(), g.arena().used_bytes());
    let p1 = Conv2dParams::padded(1);
    let check = |g: &mut Graph<'_, Q16, 16>, x: Tensor, p: Conv2dParams, want: Error| {
        assert_eq!(g.no_grad().conv2d_q8(x, &W3, p), Err(want));
        assert_eq!(
            (g.tape_len(), g.arena().used_bytes()),
            (tape, used),
            "nothing recorded"
        );
    };
    let mism = |what, expected, found| Error::ShapeMismatch {
        op: "conv2d_q8",
        what,
        expected,
        found,
    };
    check(
        &mut g,
        x2,
        p1,
        mism("weight input channels vs input channels / groups", 2, 1),
    );
    check(&mut g, x3, p1, mism("input rank (N, C, H, W)", 4, 3));
    let p = Conv2dParams { stride: [0, 1], ..p1 };
    let stride0 = Error::InvalidParam {
        op: "conv2d_q8",
        what: "stride must be at least 1",
        value: 0,
    };
    check(&mut g, x1, p, stride0);
    let too_small = mism("input (padded) smaller than the kernel", 7, 4);
    check(
        &mut g,
        x1,
        Conv2dParams {
            dilation: [3, 1],
            ..Default::default()
        },
        too_small,
    );
    let p = Conv2dParams { groups: 2, ..p1 };
    let groups = Error::InvalidParam {
        op: "conv2d_q8",
        what: "groups must divide input and output channels",
        value: 2,
    };
    check(&mut g, x2, p, groups);
    // The graph still works: the valid call gives the formula's value.
    let y = g.no_grad().conv2d_q8(x1, &W3, p1)?;
    // Centre output: all nine taps, sum(q) * 2^16 * 2^15 / 2^22 + 2^16 = 133 * 2^9 + 2^16.
    assert_eq!(g.data(y)?[5], Q16(133 * 512 + 65536));
    g.end_step();
    assert_eq!(g.no_grad().conv2d_q8(x1, &W3, p1), Err(Error::StaleTensor));
    Ok(())
}

const TAPE: usize = 24;

/// Frozen int8 trunk (conv 1->4, relu, max-pool, conv 4->6 stride 2, relu, global
/// pool) and a trained linear head 6->3, with activations freed as soon as read.
struct Stack {
    conv: [&'static QConv2dWeights<'static>; 2],
    /// The same weights dequantized to Q16, used through `Graph::external` + conv2d.
    ext: Option<[Tensor; 4]>,
    head: Tensor,
}

fn leak_weights(c_out: usize, c_in: usize, seed: u64) -> (&'static QConv2dWeights<'static>, [Vec<Q16>; 2]) {
    let mut r = Rng::new(seed);
    let n = c_out * c_in * 9;
    let w: Vec<f32> = (0..n).map(|_| (r.below(2001) as f32 - 1000.0) / 1500.0).collect();
    let (mut q, mut s) = (vec![0i8; n], vec![QScale::default(); c_out]);
    quantize_per_channel(&w, c_out, &mut q, &mut s).expect("quantize");
    let b: Vec<Q16> = (0..c_out).map(|_| Q16(raw(&mut r, 15))).collect();
    let deq: Vec<Q16> = q
        .iter()
        .enumerate()
        .map(|(i, &v)| Q16::from_f64(v as f64 * s[i / (c_in * 9)].to_f64()))
        .collect();
    let (q, s, bl) = (q.leak(), s.leak(), b.clone().leak());
    let w = QConv2dWeights::new([c_out, c_in, 3, 3], q, s, Some(bl)).expect("weights");
    (Box::leak(Box::new(w)), [deq, b])
}

fn setup(g: &mut Graph<'static, Q16, TAPE>, q8: bool) -> Result<Stack> {
    let (w1, d1) = leak_weights(4, 1, 7);
    let (w2, d2) = leak_weights(6, 4, 8);
    let ext = if q8 {
        None
    } else {
        let [a, b] = d1.map(|v| &*v.leak());
        let [c, d] = d2.map(|v| &*v.leak());
        Some([
            g.external(&[4, 1, 3, 3], a)?,
            g.external(&[4], b)?,
            g.external(&[6, 4, 3, 3], c)?,
            g.external(&[6], d)?,
        ])
    };
    let head = g.param(&[3, 6])?;
    Ok(Stack {
        conv: [w1, w2],
        ext,
        head,
    })
}

fn step(g: &mut Graph<'static, Q16, TAPE>, m: &Stack, h: usize, w: usize) -> Result<Tensor> {
    let x = g.input_with(&[1, 1, h, w], |d| {
        d.iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = Q16((i as i32 * 3001) % 65536))
    })?;
    let params = [
        Conv2dParams::padded(1),
        Conv2dParams {
            stride: [2, 2],
            ..Conv2dParams::padded(1)
        },
    ];
    let mut y = x;
    for l in 0..2 {
        let c = match m.ext {
            Some(e) => g.no_grad().conv2d(y, e[2 * l], Some(e[2 * l + 1]), params[l])?,
            None => g.no_grad().conv2d_q8(y, m.conv[l], params[l])?,
        };
        g.free(y)?;
        let r = g.no_grad().relu_(c)?;
        y = if l == 0 {
            let p = g.no_grad().max_pool2d(r, Pool2dParams::square(2))?;
            g.free(r)?;
            p
        } else {
            r
        };
    }
    let pooled = g.no_grad().adaptive_avg_pool2d(y, [1, 1])?;
    g.free(y)?;
    let flat = g.no_grad().flatten(pooled, 1)?;
    let logits = g.linear(flat, m.head, None)?;
    g.cross_entropy(logits, &[1])
}

#[test]
fn meta_plan_equals_real_high_water_and_q16_convs_bytes() -> Result<()> {
    for q8 in [true, false] {
        let planner =
            Planner::<Q16, TAPE, _, _>::new(move |g: &mut Graph<'static, Q16, TAPE>| setup(g, q8), step);
        for (h, w) in [(4, 4), (8, 8), (12, 20), (28, 28), (5, 17), (31, 9)] {
            let plan = planner.plan(h, w)?;
            let buf: &'static mut [Q16] = vec![Q16(0); 1 << 15].leak();
            let mut g: Graph<'static, Q16, TAPE> = Graph::new(buf);
            let m = setup(&mut g, q8)?;
            g.reset_high_water();
            let loss = step(&mut g, &m, h, w)?;
            assert!(g.data(loss)?[0].0 > 0, "a real loss was computed");
            g.backward(loss)?;
            assert_eq!(
                plan.step_bytes,
                g.arena().high_water_bytes(),
                "q8 {q8} at {h}x{w}"
            );
            if q8 {
                // The Q16 conv2d on external weights plans the same bytes.
                let q16 = Planner::<Q16, TAPE, _, _>::new(
                    |g: &mut Graph<'static, Q16, TAPE>| setup(g, false),
                    step,
                );
                // (Bytes only: the Q16 form's weights are tape records, the q8 form's are not.)
                let bytes = |p: Plan| Plan { records: 0, ..p };
                assert_eq!(
                    bytes(q16.plan(h, w)?),
                    bytes(plan),
                    "same memory as Q16 conv2d at {h}x{w}"
                );
            }
        }
    }
    Ok(())
}
