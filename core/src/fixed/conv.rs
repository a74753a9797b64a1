//! Q16.16 convolution kernels: every output is the **exact** sum of its products
//! (Q32.32), rounded (half away from zero) and saturated **once**.
//!
//! The generic kernels (`kernels::conv`) round and saturate every product through the
//! `Scalar` operators; on a Cortex-M0 (no FPU, no 32 x 32 -> 64 multiply) that costs about
//! 60 instructions per multiply-accumulate. These kernels are exact and cheaper:
//!
//! - **Three 32-bit multiplies per product.** With `x = xh * 2^16 + xl` (`xh` signed,
//!   `xl` in `[0, 2^16)`) and `wh = w >> 16`, `wl = w & 0xFFFF`:
//!   `x * w = (xh * w + xl * wh) * 2^16 + xl * wl`. The last term is below `2^32` and is
//!   summed in a `u64` (an add and an add-with-carry); the first two are summed in an
//!   `i32`, which is exact as long as it cannot overflow.
//! - **Overflow is ruled out before the loops, not checked in them.** Each call scans its
//!   operands once for their largest magnitudes, bounds `|xh * w + xl * wh|` per term,
//!   and flushes the `i32` into an `i64` total often enough that it cannot overflow
//!   ([`Split8`], [`Fast16`]). When even one chunk of terms could overflow (operands near the top of
//!   the range), the call runs the same loops with a saturating `i64` accumulator of
//!   four-multiply products instead ([`WideDot`]). Both give the same exact integers, so
//!   the choice never changes a result and all targets stay bit-identical.
//! - **Gather loops.** Forward and backward-input compute one output at a time (the
//!   sum stays in registers); backward-weight one tap at a time. Backward-input gathers
//!   from the output gradient, with a contiguous tap range when the stride is 1 and a
//!   per-tap divisibility check otherwise (slower, same result).
//! - Rounding and saturation happen once per output: the sticky saturation flag is
//!   raised there (or when the `i64` total saturates in the wide form).

use super::{mul, raise, round_shift, sat_i32, Q16};
use crate::kernels::conv::ConvGeom;

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
        let p = mul::wide(x, w);
        self.0 = match self.0.checked_add(p) {
            Some(v) => v,
            None => {
                raise();
                if p > 0 {
                    i64::MAX
                } else {
                    i64::MIN
                }
            }
        };
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

/// `round(total / 2^16)` added to `base`, saturated.
#[inline(always)]
fn finish(base: i32, total: i64) -> Q16 {
    Q16(sat_i32(base as i64 + round_shift(total, 16)))
}

/// The taps `k` in `0..k_len` whose input coordinate `at + k * dil - pad` lies in
/// `0..len`, as a half-open range (contiguous; no division, the borders are short).
#[inline(always)]
fn taps_in(at: usize, pad: usize, dil: usize, k_len: usize, len: usize) -> (usize, usize) {
    let mut k0 = 0;
    while k0 < k_len && at + k0 * dil < pad {
        k0 += 1;
    }
    let mut k1 = k_len;
    while k1 > k0 && at + (k1 - 1) * dil >= len + pad {
        k1 -= 1;
    }
    (k0, k1)
}

/// `acc += sum_k x[k * step] * w[k]` over `w` (three taps unrolled).
#[inline(always)]
fn dot_row<D: Dot>(acc: &mut D, x: &[Q16], w: &[Q16], step: usize) {
    if step == 1 {
        match (w, x) {
            ([w0, w1, w2], [x0, x1, x2, ..]) => {
                acc.mac(x0.0, w0.0);
                acc.mac(x1.0, w1.0);
                acc.mac(x2.0, w2.0);
            }
            ([w0, w1], [x0, x1, ..]) => {
                acc.mac(x0.0, w0.0);
                acc.mac(x1.0, w1.0);
            }
            ([w0], [x0, ..]) => acc.mac(x0.0, w0.0),
            _ => {
                for (xv, wv) in x.iter().zip(w) {
                    acc.mac(xv.0, wv.0);
                }
            }
        }
    } else {
        for (xv, wv) in x.iter().step_by(step).zip(w) {
            acc.mac(xv.0, wv.0);
        }
    }
}

/// `acc += sum_k x[k * step] * w[w.len() - 1 - k]` (three taps unrolled).
#[inline(always)]
fn dot_row_rev<D: Dot>(acc: &mut D, x: &[Q16], w: &[Q16], step: usize) {
    if step == 1 {
        match (w, x) {
            ([w0, w1, w2], [x0, x1, x2, ..]) => {
                acc.mac(x0.0, w2.0);
                acc.mac(x1.0, w1.0);
                acc.mac(x2.0, w0.0);
            }
            ([w0, w1], [x0, x1, ..]) => {
                acc.mac(x0.0, w1.0);
                acc.mac(x1.0, w0.0);
            }
            ([w0], [x0, ..]) => acc.mac(x0.0, w0.0),
            _ => {
                for (xv, wv) in x.iter().zip(w.iter().rev()) {
                    acc.mac(xv.0, wv.0);
                }
            }
        }
    } else {
        for (xv, wv) in x.iter().step_by(step).zip(w.iter().rev()) {
            acc.mac(xv.0, wv.0);
        }
    }
}

/// Entries of a tap table: the taps of one window, as (index offset in the source
/// planes, weight). 160 entries (1,280 bytes of stack) hold every window of W1's
/// forward passes and of its first two backward-input passes; larger windows use the
/// row loops.
const TABLE: usize = 160;

/// Calls `f(start, end, k0, k1)` for each run of consecutive coordinates in `0..len`
/// whose tap window `window(o) = (k0, k1)` is the same (at most `2 * (k - 1) + 1` runs).
#[inline(always)]
fn bands(
    len: usize,
    window: impl Fn(usize) -> (usize, usize),
    mut f: impl FnMut(usize, usize, usize, usize),
) {
    let mut o = 0;
    while o < len {
        let w = window(o);
        let mut e = o + 1;
        while e < len && window(e) == w {
            e += 1;
        }
        f(o, e, w.0, w.1);
        o = e;
    }
}

/// `acc += sum src[off] * w` over the table, flushed every `seg` entries.
#[inline(always)]
fn dot_table<D: Dot>(acc: &mut D, src: &[Q16], table: &[(u32, D::Tap)], seg: usize) {
    let mut rest = table;
    while !rest.is_empty() {
        let (part, tail) = rest.split_at(seg.min(rest.len()));
        acc.mac_table(src, part);
        acc.flush();
        rest = tail;
    }
}

/// `y = conv(x, w) + b`, exact sums rounded once.
pub fn conv2d_forward(g: &ConvGeom, x: &[Q16], w: &[Q16], b: Option<&[Q16]>, y: &mut [Q16]) {
    let cin_g = g.c_in / g.groups;
    let terms = cin_g * g.kh * g.kw;
    match Plan::new(x, w, g.kh * g.kw, terms) {
        Plan::Split8(units) => forward_with::<Split8>(g, x, w, b, y, units),
        Plan::Fast16(units) => forward_with::<Fast16>(g, x, w, b, y, units),
        Plan::Wide => forward_with::<WideDot>(g, x, w, b, y, cin_g),
    }
}

#[inline(never)]
fn forward_with<D: Dot>(
    g: &ConvGeom,
    x: &[Q16],
    w: &[Q16],
    b: Option<&[Q16]>,
    y: &mut [Q16],
    chans_per_flush: usize,
) {
    let (ip, op, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let ([sy, sx], [dy, dx], [py, px]) = (g.stride, g.dil, g.pad);
    let cpf = chans_per_flush.clamp(1, cin_g.max(1));
    for n in 0..g.n {
        for oc in 0..g.c_out {
            let grp = oc / cout_g;
            let xs = &x[(n * g.c_in + grp * cin_g) * ip..][..cin_g * ip];
            let wk = &w[oc * cin_g * taps..][..cin_g * taps];
            let bias = b.map_or(0, |b| b[oc].0);
            let yp = &mut y[(n * g.c_out + oc) * op..][..op];
            for oy in 0..g.oh {
                let (ky0, ky1) = taps_in(oy * sy, py, dy, g.kh, g.h);
                let yr = &mut yp[oy * g.ow..][..g.ow];
                for (ox, yv) in yr.iter_mut().enumerate() {
                    let (kx0, kx1) = taps_in(ox * sx, px, dx, g.kw, g.w);
                    let mut acc = D::zero();
                    if kx0 == kx1 || ky0 == ky1 {
                        *yv = finish(bias, 0);
                        continue;
                    }
                    let col = ox * sx + kx0 * dx - px;
                    for c0 in (0..cin_g).step_by(cpf) {
                        for ic in c0..(c0 + cpf).min(cin_g) {
                            let xp = &xs[ic * ip..][..ip];
                            let wc = &wk[ic * taps..][..taps];
                            for ky in ky0..ky1 {
                                let row = (oy * sy + ky * dy - py) * g.w;
                                dot_row(&mut acc, &xp[row + col..], &wc[ky * g.kw..][kx0..kx1], dx);
                            }
                        }
                        acc.flush();
                    }
                    *yv = finish(bias, acc.total());
                }
            }
        }
    }
}

/// The forward pass with tap tables: the plane is cut into regions whose outputs share
/// one tap window (the interior and the padded borders), and each region's table is
/// built once per output channel.
#[inline(never)]
fn forward_table<D: Dot>(
    g: &ConvGeom,
    x: &[Q16],
    w: &[Q16],
    b: Option<&[Q16]>,
    y: &mut [Q16],
    seg: usize,
) {
    let (ip, op, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let ([sy, sx], [dy, dx], [py, px]) = (g.stride, g.dil, g.pad);
    let mut table = [(0u32, D::NO_TAP); TABLE];
    for n in 0..g.n {
        for oc in 0..g.c_out {
            let grp = oc / cout_g;
            let xs = &x[(n * g.c_in + grp * cin_g) * ip..][..cin_g * ip];
            let wk = &w[oc * cin_g * taps..][..cin_g * taps];
            let bias = b.map_or(0, |b| b[oc].0);
            let yp = &mut y[(n * g.c_out + oc) * op..][..op];
            bands(
                g.oh,
                |oy| taps_in(oy * sy, py, dy, g.kh, g.h),
                |oy0, oy1, ky0, ky1| {
                    bands(
                        g.ow,
                        |ox| taps_in(ox * sx, px, dx, g.kw, g.w),
                        |ox0, ox1, kx0, kx1| {
                            // Offsets from the window's first tap (ky0, kx0) of channel 0.
                            let mut len = 0;
                            for ic in 0..cin_g {
                                for ky in ky0..ky1 {
                                    for kx in kx0..kx1 {
                                        let off = ic * ip + (ky - ky0) * dy * g.w + (kx - kx0) * dx;
                                        table[len] = (off as u32, D::tap(wk[ic * taps + ky * g.kw + kx].0));
                                        len += 1;
                                    }
                                }
                            }
                            let seg = seg.max(1);
                            for oy in oy0..oy1 {
                                let yr = &mut yp[oy * g.ow..][ox0..ox1];
                                for (ox, yv) in (ox0..ox1).zip(yr.iter_mut()) {
                                    let mut acc = D::zero();
                                    if len > 0 {
                                        let base = (oy * sy + ky0 * dy - py) * g.w + ox * sx + kx0 * dx - px;
                                        dot_table(&mut acc, &xs[base..], &table[..len], seg);
                                    }
                                    *yv = finish(bias, acc.total());
                                }
                            }
                        },
                    );
                },
            );
        }
    }
}

/// `gx += conv_transpose(gy, w)`, exact sums rounded once per input element.
pub fn conv2d_backward_input(g: &ConvGeom, gy: &[Q16], w: &[Q16], gx: &mut [Q16]) {
    let cout_g = g.c_out / g.groups;
    let terms = cout_g * g.kh * g.kw;
    if g.stride == [1, 1] && terms <= TABLE {
        match Plan::for_table(gy, w, terms) {
            Plan::Split8(seg) => backward_input_table::<SplitW8>(g, gy, w, gx, seg),
            Plan::Fast16(seg) => backward_input_table::<Fast16>(g, gy, w, gx, seg),
            Plan::Wide => backward_input_with::<WideDot>(g, gy, w, gx, cout_g),
        }
        return;
    }
    match Plan::new(gy, w, g.kh * g.kw, terms) {
        Plan::Split8(units) => backward_input_with::<Split8>(g, gy, w, gx, units),
        Plan::Fast16(units) => backward_input_with::<Fast16>(g, gy, w, gx, units),
        Plan::Wide => backward_input_with::<WideDot>(g, gy, w, gx, cout_g),
    }
}

/// The stride-1 input gradient with tap tables, plane by plane.
fn backward_input_table<D: Dot>(g: &ConvGeom, gy: &[Q16], w: &[Q16], gx: &mut [Q16], seg: usize) {
    let (ip, op, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    for n in 0..g.n {
        for ic in 0..g.c_in {
            let (grp, icg) = (ic / cin_g, ic % cin_g);
            let gys = &gy[(n * g.c_out + grp * cout_g) * op..][..cout_g * op];
            let wk = &w[(grp * cout_g * cin_g + icg) * taps..];
            let gxp = &mut gx[(n * g.c_in + ic) * ip..][..ip];
            gather_plane_table::<D>(g, gys, wk, gxp, seg);
        }
    }
}

/// The taps `k` in `0..k_len` whose output coordinate `(at + pad - k * dil) / stride`
/// is whole and lies in `0..out_len` (stride 1: a contiguous range).
#[inline(always)]
fn out_taps(at: usize, pad: usize, dil: usize, k_len: usize, out_len: usize) -> (usize, usize) {
    // Valid: k * dil <= at + pad and at + pad - k * dil < out_len.
    let top = at + pad;
    let mut k0 = 0;
    while k0 < k_len && top >= out_len + k0 * dil {
        k0 += 1;
    }
    let mut k1 = k_len;
    while k1 > k0 && (k1 - 1) * dil > top {
        k1 -= 1;
    }
    (k0, k1)
}

fn backward_input_with<D: Dot>(g: &ConvGeom, gy: &[Q16], w: &[Q16], gx: &mut [Q16], chans_per_flush: usize) {
    let (ip, op, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let cpf = chans_per_flush.clamp(1, cout_g.max(1));
    for n in 0..g.n {
        for ic in 0..g.c_in {
            let (grp, icg) = (ic / cin_g, ic % cin_g);
            let gys = &gy[(n * g.c_out + grp * cout_g) * op..][..cout_g * op];
            // Weights of (output channel j of the group, this input channel): from
            // `j * cin_g * taps` on.
            let wk = &w[(grp * cout_g * cin_g + icg) * taps..];
            let gxp = &mut gx[(n * g.c_in + ic) * ip..][..ip];
            if g.stride == [1, 1] {
                gather_plane_s1::<D>(g, gys, wk, gxp, cpf);
            } else {
                gather_plane_strided::<D>(g, gys, wk, gxp, cpf);
            }
        }
    }
}

/// One input-gradient plane, stride 1, with tap tables built once per region of
/// input pixels that share a tap window.
#[inline(never)]
fn gather_plane_table<D: Dot>(g: &ConvGeom, gys: &[Q16], wk: &[Q16], gxp: &mut [Q16], seg: usize) {
    let (op, taps) = (g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let ([dy, dx], [py, px]) = (g.dil, g.pad);
    let mut table = [(0u32, D::NO_TAP); TABLE];
    bands(
        g.h,
        |iy| out_taps(iy, py, dy, g.kh, g.oh),
        |iy0, iy1, ky0, ky1| {
            bands(
                g.w,
                |ix| out_taps(ix, px, dx, g.kw, g.ow),
                |ix0, ix1, kx0, kx1| {
                    if ky0 == ky1 || kx0 == kx1 {
                        return;
                    }
                    // Offsets from output (iy + py - (ky1-1) dy, ix + px - (kx1-1) dx) of channel 0.
                    let mut len = 0;
                    for j in 0..cout_g {
                        for ky in ky0..ky1 {
                            for kx in kx0..kx1 {
                                let off = j * op + (ky1 - 1 - ky) * dy * g.ow + (kx1 - 1 - kx) * dx;
                                table[len] = (off as u32, D::tap(wk[j * cin_g * taps + ky * g.kw + kx].0));
                                len += 1;
                            }
                        }
                    }
                    let seg = seg.max(1);
                    for iy in iy0..iy1 {
                        let gxr = &mut gxp[iy * g.w..][ix0..ix1];
                        for (ix, gxv) in (ix0..ix1).zip(gxr.iter_mut()) {
                            let base = (iy + py - (ky1 - 1) * dy) * g.ow + ix + px - (kx1 - 1) * dx;
                            let mut acc = D::zero();
                            dot_table(&mut acc, &gys[base..], &table[..len], seg);
                            *gxv = finish(gxv.0, acc.total());
                        }
                    }
                },
            );
        },
    );
}

/// One input-gradient plane, stride 1: every tap range is contiguous.
#[inline(never)]
fn gather_plane_s1<D: Dot>(g: &ConvGeom, gys: &[Q16], wk: &[Q16], gxp: &mut [Q16], cpf: usize) {
    let (op, taps) = (g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let ([dy, dx], [py, px]) = (g.dil, g.pad);
    let (row_step, wc_step) = (dy * g.ow, cin_g * taps);
    for iy in 0..g.h {
        let (ky0, ky1) = out_taps(iy, py, dy, g.kh, g.oh);
        let gxr = &mut gxp[iy * g.w..][..g.w];
        for (ix, gxv) in gxr.iter_mut().enumerate() {
            let (kx0, kx1) = out_taps(ix, px, dx, g.kw, g.ow);
            if kx0 == kx1 || ky0 == ky1 {
                continue;
            }
            // Output rows iy + py - ky * dy and columns ix + px - kx * dx, walked with
            // ky and kx descending so that both ascend.
            let first = (iy + py - (ky1 - 1) * dy) * g.ow + ix + px - (kx1 - 1) * dx;
            let mut acc = D::zero();
            let mut j = 0;
            while j < cout_g {
                let end = (j + cpf).min(cout_g);
                while j < end {
                    let mut gi = j * op + first;
                    let mut wi = j * wc_step + (ky1 - 1) * g.kw;
                    for _ in ky0..ky1 {
                        dot_row_rev(&mut acc, &gys[gi..], &wk[wi + kx0..wi + kx1], dx);
                        gi += row_step;
                        wi = wi.wrapping_sub(g.kw);
                    }
                    j += 1;
                }
                acc.flush();
            }
            *gxv = finish(gxv.0, acc.total());
        }
    }
}

/// One input-gradient plane, any stride: taps whose output coordinate is not whole
/// are skipped one by one (slower; W1 has stride 1 everywhere).
#[inline(never)]
fn gather_plane_strided<D: Dot>(g: &ConvGeom, gys: &[Q16], wk: &[Q16], gxp: &mut [Q16], cpf: usize) {
    let (op, taps) = (g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let ([sy, sx], [dy, dx], [py, px]) = (g.stride, g.dil, g.pad);
    for iy in 0..g.h {
        let (ky0, ky1) = out_taps(iy, py, dy, g.kh, g.oh * sy);
        let gxr = &mut gxp[iy * g.w..][..g.w];
        for (ix, gxv) in gxr.iter_mut().enumerate() {
            let (kx0, kx1) = out_taps(ix, px, dx, g.kw, g.ow * sx);
            let mut acc = D::zero();
            for j0 in (0..cout_g).step_by(cpf) {
                for j in j0..(j0 + cpf).min(cout_g) {
                    let gyp = &gys[j * op..][..op];
                    let wc = &wk[j * cin_g * taps..][..taps];
                    for ky in ky0..ky1 {
                        let ty = iy + py - ky * dy;
                        if ty % sy != 0 {
                            continue;
                        }
                        let gr = &gyp[(ty / sy) * g.ow..][..g.ow];
                        for kx in kx0..kx1 {
                            let tx = ix + px - kx * dx;
                            if tx % sx == 0 {
                                acc.mac(gr[tx / sx].0, wc[ky * g.kw + kx].0);
                            }
                        }
                    }
                }
                acc.flush();
            }
            *gxv = finish(gxv.0, acc.total());
        }
    }
}

/// `gw += correlate(gy, x)`, exact sums rounded once per weight.
pub fn conv2d_backward_weight(g: &ConvGeom, gy: &[Q16], x: &[Q16], gw: &mut [Q16]) {
    match Plan::new(gy, x, g.ow, g.n * g.oh * g.ow) {
        Plan::Split8(units) => backward_weight_with::<Split8>(g, gy, x, gw, units),
        Plan::Fast16(units) => backward_weight_with::<Fast16>(g, gy, x, gw, units),
        Plan::Wide => backward_weight_with::<WideDot>(g, gy, x, gw, g.oh),
    }
}

#[inline(never)]
fn backward_weight_with<D: Dot>(g: &ConvGeom, gy: &[Q16], x: &[Q16], gw: &mut [Q16], rows_per_flush: usize) {
    let (ip, op, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let ([sy, sx], [dy, dx], [py, px]) = (g.stride, g.dil, g.pad);
    let rpf = rows_per_flush.clamp(1, g.oh.max(1));
    // Tap loops outermost: the valid output ranges (divisions) are computed once per tap.
    for ky in 0..g.kh {
        let (oy0, oy1) = crate::kernels::valid_range(g.oh, g.h, sy, py, ky * dy);
        for kx in 0..g.kw {
            let (ox0, ox1) = crate::kernels::valid_range(g.ow, g.w, sx, px, kx * dx);
            if oy0 >= oy1 || ox0 >= ox1 {
                continue;
            }
            let col = ox0 * sx + kx * dx - px;
            for oc in 0..g.c_out {
                let grp = oc / cout_g;
                for icg in 0..cin_g {
                    let mut acc = D::zero();
                    for n in 0..g.n {
                        let gyp = &gy[(n * g.c_out + oc) * op..][..op];
                        let xp = &x[(n * g.c_in + grp * cin_g + icg) * ip..][..ip];
                        for r0 in (oy0..oy1).step_by(rpf) {
                            for oy in r0..(r0 + rpf).min(oy1) {
                                let gr = &gyp[oy * g.ow + ox0..oy * g.ow + ox1];
                                let xr = &xp[(oy * sy + ky * dy - py) * g.w + col..];
                                if sx == 1 {
                                    acc.mac_row(gr, xr);
                                } else {
                                    for (gv, xv) in gr.iter().zip(xr.iter().step_by(sx)) {
                                        acc.mac(gv.0, xv.0);
                                    }
                                }
                            }
                            acc.flush();
                        }
                    }
                    let gv = &mut gw[(oc * cin_g + icg) * taps + ky * g.kw + kx];
                    *gv = finish(gv.0, acc.total());
                }
            }
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
