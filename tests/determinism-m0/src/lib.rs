//! Shared bits of the M0 programs: exit codes through semihosting and a HardFault that
//! exits instead of hanging QEMU.
#![no_std]

use cortex_m_rt::{exception, ExceptionFrame};

/// Ends the QEMU run with `code` as its exit status.
pub fn exit(code: i32) -> ! {
    semihosting::process::exit(code)
}

#[exception]
unsafe fn HardFault(_ef: &ExceptionFrame) -> ! {
    semihosting::eprintln!("HardFault");
    exit(3)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    semihosting::eprintln!("panic: {}", info);
    exit(4)
}
