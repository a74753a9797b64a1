//! On-device fine-tuning of W2 ("mobile-fcn": BatchNorm, ReLU6, depthwise-separable
//! inverted residual blocks) in 64 KiB of RAM (f32, Cortex-M4F, QEMU `mps2-an386`
//! linked with `memory/mps2-an386-64k.x`: statics, heap and stack share 64 KiB).
//!
//! - The model file in flash (`assets/w2_pretrained.tlm`: W2 pretrained in PyTorch on
//!   the 28x28 digits by `tests/golden/make_w2.py`, exported to ONNX and converted by
//!   `torchlet convert`, see `make_w2_model.sh`) is checked once and run by op name.
//! - Only the biases and the classifier train (TinyTL's bias-only update); every
//!   other tensor, BatchNorm's statistics included, is read in place from flash, and
//!   BatchNorm runs on its frozen statistics (eval mode, as fine-tuning at batch 1
//!   needs). Nothing of a frozen layer's input is kept for backward.
//! - Fine-tunes on the cropped digits at their native sizes with `finetune`'s run
//!   (`torchlet_firmware::finetune`: a plan per input size, one arena, accuracy before
//!   and after); exits 0 only when held-out accuracy rose by at least
//!   [`MARGIN_POINTS`] points, every step's high-water equalled its plan, and static
//!   RAM plus the stack's high-water mark fit the 64 KiB the program is linked with.
//! - Prints the planner's bytes of a 28x28 training step for the full update (batch
//!   statistics, every parameter and statistic in RAM) and for this choice.
#![no_std]
#![no_main]

extern crate alloc;

use core::mem::MaybeUninit;
use cortex_m_rt::entry;
use defmt::intern;
use torchlet::model::{Model, ModelFile, Trained};
use torchlet::{Error, Graph};
use torchlet_firmware::finetune::{self, Settings};
use torchlet_firmware::heap::CountingHeap;
use torchlet_firmware::w1::{plan_step_with, Recipe};
use torchlet_firmware::{code, counter, exit, finish, stack, Aligned};

const MODEL_LEN: usize = include_bytes!("../../assets/w2_pretrained.tlm").len();
/// The model file, 4-byte aligned so frozen tensors are read in place as `f32`s.
static MODEL: Aligned<MODEL_LEN> = Aligned(*include_bytes!("../../assets/w2_pretrained.tlm"));
static SAMPLES: &[u8] = include_bytes!("../../assets/digits_cropped.bin");

/// Tape records of a W2 training step: 92 tensors, the input, 46 op records and the
/// loss (a meta step tells: `torchlet plan --train`), with a little room.
const TAPE: usize = 144;
const RECIPE: Recipe = Recipe {
    lr: 0.002,
    momentum: 0.9,
};
const EPOCHS: usize = 3;
/// Held-out accuracy must rise by at least this many percentage points.
const MARGIN_POINTS: usize = 20;
/// What trains.
const TRAINED: Trained<'static> = Trained::Biases;

/// The heap the arena comes from: the largest step's plan (44,268 bytes, at 22x22)
/// must fit in it, with the allocator's few bytes.
const HEAP_BYTES: usize = 44 * 1024 + 512;
#[global_allocator]
static HEAP: CountingHeap = CountingHeap::empty();
static mut HEAP_MEM: [MaybeUninit<u8>; HEAP_BYTES] = [MaybeUninit::uninit(); HEAP_BYTES];

/// W2 with `trained` training as `torchlet plan --choices` builds it
/// ([`Trained::build`]): the full update in training mode with everything in RAM;
/// another choice with BatchNorm statistics frozen and frozen tensors in flash.
fn build(
    file: ModelFile<'static>,
    trained: Trained<'static>,
) -> impl Fn(&mut Graph<'static, f32, TAPE>) -> Result<Model<'static>, Error> {
    move |g| trained.build(g, file).map_err(Error::from)
}

/// The planner's bytes of a 28x28 training step: the full update and this
/// program's choice.
#[inline(never)]
fn plan_choices(file: ModelFile<'static>) -> Result<(), Error> {
    let full = plan_step_with::<TAPE, _>(28, 28, RECIPE, usize::MAX, build(file, Trained::All))?;
    let chosen = plan_step_with::<TAPE, _>(28, 28, RECIPE, usize::MAX, build(file, TRAINED))?;
    defmt::info!(
        "plan 28x28 training step: all parameters train {=usize} bytes; biases + classifier, the rest read in place from flash, {=usize} bytes ({=usize}.{=usize}x less)",
        full,
        chosen,
        full / chosen.max(1),
        full * 10 / chosen.max(1) % 10
    );
    Ok(())
}

fn run() -> Result<bool, Error> {
    let file = ModelFile::parse(&MODEL.0).map_err(Error::from)?;
    let trained = file.tensors().filter(|t| TRAINED.trains(&file, t));
    let (n_trained, values) = trained.fold((0, 0), |(n, v), t| (n + 1, v + t.shape.numel()));
    defmt::info!(
        "model file: {=usize} bytes of flash (CRC-32 ok), {=usize} tensors, {=usize} nodes; training {=usize} tensors ({=usize} values): biases and the classifier",
        MODEL_LEN,
        file.num_tensors(),
        file.num_nodes(),
        n_trained,
        values
    );
    plan_choices(file)?;

    let settings = Settings {
        recipe: RECIPE,
        epochs: EPOCHS,
        margin_points: MARGIN_POINTS,
    };
    let loaded = |g: &mut Graph<'static, f32, TAPE>| {
        defmt::info!(
            "model built from the file: {=usize} tensors, BatchNorm statistics frozen (eval mode)",
            g.num_params()
        );
        Ok(())
    };
    let ok = finetune::run(SAMPLES, &HEAP, take_arena, settings, build(file, TRAINED), loaded)?;

    let ram_ok = stack::report_ram(stack::high_water());
    Ok(ok && ram_ok)
}

/// The arena, from the heap: `words` zeroed `f32`s, kept for the rest of the run.
fn take_arena(words: usize) -> &'static mut [f32] {
    alloc::vec![0.0f32; words].leak()
}

#[entry]
fn main() -> ! {
    stack::paint();
    // SAFETY: the heap's memory, handed over once before any allocation.
    #[allow(static_mut_refs)]
    unsafe {
        HEAP.init(HEAP_MEM.as_ptr() as usize, HEAP_BYTES)
    };
    let cp = cortex_m::Peripherals::take().unwrap_or_else(|| exit(code::ENGINE_ERROR));
    counter::start(cp.SYST);
    finish(
        intern!("finetune_w2"),
        intern!("accuracy margin, plan, allocation or RAM check failed"),
        run(),
    )
}
