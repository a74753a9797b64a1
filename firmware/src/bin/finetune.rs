//! On-device fine-tuning on the Cortex-M4F (f32, QEMU `mps2-an386`).
//!
//! - Loads W1 weights pretrained on the host on 28x28 digits only (flash,
//!   `assets/w1_pretrained.tlw`, checksum verified).
//! - Fine-tunes on real digits cropped to their ink (flash, `assets/digits_cropped.bin`)
//!   with the run of `torchlet_firmware::finetune` (plan per input size, one arena,
//!   loss, instructions and high-water per step, held-out accuracy before and after);
//!   exits 0 only when accuracy rose by at least [`MARGIN_POINTS`] percentage points
//!   and every step's high-water equalled its plan.
#![no_std]
#![no_main]

extern crate alloc;

use core::mem::MaybeUninit;
use cortex_m_rt::entry;
use defmt::intern;
use torchlet::init::Rng;
use torchlet::nn::digits_fcn;
use torchlet::{Error, Graph};
use torchlet_firmware::finetune::{self, Settings};
use torchlet_firmware::heap::CountingHeap;
use torchlet_firmware::w1::{Recipe, TAPE};
use torchlet_firmware::{code, counter, exit, finish, weights};

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

fn run() -> Result<bool, Error> {
    let settings = Settings {
        recipe: RECIPE,
        epochs: EPOCHS,
        margin_points: MARGIN_POINTS,
    };
    let build = |g: &mut Graph<'static, f32, TAPE>| digits_fcn(g, &mut Rng::new(0));
    let load = |g: &mut Graph<'static, f32, TAPE>| {
        weights::load(g, WEIGHTS)?;
        defmt::info!(
            "loaded {=usize} weight bytes from flash (CRC-32 ok), fingerprint {=u32:#x}",
            WEIGHTS.len(),
            weights::fingerprint(g)
        );
        Ok(())
    };
    finetune::run(SAMPLES, &HEAP, take_arena, settings, build, load)
}

/// The arena, from the heap: `words` zeroed `f32`s, kept for the rest of the run.
fn take_arena(words: usize) -> &'static mut [f32] {
    alloc::vec![0.0f32; words].leak()
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
    finish(
        intern!("finetune"),
        intern!("accuracy margin, plan or allocation check failed"),
        run(),
    )
}
