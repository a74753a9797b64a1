//! Products of Q16.16 raw values, exact, on every core.
//!
//! - Cortex-M0 has `MULS` (32 x 32 -> low 32 bits) only; `a as i64 * b as i64` becomes
//!   a call to the compiler's general 64 x 64 multiply (`__aeabi_lmul`), about 40
//!   instructions with the call. Splitting each operand into a signed high and an
//!   unsigned low 16-bit half needs four `MULS` whose results all fit 32 bits.
//! - Both forms compute the same exact integers (tested against each other on the
//!   host), so the choice per target cannot change a result: the cross-target hash
//!   test would catch it if it did. `cfg(target_arch = "arm")` selects the split form.

/// `a * b` exactly, from four 16 x 16 products.
#[inline(always)]
pub fn wide_split(a: i32, b: i32) -> i64 {
    let (ah, al) = (a >> 16, a & 0xFFFF); // ah in [-2^15, 2^15), al in [0, 2^16)
    let (bh, bl) = (b >> 16, b & 0xFFFF);
    let ll = (al as u32) * (bl as u32); // < 2^32
    let mid = (ah * bl) as i64 + (al * bh) as i64; // each |.| < 2^31
    (((ah * bh) as i64) << 32) + (mid << 16) + ll as i64
}

/// `round(a * b / 2^16)`, ties away from zero, from four 16 x 16 products (the result
/// may exceed the `i32` range; the caller saturates).
#[inline(always)]
pub fn q16_split(a: i32, b: i32) -> i64 {
    let (ah, al) = (a >> 16, a & 0xFFFF);
    let (bh, bl) = (b >> 16, b & 0xFFFF);
    let ll = (al as u32) * (bl as u32); // <= 2^32 - 2^17 + 1: the nudge cannot carry out
                                        // The product is negative only when the signs differ (if either is 0, ll is 0 and
                                        // the nudge rounds to 0 either way).
    let neg = ((a ^ b) < 0) as u32;
    let low = ((ll + 0x8000 - neg) >> 16) as i64;
    (((ah * bh) as i64) << 16) + (ah * bl) as i64 + (al * bh) as i64 + low
}

/// `a * b` exactly, with the native 64-bit multiply.
#[inline(always)]
pub fn wide_native(a: i32, b: i32) -> i64 {
    a as i64 * b as i64
}

/// `round(a * b / 2^16)` with the native 64-bit multiply.
#[inline(always)]
pub fn q16_native(a: i32, b: i32) -> i64 {
    let p = a as i64 * b as i64;
    (p + (1i64 << 15) - (p < 0) as i64) >> 16
}

/// The exact product, in the form that is cheapest on this target.
#[inline(always)]
pub fn wide(a: i32, b: i32) -> i64 {
    if cfg!(target_arch = "arm") {
        wide_split(a, b)
    } else {
        wide_native(a, b)
    }
}

/// The rounded Q16.16 product (before saturation), cheapest form on this target.
#[inline(always)]
pub fn q16(a: i32, b: i32) -> i64 {
    if cfg!(target_arch = "arm") {
        q16_split(a, b)
    } else {
        q16_native(a, b)
    }
}
