//! Instructions per multiply-accumulate of the f32 convolution kernels on the
//! Cortex-M4F (QEMU `mps2-an386` with `-icount`, counted on SysTick; see
//! `src/counter.rs`). For each convolution of W1 at 28x28 it times forward,
//! backward-input and backward-weight through the `Scalar` kernel hooks (what the
//! engine calls) and divides by the nominal MACs `c_out * c_in * 3 * 3 * oh * ow`
//! (padding taps included, as in GUIDE.md's 0.51 M MACs). The ideal on the M4F is
//! about one `VFMA.F32` per MAC plus loads; the issue-8 goal is <= 2.5.
//!
//! Every timed convolution, and a few odd shapes (partial channel blocks and tiles,
//! odd rows, grouped 1x1), is also run with the generic reference kernels: the
//! program fails when the forward results differ or the gradients differ beyond
//! rounding, which checks the kernels' inline assembly (the host tests check the same
//! loops written in Rust). It also fails on a broken counter (the calibration loop must
//! count within 1% of its known instructions).
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use torchlet::bench::{ConvGeom, KernelSet, Reference};
use torchlet::Scalar;
use torchlet_firmware::{code, counter, exit};

const MAX_IN: usize = 16 * 28 * 28;
const MAX_OUT: usize = 32 * 28 * 28;
const MAX_W: usize = 32 * 16 * 9;
static mut X: [f32; MAX_IN] = [0.0; MAX_IN];
static mut Y: [f32; MAX_OUT] = [0.0; MAX_OUT];
static mut W: [f32; MAX_W] = [0.0; MAX_W];
static mut B: [f32; 32] = [0.0; 32];
// The reference kernels' copies of the same data.
static mut XR: [f32; MAX_IN] = [0.0; MAX_IN];
static mut YR: [f32; MAX_OUT] = [0.0; MAX_OUT];
static mut WR: [f32; MAX_W] = [0.0; MAX_W];

/// The buffers of one run: data, outputs and weights for the kernels under test and
/// for the reference kernels, and the biases.
struct Bufs<'a> {
    x: &'a mut [f32],
    y: &'a mut [f32],
    w: &'a mut [f32],
    xr: &'a mut [f32],
    yr: &'a mut [f32],
    wr: &'a mut [f32],
    b: &'a [f32],
}

/// A stride-1 `k x k` convolution keeping the size (padding `k / 2`).
fn geom(c_in: usize, c_out: usize, hw: usize, k: usize, groups: usize) -> ConvGeom {
    geom_hw(c_in, c_out, [hw, hw], k, groups)
}

/// [`geom`] for `h x w` planes.
fn geom_hw(c_in: usize, c_out: usize, [h, w]: [usize; 2], k: usize, groups: usize) -> ConvGeom {
    ConvGeom {
        n: 1,
        c_in,
        h,
        w,
        c_out,
        kh: k,
        kw: k,
        oh: h,
        ow: w,
        stride: [1, 1],
        pad: [k / 2, k / 2],
        dil: [1, 1],
        groups,
    }
}

/// Times forward, backward-input and backward-weight of `g` (printing each pass's
/// instructions per MAC when `print`), runs the same passes with the reference kernels
/// on copies of the data and fails the program on a mismatch; returns (instructions,
/// MACs) of the three passes.
fn bench(name: &str, g: &ConvGeom, bufs: &mut Bufs, print: bool) -> (u64, u64) {
    let cin_g = g.c_in / g.groups;
    let (ni, no, nw) = (
        g.c_in * g.h * g.w,
        g.c_out * g.oh * g.ow,
        g.c_out * cin_g * g.kh * g.kw,
    );
    let macs = (nw * g.oh * g.ow) as u64;
    let (xs, ys, ws) = (&mut bufs.x[..ni], &mut bufs.y[..no], &mut bufs.w[..nw]);
    let (xr, yr, wr) = (&mut bufs.xr[..ni], &mut bufs.yr[..no], &mut bufs.wr[..nw]);
    let b = &bufs.b[..g.c_out];
    // Fresh data for every shape (the passes before added gradients to them).
    fill(xs, ws);
    xr.copy_from_slice(xs);
    wr.copy_from_slice(ws);

    let t = counter::instructions();
    <f32 as Scalar>::Kernels::conv2d_forward(g, xs, ws, Some(b), ys);
    let fwd = counter::instructions() - t;

    let t = counter::instructions();
    <f32 as Scalar>::Kernels::conv2d_backward_input(g, ys, ws, xs);
    let bwi = counter::instructions() - t;

    let t = counter::instructions();
    <f32 as Scalar>::Kernels::conv2d_backward_weight(g, ys, xs, ws);
    let bww = counter::instructions() - t;

    Reference::conv2d_forward(g, xr, wr, Some(b), yr);
    let fwd_equal = ys == yr;
    Reference::conv2d_backward_input(g, yr, wr, xr);
    let dx = max_difference(xs, xr);
    Reference::conv2d_backward_weight(g, yr, xr, wr);
    let dw = max_difference(ws, wr);
    // The tests' bound (`core` `m_f32::tests`): 1e-4 relative, widened for long sums.
    let bound = 1e-4 * (g.n * g.oh * g.ow) as f32 / 1000.0;
    if !fwd_equal || dx > 1e-4 || dw > bound.max(1e-4) {
        defmt::error!(
            "FAIL: {=str}: the kernels differ from the generic ones (forward equal: {=bool}, backward-input {=f32}, backward-weight {=f32})",
            name,
            fwd_equal,
            dx,
            dw
        );
        exit(code::CHECK_FAILED);
    }
    if !print {
        return (0, 0);
    }
    defmt::info!(
        "{=str}: results equal the generic kernels (forward) and agree to {=f32} (backward-input), {=f32} (backward-weight)",
        name,
        dx,
        dw
    );
    for (pass, instr) in [
        ("forward", fwd),
        ("backward-input", bwi),
        ("backward-weight", bww),
    ] {
        let r = per_mac_x100(instr, macs);
        defmt::info!(
            "{=str} {=str}: {=u64} MACs, {=u64} instructions, {=u64}.{=u64:02} instructions/MAC",
            name,
            pass,
            macs,
            instr,
            r / 100,
            r % 100
        );
    }
    (fwd + bwi + bww, 3 * macs)
}

/// Deterministic data in [-0.5, 0.5).
fn fill(x: &mut [f32], w: &mut [f32]) {
    for (i, v) in x.iter_mut().enumerate() {
        *v = ((i * 7919) % 255) as f32 / 255.0 - 0.5;
    }
    for (i, v) in w.iter_mut().enumerate() {
        *v = ((i * 104_729) % 97) as f32 / 97.0 - 0.5;
    }
}

/// The largest difference between `got` and `want`, relative to `1 + |want|`.
fn max_difference(got: &[f32], want: &[f32]) -> f32 {
    got.iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs() / (1.0 + b.abs()))
        .fold(0.0, f32::max)
}

/// Hundredths of instructions per MAC, for printing without float formatting.
fn per_mac_x100(instr: u64, macs: u64) -> u64 {
    (instr * 100 + macs / 2) / macs.max(1)
}

#[entry]
fn main() -> ! {
    let cp = cortex_m::Peripherals::take().unwrap_or_else(|| exit(code::ENGINE_ERROR));
    counter::start(cp.SYST);

    // Calibration: `delay(n)` runs n + 1 iterations of `subs` + `bne`.
    let t = counter::instructions();
    cortex_m::asm::delay(1_000_000);
    let cal = counter::instructions() - t;
    defmt::info!(
        "calibration: delay loop of 2000002 instructions counted {=u64}",
        cal
    );
    if cal.abs_diff(2_000_002) > 20_000 {
        defmt::error!("FAIL: the instruction counter is off (is QEMU running with -icount shift=6?)");
        exit(code::CHECK_FAILED);
    }

    // SAFETY: the only references to these statics, taken once.
    #[allow(static_mut_refs)]
    let (x, y, w, b) = unsafe { (&mut X[..], &mut Y[..], &mut W[..], &mut B[..]) };
    // SAFETY: as above.
    #[allow(static_mut_refs)]
    let (xr, yr, wr) = unsafe { (&mut XR[..], &mut YR[..], &mut WR[..]) };
    for (i, v) in b.iter_mut().enumerate() {
        *v = (i % 5) as f32 / 5.0 - 0.4;
    }
    let mut bufs = Bufs {
        x,
        y,
        w,
        xr,
        yr,
        wr,
        b,
    };
    let (mut tot_instr, mut tot_macs) = (0u64, 0u64);
    for (name, c_in, c_out, hw) in [
        ("conv1 1->8 28x28", 1, 8, 28),
        ("conv2 8->16 14x14", 8, 16, 14),
        ("conv3 16->32 7x7", 16, 32, 7),
    ] {
        let (i, m) = bench(name, &geom(c_in, c_out, hw, 3, 1), &mut bufs, true);
        tot_instr += i;
        tot_macs += m;
    }
    let r = per_mac_x100(tot_instr, tot_macs);
    defmt::info!(
        "all W1 conv passes at 28x28: {=u64} MACs, {=u64} instructions, {=u64}.{=u64:02} instructions/MAC (ideal ~1 FMA/MAC; goal <= 2.5)",
        tot_macs,
        tot_instr,
        r / 100,
        r % 100
    );
    // MobileNet-style layers (W2's sizes): a depthwise 3x3 and a pointwise 1x1.
    for (name, g, goal) in [
        ("depthwise 3x3 32ch 14x14", geom(32, 32, 14, 3, 32), "3.5"),
        ("pointwise 1x1 16->32 14x14", geom(16, 32, 14, 1, 1), "2.0"),
    ] {
        let (i, m) = bench(name, &g, &mut bufs, true);
        let r = per_mac_x100(i, m);
        defmt::info!(
            "{=str}, all three passes: {=u64}.{=u64:02} instructions/MAC (goal <= {=str})",
            name,
            r / 100,
            r % 100,
            goal
        );
    }
    // Shapes that take the tiles' other branches, checked only: blocks of fewer than 4
    // channels, positions and columns not a multiple of 4, an odd last row, groups.
    for (name, g) in [
        ("depthwise 3x3 5ch 13x11", geom_hw(5, 5, [13, 11], 3, 5)),
        ("depthwise 3x3 3ch 9x3", geom_hw(3, 3, [9, 3], 3, 3)),
        ("pointwise 1x1 6->5 9x7", geom_hw(6, 5, [9, 7], 1, 1)),
        ("pointwise 1x1 9->7 5x5", geom_hw(9, 7, [5, 5], 1, 1)),
        ("pointwise 1x1 8->6 groups 2 6x6", geom_hw(8, 6, [6, 6], 1, 2)),
    ] {
        bench(name, &g, &mut bufs, false);
    }
    defmt::info!("odd shapes: results match the generic kernels");
    defmt::info!("DONE kernel_bench");
    exit(code::OK)
}
