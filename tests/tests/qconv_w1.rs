//! Frozen int8 convolutions on W1's real pretrained weights
//! (`firmware/assets/w1_pretrained.tlw`, f32, trained on 28x28 MNIST), quantized per
//! output channel by `quantize_per_channel`, against the Q16.16 convolutions the
//! Cortex-M0 program uses today (weights `Q16::from_f32`, `Graph::external`):
//! - per layer, on the same input: every output within the bound of the weights'
//!   rounding, `|y8 - y16| <= sum|x_raw| * (s_co / 2 + 2^-17) + 1` LSB (int8 step of
//!   at most half a scale, Q16 step of at most half an LSB, one rounding each), and
//!   within 1 LSB of an `f64` convolution with the dequantized weights `q * s_co`;
//! - end to end on the 2,000 held-out digits: the held-out accuracy with int8 frozen
//!   convolutions stays within 1 point of the Q16 one (both printed).

use torchlet::fixed::{quantize_per_channel, take_saturated, QConv2dWeights, QScale};
use torchlet::init::Rng;
use torchlet::nn::digits_fcn;
use torchlet::{Conv2dParams, Graph, Pool2dParams, Result, Tensor, Q16};
use torchlet_tests::digits::Digits;

/// (c_out, c_in) of W1's three convolutions (3x3, padding 1).
const LAYERS: [(usize, usize); 3] = [(8, 1), (16, 8), (32, 16)];

struct Model {
    /// Per layer: int8 weights and scales.
    q: Vec<(Vec<i8>, Vec<QScale>)>,
    /// W1's eight parameters in Q16 (conv weights, biases, head).
    p16: Vec<Vec<Q16>>,
}

impl Model {
    fn load() -> Model {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../firmware/assets/w1_pretrained.tlw"
        );
        let tlw = std::fs::read(path).expect("W1 pretrained weights");
        let mut buf = vec![0.0f32; 16 * 1024];
        let mut g: Graph<f32, 32> = Graph::new(&mut buf);
        digits_fcn(&mut g, &mut Rng::new(0)).expect("model");
        torchlet::io::load(&mut g, &tlw).expect("load");
        let f32s: Vec<Vec<f32>> = (0..8)
            .map(|i| g.data(g.param_handle(i).unwrap()).unwrap().to_vec())
            .collect();
        let q = LAYERS
            .iter()
            .enumerate()
            .map(|(l, &(co, _))| {
                let w = &f32s[2 * l];
                let (mut q, mut s) = (vec![0i8; w.len()], vec![QScale::default(); co]);
                quantize_per_channel(w, co, &mut q, &mut s).expect("quantize");
                (q, s)
            })
            .collect();
        let p16 = f32s
            .iter()
            .map(|v| v.iter().map(|&x| Q16::from_f32(x)).collect())
            .collect();
        Model { q, p16 }
    }

    fn q8(&self, l: usize) -> QConv2dWeights<'_> {
        let (co, ci) = LAYERS[l];
        let (q, s) = &self.q[l];
        QConv2dWeights::new([co, ci, 3, 3], q, s, Some(&self.p16[2 * l + 1])).expect("weights")
    }
}

/// Sum of `|x_raw|` over each 3x3 (padding 1) window, all channels: `[h * w]`.
fn window_abs_sums(x: &[Q16], c: usize, h: usize, w: usize) -> Vec<f64> {
    let mut out = vec![0.0; h * w];
    for oy in 0..h {
        for ox in 0..w {
            let mut s = 0.0;
            for ch in 0..c {
                for iy in oy.saturating_sub(1)..(oy + 2).min(h) {
                    for ix in ox.saturating_sub(1)..(ox + 2).min(w) {
                        s += (x[(ch * h + iy) * w + ix].0 as f64).abs();
                    }
                }
            }
            out[oy * w + ox] = s;
        }
    }
    out
}

/// `f64` convolution (3x3, padding 1, batch 1) with dequantized weights, in raw units.
fn dequantized_conv(x: &[Q16], m: &Model, l: usize, h: usize, w: usize) -> Vec<f64> {
    let (co, ci) = LAYERS[l];
    let (q, s) = &m.q[l];
    let mut out = vec![0.0; co * h * w];
    for o in 0..co {
        for oy in 0..h {
            for ox in 0..w {
                let mut acc = m.p16[2 * l + 1][o].0 as f64;
                for c in 0..ci {
                    for ky in 0..3 {
                        for kx in 0..3 {
                            let (iy, ix) = ((oy + ky) as isize - 1, (ox + kx) as isize - 1);
                            if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                continue;
                            }
                            let xv = x[(c * h + iy as usize) * w + ix as usize].0 as f64;
                            acc += xv * q[((o * ci + c) * 3 + ky) * 3 + kx] as f64 * s[o].to_f64();
                        }
                    }
                }
                out[(o * h + oy) * w + ox] = acc;
            }
        }
    }
    out
}

const TAPE: usize = 32;

/// The logits of one 28x28 digit through the frozen trunk (int8 or Q16 convolutions)
/// and the Q16 head. With `check`, each int8 layer is compared on its input with the
/// Q16 layer and the dequantized f64 one; returns the logits and the largest
/// `|y8 - y16|` as a fraction of its bound.
fn logits(m: &Model, pixels: &[u8], int8: bool, check: bool) -> Result<(Vec<Q16>, f64)> {
    let mut buf = vec![Q16(0); 1 << 15];
    let mut g: Graph<Q16, TAPE> = Graph::new(&mut buf);
    let ext: Vec<Tensor> = (0..8)
        .map(|i| {
            let dims: &[usize] = match i {
                0 => &[8, 1, 3, 3],
                2 => &[16, 8, 3, 3],
                4 => &[32, 16, 3, 3],
                6 => &[10, 32],
                1 => &[8],
                3 => &[16],
                5 => &[32],
                _ => &[10],
            };
            g.external(dims, &m.p16[i])
        })
        .collect::<Result<_>>()?;
    let mut y = g.input_with(&[1, 1, 28, 28], |d| {
        for (v, &p) in d.iter_mut().zip(pixels) {
            *v = Q16::from_f32(p as f32 / 255.0);
        }
    })?;
    let (mut side, mut worst) = (28, 0.0f64);
    let p1 = Conv2dParams::padded(1);
    for l in 0..3 {
        let (co, ci) = LAYERS[l];
        let c16 = g.no_grad().conv2d(y, ext[2 * l], Some(ext[2 * l + 1]), p1)?;
        let c8 = g.no_grad().conv2d_q8(y, &m.q8(l), p1)?;
        if check {
            let x = g.data(y)?.to_vec();
            let sums = window_abs_sums(&x, ci, side, side);
            let deq = dequantized_conv(&x, m, l, side, side);
            let (a, b) = (g.data(c8)?, g.data(c16)?);
            for (i, (&v8, &v16)) in a.iter().zip(b).enumerate() {
                let o = i / (side * side);
                let bound = sums[i % (side * side)] * (m.q[l].1[o].to_f64() / 2.0 + 1.0 / 131072.0) + 1.0;
                let d = (v8.0 as f64 - v16.0 as f64).abs();
                assert!(
                    d <= bound,
                    "layer {l} output {i}: int8 {v8:?} Q16 {v16:?}, bound {bound} LSB"
                );
                worst = worst.max(d / bound);
                let e = (v8.0 as f64 - deq[i]).abs();
                assert!(
                    e <= 1.0,
                    "layer {l} output {i}: int8 {v8:?} vs dequantized f64 {}",
                    deq[i]
                );
            }
            assert_eq!(co * side * side, a.len());
        }
        let (keep, drop) = if int8 { (c8, c16) } else { (c16, c8) };
        g.free(drop)?;
        g.free(y)?;
        let r = g.no_grad().relu_(keep)?;
        y = if l < 2 {
            side /= 2;
            let p = g.no_grad().max_pool2d(r, Pool2dParams::square(2))?;
            g.free(r)?;
            p
        } else {
            r
        };
    }
    let pooled = g.no_grad().adaptive_avg_pool2d(y, [1, 1])?;
    let flat = g.no_grad().flatten(pooled, 1)?;
    let out = g.linear(flat, ext[6], Some(ext[7]))?;
    Ok((g.data(out)?.to_vec(), worst))
}

fn argmax(v: &[Q16]) -> usize {
    (0..v.len())
        .max_by_key(|&k| (v[k].0, usize::MAX - k))
        .unwrap_or(0)
}

#[test]
fn int8_frozen_convs_track_q16_on_w1_pretrained() -> Result<()> {
    let m = Model::load();
    let digits = Digits::load().expect("digits file");
    let (_, held_out) = digits.split();
    let (mut ok16, mut ok8, mut agree, mut worst) = (0, 0, 0, 0.0f64);
    take_saturated();
    for (i, d) in held_out.iter().enumerate() {
        let check = i < 20;
        let (l16, w) = logits(&m, &d.pixels, false, check)?;
        let (l8, _) = logits(&m, &d.pixels, true, false)?;
        worst = worst.max(w);
        let (p16, p8) = (argmax(&l16), argmax(&l8));
        ok16 += (p16 == d.label as usize) as usize;
        ok8 += (p8 == d.label as usize) as usize;
        agree += (p16 == p8) as usize;
    }
    assert!(!take_saturated(), "nothing clamps on W1's real data");
    let n = held_out.len();
    let (a16, a8) = (100.0 * ok16 as f64 / n as f64, 100.0 * ok8 as f64 / n as f64);
    println!(
        "W1 pretrained, {n} held-out 28x28 digits: Q16 convs {a16:.2}%, int8 convs {a8:.2}%, \
         same prediction {agree}/{n}; largest |y8 - y16| / bound on 20 digits: {worst:.3}"
    );
    assert!(a8 >= a16 - 1.0, "int8 {a8:.2}% vs Q16 {a16:.2}%");
    assert!(a16 > 80.0, "the pretrained model works at all ({a16:.2}%)");
    Ok(())
}
