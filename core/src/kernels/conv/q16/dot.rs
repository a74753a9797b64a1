//! Exact running sums of Q16.16 products for the convolution kernels ([`super`]),
//! in the cheapest form the operands' magnitudes allow ([`Plan`]).

use crate::fixed::Q16;
use crate::scalar::Scalar;

/// A running exact sum of Q16.16 products `x * w`, in units of `2^-32`.
pub(crate) trait Dot: Copy {
    /// An empty sum.
    fn zero() -> Self;
    /// Adds `x * w` (raw Q16.16 values).
    fn mac(&mut self, x: i32, w: i32);
    /// Moves the narrow partial sum into the wide total (called between chunks).
    fn flush(&mut self);
    /// The sum (saturated to the `i64` range by the wide form).
    fn total(self) -> i64;
    /// A weight as stored in a tap table (pre-split where that saves work per product).
    type Tap: Copy;
    /// The table filler.
    const NO_TAP: Self::Tap;
    /// `w` as a table entry.
    fn tap(w: i32) -> Self::Tap;
    /// Adds `x * w` for a table entry of `w`.
    fn mac_tap(&mut self, x: i32, w: Self::Tap);
    /// Adds `sum src[off] * w` over a tap table.
    #[inline(always)]
    fn mac_table(&mut self, src: &[Q16], table: &[(u32, Self::Tap)]) {
        for &(off, w) in table {
            self.mac_tap(src[off as usize].0, w);
        }
    }
    /// Adds `sum x[i] * w[i]` over the shorter of the two.
    #[inline(always)]
    fn mac_row(&mut self, x: &[Q16], w: &[Q16]) {
        for (xv, wv) in x.iter().zip(w) {
            self.mac(xv.0, wv.0);
        }
    }
}

/// The cheapest form, for operands of moderate size: two multiplies per product.
/// With `x = xh * 2^8 + xl` (`xl` in `[0, 2^8)`), `x * w = xh * w * 2^8 + xl * w`;
/// both sums are `i32`, exact only under the bound checked by [`Plan::new`].
#[derive(Clone, Copy)]
pub(crate) struct Split8 {
    m: i32,
    l: i32,
    t: i64,
}

impl Dot for Split8 {
    #[inline(always)]
    fn zero() -> Self {
        Split8 { m: 0, l: 0, t: 0 }
    }
    #[inline(always)]
    fn mac(&mut self, x: i32, w: i32) {
        let (xh, xl) = (x >> 8, x & 0xFF);
        self.m = self.m.wrapping_add(xh.wrapping_mul(w));
        self.l = self.l.wrapping_add(xl.wrapping_mul(w));
    }
    #[inline(always)]
    fn flush(&mut self) {
        self.t += ((self.m as i64) << 8) + self.l as i64;
        self.m = 0;
        self.l = 0;
    }
    #[inline(always)]
    fn total(self) -> i64 {
        self.t + ((self.m as i64) << 8) + self.l as i64
    }
    type Tap = i32;
    const NO_TAP: i32 = 0;
    #[inline(always)]
    fn tap(w: i32) -> i32 {
        w
    }
    #[inline(always)]
    fn mac_tap(&mut self, x: i32, w: i32) {
        self.mac(x, w)
    }
    #[inline(always)]
    fn mac_row(&mut self, x: &[Q16], w: &[Q16]) {
        let (m, l) = split8_row(x, w);
        self.m = self.m.wrapping_add(m);
        self.l = self.l.wrapping_add(l);
    }
}

/// The sums `(sum xh * w, sum xl * w)` of [`Split8`] over a row, in a function of its
/// own so that the loop has all of a Cortex-M0's eight low registers.
#[inline(never)]
fn split8_row(x: &[Q16], w: &[Q16]) -> (i32, i32) {
    let (mut m, mut l) = (0i32, 0i32);
    for (xv, wv) in x.iter().zip(w) {
        m = m.wrapping_add((xv.0 >> 8).wrapping_mul(wv.0));
        l = l.wrapping_add((xv.0 & 0xFF).wrapping_mul(wv.0));
    }
    (m, l)
}

/// The sums of [`SplitW8`] over a tap table, in a function of its own (see
/// [`split8_row`]).
#[inline(never)]
fn split_w8_table(src: &[Q16], table: &[(u32, (i32, i32))]) -> (i32, i32) {
    let (mut m, mut l) = (0i32, 0i32);
    for &(off, (wh, wl)) in table {
        let x = src[off as usize].0;
        m = m.wrapping_add(x.wrapping_mul(wh));
        l = l.wrapping_add(x.wrapping_mul(wl));
    }
    (m, l)
}

/// [`Split8`] with the roles swapped, for tap tables: the weight is split once when
/// the table is built (`w = wh * 2^8 + wl`), so a product costs two multiplies and no
/// split: `x * w = x * wh * 2^8 + x * wl`.
#[derive(Clone, Copy)]
pub(crate) struct SplitW8 {
    m: i32,
    l: i32,
    t: i64,
}

impl Dot for SplitW8 {
    #[inline(always)]
    fn zero() -> Self {
        SplitW8 { m: 0, l: 0, t: 0 }
    }
    #[inline(always)]
    fn mac(&mut self, x: i32, w: i32) {
        self.mac_tap(x, Self::tap(w))
    }
    #[inline(always)]
    fn flush(&mut self) {
        self.t += ((self.m as i64) << 8) + self.l as i64;
        self.m = 0;
        self.l = 0;
    }
    #[inline(always)]
    fn total(self) -> i64 {
        self.t + ((self.m as i64) << 8) + self.l as i64
    }
    type Tap = (i32, i32);
    const NO_TAP: (i32, i32) = (0, 0);
    #[inline(always)]
    fn tap(w: i32) -> (i32, i32) {
        (w >> 8, w & 0xFF)
    }
    #[inline(always)]
    fn mac_tap(&mut self, x: i32, (wh, wl): (i32, i32)) {
        self.m = self.m.wrapping_add(x.wrapping_mul(wh));
        self.l = self.l.wrapping_add(x.wrapping_mul(wl));
    }
    #[inline(always)]
    fn mac_table(&mut self, src: &[Q16], table: &[(u32, (i32, i32))]) {
        let (m, l) = split_w8_table(src, table);
        self.m = self.m.wrapping_add(m);
        self.l = self.l.wrapping_add(l);
    }
}

/// The form for larger operands: the same identity with 16-bit halves, the low sum in
/// a `u64` (an add and an add-with-carry per term).
#[derive(Clone, Copy)]
pub(crate) struct Fast16 {
    m: i32,
    l: u64,
    t: i64,
}

impl Dot for Fast16 {
    #[inline(always)]
    fn zero() -> Self {
        Fast16 { m: 0, l: 0, t: 0 }
    }
    #[inline(always)]
    fn mac(&mut self, x: i32, w: i32) {
        let (xh, xl) = (x >> 16, x & 0xFFFF);
        let (wh, wl) = (w >> 16, (w & 0xFFFF) as u32);
        self.m = self
            .m
            .wrapping_add(xh.wrapping_mul(w))
            .wrapping_add(xl.wrapping_mul(wh));
        self.l += (xl as u32).wrapping_mul(wl) as u64;
    }
    #[inline(always)]
    fn flush(&mut self) {
        self.t += (self.m as i64) << 16;
        self.m = 0;
    }
    #[inline(always)]
    fn total(self) -> i64 {
        self.t + ((self.m as i64) << 16) + self.l as i64
    }
    type Tap = i32;
    const NO_TAP: i32 = 0;
    #[inline(always)]
    fn tap(w: i32) -> i32 {
        w
    }
    #[inline(always)]
    fn mac_tap(&mut self, x: i32, w: i32) {
        self.mac(x, w)
    }
}

/// The fallback form: one saturating `i64` sum of exact products.
#[derive(Clone, Copy)]
pub(crate) struct WideDot(i64);

impl Dot for WideDot {
    #[inline(always)]
    fn zero() -> Self {
        WideDot(0)
    }
    #[inline(always)]
    fn mac(&mut self, x: i32, w: i32) {
        // Q16's own saturating accumulation (the generic kernels' `Scalar::mac`).
        self.0 = <Q16 as Scalar>::mac(self.0, Q16(x), Q16(w));
    }
    #[inline(always)]
    fn flush(&mut self) {}
    #[inline(always)]
    fn total(self) -> i64 {
        self.0
    }
    type Tap = i32;
    const NO_TAP: i32 = 0;
    #[inline(always)]
    fn tap(w: i32) -> i32 {
        w
    }
    #[inline(always)]
    fn mac_tap(&mut self, x: i32, w: i32) {
        self.mac(x, w)
    }
}

/// How a call accumulates: which [`Dot`] form, flushed every how many units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// [`Split8`], flushed every `n` units.
    Split8(usize),
    /// [`Fast16`], flushed every `n` units.
    Fast16(usize),
    /// [`WideDot`].
    Wide,
}

/// Largest `|v >> shift|` and `|v|` of raw values (as `u64`, so `|i32::MIN|` fits).
fn magnitudes(v: &[Q16], shift: u32) -> (u64, u64) {
    let (mut lo, mut hi) = (0i32, 0i32);
    for q in v {
        lo = lo.min(q.0);
        hi = hi.max(q.0);
    }
    let mag = |a: i32, b: i32| (a as i64).unsigned_abs().max((b as i64).unsigned_abs());
    (mag(lo >> shift, hi >> shift), mag(lo, hi))
}

/// Units per flush of a two-multiply form (`split` cut at bit 8, `full` whole): each
/// term of either `i32` sum is at most `max(|split >> 8|, 2^8) * |full|`.
fn split8_units(split: &[Q16], full: &[Q16], unit: u64, terms: u64) -> Option<u64> {
    let (sh, _) = magnitudes(split, 8);
    let (_, fmax) = magnitudes(full, 16);
    units_for((sh.max(1 << 8) * fmax).max(1), unit, terms)
}

/// Units per flush of [`Fast16`]: each term of its `i32` sum is below
/// `|xh| * |w| + 2^16 * |wh|`.
fn fast16_units(split: &[Q16], full: &[Q16], unit: u64, terms: u64) -> Option<u64> {
    let (xh, _) = magnitudes(split, 16);
    let (wh, wmax) = magnitudes(full, 16);
    units_for((xh * wmax + 0xFFFF * wh).max(1), unit, terms)
}

/// Units (of `unit` terms) that an `i32` sum of terms below `bound` holds, if at least
/// one and if the `i64` total stays below 2^62: `2^16 * terms * bound`, plus
/// `terms * 2^32` (it does when `terms * bound < 2^45`).
fn units_for(bound: u64, unit: u64, terms: u64) -> Option<u64> {
    let fits_total = terms < (1 << 28) && terms.saturating_mul(bound) < (1 << 45);
    let n = (i32::MAX as u64 / bound) / unit.max(1);
    (fits_total && n >= 1).then_some(n.min(u32::MAX as u64))
}

impl Plan {
    /// `split` are the operands passed as `x` to [`Dot::mac`], `full` those passed as
    /// `w`; a unit (the stretch between two possible flushes) is at most `unit_terms`
    /// products, an output sums at most `terms` products.
    pub(crate) fn new(split: &[Q16], full: &[Q16], unit_terms: usize, terms: usize) -> Plan {
        let (unit, terms) = (unit_terms as u64, terms as u64);
        if let Some(n) = split8_units(split, full, unit, terms) {
            Plan::Split8(n as usize)
        } else if let Some(n) = fast16_units(split, full, unit, terms) {
            Plan::Fast16(n as usize)
        } else {
            Plan::Wide
        }
    }

    /// The plan of a tap-table loop: [`Plan::Split8`] then means [`SplitW8`] (the
    /// weights `w` are split), flushed every `n` table entries.
    pub(crate) fn for_table(x: &[Q16], w: &[Q16], terms: usize) -> Plan {
        let terms = terms as u64;
        if let Some(n) = split8_units(w, x, 1, terms) {
            Plan::Split8(n as usize)
        } else if let Some(n) = fast16_units(x, w, 1, terms) {
            Plan::Fast16(n as usize)
        } else {
            Plan::Wide
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(v: f32) -> Q16 {
        Q16::from_f32(v)
    }

    #[test]
    fn plan_picks_the_cheapest_exact_form() {
        // |x|, |w| <= 1, 9-tap units: two multiplies, max(2^8, 2^8) * 2^16 per term.
        let (x, w) = ([q(1.0), q(-0.5)], [q(-1.0), q(0.25)]);
        assert_eq!(
            Plan::new(&x, &w, 9, 72),
            Plan::Split8((i32::MAX as usize >> 24) / 9)
        );
        // |x| = 64, |w| = 64: 2^14 * 2^22 per term overflows Split8; Fast16 holds
        // 64 * 2^22 + 65535 * 64 per term.
        let (x, w) = ([q(64.0)], [q(-64.0)]);
        assert_eq!(Plan::new(&x, &w, 1, 72), Plan::Fast16(7));
        // ... but not 9 terms between flushes.
        assert_eq!(Plan::new(&x, &w, 9, 72), Plan::Wide);
        // Near the rails even one term may overflow the i32 sums: the wide form.
        let (x, w) = ([Q16::MAX], [Q16::MIN]);
        assert_eq!(Plan::new(&x, &w, 1, 1), Plan::Wide);
        // Empty operands (a zero-size plane) are fine.
        assert_eq!(Plan::new(&[], &[], 9, 0), Plan::Split8(i32::MAX as usize / 9));
    }
}
