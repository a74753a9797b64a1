//! Instructions counted with SysTick on the core clock under QEMU `-icount shift=6`
//! (one tick = 0.625 instructions), for the benchmark programs, which include this
//! file with `#[path]`.

use core::sync::atomic::{AtomicU32, Ordering};
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m_rt::exception;

static WRAPS: AtomicU32 = AtomicU32::new(0);

#[exception]
fn SysTick() {
    // Only this handler writes WRAPS; load + store is enough on a single core (no CAS
    // on thumbv6m).
    WRAPS.store(WRAPS.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// SysTick ticks since start (counts down from 0xFF_FFFF, then wraps).
fn ticks() -> u64 {
    loop {
        let w = WRAPS.load(Ordering::Relaxed);
        let c = cortex_m::peripheral::SYST::get_current();
        if WRAPS.load(Ordering::Relaxed) == w {
            return w as u64 * (1 << 24) + (0xFF_FFFF - c) as u64;
        }
    }
}

/// Starts SysTick on the core clock (exit status 5 if the peripherals were taken).
pub fn start_counter() {
    let mut p = cortex_m::Peripherals::take().unwrap_or_else(|| torchlet_determinism_m0::exit(5));
    p.SYST.set_clock_source(SystClkSource::Core);
    p.SYST.set_reload(0xFF_FFFF);
    p.SYST.clear_current();
    p.SYST.enable_interrupt();
    p.SYST.enable_counter();
}

/// `f`'s result and the instructions spent in it (ticks * 0.625).
pub fn instructions<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let t0 = ticks();
    let r = f();
    (r, (ticks() - t0) * 40 / 64)
}
