//! On-device fine-tuning on a Cortex-M0 in Q16.16 fixed point, within the micro:bit's
//! 16 KiB of RAM (QEMU `microbit`, `thumbv6m-none-eabi`).
//!
//! - W1's frozen convolutions (int8 weights quantized per output channel, with their
//!   scales and Q16 biases: 6,280 bytes) run in place from flash (`conv2d_q8`); only
//!   the classifier head (linear 32->10, weight and bias, Q16) is trained, with fused
//!   SGD (`src/w1_head.rs`).
//! - The arena is one static buffer (`m0_recipe::ARENA_BYTES`); nothing is allocated.
//! - Each digit is used at its native size when the meta plan of its training step fits
//!   the arena, otherwise resized in the graph to the largest size that fits (the
//!   planner's answer); the program reports how many needed it, and skips (never
//!   faults on) a sample for which nothing fits.
//! - The stack is painted at boot; at the end the program reports static RAM + stack
//!   high-water and fails if they reach 16 KiB. It exits 0 only when held-out accuracy
//!   rose by [`MARGIN_POINTS`], every step's real arena high-water equalled its plan,
//!   and the RAM check held.
#![no_std]
#![no_main]

use core::ptr::addr_of_mut;
use cortex_m_rt::entry;
use defmt::intern;
use torchlet::fixed::{QConv2dWeights, QScale};
use torchlet::{Error, Graph, Q16};
use torchlet_firmware::m0_recipe::{ARENA_BYTES, EPOCHS, LR};
use torchlet_firmware::w1_head::{
    evaluate, input_size, train_epoch, Frozen, HeadModel, PassStats, SizeTable, CONV_DIMS, TAPE_M0,
};
use torchlet_firmware::{assets::Samples, finish, stack};

#[path = "../small_div.rs"]
mod small_div;
#[path = "../small_mem.rs"]
mod small_mem;

/// The pretrained weights as statics in flash (`tests/examples/export_m0_assets.rs`):
/// int8 frozen convolutions, Q16 biases and head.
mod w1_q8 {
    use torchlet::fixed::QScale;
    use torchlet::Q16;
    include!("../../assets/w1_q8.rs");
}

static SAMPLES: &[u8] = include_bytes!("../../assets/digits_m0.bin");

/// A frozen 3x3 convolution's statics, checked when the program compiles (a length
/// or scale that does not fit its dims stops the build, never the device).
const fn frozen(
    dims: [usize; 4],
    q: &'static [i8],
    s: &'static [QScale],
    b: &'static [Q16],
) -> QConv2dWeights<'static> {
    match QConv2dWeights::new(dims, q, s, Some(b)) {
        Ok(w) => w,
        Err(_) => panic!("frozen convolution statics do not match their dims"),
    }
}

static FROZEN: Frozen<'static> = Frozen {
    conv: [
        frozen(CONV_DIMS[0], &w1_q8::CONV1_Q, &w1_q8::CONV1_S, &w1_q8::CONV1_B),
        frozen(CONV_DIMS[1], &w1_q8::CONV2_Q, &w1_q8::CONV2_S, &w1_q8::CONV2_B),
        frozen(CONV_DIMS[2], &w1_q8::CONV3_Q, &w1_q8::CONV3_S, &w1_q8::CONV3_B),
    ],
    head: [&w1_q8::FC_W, &w1_q8::FC_B],
};
static mut ARENA: [Q16; ARENA_BYTES / 4] = [Q16(0); ARENA_BYTES / 4];

/// Held-out accuracy must rise by at least this many percentage points.
const MARGIN_POINTS: usize = 20;

fn log_pass(what: &str, st: &PassStats) {
    defmt::info!(
        "{=str}: {=usize}/{=usize} correct, {=usize} resized to fit, {=usize} skipped",
        what,
        st.correct,
        st.n,
        st.resized,
        st.skipped
    );
}

fn run() -> Result<bool, Error> {
    if !small_mem::self_check() {
        defmt::error!("memcpy/memmove/memclr self-check failed");
        return Ok(false);
    }
    if !small_div::self_check() {
        defmt::error!("integer division self-check failed");
        return Ok(false);
    }
    let samples = Samples::parse(SAMPLES)?;
    defmt::info!(
        "samples: {=usize} fine-tuning + {=usize} held-out cropped digits, {=usize} bytes of flash",
        samples.n_finetune,
        samples.n_heldout,
        SAMPLES.len()
    );
    // Plan every distinct size once, before the real graph exists.
    let sizes = SizeTable::build(&FROZEN, LR, samples.iter(), ARENA_BYTES, |p| match p.target {
        Some((h, w)) => defmt::info!(
            "plan {=u8}x{=u8}: used at {=u8}x{=u8}, {=u32} arena bytes",
            p.native.0,
            p.native.1,
            h,
            w,
            p.step_bytes
        ),
        None => defmt::warn!(
            "plan {=u8}x{=u8}: no valid size fits the arena",
            p.native.0,
            p.native.1
        ),
    })?;
    defmt::info!("{=usize} distinct sample sizes planned", sizes.len());
    // A sample too large for any valid size (its native input alone needs more than
    // the arena) would be skipped: the planner says so, nothing faults.
    let big = (200, 200);
    let big_ok = match input_size::<TAPE_M0>(&FROZEN, LR, big, ARENA_BYTES) {
        None => {
            defmt::info!(
                "a {=usize}x{=usize} sample would be skipped: the planner finds no size that fits the arena",
                big.0,
                big.1
            );
            true
        }
        Some((h, w)) => {
            defmt::error!(
                "the planner fitted a {=usize}x{=usize} sample at {=usize}x{=usize}?",
                big.0,
                big.1,
                h,
                w
            );
            false
        }
    };
    let plan_stack = stack::high_water();
    defmt::info!(
        "stack high-water while planning: {=usize} bytes (a graph of {=usize} records is {=usize} bytes)",
        plan_stack,
        TAPE_M0,
        core::mem::size_of::<Graph<'static, Q16, TAPE_M0>>()
    );
    stack::paint(); // measure the training phase afresh
    Ok(train(&sizes, &samples, plan_stack)? && big_ok)
}

/// The integer part of a non-negative loss (printed without float: no soft-float
/// code is linked into the M0 program).
fn int(q: Q16) -> u32 {
    q.raw().max(0) as u32 >> 16
}

/// Its first four decimals, truncated.
fn frac4(q: Q16) -> u32 {
    ((q.raw().max(0) as u32 & 0xFFFF) * 10_000) >> 16
}

/// Fine-tunes and evaluates (the real graph lives in this frame only).
#[inline(never)]
fn train(sizes: &SizeTable, samples: &Samples<'static>, plan_stack: usize) -> Result<bool, Error> {
    // SAFETY: the only reference ever made to ARENA, taken once here.
    let arena: &'static mut [Q16] = unsafe { &mut *addr_of_mut!(ARENA) };
    let mut g: Graph<'static, Q16, TAPE_M0> = Graph::new(arena);
    let m = HeadModel::new(&mut g, &FROZEN, LR)?;
    let frozen_bytes = FROZEN.conv_bytes();
    defmt::info!(
        "arena {=usize} bytes (static), head {=usize} bytes in it; frozen int8 convolutions {=usize} bytes read in place from flash",
        g.arena().capacity_bytes(),
        g.arena().persistent_bytes(),
        frozen_bytes
    );

    let before = evaluate(&m, &mut g, sizes, samples.heldout())?;
    log_pass("held-out before", &before);
    let (mut mismatch, mut high, mut resized, mut skipped, mut saturated) = (0, 0, 0, 0, 0);
    for epoch in 1..=EPOCHS {
        let st = train_epoch(&m, &mut g, sizes, samples.finetune(), |i, s, step| {
            match step {
            Some(t) => defmt::info!(
                "epoch {=usize} step {=usize} {=usize}x{=usize} used at {=usize}x{=usize}: loss {=u32}.{=u32:04}, arena {=usize} bytes (plan {=usize})",
                epoch, i, s.h, s.w, t.target.0, t.target.1, int(t.loss), frac4(t.loss), t.high_water, t.planned
            ),
            None => defmt::warn!("sample {=usize} {=usize}x{=usize} skipped: no valid size fits the arena", i, s.h, s.w),
        }
        })?;
        let acc = evaluate(&m, &mut g, sizes, samples.heldout())?;
        let mean = Q16((st.loss_sum / st.n.max(1) as i64) as i32);
        defmt::info!(
            "epoch {=usize}: mean loss {=u32}.{=u32:04}, {=usize}/{=usize} samples resized to fit, held-out accuracy {=usize}/{=usize}",
            epoch,
            int(mean),
            frac4(mean),
            st.resized,
            st.n,
            acc.correct,
            acc.n
        );
        mismatch += st.plan_mismatch;
        high = high.max(st.high_water);
        resized = st.resized;
        skipped += st.skipped;
        saturated += st.saturated;
    }
    let after = evaluate(&m, &mut g, sizes, samples.heldout())?;
    log_pass("held-out after", &after);
    defmt::info!(
        "fine-tuning samples resized to fit: {=usize}/{=usize}, held-out: {=usize}/{=usize}; skipped: {=usize}; steps with Q16 saturation: {=usize}",
        resized,
        samples.n_finetune,
        after.resized,
        after.n,
        skipped,
        saturated
    );
    defmt::info!(
        "arena: {=usize} bytes, real high-water {=usize} bytes; steps whose high-water differed from the plan: {=usize}",
        g.arena().capacity_bytes(),
        high,
        mismatch
    );
    defmt::info!(
        "stack high-water while training: {=usize} bytes",
        stack::high_water()
    );
    let ram_ok = stack::report_ram(stack::high_water().max(plan_stack));
    defmt::info!(
        "held-out accuracy: before {=usize}/{=usize}, after {=usize}/{=usize} (required: +{=usize} points)",
        before.correct,
        before.n,
        after.correct,
        after.n,
        MARGIN_POINTS
    );
    let improved = after.correct * 100 >= before.correct * 100 + MARGIN_POINTS * after.n;
    Ok(improved && mismatch == 0 && ram_ok)
}

#[entry]
fn main() -> ! {
    stack::paint();
    finish(
        intern!("finetune_m0"),
        intern!("accuracy margin, plan or RAM check failed"),
        run(),
    )
}
