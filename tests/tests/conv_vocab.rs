//! conv1d and conv_transpose2d beyond the golden cases: forward and every gradient
//! against direct loops (in f64) on random shapes large enough for the fast kernels,
//! Q16 close to f32, the input gradient when another op already gave one (the
//! scratch path), fused SGD, and a network using both whose meta plan equals the real
//! high-water mark over many input sizes.

use torchlet::init::Rng;
use torchlet::nn::{Conv1d, Conv2d, ConvTranspose2d};
use torchlet::{Conv1dParams, Conv2dParams, ConvTranspose2dParams, Graph, Result, Scalar, Tensor, Q16};

const TAPE: usize = 64;

fn rand(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect()
}

/// Forward and gradients of one op: `y`, and `dL/dx`, `dL/dw`, `dL/db` for
/// `L = sum(y * gy)`.
struct Run {
    y: Vec<f64>,
    gx: Vec<f64>,
    gw: Vec<f64>,
    gb: Vec<f64>,
}

/// Which op runs on the graph: the 3-D or the 4-D one.
#[derive(Clone, Copy)]
enum Which {
    Conv1d(Conv1dParams),
    ConvT(ConvTranspose2dParams),
}

/// Runs the op in a graph of scalar `S`, with `x` also squared into the loss (after the
/// op, so that backward reaches the op with x's gradient already set) when `twice`.
#[allow(clippy::too_many_arguments)]
fn run_graph<S: Scalar>(
    op: Which,
    xd: (&[usize], &[f32]),
    wd: (&[usize], &[f32]),
    bd: &[f32],
    gy: &[f32],
    twice: bool,
) -> Result<Run> {
    let mut arena = vec![S::ZERO; 1 << 20];
    let mut g: Graph<S, TAPE> = Graph::new(&mut arena);
    let cv = |v: &[f32]| v.iter().map(|&f| S::from_f32(f)).collect::<Vec<S>>();
    let w = g.param(wd.0)?;
    g.param_data_mut(w)?.copy_from_slice(&cv(wd.1));
    let b = g.param(&[bd.len()])?;
    g.param_data_mut(b)?.copy_from_slice(&cv(bd));
    let x = g.input_with_grad(xd.0, &cv(xd.1))?;
    let y = match op {
        Which::Conv1d(p) => g.conv1d(x, w, Some(b), p)?,
        Which::ConvT(p) => g.conv_transpose2d(x, w, Some(b), p)?,
    };
    let gyt = g.input(g.shape(y)?.dims(), &cv(gy))?;
    let mut l = g.mul(y, gyt)?;
    l = g.sum(l, &[], false)?;
    if twice {
        let sq = g.mul(x, x)?;
        let sq = g.sum(sq, &[], false)?;
        l = g.add(l, sq)?;
    }
    g.backward(l)?;
    let f = |v: &[S]| v.iter().map(|s| s.to_f32() as f64).collect::<Vec<f64>>();
    let mut gx = f(g.grad(x)?.unwrap());
    if twice {
        for (a, &v) in gx.iter_mut().zip(xd.1) {
            *a -= 2.0 * v as f64;
        }
    }
    Ok(Run {
        y: f(g.data(y)?),
        gx,
        gw: f(g.grad(w)?.unwrap()),
        gb: f(g.grad(b)?.unwrap()),
    })
}

#[allow(clippy::too_many_arguments)]
/// conv_transpose2d as scatter loops: every input value times every tap lands at
/// `(iy * s - p + ky * d, ix * s - p + kx * d)` when that is inside the output.
fn direct_t(
    xs: [usize; 4],
    x: &[f32],
    ws: [usize; 4],
    w: &[f32],
    b: &[f32],
    gy: &[f32],
    p: &ConvTranspose2dParams,
    os: [usize; 2],
) -> Run {
    let [n, ci, h, wd] = xs;
    let [_, cog, kh, kw] = ws;
    let co = cog * p.groups;
    let cig = ci / p.groups;
    let (oh, ow) = (os[0], os[1]);
    let mut r = Run {
        y: vec![0.0; n * co * oh * ow],
        gx: vec![0.0; x.len()],
        gw: vec![0.0; w.len()],
        gb: vec![0.0; co],
    };
    for (k, v) in r.y.iter_mut().enumerate() {
        *v = b[(k / (oh * ow)) % co] as f64;
    }
    for (k, v) in r.gb.iter_mut().enumerate() {
        *v = (0..n)
            .map(|s| {
                gy[(s * co + k) * oh * ow..][..oh * ow]
                    .iter()
                    .map(|&v| v as f64)
                    .sum::<f64>()
            })
            .sum();
    }
    for s in 0..n {
        for c in 0..ci {
            let grp = c / cig;
            for iy in 0..h {
                for ix in 0..wd {
                    let xi = ((s * ci + c) * h + iy) * wd + ix;
                    for o in 0..cog {
                        let oc = grp * cog + o;
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let y =
                                    (iy * p.stride[0] + ky * p.dilation[0]) as isize - p.padding[0] as isize;
                                let xx =
                                    (ix * p.stride[1] + kx * p.dilation[1]) as isize - p.padding[1] as isize;
                                if y < 0 || xx < 0 || y as usize >= oh || xx as usize >= ow {
                                    continue;
                                }
                                let yi = ((s * co + oc) * oh + y as usize) * ow + xx as usize;
                                let wi = ((c * cog + o) * kh + ky) * kw + kx;
                                r.y[yi] += x[xi] as f64 * w[wi] as f64;
                                r.gx[xi] += gy[yi] as f64 * w[wi] as f64;
                                r.gw[wi] += gy[yi] as f64 * x[xi] as f64;
                            }
                        }
                    }
                }
            }
        }
    }
    r
}

/// conv1d as gather loops (indices as in the formula).
#[allow(clippy::needless_range_loop)]
fn direct_1d(
    xs: [usize; 3],
    x: &[f32],
    ws: [usize; 3],
    w: &[f32],
    b: &[f32],
    gy: &[f32],
    p: &Conv1dParams,
) -> Run {
    let [n, ci, len] = xs;
    let [co, cig, k] = ws;
    let cog = co / p.groups;
    let ol = (len + 2 * p.padding - p.dilation * (k - 1) - 1) / p.stride + 1;
    let mut r = Run {
        y: vec![0.0; n * co * ol],
        gx: vec![0.0; x.len()],
        gw: vec![0.0; w.len()],
        gb: vec![0.0; co],
    };
    for s in 0..n {
        for oc in 0..co {
            for o in 0..ol {
                let yi = (s * co + oc) * ol + o;
                r.y[yi] = b[oc] as f64;
                r.gb[oc] += gy[yi] as f64;
                for i in 0..cig {
                    let c = (oc / cog) * cig + i;
                    for t in 0..k {
                        let at = (o * p.stride + t * p.dilation) as isize - p.padding as isize;
                        if at < 0 || at as usize >= len {
                            continue;
                        }
                        let xi = (s * ci + c) * len + at as usize;
                        let wi = (oc * cig + i) * k + t;
                        r.y[yi] += x[xi] as f64 * w[wi] as f64;
                        r.gx[xi] += gy[yi] as f64 * w[wi] as f64;
                        r.gw[wi] += gy[yi] as f64 * x[xi] as f64;
                    }
                }
            }
        }
    }
    r
}

fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{what}[{i}]: {g} vs {w}");
    }
}

fn compare(what: &str, got: &Run, want: &Run, tol: f64) {
    assert_close(&format!("{what} y"), &got.y, &want.y, tol);
    assert_close(&format!("{what} gx"), &got.gx, &want.gx, tol);
    assert_close(&format!("{what} gw"), &got.gw, &want.gw, tol);
    assert_close(&format!("{what} gb"), &got.gb, &want.gb, tol);
}

#[test]
fn conv_transpose2d_matches_direct_loops_in_f32_and_q16() {
    let mut rng = Rng::new(21);
    for case in 0..40 {
        // The first cases are MobileNet/U-Net-like sizes (fast kernels), then random.
        let (groups, cig, cog) = match case {
            0 => (1, 16, 8),
            1 => (8, 1, 1),
            _ => {
                let g = 1 + rng.below(3);
                (g, 1 + rng.below(4), 1 + rng.below(4))
            }
        };
        let k = [1 + rng.below(4), 1 + rng.below(4)];
        let stride = [1 + rng.below(3), 1 + rng.below(3)];
        let dilation = [1 + rng.below(2), 1 + rng.below(2)];
        let pick = |r: &mut Rng, lim: usize| if lim == 0 { 0 } else { r.below(lim) };
        let output_padding = [pick(&mut rng, stride[0]), pick(&mut rng, stride[1])];
        let (h, w) = if case < 2 {
            (14, 14)
        } else {
            (1 + rng.below(7), 1 + rng.below(7))
        };
        let full = |len: usize, d: usize| (len - 1) * stride[d] + dilation[d] * (k[d] - 1) + 1;
        let padding = [
            pick(&mut rng, full(h, 0).div_ceil(2).min(3)),
            pick(&mut rng, full(w, 1).div_ceil(2).min(3)),
        ];
        let p = ConvTranspose2dParams {
            stride,
            padding,
            output_padding,
            groups,
            dilation,
        };
        let os = [
            full(h, 0) + output_padding[0] - 2 * padding[0],
            full(w, 1) + output_padding[1] - 2 * padding[1],
        ];
        let n = 1 + rng.below(2);
        let (ci, co) = (cig * groups, cog * groups);
        let xs = [n, ci, h, w];
        let ws = [ci, cog, k[0], k[1]];
        let x = rand(&mut rng, n * ci * h * w);
        let wv = rand(&mut rng, ci * cog * k[0] * k[1]);
        let b = rand(&mut rng, co);
        let gy = rand(&mut rng, n * co * os[0] * os[1]);
        let want = direct_t(xs, &x, ws, &wv, &b, &gy, &p, os);
        let what = format!("case {case} {p:?} x {xs:?} w {ws:?}");
        for twice in [false, true] {
            let got = run_graph::<f32>(Which::ConvT(p), (&xs, &x), (&ws, &wv), &b, &gy, twice).unwrap();
            compare(&what, &got, &want, 1e-4);
        }
        // Q16.16: one rounding per input and a few per accumulated sum.
        let taps = (cig * cog * k[0] * k[1] * n * h * w) as f64;
        let got = run_graph::<Q16>(Which::ConvT(p), (&xs, &x), (&ws, &wv), &b, &gy, true).unwrap();
        compare(&format!("q16 {what}"), &got, &want, 1e-4 * taps.sqrt() + 2e-4);
    }
}

#[test]
fn conv1d_matches_direct_loops_in_f32_and_q16() {
    let mut rng = Rng::new(22);
    for case in 0..40 {
        let (groups, cig, cog) = match case {
            0 => (1, 16, 16),
            1 => (16, 1, 1),
            _ => (1 + rng.below(3), 1 + rng.below(4), 1 + rng.below(4)),
        };
        let k = if case < 2 { 3 } else { 1 + rng.below(5) };
        let p = Conv1dParams {
            stride: 1 + rng.below(3),
            padding: rng.below(3),
            dilation: 1 + rng.below(2),
            groups,
        };
        let span = p.dilation * (k - 1) + 1;
        let len = span.saturating_sub(2 * p.padding).max(1) + if case < 2 { 60 } else { rng.below(9) };
        let n = 1 + rng.below(2);
        let (ci, co) = (cig * groups, cog * groups);
        let xs = [n, ci, len];
        let ws = [co, cig, k];
        let ol = (len + 2 * p.padding - span) / p.stride + 1;
        let x = rand(&mut rng, n * ci * len);
        let wv = rand(&mut rng, co * cig * k);
        let b = rand(&mut rng, co);
        let gy = rand(&mut rng, n * co * ol);
        let want = direct_1d(xs, &x, ws, &wv, &b, &gy, &p);
        let what = format!("case {case} {p:?} x {xs:?} w {ws:?}");
        for twice in [false, true] {
            let got = run_graph::<f32>(Which::Conv1d(p), (&xs, &x), (&ws, &wv), &b, &gy, twice).unwrap();
            compare(&what, &got, &want, 1e-4);
        }
        let taps = (cig * k * n * len) as f64;
        let got = run_graph::<Q16>(Which::Conv1d(p), (&xs, &x), (&ws, &wv), &b, &gy, false).unwrap();
        compare(&format!("q16 {what}"), &got, &want, 1e-4 * taps.sqrt() + 2e-4);
    }
}

#[test]
fn bad_shapes_are_errors_and_leave_the_graph_usable() {
    let mut arena = vec![0.0f32; 1 << 12];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let w1 = g.param(&[2, 3, 3]).unwrap();
    let wt = g.param(&[3, 2, 3, 3]).unwrap();
    let x1 = g.input(&[1, 3, 8], &[0.5; 24]).unwrap();
    let x2 = g.input(&[1, 3, 2, 2], &[0.5; 12]).unwrap();
    let d1 = Conv1dParams::default();
    let dt = ConvTranspose2dParams::default();
    let tape = g.tape_len();
    for e in [
        g.conv1d(x2, w1, None, d1),
        g.conv1d(x1, wt, None, d1),
        g.conv1d(x1, w1, None, Conv1dParams { groups: 2, ..d1 }),
        g.conv1d(x1, w1, None, Conv1dParams { stride: 0, ..d1 }),
        g.conv1d(
            x1,
            w1,
            None,
            Conv1dParams {
                padding: 70_000,
                ..d1
            },
        ),
        g.conv_transpose2d(x1, wt, None, dt),
        g.conv_transpose2d(x2, wt, Some(x2), dt),
        g.conv_transpose2d(x2, wt, None, ConvTranspose2dParams { groups: 2, ..dt }),
        g.conv_transpose2d(
            x2,
            wt,
            None,
            ConvTranspose2dParams {
                padding: [3, 0],
                ..dt
            },
        ),
        g.conv_transpose2d(x2, wt, None, ConvTranspose2dParams { stride: [0, 1], ..dt }),
        g.conv_transpose2d(
            x2,
            wt,
            None,
            ConvTranspose2dParams {
                output_padding: [0, 1],
                ..dt
            },
        ),
        // Below the dilation but not the stride: PyTorch's, not supported here.
        g.conv_transpose2d(
            x2,
            wt,
            None,
            ConvTranspose2dParams {
                output_padding: [1, 0],
                dilation: [2, 1],
                ..dt
            },
        ),
        g.conv_transpose2d(
            x2,
            wt,
            None,
            ConvTranspose2dParams {
                stride: [usize::MAX, 1],
                ..dt
            },
        ),
    ] {
        assert!(e.is_err());
    }
    assert_eq!(g.tape_len(), tape);
    let y = g.conv_transpose2d(
        x2,
        wt,
        None,
        ConvTranspose2dParams {
            stride: [2, 1],
            output_padding: [1, 0],
            ..dt
        },
    );
    assert_eq!(g.shape(y.unwrap()).unwrap().dims(), &[1, 2, 6, 4]);
    let y = g.conv1d(x1, w1, None, Conv1dParams { padding: 1, ..d1 }).unwrap();
    assert_eq!(g.shape(y).unwrap().dims(), &[1, 2, 8]);
}

/// A small sequence-and-upsampling network: conv1d over `[1, 2, len]`, reshaped into an
/// image, a rectangular conv2d, conv_transpose2d upsampling x2, a 1x1 conv2d, and an MSE
/// loss. Returns the loss.
fn small_net<S: Scalar, const N: usize>(g: &mut Graph<'_, S, N>, len: usize, real: bool) -> Result<Tensor> {
    let mut rng = Rng::new(5);
    let c1 = Conv1d::new(
        g,
        2,
        4,
        3,
        Conv1dParams {
            padding: 1,
            ..Default::default()
        },
        true,
        &mut rng,
    )?;
    let c1b = Conv1d::new(
        g,
        4,
        4,
        3,
        Conv1dParams {
            groups: 4,
            stride: 2,
            ..Default::default()
        },
        false,
        &mut rng,
    )?;
    let rect = Conv2dParams {
        padding: [1, 0],
        ..Default::default()
    };
    let c2 = Conv2d::rect(g, 1, 3, [3, 1], rect, true, &mut rng)?;
    let up = ConvTranspose2dParams {
        stride: [2, 2],
        padding: [1, 1],
        output_padding: [1, 1],
        ..Default::default()
    };
    let ct = ConvTranspose2d::new(g, 3, 2, [3, 3], up, true, &mut rng)?;
    let head = Conv2d::new(g, 2, 1, 1, Conv2dParams::default(), true, &mut rng)?;
    let data: Vec<S> = (0..2 * len)
        .map(|i| S::from_f32(((i * 7) % 11) as f32 / 11.0))
        .collect();
    let x = g.input(&[1, 2, len], if real { &data } else { &[] })?;
    let a = c1.forward(g, x)?;
    let a = g.relu(a)?;
    let a = c1b.forward(g, a)?; // [1, 4, L']
    let l2 = g.shape(a)?.dim(2);
    let img = g.reshape(a, &[1, 1, 4, l2])?;
    let b = c2.forward(g, img)?;
    let b = g.relu(b)?;
    let u = ct.forward(g, b)?; // [1, 2, 8, 2 L']
    let u = g.relu(u)?;
    let o = head.forward(g, u)?;
    let t: Vec<S> = (0..8 * 2 * l2)
        .map(|i| S::from_f32((i % 3) as f32 / 3.0))
        .collect();
    let t = g.input(&[1, 1, 8, 2 * l2], if real { &t } else { &[] })?;
    g.mse_loss(o, t)
}

fn plan_equals_real<S: Scalar>(fused: bool) {
    for len in [3usize, 4, 5, 8, 13, 31, 64, 100] {
        let mut meta: Graph<S, TAPE> = Graph::meta(1 << 24);
        if fused {
            meta.set_fused_sgd(0.01).unwrap();
        }
        let loss = small_net(&mut meta, len, false).unwrap();
        let fwd = meta.arena().high_water_bytes();
        meta.backward(loss).unwrap();
        let step = meta.arena().high_water_bytes();
        let mut arena = vec![S::ZERO; step / core::mem::size_of::<S>()];
        let mut g: Graph<S, TAPE> = Graph::new(&mut arena);
        if fused {
            g.set_fused_sgd(0.01).unwrap();
        }
        let loss = small_net(&mut g, len, true).unwrap();
        assert_eq!(g.arena().high_water_bytes(), fwd, "len {len}");
        g.backward(loss).unwrap();
        assert_eq!(g.arena().high_water_bytes(), step, "len {len}");
        assert!(g.data(loss).unwrap()[0].to_f32().is_finite(), "len {len}");
    }
}

#[test]
fn conv1d_conv_transpose2d_network_plan_equals_real_high_water() {
    plan_equals_real::<f32>(false);
    plan_equals_real::<f32>(true);
    plan_equals_real::<Q16>(false);
}

#[test]
fn fused_sgd_equals_sgd_through_both_ops() {
    let run = |fused: bool| {
        let mut arena = vec![0.0f32; 1 << 16];
        let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
        if fused {
            g.set_fused_sgd(0.1).unwrap();
        }
        let loss = small_net(&mut g, 12, true).unwrap();
        g.backward(loss).unwrap();
        if !fused {
            for i in 0.. {
                let Some(p) = g.param_handle(i) else { break };
                let gr = g.grad(p).unwrap().unwrap().to_vec();
                for (v, d) in g.param_data_mut(p).unwrap().iter_mut().zip(gr) {
                    *v -= 0.1 * d;
                }
            }
        }
        g.end_step();
        let mut all = Vec::new();
        for i in 0.. {
            let Some(p) = g.param_handle(i) else { break };
            all.extend_from_slice(g.param_data_mut(p).unwrap());
        }
        all
    };
    let (a, b) = (run(false), run(true));
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            (x - y).abs() <= 1e-5 * (1.0 + x.abs()),
            "param value {i}: {x} vs {y}"
        );
    }
}
