//! On-device fine-tuning of a network that comes from a model file (f32, Cortex-M4F,
//! QEMU `mps2-an386`): the program knows no network. The model file in flash
//! (`assets/w1_pretrained.tlm`: W1 with `finetune`'s pretrained weights, exported from
//! PyTorch to ONNX and converted by `torchlet convert`, see `make_w1_model.sh`) is
//! checked once (`ModelFile::parse`: CRC-32, every record) and its nodes run by op
//! name (`torchlet::model::Model`).
//!
//! - Fine-tunes on the cropped digits with the same run as `finetune`
//!   (`torchlet_firmware::finetune`: plan per input size, one arena, held-out accuracy
//!   before and after, the same recipe); exits 0 only when accuracy rose by at least
//!   [`MARGIN_POINTS`] points and every step's high-water equalled its plan. For W1 it
//!   must print what `finetune` prints (the CI stage compares accuracy and losses).
//! - Prints the planner's bytes of a 28x28 training step for three choices: every
//!   parameter trains; the convolutions frozen in the arena and only the classifier
//!   trains; the convolutions frozen and read in place from flash (no RAM for them).
#![no_std]
#![no_main]

extern crate alloc;

use core::mem::MaybeUninit;
use cortex_m_rt::entry;
use defmt::intern;
use torchlet::model::{Model, ModelFile, Placement, TensorRecord};
use torchlet::{Error, Graph};
use torchlet_firmware::finetune::{self, Settings};
use torchlet_firmware::heap::CountingHeap;
use torchlet_firmware::w1::{plan_step_with, Recipe, TAPE};
use torchlet_firmware::{code, counter, exit, finish, weights, Aligned};

const MODEL_LEN: usize = include_bytes!("../../assets/w1_pretrained.tlm").len();
/// The model file, 4-byte aligned so frozen tensors are read in place as `f32`s.
static MODEL: Aligned<MODEL_LEN> = Aligned(*include_bytes!("../../assets/w1_pretrained.tlm"));
static SAMPLES: &[u8] = include_bytes!("../../assets/digits_cropped.bin");

/// `finetune`'s recipe, so both give the same result on W1.
const RECIPE: Recipe = Recipe {
    lr: 0.005,
    momentum: 0.9,
};
const EPOCHS: usize = 2;
/// Held-out accuracy must rise by at least this many percentage points (as `finetune`).
const MARGIN_POINTS: usize = 20;
/// The gain the classifier-only run must make (the project's bar, as `finetune_m0`'s).
const HEAD_MARGIN_POINTS: usize = 20;

const HEAP_BYTES: usize = 256 * 1024;
#[global_allocator]
static HEAP: CountingHeap = CountingHeap::empty();
static mut HEAP_MEM: [MaybeUninit<u8>; HEAP_BYTES] = [MaybeUninit::uninit(); HEAP_BYTES];

/// The choice "only the classifier trains": every tensor but the last node's frozen,
/// in the arena or (`in_place`) in flash.
fn head_only(file: &ModelFile<'_>, in_place: bool) -> impl Fn(&TensorRecord<'_>) -> Placement {
    // The tensors the last node reads (the classifier's weight and bias).
    let mut head = [usize::MAX; 4];
    if let Some(last) = file.nodes().last() {
        for (slot, r) in head.iter_mut().zip(last.inputs()) {
            if let Some(torchlet::model::ValueRef::Tensor(k)) = r {
                *slot = k;
            }
        }
    }
    move |t| match () {
        _ if head.contains(&t.index) => Placement::Train,
        _ if in_place => Placement::InPlace,
        _ => Placement::Frozen,
    }
}

fn run() -> Result<bool, Error> {
    let file = ModelFile::parse(&MODEL.0).map_err(Error::from)?;
    defmt::info!(
        "model file: {=usize} bytes of flash (CRC-32 ok), {=usize} inputs, {=usize} tensors, {=usize} nodes",
        MODEL_LEN,
        file.num_inputs(),
        file.num_tensors(),
        file.num_nodes()
    );

    // What each choice of trained parameters costs at 28x28, from the planner.
    let full = plan_step_with::<TAPE, _>(28, 28, RECIPE, usize::MAX, |g| {
        Model::new(g, file).map_err(Error::from)
    })?;
    let frozen = plan_step_with::<TAPE, _>(28, 28, RECIPE, usize::MAX, |g| {
        Model::with_placement(g, file, head_only(&file, false)).map_err(Error::from)
    })?;
    let in_place = plan_step_with::<TAPE, _>(28, 28, RECIPE, usize::MAX, |g| {
        Model::in_place(g, file, head_only(&file, true)).map_err(Error::from)
    })?;
    defmt::info!(
        "plan 28x28 training step: all parameters train {=usize} bytes; classifier only, frozen in RAM {=usize} bytes; classifier only, frozen read in place from flash {=usize} bytes",
        full,
        frozen,
        in_place
    );

    let settings = Settings {
        recipe: RECIPE,
        epochs: EPOCHS,
        margin_points: MARGIN_POINTS,
    };
    let build = |g: &mut Graph<'static, f32, TAPE>| Model::new(g, file).map_err(Error::from);
    let loaded = |g: &mut Graph<'static, f32, TAPE>| {
        defmt::info!(
            "model built from the file: {=usize} parameters, fingerprint {=u32:#x}",
            g.num_params(),
            weights::fingerprint(g)
        );
        Ok(())
    };
    let full_ok = finetune::run(SAMPLES, &HEAP, take_arena, settings, build, loaded)?;

    // The same run again from the file's weights, training only the classifier, the
    // frozen convolutions read in place from flash.
    defmt::info!("--- second run: classifier only, the convolutions frozen and read in place from flash");
    let settings = Settings {
        margin_points: HEAD_MARGIN_POINTS,
        ..settings
    };
    let build = |g: &mut Graph<'static, f32, TAPE>| {
        Model::in_place(g, file, head_only(&file, true)).map_err(Error::from)
    };
    let loaded = |g: &mut Graph<'static, f32, TAPE>| {
        let place = head_only(&file, true);
        defmt::info!(
            "model built from the file: {=usize} parameters, {=usize} of them read in place from flash",
            g.num_params(),
            file.tensors().filter(|t| place(t) == Placement::InPlace).count()
        );
        Ok(())
    };
    let head_ok = finetune::run(SAMPLES, &HEAP, take_arena, settings, build, loaded)?;
    Ok(full_ok && head_ok)
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
        intern!("finetune_model"),
        intern!("accuracy margin, plan or allocation check failed"),
        run(),
    )
}
