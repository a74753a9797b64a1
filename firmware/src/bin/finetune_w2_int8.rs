//! `finetune_w2` with the convolution weights stored as int8 with a scale per output
//! channel (`assets/w2_int8.tlm`: `make_w2_model.sh --int8`, that is `torchlet
//! convert --freeze ... --int8-frozen`, 40,872 bytes instead of 88,728). The frozen
//! int8 weights are read in place from flash by the int8 convolution kernels, and
//! gradients still flow through them to the biases below. The same run and checks as
//! `finetune_w2` (`torchlet_firmware::w2`); the full update is not planned, since
//! int8 weights cannot train.
#![no_std]
#![no_main]

extern crate alloc;

use core::mem::MaybeUninit;
use cortex_m_rt::entry;
use defmt::intern;
use torchlet_firmware::heap::CountingHeap;
use torchlet_firmware::{code, counter, exit, finish, stack, w2, Aligned};

const MODEL_LEN: usize = include_bytes!("../../assets/w2_int8.tlm").len();
/// The model file, 4-byte aligned so frozen tensors are read in place.
static MODEL: Aligned<MODEL_LEN> = Aligned(*include_bytes!("../../assets/w2_int8.tlm"));
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
        intern!("finetune_w2_int8"),
        intern!("accuracy margin, plan, allocation or RAM check failed"),
        w2::run(&MODEL.0, SAMPLES, &HEAP, take_arena),
    )
}
