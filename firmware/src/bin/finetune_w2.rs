//! On-device fine-tuning of W2 ("mobile-fcn": BatchNorm, ReLU6, depthwise-separable
//! inverted residual blocks) in 64 KiB of RAM (f32, Cortex-M4F, QEMU `mps2-an386`
//! linked with `memory/mps2-an386-64k.x`: statics, heap and stack share 64 KiB).
//!
//! - The model file in flash (`assets/w2_pretrained.tlm`: W2 pretrained in PyTorch on
//!   the 28x28 digits by `tests/golden/make_w2.py`, exported to ONNX and converted by
//!   `torchlet convert`, see `make_w2_model.sh`) is checked once and run by op name.
//! - Only the biases and the classifier train (TinyTL's bias-only update); every
//!   other tensor, BatchNorm's statistics included, is read in place from flash
//!   (`torchlet_firmware::w2`, which says what the run checks).
//! - Prints the planner's bytes of a 28x28 training step for the full update (batch
//!   statistics, every parameter and statistic in RAM) and for this choice.
#![no_std]
#![no_main]

extern crate alloc;

use core::mem::MaybeUninit;
use cortex_m_rt::entry;
use defmt::intern;
use torchlet_firmware::heap::CountingHeap;
use torchlet_firmware::{code, counter, exit, finish, stack, w2, Aligned};

const MODEL_LEN: usize = include_bytes!("../../assets/w2_pretrained.tlm").len();
/// The model file, 4-byte aligned so frozen tensors are read in place.
static MODEL: Aligned<MODEL_LEN> = Aligned(*include_bytes!("../../assets/w2_pretrained.tlm"));
static SAMPLES: &[u8] = include_bytes!("../../assets/digits_cropped.bin");

/// The heap the arena comes from: the largest step's plan (44,044 bytes, at 22x22)
/// must fit in it, with the allocator's few bytes.
const HEAP_BYTES: usize = 44 * 1024 + 512;
#[global_allocator]
static HEAP: CountingHeap = CountingHeap::empty();
static mut HEAP_MEM: [MaybeUninit<u8>; HEAP_BYTES] = [MaybeUninit::uninit(); HEAP_BYTES];

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
        w2::run(&MODEL.0, SAMPLES, &HEAP, take_arena),
    )
}
