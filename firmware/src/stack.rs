//! How much RAM the stack really used, on a core with no OS and no stack guard: fill
//! the free RAM below the stack with a pattern at boot ("paint"), and at the end find
//! the lowest word that no longer holds it. Statics end at `_stack_end` and the stack
//! starts at `_stack_start` (the end of RAM); both symbols come from cortex-m-rt's
//! `link.x`.

use core::ptr::{addr_of, read_volatile, write_volatile};

const PAINT: u32 = 0x57AC_C0DE;
/// Bytes left unpainted below the stack pointer at the time of painting (the
/// painter's own frame).
const SKIP: usize = 64;

extern "C" {
    static _ram_start: u32;
    static _stack_end: u32;
    static _stack_start: u32;
}

/// (start of RAM, end of the statics, top of the stack).
fn bounds() -> (usize, usize, usize) {
    // Only the addresses of the linker symbols are taken (safe): nothing is read.
    (
        addr_of!(_ram_start) as usize,
        addr_of!(_stack_end) as usize,
        addr_of!(_stack_start) as usize,
    )
}

/// Paints the free RAM between the statics and the current stack pointer. Call it
/// first thing in `main`.
#[inline(never)]
pub fn paint() {
    let (_, lo, _) = bounds();
    let sp = cortex_m::register::msp::read() as usize;
    let mut p = lo;
    while p + SKIP < sp {
        // SAFETY: [lo, sp - SKIP) is RAM above every static and below the live stack
        // frames: nothing uses it yet; the write is aligned (both ends are 4-aligned).
        unsafe { write_volatile(p as *mut u32, PAINT) };
        p += 4;
    }
}

fn painted(p: usize) -> bool {
    // SAFETY: `p` is a 4-aligned address inside RAM, between the statics and the top
    // of the stack.
    unsafe { read_volatile(p as *const u32) == PAINT }
}

/// The most stack used since [`paint`], in bytes (the top of the stack down to the
/// lowest word that lost the pattern).
pub fn high_water() -> usize {
    let (_, lo, hi) = bounds();
    let mut p = lo;
    while p < hi && painted(p) {
        p += 4;
    }
    hi - p
}

/// Whether the stack reached the statics (the lowest painted word was overwritten):
/// then [`high_water`] is only a lower bound and statics may have been corrupted.
pub fn reached_statics() -> bool {
    let (_, lo, _) = bounds();
    !painted(lo)
}

/// Bytes of RAM taken by statics (`.data`, `.bss`, `.uninit`): RAM start to `_stack_end`.
pub fn static_bytes() -> usize {
    let (ram, lo, _) = bounds();
    lo - ram
}

/// The RAM's size in bytes, as linked.
pub fn ram_bytes() -> usize {
    let (ram, _, hi) = bounds();
    hi - ram
}

/// Logs `RAM: static S bytes + stack high-water K bytes = T of R bytes` for a stack
/// high-water mark `stack_hw` (at least [`high_water`]'s), and returns whether static
/// RAM plus that stack fit the RAM with the stack never reaching the statics.
#[inline(always)]
pub fn report_ram(stack_hw: usize) -> bool {
    let (statics, ram) = (static_bytes(), ram_bytes());
    defmt::info!(
        "RAM: static {=usize} bytes + stack high-water {=usize} bytes = {=usize} of {=usize} bytes",
        statics,
        stack_hw,
        statics + stack_hw,
        ram
    );
    statics + stack_hw < ram && !reached_statics()
}
