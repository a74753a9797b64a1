//! `determinism_hash()`: the fixed-point W1 run of `torchlet-determinism`, exported as a
//! plain C-ABI function from a no_std wasm32 module. `run.mjs` instantiates it with
//! `WebAssembly.instantiate` and prints the hash.
#![no_std]

use torchlet::Q16;
use torchlet_determinism::{run, ARENA_WORDS};

/// FNV-1a 64 of the final weights (0 if the run failed, which no host hash equals;
/// `u64::MAX` if it saturated).
#[no_mangle]
pub extern "C" fn determinism_hash() -> u64 {
    // The arena lives on the wasm stack (1 MiB by default), so no `static mut`.
    let mut arena = [Q16(0); ARENA_WORDS];
    match run(&mut arena) {
        Ok(o) if o.saturated_steps == 0 => o.hash,
        Ok(_) => u64::MAX,
        Err(_) => 0,
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    core::arch::wasm32::unreachable()
}
