//! Q16.16 convolutions for hosts with a native 32 x 32 -> 64 multiply (x86_64, wasm32,
//! aarch64; not built for `target_arch = "arm"`, whose M-profile cores keep the split
//! kernels of the parent module).
//!
//! - **Same sums, cheaper form.** Every output is still the exact sum of its products
//!   (Q32.32), rounded and saturated once by the parent's `finish`; here the sum is an
//!   `i64` of `i64` products of sign-extended `i32`s, exact when
//!   `max|a| * max|b| * terms < 2^63`, or an `f64` sum when that bound is below `2^53`
//!   (every product and partial sum is then an integer an `f64` holds; SSE2 and wasm
//!   multiply `f64` pairs but have no packed `i64` multiply). [`form`] checks the bound
//!   once per call. So the results, and the sticky saturation flag, are bit-identical
//!   to the split kernels'.
//! - **3x3 kernels** (W1's) add all nine taps in one pass over the sums ([`axpy9`]).
//! - **Padded planes on the stack.** A group's input planes (forward, backward-weight)
//!   or output-gradient planes (backward-input) are copied once per sample into a
//!   zero-padded stack buffer, so no loop needs a bounds test at the borders.
//! - **One long loop per tap.** With stride 1 the sums of a band of output rows are laid
//!   out at the padded row width, so a tap is a single contiguous `axpy` (or `dot`) over
//!   the whole band, padding columns included (their sums are discarded): loops LLVM
//!   vectorises. Other strides walk rows with a step.
//! - A call that does not fit the stack buffers, or whose operands are too large for
//!   an exact `i64` sum, returns `false` and the caller runs the split kernels (which
//!   fall back to a saturating sum near the rails).

use super::finish;
use crate::fixed::Q16;
use crate::kernels::conv::ConvGeom;

/// Zero-padded planes of one group, as `i32` (32 KiB of stack: W1 at 28x28 fits).
const PAD: usize = 8192;
/// `i64` sums of a band of outputs (8 KiB).
const TILE: usize = 1024;
/// An output-gradient plane at the padded row width, `i32` (8 KiB).
const GYROW: usize = 2048;
/// `i64` weight-gradient totals of a chunk of output channels (8 KiB).
const WTOT: usize = 1024;

/// The largest `|v|` (as `u64`, so `|i32::MIN|` fits).
fn max_abs(v: &[Q16]) -> u64 {
    let (mut lo, mut hi) = (0i32, 0i32);
    for q in v {
        lo = lo.min(q.0);
        hi = hi.max(q.0);
    }
    (lo as i64).unsigned_abs().max(hi as u64)
}

/// A plane size after padding: `(h + top + bottom, w + left + right)`.
#[derive(Clone, Copy)]
struct Padded {
    h: usize,
    w: usize,
    top: usize,
    left: usize,
}

/// Copies `planes` planes of `h x w` values into `dst`, each zero-padded to `p`.
fn pad_planes(src: &[Q16], planes: usize, (h, w): (usize, usize), p: Padded, dst: &mut [i32]) {
    let dst = &mut dst[..planes * p.h * p.w];
    dst.fill(0);
    for (s, d) in src
        .chunks_exact(h * w)
        .zip(dst.chunks_exact_mut(p.h * p.w))
        .take(planes)
    {
        for (sr, dr) in s.chunks_exact(w).zip(d[p.top * p.w..].chunks_mut(p.w)) {
            for (dv, sv) in dr[p.left..][..w].iter_mut().zip(sr) {
                *dv = sv.0;
            }
        }
    }
}

/// An exact running sum of integer products: `i64`, or `f64` when every partial sum
/// stays below `2^53` in magnitude (then each product and sum is an integer the
/// format holds, so no rounding happens; SSE2 and wasm multiply two `f64` lanes in one
/// instruction but have no packed `i64` multiply).
trait Exact: Copy + Default + core::ops::AddAssign + core::ops::Mul<Output = Self> {
    /// Sums of up to this magnitude are exact.
    const LIMIT: u128;
    fn of(v: i32) -> Self;
    fn to_i64(self) -> i64;
}

impl Exact for i64 {
    const LIMIT: u128 = 1 << 63;
    #[inline(always)]
    fn of(v: i32) -> i64 {
        v as i64
    }
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self
    }
}

impl Exact for f64 {
    const LIMIT: u128 = 1 << 53;
    #[inline(always)]
    fn of(v: i32) -> f64 {
        v as f64
    }
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self as i64
    }
}

/// Which sum a call uses: `f64` if exact, else `i64` if exact, else none.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Form {
    F64,
    I64,
}

/// The form for sums of at most `terms` products `a * b`.
fn form(a: &[Q16], b: &[Q16], terms: usize) -> Option<Form> {
    let bound = u128::from(max_abs(a)) * u128::from(max_abs(b)) * (terms as u128);
    if bound < f64::LIMIT {
        Some(Form::F64)
    } else if bound < i64::LIMIT {
        Some(Form::I64)
    } else {
        None
    }
}

/// `acc[i] += src[i] * w`, exact (the caller bounds the sums).
#[inline(always)]
fn axpy<T: Exact>(acc: &mut [T], src: &[i32], w: i32) {
    let w = T::of(w);
    for (a, &s) in acc.iter_mut().zip(src) {
        *a += T::of(s) * w;
    }
}

/// `acc[i] += src[i] * w0 + src[i + d] * w1 + src[i + 2d] * w2` (a 3-wide kernel row).
#[inline(always)]
fn axpy3<T: Exact>(acc: &mut [T], src: &[i32], d: usize, [w0, w1, w2]: [i32; 3]) {
    let (w0, w1, w2) = (T::of(w0), T::of(w1), T::of(w2));
    let n = acc.len();
    let (s0, s1, s2) = (&src[..n], &src[d..][..n], &src[2 * d..][..n]);
    for i in 0..n {
        let mut t = T::of(s0[i]) * w0;
        t += T::of(s1[i]) * w1;
        t += T::of(s2[i]) * w2;
        acc[i] += t;
    }
}

/// `acc[i] += sum_k src[i + (k / 3) * rs + (k % 3) * d] * w[k]` (a 3x3 kernel, rows
/// `rs` apart): one pass over the sums instead of three.
#[inline(always)]
fn axpy9<T: Exact>(acc: &mut [T], src: &[i32], rs: usize, d: usize, w: [i32; 9]) {
    let n = acc.len();
    let w = w.map(T::of);
    let s: [&[i32]; 9] = core::array::from_fn(|k| &src[(k / 3) * rs + (k % 3) * d..][..n]);
    for (i, a) in acc.iter_mut().enumerate() {
        let mut t = T::of(s[0][i]) * w[0];
        for k in 1..9 {
            t += T::of(s[k][i]) * w[k];
        }
        *a += t;
    }
}

/// `acc[i] += src[i * step] * w`.
#[inline(always)]
fn axpy_step<T: Exact>(acc: &mut [T], src: &[i32], step: usize, w: i32) {
    let w = T::of(w);
    for (a, &s) in acc.iter_mut().zip(src.iter().step_by(step)) {
        *a += T::of(s) * w;
    }
}

/// `sum a[i * step] * b[i]`, exact (the caller bounds the sum). Eight partial sums
/// when `step` is 1: exact integer sums do not depend on the order, and independent
/// lanes let LLVM vectorise the `f64` form (it keeps a single float sum in order).
#[inline(always)]
fn dot<T: Exact>(a: &[i32], b: &[i32], step: usize) -> T {
    let mut s = T::default();
    if step == 1 {
        let n = a.len().min(b.len());
        let (a, b) = (&a[..n], &b[..n]);
        let mut lanes = [T::default(); 8];
        for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
            for i in 0..8 {
                lanes[i] += T::of(x[i]) * T::of(y[i]);
            }
        }
        let tail = n - n % 8;
        for (&x, &y) in a[tail..].iter().zip(&b[tail..]) {
            s += T::of(x) * T::of(y);
        }
        for l in lanes {
            s += l;
        }
    } else {
        for (&x, &y) in a.iter().step_by(step).zip(b) {
            s += T::of(x) * T::of(y);
        }
    }
    s
}

/// Rows per band of sums laid out `stride` apart, `width` used per row, in [`TILE`].
fn band_rows(width: usize, stride: usize) -> usize {
    (TILE - width) / stride + 1
}

/// `y = conv(x, w) + b`; `false` (nothing written) if this path does not apply.
pub(super) fn forward(g: &ConvGeom, x: &[Q16], w: &[Q16], b: Option<&[Q16]>, y: &mut [Q16]) -> bool {
    let cin_g = g.c_in / g.groups;
    let pp = (g.h + 2 * g.pad[0]) * (g.w + 2 * g.pad[1]);
    if g.oh * g.ow == 0 || cin_g * pp > PAD || g.ow > TILE {
        return false;
    }
    match form(x, w, cin_g * g.kh * g.kw) {
        Some(Form::F64) => forward_in::<f64>(g, x, w, b, y),
        Some(Form::I64) => forward_in::<i64>(g, x, w, b, y),
        None => return false,
    }
    true
}

/// [`forward`] with sums in `T`.
#[inline(never)]
fn forward_in<T: Exact>(g: &ConvGeom, x: &[Q16], w: &[Q16], b: Option<&[Q16]>, y: &mut [Q16]) {
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let ([sy, sx], [dy, dx], [py, px]) = (g.stride, g.dil, g.pad);
    let p = Padded {
        h: g.h + 2 * py,
        w: g.w + 2 * px,
        top: py,
        left: px,
    };
    let (ip, pp, op, taps) = (g.h * g.w, p.h * p.w, g.oh * g.ow, g.kh * g.kw);
    let flat = sx == 1 && sy == 1;
    // Row stride of the sums: the padded width (one loop per tap) or the output width.
    let stride = if flat { p.w } else { g.ow };
    let rows = band_rows(g.ow, stride);
    let (mut xp, mut tile) = ([0i32; PAD], [T::default(); TILE]);
    for n in 0..g.n {
        for grp in 0..g.groups {
            let xs = &x[(n * g.c_in + grp * cin_g) * ip..][..cin_g * ip];
            pad_planes(xs, cin_g, (g.h, g.w), p, &mut xp);
            for oc in grp * cout_g..(grp + 1) * cout_g {
                let wk = &w[oc * cin_g * taps..][..cin_g * taps];
                let bias = b.map_or(0, |b| b[oc].0);
                let yp = &mut y[(n * g.c_out + oc) * op..][..op];
                for oy0 in (0..g.oh).step_by(rows) {
                    let nr = rows.min(g.oh - oy0);
                    let acc = &mut tile[..(nr - 1) * stride + g.ow];
                    acc.fill(T::default());
                    for (plane, wc) in xp.chunks_exact(pp).zip(wk.chunks_exact(taps)) {
                        if let (true, Ok(w9)) = (flat && g.kh == 3, <&[Q16; 9]>::try_from(wc)) {
                            let src = &plane[oy0 * p.w..];
                            axpy9(acc, src, dy * p.w, dx, w9.map(|v| v.0));
                            continue;
                        }
                        for (ky, wr) in wc.chunks_exact(g.kw).enumerate() {
                            let at = (oy0 * sy + ky * dy) * p.w;
                            if flat {
                                let len = acc.len();
                                if let [w0, w1, w2] = wr {
                                    axpy3(acc, &plane[at..], dx, [w0.0, w1.0, w2.0]);
                                } else {
                                    for (kx, wv) in wr.iter().enumerate() {
                                        axpy(acc, &plane[at + kx * dx..][..len], wv.0);
                                    }
                                }
                            } else {
                                for (kx, wv) in wr.iter().enumerate() {
                                    for r in 0..nr {
                                        let src = &plane[at + r * sy * p.w + kx * dx..];
                                        axpy_step(&mut acc[r * stride..][..g.ow], src, sx, wv.0);
                                    }
                                }
                            }
                        }
                    }
                    for r in 0..nr {
                        let out = &mut yp[(oy0 + r) * g.ow..][..g.ow];
                        for (yv, &t) in out.iter_mut().zip(&acc[r * stride..]) {
                            *yv = finish(bias, t.to_i64());
                        }
                    }
                }
            }
        }
    }
}

/// `gx += conv_transpose(gy, w)` for stride 1; `false` (nothing written) otherwise.
///
/// With `gy` padded by the kernel's reach on every side, input pixel `(iy, ix)` takes
/// tap `(ky, kx)` from padded `gy` at `(iy + py + (kh-1-ky) dy, ix + px + (kw-1-kx) dx)`:
/// a constant offset per tap, so each tap is one `axpy` over a band of input rows.
pub(super) fn backward_input(g: &ConvGeom, gy: &[Q16], w: &[Q16], gx: &mut [Q16]) -> bool {
    let cout_g = g.c_out / g.groups;
    let (ry, rx) = ((g.kh - 1) * g.dil[0], (g.kw - 1) * g.dil[1]);
    let pp = (g.oh + 2 * ry) * (g.ow + 2 * rx);
    if g.stride != [1, 1] || g.h * g.w == 0 || g.oh * g.ow == 0 || cout_g * pp > PAD || g.w > TILE {
        return false;
    }
    match form(gy, w, cout_g * g.kh * g.kw) {
        Some(Form::F64) => backward_input_in::<f64>(g, gy, w, gx),
        Some(Form::I64) => backward_input_in::<i64>(g, gy, w, gx),
        None => return false,
    }
    true
}

/// [`backward_input`] with sums in `T`.
#[inline(never)]
fn backward_input_in<T: Exact>(g: &ConvGeom, gy: &[Q16], w: &[Q16], gx: &mut [Q16]) {
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let ([dy, dx], [py, px]) = (g.dil, g.pad);
    let (ry, rx) = ((g.kh - 1) * dy, (g.kw - 1) * dx);
    let p = Padded {
        h: g.oh + 2 * ry,
        w: g.ow + 2 * rx,
        top: ry,
        left: rx,
    };
    let (ip, pp, op, taps) = (g.h * g.w, p.h * p.w, g.oh * g.ow, g.kh * g.kw);
    let rows = band_rows(g.w, p.w);
    let (mut gp, mut tile) = ([0i32; PAD], [T::default(); TILE]);
    for n in 0..g.n {
        for grp in 0..g.groups {
            let gys = &gy[(n * g.c_out + grp * cout_g) * op..][..cout_g * op];
            pad_planes(gys, cout_g, (g.oh, g.ow), p, &mut gp);
            for icg in 0..cin_g {
                let gxp = &mut gx[(n * g.c_in + grp * cin_g + icg) * ip..][..ip];
                for iy0 in (0..g.h).step_by(rows) {
                    let nr = rows.min(g.h - iy0);
                    let acc = &mut tile[..(nr - 1) * p.w + g.w];
                    acc.fill(T::default());
                    let len = acc.len();
                    for (ocg, plane) in gp.chunks_exact(pp).take(cout_g).enumerate() {
                        let wc = &w[((grp * cout_g + ocg) * cin_g + icg) * taps..][..taps];
                        if let (3, Ok(w9)) = (g.kh, <&[Q16; 9]>::try_from(wc)) {
                            // Tap (ky, kx) reads (iy + py + ry - ky dy, ix + px + rx - kx dx):
                            // the kernel turned by half a turn, from (py, px).
                            let src = &plane[(iy0 + py) * p.w + px..];
                            axpy9(acc, src, dy * p.w, dx, core::array::from_fn(|k| w9[8 - k].0));
                            continue;
                        }
                        for (ky, wr) in wc.chunks_exact(g.kw).enumerate() {
                            let at = (iy0 + py + ry - ky * dy) * p.w + px;
                            if let [w0, w1, w2] = wr {
                                // Tap kx reads at + rx - kx * dx: w2 first.
                                axpy3(acc, &plane[at..], dx, [w2.0, w1.0, w0.0]);
                            } else {
                                for (kx, wv) in wr.iter().enumerate() {
                                    axpy(acc, &plane[at + rx - kx * dx..][..len], wv.0);
                                }
                            }
                        }
                    }
                    for r in 0..nr {
                        let out = &mut gxp[(iy0 + r) * g.w..][..g.w];
                        for (gv, &t) in out.iter_mut().zip(&acc[r * p.w..]) {
                            *gv = finish(gv.0, t.to_i64());
                        }
                    }
                }
            }
        }
    }
}

/// `gw += correlate(gy, x)`; `false` (nothing written) if this path does not apply.
///
/// With stride 1, `gy` is laid out at the padded input's row width with zero columns,
/// so the sum of a tap is one `dot` of that plane with the padded input at the tap's
/// offset.
pub(super) fn backward_weight(g: &ConvGeom, gy: &[Q16], x: &[Q16], gw: &mut [Q16]) -> bool {
    let cin_g = g.c_in / g.groups;
    let (hp, wp) = (g.h + 2 * g.pad[0], g.w + 2 * g.pad[1]);
    let op = g.oh * g.ow;
    let flat = g.stride == [1, 1];
    let per_oc = cin_g * g.kh * g.kw;
    if op == 0
        || per_oc == 0
        || per_oc > WTOT
        || cin_g * hp * wp > PAD
        || (if flat { (g.oh - 1) * wp + g.ow } else { op }) > GYROW
    {
        return false;
    }
    match form(gy, x, g.n * op) {
        Some(Form::F64) => backward_weight_in::<f64>(g, gy, x, gw),
        Some(Form::I64) => backward_weight_in::<i64>(g, gy, x, gw),
        None => return false,
    }
    true
}

/// [`backward_weight`] with sums in `T`.
#[inline(never)]
fn backward_weight_in<T: Exact>(g: &ConvGeom, gy: &[Q16], x: &[Q16], gw: &mut [Q16]) {
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let ([sy, sx], [dy, dx], [py, px]) = (g.stride, g.dil, g.pad);
    let p = Padded {
        h: g.h + 2 * py,
        w: g.w + 2 * px,
        top: py,
        left: px,
    };
    let (ip, pp, op, taps) = (g.h * g.w, p.h * p.w, g.oh * g.ow, g.kh * g.kw);
    let flat = sx == 1 && sy == 1;
    let per_oc = cin_g * taps;
    let chunk = WTOT / per_oc;
    let (mut xp, mut gyrow, mut tot) = ([0i32; PAD], [0i32; GYROW], [T::default(); WTOT]);
    // The sum of one tap: `gy` plane `gyp` (laid out as described) against `plane`.
    let tap_sum = |gyp: &[i32], plane: &[i32], ky: usize, kx: usize| -> T {
        let at = ky * dy * p.w + kx * dx;
        if flat {
            dot(&plane[at..][..gyp.len()], gyp, 1)
        } else {
            let mut s = T::default();
            for (oy, gr) in gyp.chunks_exact(g.ow).enumerate() {
                s += dot(&plane[at + oy * sy * p.w..], gr, sx);
            }
            s
        }
    };
    for grp in 0..g.groups {
        for oc0 in (grp * cout_g..(grp + 1) * cout_g).step_by(chunk) {
            let oc1 = (oc0 + chunk).min((grp + 1) * cout_g);
            let tot = &mut tot[..(oc1 - oc0) * per_oc];
            tot.fill(T::default());
            for n in 0..g.n {
                let xs = &x[(n * g.c_in + grp * cin_g) * ip..][..cin_g * ip];
                pad_planes(xs, cin_g, (g.h, g.w), p, &mut xp);
                for oc in oc0..oc1 {
                    let src = &gy[(n * g.c_out + oc) * op..][..op];
                    let gyp: &[i32] = if flat {
                        let used = &mut gyrow[..(g.oh - 1) * p.w + g.ow];
                        used.fill(0);
                        for (sr, dr) in src.chunks_exact(g.ow).zip(used.chunks_mut(p.w)) {
                            for (d, s) in dr.iter_mut().zip(sr) {
                                *d = s.0;
                            }
                        }
                        used
                    } else {
                        for (d, s) in gyrow.iter_mut().zip(src) {
                            *d = s.0;
                        }
                        &gyrow[..op]
                    };
                    let t = &mut tot[(oc - oc0) * per_oc..][..per_oc];
                    for (plane, tc) in xp.chunks_exact(pp).zip(t.chunks_exact_mut(taps)) {
                        for ky in 0..g.kh {
                            for kx in 0..g.kw {
                                tc[ky * g.kw + kx] += tap_sum(gyp, plane, ky, kx);
                            }
                        }
                    }
                }
            }
            let out = &mut gw[oc0 * per_oc..oc1 * per_oc];
            for (gv, &t) in out.iter_mut().zip(tot.iter()) {
                *gv = finish(gv.0, t.to_i64());
            }
        }
    }
}

#[cfg(test)]
mod tests;
