//! Bit-at-a-time integer division for the Cortex-M0 program, in place of
//! compiler-builtins' unrolled `u32`/`u64` ones (about 1,300 bytes of thumbv6m code;
//! these take about 150). Division is rare in the program (Q16 `div`, `exp` and `ln`
//! in the loss, resize taps, pool geometry), so a loop of 32 or 64 steps costs it
//! little; the quotient and remainder are exact either way, so no result changes
//! ([`self_check`] proves them at boot).
//!
//! Included only by `finetune_m0` (`#[path]`), so the M4F programs keep the fast ones.
//! The AEABI entry points: `u32` numerator `r0`, divisor `r1`, quotient `r0`,
//! remainder `r1`; `u64`/`i64` numerator `r1:r0`, divisor `r3:r2`, quotient `r1:r0`,
//! remainder `r3:r2` (the sign of the numerator's). Rust checks for a zero divisor
//! (and `i64::MIN / -1`) before it calls them.

core::arch::global_asm!(
    ".section .text.torchlet_small_div,\"ax\",%progbits",
    // Restoring division: shift the numerator's top bit into the remainder, subtract
    // the divisor when it fits (the carry out of the shift counts as a 33rd bit), and
    // set the quotient bit that the shift freed.
    ".global __aeabi_uidiv",
    ".global __aeabi_uidivmod",
    ".thumb_func",
    "__aeabi_uidiv:",
    "__aeabi_uidivmod:",
    "    movs r2, #0",
    "    movs r3, #32",
    "11: adds r0, r0, r0",
    "    adcs r2, r2",
    "    bcs 12f",
    "    cmp r2, r1",
    "    blo 13f",
    "12: subs r2, r2, r1",
    "    adds r0, #1",
    "13: subs r3, #1",
    "    bne 11b",
    "    mov r1, r2",
    "    bx lr",
    // The same over 64 bits: remainder in r5:r4, steps left in r6.
    ".global __aeabi_uldivmod",
    ".thumb_func",
    "__aeabi_uldivmod:",
    "    push {{r4, r5, r6, lr}}",
    "    movs r4, #0",
    "    movs r5, #0",
    "    movs r6, #64",
    "21: adds r0, r0, r0",
    "    adcs r1, r1",
    "    adcs r4, r4",
    "    adcs r5, r5",
    "    bcs 22f",
    "    cmp r5, r3",
    "    bhi 22f",
    "    bne 23f",
    "    cmp r4, r2",
    "    blo 23f",
    "22: subs r4, r4, r2",
    "    sbcs r5, r3",
    "    adds r0, #1",
    "23: subs r6, #1",
    "    bne 21b",
    "    mov r2, r4",
    "    mov r3, r5",
    "    pop {{r4, r5, r6, pc}}",
    // Signed: divide the magnitudes, then negate the quotient when the signs differ
    // (bit 0 of r4) and the remainder when the numerator was negative (bit 1).
    // A 64-bit negation: r5 = 0; low = 0 - low; high = 0 - high - borrow.
    ".global __aeabi_ldivmod",
    ".thumb_func",
    "__aeabi_ldivmod:",
    "    push {{r4, r5, r6, lr}}",
    "    movs r4, #0",
    "    cmp r1, #0",
    "    bge 31f",
    "    movs r4, #3",
    "    movs r5, #0",
    "    rsbs r0, r0, #0",
    "    sbcs r5, r1",
    "    mov r1, r5",
    "31: cmp r3, #0",
    "    bge 32f",
    "    movs r5, #1",
    "    eors r4, r5",
    "    movs r5, #0",
    "    rsbs r2, r2, #0",
    "    sbcs r5, r3",
    "    mov r3, r5",
    "32: bl __aeabi_uldivmod",
    "    lsrs r4, r4, #1",
    "    bcc 33f",
    "    movs r5, #0",
    "    rsbs r0, r0, #0",
    "    sbcs r5, r1",
    "    mov r1, r5",
    "33: lsrs r4, r4, #1",
    "    bcc 34f",
    "    movs r5, #0",
    "    rsbs r2, r2, #0",
    "    sbcs r5, r3",
    "    mov r3, r5",
    "34: pop {{r4, r5, r6, pc}}",
);

/// What [`self_check`]'s 64 divisions fold to, computed on the host (x86_64's
/// hardware division) by the same code.
const EXPECTED: u64 = 0xde11_3daf_da12_09b0;

/// Divides 64 pseudo-random pairs of every width (unsigned and signed 64-bit,
/// unsigned 32-bit) through the routines above and folds quotients and remainders
/// into one value; `false` means they are broken (the program then fails, never
/// trusts them). No panic path: `checked_*` (the divisors are never zero).
#[inline(never)]
pub fn self_check() -> bool {
    fold() == EXPECTED
}

/// The fold [`self_check`] compares (also what computes [`EXPECTED`] on the host).
pub fn fold() -> u64 {
    use core::num::{NonZeroU32, NonZeroU64};
    let mut x = core::hint::black_box(0x9E37_79B9_7F4A_7C15u64);
    let mut h = 0u64;
    for k in 0..64 {
        x ^= x << 13; // xorshift64
        x ^= x >> 7;
        x ^= x << 17;
        // Divisors of every width (odd, so never zero); remainders of other
        // numerators than the quotients (so the remainder registers are read, not
        // recomputed from the quotient).
        let (d, y) = (NonZeroU64::MIN | x >> k, !x);
        let d32 = NonZeroU32::MIN | (d.get() >> 32) as u32;
        let di = d.get() as i64;
        let di = if k & 1 == 0 { di } else { di.wrapping_neg() };
        for v in [
            x / d,
            y % d,
            (x as i64).checked_div(di).unwrap_or(0) as u64,
            (y as i64).checked_rem(di).unwrap_or(0) as u64,
            (x as u32 / d32) as u64,
            (y as u32 % d32) as u64,
        ] {
            h = h.rotate_left(9) ^ v;
        }
    }
    h
}
