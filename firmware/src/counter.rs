//! Counting executed instructions on QEMU: the runner starts QEMU with
//! `-icount shift=6`, under which the MPS2 boards' SysTick (clock source: the core)
//! advances once every 2^6 / 40 = 1.6 instructions, so
//! `instructions = ticks * 40 / 64`. The 24-bit counter wraps after about 10 M
//! instructions; the SysTick interrupt counts the wraps, and a read with interrupts
//! masked (defmt logs inside a critical section, and its timestamp reads the counter)
//! counts a wrap whose interrupt is still pending. The counts are deterministic from
//! run to run, and are instructions, not cycles (QEMU does not model the DWT cycle
//! counter). On real hardware the same code counts core clock cycles; the micro:bit's
//! SysTick runs at another clock than the MPS2 boards', so its counts would need their
//! own factor.

use core::sync::atomic::{AtomicU32, Ordering};
use cortex_m::peripheral::{syst::SystClkSource, SYST};
use cortex_m_rt::exception;

const RELOAD: u32 = 0x00FF_FFFF;
/// QEMU `-icount` shift the runners use.
pub const ICOUNT_SHIFT: u32 = 6;

static WRAPS: AtomicU32 = AtomicU32::new(0);

/// Starts SysTick free-running from the core clock with its wrap interrupt.
pub fn start(mut syst: SYST) {
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(RELOAD);
    syst.clear_current();
    syst.enable_interrupt();
    syst.enable_counter();
}

#[exception]
fn SysTick() {
    // load + store, not fetch_add: thumbv6m has no atomic read-modify-write, and only
    // this handler writes WRAPS.
    WRAPS.store(WRAPS.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
}

/// SysTick ticks since [`start`] (monotonic, handles wraps).
pub fn ticks() -> u64 {
    loop {
        let w0 = WRAPS.load(Ordering::Relaxed);
        let cur = SYST::get_current();
        // A wrap between the two reads makes w1 differ: read again.
        let pending = cortex_m::peripheral::SCB::is_pendst_pending();
        let w1 = WRAPS.load(Ordering::Relaxed);
        if w0 == w1 && !pending {
            return w0 as u64 * (RELOAD as u64 + 1) + (RELOAD - cur) as u64;
        }
        if pending && w0 == w1 {
            // Wrapped but the interrupt has not run yet (interrupts masked): count it.
            let cur = SYST::get_current();
            return (w0 as u64 + 1) * (RELOAD as u64 + 1) + (RELOAD - cur) as u64;
        }
    }
}

/// Instructions executed since [`start`] under QEMU `-icount shift=6` (on MPS2 boards).
pub fn instructions() -> u64 {
    (ticks() * 40) >> ICOUNT_SHIFT
}

/// `f`'s result and the instructions spent in it (the difference of two ticks counts,
/// converted once, so no rounding accumulates).
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let t0 = ticks();
    let r = f();
    (r, ((ticks() - t0) * 40) >> ICOUNT_SHIFT)
}
