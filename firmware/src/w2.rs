//! W2 ("mobile-fcn") fine-tuned from a model file in flash, biases and classifier
//! training, in 64 KiB of RAM: the run of `finetune_w2` (the f32 file) and of
//! `finetune_w2_int8` (the same network with its convolution weights stored as int8
//! per output channel, read in place), which differ only in the file.
//!
//! - BatchNorm runs on its frozen statistics (eval mode, as fine-tuning at batch 1
//!   needs); every tensor that does not train is read in place from flash. Nothing of
//!   a frozen layer's input is kept for backward.
//! - Fine-tunes on the cropped digits at their native sizes with `finetune`'s run (a
//!   plan per input size, one arena, accuracy before and after); `Ok(true)` only when
//!   held-out accuracy rose by at least [`MARGIN_POINTS`] points, every step's
//!   high-water equalled its plan, and static RAM plus the stack's high-water mark fit
//!   the 64 KiB the program is linked with.

use crate::finetune::{self, Settings};
use crate::heap::CountingHeap;
use crate::stack;
use crate::w1::{plan_step_with, Recipe};
use torchlet::model::{Model, ModelFile, Trained};
use torchlet::{Error, Graph};

/// Tape records of a W2 training step: 92 tensors, the input, 46 op records and the
/// loss (a meta step tells: `torchlet plan --train`), with a little room.
pub const TAPE: usize = 144;
const RECIPE: Recipe = Recipe {
    lr: 0.002,
    momentum: 0.9,
};
const EPOCHS: usize = 3;
/// Held-out accuracy must rise by at least this many percentage points.
pub const MARGIN_POINTS: usize = 20;
/// What trains.
const TRAINED: Trained<'static> = Trained::Biases;

/// W2 with `trained` training as `torchlet plan --choices` builds it
/// ([`Trained::build`]): the full update in training mode with everything in RAM;
/// another choice with BatchNorm statistics frozen and frozen tensors in flash.
fn build(
    file: ModelFile<'static>,
    trained: Trained<'static>,
) -> impl Fn(&mut Graph<'static, f32, TAPE>) -> Result<Model<'static>, Error> {
    move |g| trained.build(g, file).map_err(Error::from)
}

/// The planner's bytes of a 28x28 training step for this program's choice and, when
/// every parameter of the file can train (f32), for the full update.
#[inline(never)]
fn plan_choices(file: ModelFile<'static>, int8: usize) -> Result<(), Error> {
    let chosen = plan_step_with::<TAPE, _>(28, 28, RECIPE, usize::MAX, build(file, TRAINED))?;
    if int8 > 0 {
        defmt::info!(
            "plan 28x28 training step: biases + classifier, the rest read in place from flash ({=usize} int8 convolution weights), {=usize} bytes",
            int8,
            chosen
        );
        return Ok(());
    }
    let full = plan_step_with::<TAPE, _>(28, 28, RECIPE, usize::MAX, build(file, Trained::All))?;
    defmt::info!(
        "plan 28x28 training step: all parameters train {=usize} bytes; biases + classifier, the rest read in place from flash, {=usize} bytes ({=usize}.{=usize}x less)",
        full,
        chosen,
        full / chosen.max(1),
        full * 10 / chosen.max(1) % 10
    );
    Ok(())
}

/// Fine-tunes the model of `model` (a 4-byte aligned model file in flash) on
/// `samples`, the arena taken from `heap` by `take_arena`; see the module docs.
pub fn run(
    model: &'static [u8],
    samples: &'static [u8],
    heap: &CountingHeap,
    take_arena: impl FnOnce(usize) -> &'static mut [f32],
) -> Result<bool, Error> {
    let file = ModelFile::parse(model).map_err(Error::from)?;
    let trained = file.tensors().filter(|t| TRAINED.trains(&file, t));
    let (n_trained, values) = trained.fold((0, 0), |(n, v), t| (n + 1, v + t.shape.numel()));
    let int8 = file.tensors().filter(|t| t.int8).count();
    defmt::info!(
        "model file: {=usize} bytes of flash (CRC-32 ok), {=usize} tensors, {=usize} nodes; training {=usize} tensors ({=usize} values): biases and the classifier",
        model.len(),
        file.num_tensors(),
        file.num_nodes(),
        n_trained,
        values
    );
    plan_choices(file, int8)?;

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
    let ok = finetune::run(samples, heap, take_arena, settings, build(file, TRAINED), loaded)?;

    let ram_ok = stack::report_ram(stack::high_water());
    Ok(ok && ram_ok)
}

/// The whole program of a W2 fine-tuning run (`finetune_w2`, `finetune_w2_int8`, which
/// differ only in their model file): the model file `$model` (an `include_bytes!`) in
/// flash, 4-byte aligned so frozen tensors are read in place; the digits `$samples`;
/// the heap the arena comes from (the largest step's plan, 37,976 bytes at 22x22, with
/// the allocator's few bytes); `main`, which runs [`run`] and ends on its outcome.
#[macro_export]
macro_rules! w2_program {
    ($name:literal, $model:expr, $samples:expr) => {
        extern crate alloc;

        const MODEL_LEN: usize = $model.len();
        static MODEL: $crate::Aligned<MODEL_LEN> = $crate::Aligned(*$model);
        const HEAP_BYTES: usize = 38 * 1024;
        #[global_allocator]
        static HEAP: $crate::heap::CountingHeap = $crate::heap::CountingHeap::empty();
        static mut HEAP_MEM: [core::mem::MaybeUninit<u8>; HEAP_BYTES] =
            [core::mem::MaybeUninit::uninit(); HEAP_BYTES];

        /// The arena, from the heap: `words` zeroed `f32`s, kept for the rest of the run.
        fn take_arena(words: usize) -> &'static mut [f32] {
            alloc::vec![0.0f32; words].leak()
        }

        #[cortex_m_rt::entry]
        fn main() -> ! {
            $crate::stack::paint();
            // SAFETY: the heap's memory, handed over once before any allocation.
            #[allow(static_mut_refs)]
            unsafe {
                HEAP.init(HEAP_MEM.as_ptr() as usize, HEAP_BYTES)
            };
            let cp = cortex_m::Peripherals::take()
                .unwrap_or_else(|| $crate::exit($crate::code::ENGINE_ERROR));
            $crate::counter::start(cp.SYST);
            $crate::finish(
                defmt::intern!($name),
                defmt::intern!("accuracy margin, plan, allocation or RAM check failed"),
                $crate::w2::run(&MODEL.0, $samples, &HEAP, take_arena),
            )
        }
    };
}
