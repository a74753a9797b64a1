//! Direct 2-D convolution, forward and both backward passes, NCHW.
//!
//! - Forward: for every output plane, every input channel of its group and every
//!   kernel tap, add `w * input row` to each output row the tap reaches (an axpy over
//!   the valid part of the row, so padding costs no branch in the inner loop).
//! - Backward input: the same loops with the axpy scattered into the input gradient.
//! - Backward weight: one dot product per tap, accumulated in the wide accumulator.
//! - No workspace: im2col would need `C*kh*kw*OH*OW` words, more than a whole W1 step
//!   on a microcontroller.

pub mod bias;
#[cfg(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "wasm32",
    target_arch = "aarch64"
))]
pub mod fast_f32;
#[cfg(any(test, all(target_arch = "arm", target_abi = "eabihf")))]
pub mod m_f32;
pub mod q16;
pub mod q8;
pub mod q8_f32;

use super::{axpy_scatter, axpy_strided, dot_strided, valid_range};
use crate::scalar::Scalar;

/// Every size of one convolution, validated by the op before any kernel runs.
#[derive(Clone, Copy, Debug)]
pub struct ConvGeom {
    /// Batch.
    pub n: usize,
    /// Input channels.
    pub c_in: usize,
    /// Input height and width.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output channels.
    pub c_out: usize,
    /// Kernel height.
    pub kh: usize,
    /// Kernel width.
    pub kw: usize,
    /// Output height.
    pub oh: usize,
    /// Output width.
    pub ow: usize,
    /// Stride (rows, columns).
    pub stride: [usize; 2],
    /// Zero padding (rows, columns).
    pub pad: [usize; 2],
    /// Dilation (rows, columns).
    pub dil: [usize; 2],
    /// Channel groups.
    pub groups: usize,
}

impl ConvGeom {
    /// Multiply-accumulates of the convolution (and of each of its input- and
    /// weight-gradient passes): output elements x input channels per group x kernel
    /// taps, saturating.
    pub(crate) fn macs(&self) -> u64 {
        let parts = [
            self.n,
            self.c_out,
            self.oh,
            self.ow,
            self.cin_g(),
            self.kh,
            self.kw,
        ];
        parts.iter().fold(1u64, |acc, &p| acc.saturating_mul(p as u64))
    }

    fn cin_g(&self) -> usize {
        self.c_in / self.groups
    }
    fn cout_g(&self) -> usize {
        self.c_out / self.groups
    }
    fn taps(&self) -> usize {
        self.kh * self.kw
    }

    /// Calls `f(oy0..oy1, iy(oy), ox0..ox1, ix0)` for every tap `(ky, kx)` that reaches
    /// at least one output, with the valid output ranges.
    #[inline(always)]
    fn for_each_tap(&self, mut f: impl FnMut(usize, usize, usize, usize, usize, usize)) {
        for ky in 0..self.kh {
            let (oy0, oy1) = valid_range(self.oh, self.h, self.stride[0], self.pad[0], ky * self.dil[0]);
            for kx in 0..self.kw {
                let (ox0, ox1) = valid_range(self.ow, self.w, self.stride[1], self.pad[1], kx * self.dil[1]);
                if ox0 < ox1 && oy0 < oy1 {
                    f(ky * self.kw + kx, ky, oy0, oy1, ox0, ox1 - ox0);
                }
            }
        }
    }

    fn iy(&self, oy: usize, ky: usize) -> usize {
        oy * self.stride[0] + ky * self.dil[0] - self.pad[0]
    }
    fn ix(&self, ox: usize, tap: usize) -> usize {
        let kx = tap % self.kw;
        ox * self.stride[1] + kx * self.dil[1] - self.pad[1]
    }
}

/// `y = conv(x, w) + b`.
pub fn conv2d_forward<S: Scalar>(g: &ConvGeom, x: &[S], w: &[S], b: Option<&[S]>, y: &mut [S]) {
    conv2d_forward_by(g, x, |_, i| w[i], b, y)
}

/// [`conv2d_forward`] with weight `i` (row-major; `oc` its output channel) from
/// `weight`: the one loop nest of the reference kernel and of the int8 weights that
/// are dequantized as they are read ([`q8_f32`]).
pub(crate) fn conv2d_forward_by<S: Scalar>(
    g: &ConvGeom,
    x: &[S],
    weight: impl Fn(usize, usize) -> S,
    b: Option<&[S]>,
    y: &mut [S],
) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    debug_assert_eq!(x.len(), g.n * g.c_in * ip);
    debug_assert_eq!(y.len(), g.n * g.c_out * op);
    for n in 0..g.n {
        for oc in 0..g.c_out {
            let grp = oc / g.cout_g();
            let yp = &mut y[(n * g.c_out + oc) * op..][..op];
            yp.fill(b.map_or(S::ZERO, |b| b[oc]));
            for icg in 0..g.cin_g() {
                let xp = &x[(n * g.c_in + grp * g.cin_g() + icg) * ip..][..ip];
                let w0 = (oc * g.cin_g() + icg) * g.taps();
                g.for_each_tap(|tap, ky, oy0, oy1, ox0, len| {
                    let (ix0, wt) = (g.ix(ox0, tap), weight(oc, w0 + tap));
                    for oy in oy0..oy1 {
                        let xr = &xp[g.iy(oy, ky) * g.w + ix0..];
                        axpy_strided(&mut yp[oy * g.ow + ox0..][..len], wt, xr, g.stride[1]);
                    }
                });
            }
        }
    }
}

/// `gx += conv_transpose(gy, w)`: the gradient with respect to the input.
pub fn conv2d_backward_input<S: Scalar>(g: &ConvGeom, gy: &[S], w: &[S], gx: &mut [S]) {
    conv2d_backward_input_by(g, gy, |_, i| w[i], gx)
}

/// [`conv2d_backward_input`] with weight `i` from `weight`, as [`conv2d_forward_by`].
pub(crate) fn conv2d_backward_input_by<S: Scalar>(
    g: &ConvGeom,
    gy: &[S],
    weight: impl Fn(usize, usize) -> S,
    gx: &mut [S],
) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    for n in 0..g.n {
        for oc in 0..g.c_out {
            let grp = oc / g.cout_g();
            let gyp = &gy[(n * g.c_out + oc) * op..][..op];
            for icg in 0..g.cin_g() {
                let gxp = &mut gx[(n * g.c_in + grp * g.cin_g() + icg) * ip..][..ip];
                let w0 = (oc * g.cin_g() + icg) * g.taps();
                g.for_each_tap(|tap, ky, oy0, oy1, ox0, len| {
                    let (ix0, wt) = (g.ix(ox0, tap), weight(oc, w0 + tap));
                    for oy in oy0..oy1 {
                        let xr = &mut gxp[g.iy(oy, ky) * g.w + ix0..];
                        axpy_scatter(xr, wt, &gyp[oy * g.ow + ox0..][..len], g.stride[1]);
                    }
                });
            }
        }
    }
}

/// `gw += correlate(gy, x)`: the gradient with respect to the weight.
pub fn conv2d_backward_weight<S: Scalar>(g: &ConvGeom, gy: &[S], x: &[S], gw: &mut [S]) {
    let (ip, op) = (g.h * g.w, g.oh * g.ow);
    for oc in 0..g.c_out {
        let grp = oc / g.cout_g();
        for icg in 0..g.cin_g() {
            let gwk = &mut gw[(oc * g.cin_g() + icg) * g.taps()..][..g.taps()];
            g.for_each_tap(|tap, ky, oy0, oy1, ox0, len| {
                let ix0 = g.ix(ox0, tap);
                let mut acc = S::acc_zero();
                for n in 0..g.n {
                    let gyp = &gy[(n * g.c_out + oc) * op..][..op];
                    let xp = &x[(n * g.c_in + grp * g.cin_g() + icg) * ip..][..ip];
                    for oy in oy0..oy1 {
                        let xr = &xp[g.iy(oy, ky) * g.w + ix0..];
                        acc = dot_strided(acc, &gyp[oy * g.ow + ox0..][..len], xr, g.stride[1]);
                    }
                }
                gwk[tap] += S::from_acc(acc);
            });
        }
    }
}

/// `gb[c] += sum of gy over batch and plane`.
pub fn conv2d_backward_bias<S: Scalar>(g: &ConvGeom, gy: &[S], gb: &mut [S]) {
    let op = g.oh * g.ow;
    for (oc, gbv) in gb.iter_mut().enumerate() {
        let mut acc = S::acc_zero();
        for n in 0..g.n {
            for &v in &gy[(n * g.c_out + oc) * op..][..op] {
                acc = S::acc_add(acc, v);
            }
        }
        *gbv += S::from_acc(acc);
    }
}
