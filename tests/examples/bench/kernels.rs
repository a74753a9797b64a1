//! The benchmark's conv2d kernel table: W1's three convolutions and MobileNet-like
//! depthwise and pointwise ones, each kernel (forward, backward-input,
//! backward-weight) generic, portable and `f32`'s own, in GFLOP/s and % of the
//! measured peak.

use super::peak::{fma16_with_loads_gflops, store16_us};
use super::tiles::tile_gflops;
use super::{median_us, Out};
use std::hint::black_box;
use torchlet::bench::{reference as conv, ConvGeom, KernelSet, F32};

/// A convolution's multiply-add count (x2) and fixed, varied operands: input, weight
/// and output gradient.
pub struct ConvData {
    pub flops: f64,
    pub x: Vec<f32>,
    pub wt: Vec<f32>,
    pub gy: Vec<f32>,
}

impl ConvData {
    pub fn new(g: &ConvGeom) -> Self {
        let fill = |len: usize, m: usize, off: f32| (0..len).map(|i| (i % m) as f32 * 0.1 - off).collect();
        ConvData {
            flops: 2.0 * (g.n * g.c_out * g.oh * g.ow * g.c_in / g.groups * g.kh * g.kw) as f64,
            x: fill(g.n * g.c_in * g.h * g.w, 13, 0.6),
            wt: fill(g.c_out * g.c_in / g.groups * g.kh * g.kw, 7, 0.3),
            gy: fill(g.n * g.c_out * g.oh * g.ow, 5, 0.2),
        }
    }
}

/// W1's three convolutions at batch `n` and 28x28 input.
fn w1_convs(n: usize) -> [(&'static str, ConvGeom); 3] {
    let geom = |c_in, c_out, hw| ConvGeom {
        n,
        c_in,
        h: hw,
        w: hw,
        c_out,
        kh: 3,
        kw: 3,
        oh: hw,
        ow: hw,
        stride: [1, 1],
        pad: [1, 1],
        dil: [1, 1],
        groups: 1,
    };
    [
        ("conv1 1->8 28x28", geom(1, 8, 28)),
        ("conv2 8->16 14x14", geom(8, 16, 14)),
        ("conv3 16->32 7x7", geom(16, 32, 7)),
    ]
}

/// MobileNet-like depthwise 3x3 and pointwise (1x1) convolutions at batch `n`, 14x14.
fn mobile_convs(n: usize) -> [(&'static str, ConvGeom); 3] {
    let geom = |c_in, c_out, k, groups| ConvGeom {
        n,
        c_in,
        h: 14,
        w: 14,
        c_out,
        kh: k,
        kw: k,
        oh: 14,
        ow: 14,
        stride: [1, 1],
        pad: [k / 2, k / 2],
        dil: [1, 1],
        groups,
    };
    [
        ("dw3x3 32ch 14x14", geom(32, 32, 3, 32)),
        ("dw3x3 16ch 14x14", geom(16, 16, 3, 16)),
        ("pw1x1 16->32 14x14", geom(16, 32, 1, 1)),
    ]
}

type ConvKernel = fn(&ConvGeom, &[f32], &[f32], &mut [f32]);

pub fn kernel_table(out: &mut Out, peak: f64, quick: bool) {
    use torchlet::bench::portable as fast;
    let fwd_generic: ConvKernel = |g, x, w, y| conv::conv2d_forward(g, x, w, None, y);
    let fwd_portable: ConvKernel = |g, x, w, y| fast::conv2d_forward_portable(g, x, w, None, y);
    let fwd_f32: ConvKernel = |g, x, w, y| F32::conv2d_forward(g, x, w, None, y);
    // Generic, portable tiled (this build's SIMD), and what `f32` uses (AVX2 + FMA
    // when the CPU has it).
    let kernels: [(&str, ConvKernel, ConvKernel, ConvKernel); 3] = [
        ("forward", fwd_generic, fwd_portable, fwd_f32),
        (
            "backward-input",
            conv::conv2d_backward_input,
            fast::conv2d_backward_input_portable,
            F32::conv2d_backward_input,
        ),
        (
            "backward-weight",
            conv::conv2d_backward_weight,
            fast::conv2d_backward_weight_portable,
            F32::conv2d_backward_weight,
        ),
    ];
    out.line(format!(
        "\nconv2d kernels (GFLOP/s of thread CPU time; % of measured peak {peak:.1} GFLOP/s)"
    ));
    for split in [false, true] {
        let mixes = (
            fma16_with_loads_gflops::<3, 8>(split),
            fma16_with_loads_gflops::<8, 0>(split),
            fma16_with_loads_gflops::<11, 0>(split),
        );
        if let (Some(b8), Some(l8), Some(l11)) = mixes {
            let pc = |g: f64| 100.0 * g / peak;
            let lines = if split {
                "each load across two cache lines"
            } else {
                "loads aligned to cache lines"
            };
            out.line(format!(
                "the same multiply-adds fed from L1 per 24 ({lines}): 3 vector loads + 8 broadcasts {b8:.1} GFLOP/s ({:.0}%), 8 vector loads {l8:.1} ({:.0}%), 11 vector loads {l11:.1} ({:.0}%)",
                pc(b8),
                pc(l8),
                pc(l11)
            ));
        }
    }
    if let (Some(t9), Some(t72)) = (tile_gflops::<9>(), tile_gflops::<72>()) {
        out.line(format!(
            "conv1 forward's tile shape alone (8 channels x 3 vectors of sums, per tap 3 aligned loads + 8 broadcasts, 24 stores per tile, all in L1): 9 taps per tile {t9:.1} GFLOP/s ({:.0}%), 72 taps {t72:.1} ({:.0}%)",
            100.0 * t9 / peak,
            100.0 * t72 / peak
        ));
    }
    let (_, c1) = &w1_convs(32)[0];
    let words = c1.n * c1.c_out * c1.oh * c1.ow;
    if let Some(us) = store16_us(words) {
        out.line(format!(
            "writing conv1's batch-32 output alone ({} bytes, 16-lane stores, cache-resident): {us:.1} µs ({:.1} GB/s); its forward's multiply-adds take {:.1} µs at the peak",
            4 * words,
            4.0 * words as f64 / us / 1e3,
            2.0 * 9.0 * words as f64 / peak / 1e3
        ));
    }
    out.line(
        "GFLOP/s count a direct convolution's multiply-adds; where the f32 kernel is Winograd F(2x2,3x3) \
         (3x3 stride 1: forward and backward-input on planes under 8 wide, or 16 with AVX-512F, at batch >= 8, \
         conv3 and with AVX-512F conv2 at batch 32; backward-weight with >= 8 channels in and out, conv2 and conv3 at batch 32, conv2 at batch 1) \
         the rate is effective",
    );
    out.line(format!(
        "{:<20} {:>5} {:<16} {:>8} {:>7} {:>9} {:>7} {:>8} {:>7} {:>8}",
        "layer", "batch", "kernel", "generic", "%peak", "portable", "%peak", "f32", "%peak", "speedup"
    ));
    for n in [1usize, 32] {
        for (name, g) in w1_convs(n).into_iter().chain(mobile_convs(n)) {
            let ConvData { flops, x, wt, gy } = ConvData::new(&g);
            let iters = if quick {
                20
            } else {
                // At least 100 calls: the median of fewer swung with a neighbour's load.
                (20_000_000.0 / flops).clamp(100.0, 5000.0) as usize
            };
            for (kname, generic, portable, special) in kernels {
                let run = |k: ConvKernel| {
                    let (a, b, mut out) = match kname {
                        "forward" => (&x, &wt, vec![0.0f32; gy.len()]),
                        "backward-input" => (&gy, &wt, vec![0.0f32; x.len()]),
                        _ => (&gy, &x, vec![0.0f32; wt.len()]),
                    };
                    let us = median_us(iters, || k(&g, black_box(a), black_box(b), black_box(&mut out))).cpu;
                    flops / us / 1e3
                };
                let (gg, gp, gs) = (run(generic), run(portable), run(special));
                out.line(format!(
                    "{:<20} {:>5} {:<16} {:>8.2} {:>6.1}% {:>9.2} {:>6.1}% {:>8.2} {:>6.1}% {:>7.1}x",
                    name,
                    n,
                    kname,
                    gg,
                    100.0 * gg / peak,
                    gp,
                    100.0 * gp / peak,
                    gs,
                    100.0 * gs / peak,
                    gs / gg
                ));
            }
        }
    }
}
