//! Benchmark (not a test): instructions per multiply-accumulate of the conv kernels on
//! thumbv6m, f32 (soft-float) against Q16.16, counted by SysTick under QEMU
//! `-icount shift=6` (one tick = 40 / 2^6 = 0.625 instructions on the MPS2 boards;
//! SysTick wraps every 2^24 ticks, so a handler counts the wraps).
//!
//! Workloads:
//! - W1's second convolution without padding, so every output has all taps: batch 1,
//!   8 -> 16 channels, 3x3, 10x10 input, 8x8 output = 73,728 MACs per pass. Its
//!   backward-input is a full correlation (padding 2): 36 of the 100 input-gradient
//!   pixels are on the border, where the kernels take their slower edge loops.
//! - W1's three convolutions as a 28x28 training step runs them (padding 1: conv1
//!   1 -> 8 at 28x28, conv2 8 -> 16 at 14x14, conv3 16 -> 32 at 7x7), MACs counted
//!   densely (padding taps included, as PyTorch counts them) and the same for both
//!   types, so each ratio is that of the instructions of the same work.
//!
//! Each pass gets fresh operands in [-1, 1) (W1's weights, activations and loss-scaled
//! gradients were all below 1.4 in magnitude in a measured Q16 run), then once more
//! in [-64, 64) to show the Q16 kernels' slower exact forms for large operands.
#![no_std]
#![no_main]

#[path = "../icount.rs"]
mod icount;

use cortex_m_rt::entry;
use icount::{instructions, start_counter};
use torchlet::kernels::conv::{self, ConvGeom};
use torchlet::{Scalar, Q16};
use torchlet_determinism_m0::exit;

const G: ConvGeom = ConvGeom {
    n: 1,
    c_in: 8,
    h: 10,
    w: 10,
    c_out: 16,
    kh: 3,
    kw: 3,
    oh: 8,
    ow: 8,
    stride: [1, 1],
    pad: [0, 0],
    dil: [1, 1],
    groups: 1,
};
const MACS: u64 = 16 * 8 * 9 * 64;

/// W1's convolutions in a 28x28 training step (padding 1).
const W1_LAYERS: [(&str, ConvGeom); 3] = [
    ("conv1 1->8 28x28", w1_conv(1, 8, 28)),
    ("conv2 8->16 14x14", w1_conv(8, 16, 14)),
    ("conv3 16->32 7x7", w1_conv(16, 32, 7)),
];

/// A W1 convolution: 3x3, padding 1, `c_in -> c_out` on a `side x side` input.
const fn w1_conv(c_in: usize, c_out: usize, side: usize) -> ConvGeom {
    ConvGeom {
        c_in,
        c_out,
        h: side,
        w: side,
        oh: side,
        ow: side,
        pad: [1, 1],
        ..G
    }
}

/// Deterministic data in `[-scale, scale)`: real values, converted by the type's rule.
fn fill<S: Scalar>(scale: f32, bufs: [&mut [S]; 3]) {
    let mut s = 12345u32;
    for buf in bufs {
        for v in buf.iter_mut() {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            *v = S::from_f32(((s >> 8) as f32 / 8_388_608.0 - 1.0) * scale);
        }
    }
}

/// Instructions per MAC of forward, backward-input and backward-weight in `S`, each
/// pass on fresh operands in `[-scale, scale)` (the Q16 kernels pick their
/// accumulation form from the operands' magnitudes: see `torchlet::fixed::conv`).
fn per_mac<S: Scalar>(scale: f32, x: &mut [S], w: &mut [S], y: &mut [S]) -> [u64; 3] {
    per_mac_on(G, MACS, scale, x, w, y)
}

/// [`per_mac`] on geometry `g` of `macs` multiply-accumulates.
fn per_mac_on<S: Scalar>(
    g: ConvGeom,
    macs: u64,
    scale: f32,
    x: &mut [S],
    w: &mut [S],
    y: &mut [S],
) -> [u64; 3] {
    // The sizes reach the kernels as run-time values, as in training (a constant
    // geometry would let the compiler fold index arithmetic into the kernels).
    let g = core::hint::black_box(g);
    fill(scale, [&mut *x, &mut *w, &mut *y]);
    let fwd = instructions(|| S::conv2d_forward(&g, x, w, None, y)).1;
    fill(scale, [&mut *x, &mut *w, &mut *y]);
    let bwi = instructions(|| S::conv2d_backward_input(&g, y, w, x)).1;
    fill(scale, [&mut *x, &mut *w, &mut *y]);
    let bww = instructions(|| S::conv2d_backward_weight(&g, y, x, w)).1;
    // Scaled by 100 to print two decimals without floats.
    [fwd * 100 / macs, bwi * 100 / macs, bww * 100 / macs]
}

fn show(name: &str, v: [u64; 3]) {
    semihosting::println!(
        "{:7} instructions/MAC  forward {}.{:02}  backward-input {}.{:02}  backward-weight {}.{:02}",
        name,
        v[0] / 100,
        v[0] % 100,
        v[1] / 100,
        v[1] % 100,
        v[2] / 100,
        v[2] % 100
    );
}

#[entry]
fn main() -> ! {
    start_counter();

    let (mut xf, mut wf, mut yf) = ([0f32; 8 * 100], [0f32; 16 * 8 * 9], [0f32; 16 * 64]);
    let (mut xq, mut wq, mut yq) = ([Q16(0); 8 * 100], [Q16(0); 16 * 8 * 9], [Q16(0); 16 * 64]);
    semihosting::println!(
        "conv 8->16 3x3 on 10x10 (no padding), {} MACs per pass, thumbv6m",
        MACS
    );
    let f = per_mac(1.0, &mut xf, &mut wf, &mut yf);
    let q = per_mac(1.0, &mut xq, &mut wq, &mut yq);
    show("f32", f);
    show("q16.16", q);
    let ratio = |a: u64, b: u64| a * 100 / b.max(1);
    let r = [ratio(f[0], q[0]), ratio(f[1], q[1]), ratio(f[2], q[2])];
    show("ratio", r);
    semihosting::println!("(ratio = f32 instructions / q16.16 instructions; goal >= 10)");
    // The generic kernels (kernels::conv) in Q16, which round every product: the cost
    // before the Q16-specific ones.
    fill(1.0, [&mut xq[..], &mut wq[..], &mut yq[..]]);
    let g = core::hint::black_box(G);
    let gen = [
        instructions(|| conv::conv2d_forward(&g, &xq, &wq, None, &mut yq)).1,
        {
            fill(1.0, [&mut xq[..], &mut wq[..], &mut yq[..]]);
            instructions(|| conv::conv2d_backward_input(&g, &yq, &wq, &mut xq)).1
        },
        {
            fill(1.0, [&mut xq[..], &mut wq[..], &mut yq[..]]);
            instructions(|| conv::conv2d_backward_weight(&g, &yq, &xq, &mut wq)).1
        },
    ];
    show(
        "generic",
        [gen[0] * 100 / MACS, gen[1] * 100 / MACS, gen[2] * 100 / MACS],
    );
    semihosting::println!("(generic = the Q16 generic kernels, which round every product)");
    // Operands up to 64 in magnitude: too large for the two-multiply form, so this
    // shows the cost of the three-multiply and wide forms.
    let q64 = per_mac(64.0, &mut xq, &mut wq, &mut yq);
    semihosting::println!("operands in [-64, 64) (three-multiply / wide forms):");
    show("q16.16", q64);
    w1_as_trained();
    exit(0)
}

/// The second workload: W1's convolutions as a 28x28 training step runs them.
fn w1_as_trained() {
    // Buffers for the largest layer's operands: x of conv2 (8 x 196), w of conv3
    // (32 x 16 x 9), y of conv1 (8 x 784).
    let (mut xf, mut wf, mut yf) = ([0f32; 1568], [0f32; 4608], [0f32; 6272]);
    let (mut xq, mut wq, mut yq) = ([Q16(0); 1568], [Q16(0); 4608], [Q16(0); 6272]);
    for (name, g) in W1_LAYERS {
        let macs = (g.c_out * g.c_in * 9 * g.oh * g.ow) as u64;
        let (nx, nw, ny) = (g.c_in * g.h * g.w, g.c_out * g.c_in * 9, g.c_out * g.oh * g.ow);
        semihosting::println!(
            "{} as trained (padding 1), {} MACs per pass (dense count), thumbv6m",
            name,
            macs
        );
        let f = per_mac_on(g, macs, 1.0, &mut xf[..nx], &mut wf[..nw], &mut yf[..ny]);
        let q = per_mac_on(g, macs, 1.0, &mut xq[..nx], &mut wq[..nw], &mut yq[..ny]);
        show("f32", f);
        show("q16.16", q);
        let ratio = |a: u64, b: u64| a * 100 / b.max(1);
        show("ratio", [ratio(f[0], q[0]), ratio(f[1], q[1]), ratio(f[2], q[2])]);
    }
}
