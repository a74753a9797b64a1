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
//!
//! The f32 baseline calls the generic conv kernels (`torchlet::bench::reference`, what
//! thumbv6m's f32 runs) directly, each from a never-inlined function of this program,
//! not through the `Scalar` kernel hooks: how the engine routes f32 to its kernels can
//! change without changing what is measured here (a routing change once made LLVM
//! inline the f32 kernels differently and moved the Q16/f32 ratios by 1-2%). The Q16
//! side goes through the hooks, which is what training runs. The goal (issue 4): each
//! Q16/f32 ratio at least 10 at this program's profile (`--profile m0-bench`, opt-level 2).
//!
//! Runs on QEMU `mps2-an385` (feature `mps2-an385`; SysTick counts as on the MPS2 M4F
//! board): `cargo run --profile m0-bench --target thumbv6m-none-eabi --features mps2-an385
//! --bin m0_kernel_cost`.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use torchlet::bench::{reference as conv, ConvGeom, KernelSet};
use torchlet::{Scalar, Q16};
use torchlet_firmware::counter::measure;
use torchlet_firmware::{code, counter, exit};

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

/// A conv kernel as measured: `(geometry, a, b, out)` in the argument order of
/// forward `(x, w, y)`, backward-input `(gy, w, gx)` and backward-weight `(gy, x, gw)`.
type Kernel<S> = fn(&ConvGeom, &[S], &[S], &mut [S]);

/// The three passes of one scalar type's convolution.
struct Kernels<S: 'static> {
    forward: Kernel<S>,
    backward_input: Kernel<S>,
    backward_weight: Kernel<S>,
}

/// The f32 baseline: the generic kernels, called directly (see the module docs).
const F32_GENERIC: Kernels<f32> = Kernels {
    forward: f32_forward,
    backward_input: f32_backward_input,
    backward_weight: f32_backward_weight,
};

#[inline(never)]
fn f32_forward(g: &ConvGeom, x: &[f32], w: &[f32], y: &mut [f32]) {
    conv::conv2d_forward(g, x, w, None, y)
}

#[inline(never)]
fn f32_backward_input(g: &ConvGeom, gy: &[f32], w: &[f32], gx: &mut [f32]) {
    conv::conv2d_backward_input(g, gy, w, gx)
}

#[inline(never)]
fn f32_backward_weight(g: &ConvGeom, gy: &[f32], x: &[f32], gw: &mut [f32]) {
    conv::conv2d_backward_weight(g, gy, x, gw)
}

/// Q16 as training runs it: the Q16 kernels behind the `Scalar` hooks.
const Q16_HOOKS: Kernels<Q16> = Kernels {
    forward: q16_forward,
    backward_input: q16_backward_input,
    backward_weight: q16_backward_weight,
};

#[inline(never)]
fn q16_forward(g: &ConvGeom, x: &[Q16], w: &[Q16], y: &mut [Q16]) {
    <Q16 as Scalar>::Kernels::conv2d_forward(g, x, w, None, y)
}

#[inline(never)]
fn q16_backward_input(g: &ConvGeom, gy: &[Q16], w: &[Q16], gx: &mut [Q16]) {
    <Q16 as Scalar>::Kernels::conv2d_backward_input(g, gy, w, gx)
}

#[inline(never)]
fn q16_backward_weight(g: &ConvGeom, gy: &[Q16], x: &[Q16], gw: &mut [Q16]) {
    <Q16 as Scalar>::Kernels::conv2d_backward_weight(g, gy, x, gw)
}

/// The generic kernels in Q16, which round every product: the cost before the
/// Q16-specific ones.
const Q16_GENERIC: Kernels<Q16> = Kernels {
    forward: q16_generic_forward,
    backward_input: q16_generic_backward_input,
    backward_weight: q16_generic_backward_weight,
};

#[inline(never)]
fn q16_generic_forward(g: &ConvGeom, x: &[Q16], w: &[Q16], y: &mut [Q16]) {
    conv::conv2d_forward(g, x, w, None, y)
}

#[inline(never)]
fn q16_generic_backward_input(g: &ConvGeom, gy: &[Q16], w: &[Q16], gx: &mut [Q16]) {
    conv::conv2d_backward_input(g, gy, w, gx)
}

#[inline(never)]
fn q16_generic_backward_weight(g: &ConvGeom, gy: &[Q16], x: &[Q16], gw: &mut [Q16]) {
    conv::conv2d_backward_weight(g, gy, x, gw)
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

/// Hundredths of instructions per MAC of forward, backward-input and backward-weight
/// of `k` on geometry `g` of `macs` multiply-accumulates, each pass on fresh operands
/// in `[-scale, scale)` (the Q16 kernels pick their accumulation form from the
/// operands' magnitudes: see the Q16 kernels' module docs).
fn per_mac<S: Scalar>(
    k: &Kernels<S>,
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
    let fwd = measure(|| (k.forward)(&g, x, w, y)).1;
    fill(scale, [&mut *x, &mut *w, &mut *y]);
    let bwi = measure(|| (k.backward_input)(&g, y, w, x)).1;
    fill(scale, [&mut *x, &mut *w, &mut *y]);
    let bww = measure(|| (k.backward_weight)(&g, y, x, w)).1;
    // Scaled by 100 to print two decimals without floats.
    [fwd * 100 / macs, bwi * 100 / macs, bww * 100 / macs]
}

/// Prints one row of three figures in hundredths.
fn show(name: &str, v: [u64; 3]) {
    defmt::println!(
        "{=str} instructions/MAC  forward {=u64}.{=u64:02}  backward-input {=u64}.{=u64:02}  backward-weight {=u64}.{=u64:02}",
        name,
        v[0] / 100,
        v[0] % 100,
        v[1] / 100,
        v[1] % 100,
        v[2] / 100,
        v[2] % 100
    );
}

/// Prints the f32/Q16 ratios in hundredths and returns how many reach the goal (10).
fn show_ratio(f: [u64; 3], q: [u64; 3]) -> usize {
    let r = [0, 1, 2].map(|i| f[i] * 100 / q[i].max(1));
    show("ratio  ", r);
    r.iter().filter(|&&v| v >= 1000).count()
}

#[entry]
fn main() -> ! {
    let cp = cortex_m::Peripherals::take().unwrap_or_else(|| exit(code::ENGINE_ERROR));
    counter::start(cp.SYST);

    let (mut xf, mut wf, mut yf) = ([0f32; 8 * 100], [0f32; 16 * 8 * 9], [0f32; 16 * 64]);
    let (mut xq, mut wq, mut yq) = ([Q16(0); 8 * 100], [Q16(0); 16 * 8 * 9], [Q16(0); 16 * 64]);
    defmt::println!(
        "conv 8->16 3x3 on 10x10 (no padding), {=u64} MACs per pass, thumbv6m",
        MACS
    );
    let f = per_mac(&F32_GENERIC, G, MACS, 1.0, &mut xf, &mut wf, &mut yf);
    let q = per_mac(&Q16_HOOKS, G, MACS, 1.0, &mut xq, &mut wq, &mut yq);
    show("f32    ", f);
    show("q16.16 ", q);
    let mut met = show_ratio(f, q);
    defmt::println!("(ratio = f32 instructions / q16.16 instructions; goal >= 10)");
    let gen = per_mac(&Q16_GENERIC, G, MACS, 1.0, &mut xq, &mut wq, &mut yq);
    show("generic", gen);
    defmt::println!("(generic = the Q16 generic kernels, which round every product)");
    // Operands up to 64 in magnitude: too large for the two-multiply form, so this
    // shows the cost of the three-multiply and wide forms.
    let q64 = per_mac(&Q16_HOOKS, G, MACS, 64.0, &mut xq, &mut wq, &mut yq);
    defmt::println!("operands in [-64, 64) (three-multiply / wide forms):");
    show("q16.16 ", q64);
    met += w1_as_trained();
    defmt::println!("goal: Q16/f32 ratio >= 10 in {=usize} of 12 passes", met);
    exit(code::OK)
}

/// The second workload: W1's convolutions as a 28x28 training step runs them. Returns
/// how many of the nine ratios reach the goal.
fn w1_as_trained() -> usize {
    // Buffers for the largest layer's operands: x of conv2 (8 x 196), w of conv3
    // (32 x 16 x 9), y of conv1 (8 x 784).
    let (mut xf, mut wf, mut yf) = ([0f32; 1568], [0f32; 4608], [0f32; 6272]);
    let (mut xq, mut wq, mut yq) = ([Q16(0); 1568], [Q16(0); 4608], [Q16(0); 6272]);
    let mut met = 0;
    for (name, g) in W1_LAYERS {
        let macs = (g.c_out * g.c_in * 9 * g.oh * g.ow) as u64;
        let (nx, nw, ny) = (g.c_in * g.h * g.w, g.c_out * g.c_in * 9, g.c_out * g.oh * g.ow);
        defmt::println!(
            "{=str} as trained (padding 1), {=u64} MACs per pass (dense count), thumbv6m",
            name,
            macs
        );
        let f = per_mac(
            &F32_GENERIC,
            g,
            macs,
            1.0,
            &mut xf[..nx],
            &mut wf[..nw],
            &mut yf[..ny],
        );
        let q = per_mac(
            &Q16_HOOKS,
            g,
            macs,
            1.0,
            &mut xq[..nx],
            &mut wq[..nw],
            &mut yq[..ny],
        );
        show("f32    ", f);
        show("q16.16 ", q);
        met += show_ratio(f, q);
    }
    met
}
