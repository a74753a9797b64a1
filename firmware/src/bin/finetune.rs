//! On-device fine-tuning on the Cortex-M4F (f32, QEMU `mps2-an386`).
//!
//! - Loads W1 weights pretrained on the host on 28x28 digits only (flash,
//!   `assets/w1_pretrained.tlw`, checksum verified).
//! - Plans the arena per input size with the meta graph, takes exactly the largest
//!   plan from the heap at boot, and allocates nothing afterwards.
//! - Fine-tunes (batch 1, SGD with momentum) on real digits cropped to their ink's
//!   bounding box at their native, varying sizes (flash, `assets/digits_cropped.bin`),
//!   logging loss, instructions and the arena's real high-water mark per step.
//! - Measures held-out accuracy on cropped digits before and after, and exits 0 only
//!   when it rose by at least [`MARGIN_POINTS`] percentage points.
#![no_std]
#![no_main]

extern crate alloc;

use core::mem::MaybeUninit;
use cortex_m_rt::entry;
use torchlet::{Error, Graph};
use torchlet_firmware::assets::{Sample, Samples};
use torchlet_firmware::heap::CountingHeap;
use torchlet_firmware::w1::{plan_step, Model, Recipe, TAPE};
use torchlet_firmware::{code, counter, exit, weights};

static WEIGHTS: &[u8] = include_bytes!("../../assets/w1_pretrained.tlw");
static SAMPLES: &[u8] = include_bytes!("../../assets/digits_cropped.bin");

/// The recipe the host exporter simulates (`tests/examples/export_firmware_assets.rs`).
const RECIPE: Recipe = Recipe {
    lr: 0.005,
    momentum: 0.9,
};
const EPOCHS: usize = 2;
/// Held-out accuracy must rise by at least this many percentage points.
const MARGIN_POINTS: usize = 20;

const HEAP_BYTES: usize = 256 * 1024;
#[global_allocator]
static HEAP: CountingHeap = CountingHeap::empty();
static mut HEAP_MEM: [MaybeUninit<u8>; HEAP_BYTES] = [MaybeUninit::uninit(); HEAP_BYTES];

/// Whether `s` is the first sample of its size (so each size is planned once).
fn first_of_size(samples: &Samples, i: usize, s: &Sample) -> bool {
    !samples.iter().take(i).any(|t| (t.h, t.w) == (s.h, s.w))
}

/// Min / max / total instructions of the training steps, with the sizes of the extremes.
#[derive(Default)]
struct StepStats {
    n: u64,
    total: u64,
    min: (u64, usize, usize),
    max: (u64, usize, usize),
}

impl StepStats {
    fn add(&mut self, instr: u64, h: usize, w: usize) {
        if self.n == 0 || instr < self.min.0 {
            self.min = (instr, h, w);
        }
        if instr > self.max.0 {
            self.max = (instr, h, w);
        }
        self.n += 1;
        self.total += instr;
    }
}

fn run() -> Result<bool, Error> {
    let samples = Samples::parse(SAMPLES)?;
    defmt::info!(
        "samples: {=usize} fine-tuning + {=usize} held-out cropped digits, {=usize} bytes of flash",
        samples.n_finetune,
        samples.n_heldout,
        SAMPLES.len()
    );

    // Plan every input size once, on the meta graph; the arena is the largest plan.
    let (mut largest, mut sizes) = (0usize, 0usize);
    let t0 = counter::instructions();
    for (i, s) in samples.iter().enumerate() {
        if first_of_size(&samples, i, &s) {
            let bytes = plan_step::<TAPE>(s.h, s.w, RECIPE, usize::MAX)?;
            defmt::info!("plan {=usize}x{=usize}: {=usize} arena bytes", s.h, s.w, bytes);
            largest = largest.max(bytes);
            sizes += 1;
        }
    }
    let plan_instr = counter::instructions() - t0;
    defmt::info!(
        "arena plan: {=usize} input sizes, largest step needs {=usize} bytes ({=u64} instructions per plan)",
        sizes,
        largest,
        plan_instr / sizes.max(1) as u64
    );

    // The one allocation: the arena, as large as the plan says.
    let arena: &'static mut [f32] = alloc::vec![0.0f32; largest / 4].leak();
    let mut g: Graph<f32, TAPE> = Graph::new(arena);
    let mut model = Model::new(&mut g, RECIPE)?;
    weights::load(&mut g, WEIGHTS)?;
    defmt::info!(
        "loaded {=usize} weight bytes from flash (CRC-32 ok), fingerprint {=u32:#x}",
        WEIGHTS.len(),
        weights::fingerprint(&g)
    );

    let (before, n_test) = model.correct(&mut g, samples.heldout())?;
    defmt::info!("held-out accuracy before: {=usize}/{=usize}", before, n_test);

    let mut stats = StepStats::default();
    let (mut skipped, mut plan_mismatch, mut real_high) = (0usize, 0usize, 0usize);
    let cap = g.arena().capacity_bytes();
    for epoch in 1..=EPOCHS {
        let mut loss_sum = 0.0f32;
        for (i, s) in samples.finetune().enumerate() {
            // Ask the planner first: a sample the arena cannot hold is skipped.
            let planned = match plan_step::<TAPE>(s.h, s.w, RECIPE, cap) {
                Ok(b) => b,
                Err(e) => {
                    defmt::warn!("sample {=usize} {=usize}x{=usize} skipped: {}", i, s.h, s.w, e);
                    skipped += 1;
                    continue;
                }
            };
            g.reset_high_water();
            let t = counter::instructions();
            let step = model.train_step(&mut g, (s.h, s.w), s.label as usize, |d| s.fill(d));
            let instr = counter::instructions() - t;
            let high = g.arena().high_water_bytes();
            match step {
                Ok(loss) => {
                    loss_sum += loss;
                    stats.add(instr, s.h, s.w);
                    plan_mismatch += (high != planned) as usize;
                    real_high = real_high.max(high);
                    defmt::info!(
                        "epoch {=usize} step {=usize} {=usize}x{=usize}: loss {=f32}, {=u64} instructions, arena {=usize} bytes (plan {=usize})",
                        epoch, i, s.h, s.w, loss, instr, high, planned
                    );
                }
                Err(e) => {
                    defmt::warn!("sample {=usize} failed, weights kept: {}", i, e);
                    skipped += 1;
                }
            }
        }
        let (ok, n) = model.correct(&mut g, samples.heldout())?;
        defmt::info!(
            "epoch {=usize}: mean loss {=f32}, held-out accuracy {=usize}/{=usize}",
            epoch,
            loss_sum / samples.n_finetune.max(1) as f32,
            ok,
            n
        );
    }

    let (after, _) = model.correct(&mut g, samples.heldout())?;
    defmt::info!(
        "instructions per training step: mean {=u64}, min {=u64} at {=usize}x{=usize}, max {=u64} at {=usize}x{=usize}",
        stats.total / stats.n.max(1),
        stats.min.0,
        stats.min.1,
        stats.min.2,
        stats.max.0,
        stats.max.1,
        stats.max.2
    );
    defmt::info!(
        "arena: {=usize} bytes, real high-water {=usize} bytes; steps whose high-water differed from the plan: {=usize}",
        cap,
        real_high,
        plan_mismatch
    );
    defmt::info!(
        "heap: {=u32} allocation(s) in total (the arena), {=usize} bytes; skipped samples: {=usize}",
        HEAP.allocations(),
        HEAP.used(),
        skipped
    );
    defmt::info!(
        "held-out accuracy: before {=usize}/{=usize}, after {=usize}/{=usize} (required: +{=usize} points)",
        before,
        n_test,
        after,
        n_test,
        MARGIN_POINTS
    );
    let improved = after * 100 >= (before * 100 + MARGIN_POINTS * n_test);
    Ok(improved && plan_mismatch == 0 && HEAP.allocations() == 1 && skipped == 0)
}

#[entry]
fn main() -> ! {
    // SAFETY: the heap's memory, handed over once before any allocation.
    #[allow(static_mut_refs)]
    unsafe {
        HEAP.init(HEAP_MEM.as_ptr() as usize, HEAP_BYTES)
    };
    let cp = cortex_m::Peripherals::take().unwrap_or_else(|| exit(code::ENGINE_ERROR));
    counter::start(cp.SYST);
    match run() {
        Ok(true) => {
            defmt::info!("PASS finetune");
            exit(code::OK)
        }
        Ok(false) => {
            defmt::error!("FAIL finetune: accuracy margin, plan or allocation check failed");
            exit(code::CHECK_FAILED)
        }
        Err(e) => {
            defmt::error!("engine error: {}", e);
            exit(code::ENGINE_ERROR)
        }
    }
}
