//! Board support shared by every firmware program (`src/bin/*.rs`, on the Cortex-M4F
//! and the Cortex-M0 boards alike): exit codes through semihosting, a panic handler and
//! a `HardFault` handler that both exit non-zero (so a fault never hangs QEMU), defmt
//! logging over semihosting, and an instruction counter on SysTick (`counter`).
//!
//! No math lives here: the programs only boot, place the arena, log with defmt and
//! call the engine. What several programs share is here too: [`Aligned`] (a model
//! file in flash), [`finish`] (the end of `main`), `stack::report_ram` (the RAM line).
#![no_std]

pub mod assets;
pub mod counter;
pub mod finetune;
pub mod frozen_trunk;
pub mod heap;
pub mod m0_recipe;
pub mod stack;
pub mod w1;
pub mod w1_head;
pub mod w2;
pub mod weights;

use cortex_m_rt::{exception, ExceptionFrame};
use defmt_semihosting as _;

/// Exit codes the CI stage distinguishes.
pub mod code {
    /// Everything the program checks held.
    pub const OK: i32 = 0;
    /// A check the program states failed (for example accuracy did not improve).
    pub const CHECK_FAILED: i32 = 1;
    /// An engine error that the program could not handle.
    pub const ENGINE_ERROR: i32 = 2;
    /// A Rust panic.
    pub const PANIC: i32 = 101;
    /// A HardFault.
    pub const HARD_FAULT: i32 = 102;
}

/// Ends the QEMU run with `status` (passes through `qemu-system-arm` and `cargo run`).
pub fn exit(status: i32) -> ! {
    semihosting::process::exit(status)
}

/// Ends `main` on its run's outcome: `Ok(true)` logs `PASS program` and exits
/// [`code::OK`]; `Ok(false)` logs `FAIL program: failed` and exits
/// [`code::CHECK_FAILED`]; an engine error is logged and exits [`code::ENGINE_ERROR`].
/// The two texts are interned (`defmt::intern!`), so they take no flash. Inlined: a
/// call would add a frame holding the outcome to `main`'s stack.
#[inline(always)]
pub fn finish(program: defmt::Str, failed: defmt::Str, outcome: Result<bool, torchlet::Error>) -> ! {
    match outcome {
        Ok(true) => {
            defmt::info!("PASS {=istr}", program);
            exit(code::OK)
        }
        Ok(false) => {
            defmt::error!("FAIL {=istr}: {=istr}", program, failed);
            exit(code::CHECK_FAILED)
        }
        Err(e) => {
            defmt::error!("engine error: {}", e);
            exit(code::ENGINE_ERROR)
        }
    }
}

/// Bytes at a 4-byte aligned address: a model file in flash, so its frozen tensors
/// are read in place as `f32`s (`static MODEL: Aligned<N> = Aligned(*include_bytes!(..))`).
#[repr(C, align(4))]
pub struct Aligned<const L: usize>(pub [u8; L]);

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    if let Some(loc) = info.location() {
        defmt::error!("panic at {=str}:{=u32}", loc.file(), loc.line());
    } else {
        defmt::error!("panic");
    }
    exit(code::PANIC)
}

#[exception]
unsafe fn HardFault(frame: &ExceptionFrame) -> ! {
    defmt::error!("HardFault at pc {=u32:#x}", frame.pc());
    exit(code::HARD_FAULT)
}

defmt::timestamp!("{=u64}", counter::instructions());
