//! Proves the fault path: reads from an address with no memory behind it, which
//! HardFaults; the handler in `src/lib.rs` logs the program counter and exits with
//! status 102 instead of hanging QEMU. The CI stage expects exactly that status.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use torchlet_firmware::{code, counter, exit};

#[entry]
fn main() -> ! {
    let cp = cortex_m::Peripherals::take().unwrap_or_else(|| exit(code::ENGINE_ERROR));
    counter::start(cp.SYST);
    defmt::info!("reading from 0xF000_0000 (unmapped): expect a HardFault, exit status 102");
    // SAFETY: deliberately invalid; the fault is the point, and it never returns.
    let v = unsafe { core::ptr::read_volatile(0xF000_0000 as *const u32) };
    defmt::error!("FAIL: no fault (read {=u32:#x})", v);
    exit(code::OK)
}
