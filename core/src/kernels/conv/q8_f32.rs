//! Frozen int8 convolutions for `f32` graphs: weights `[out, in/groups, kh, kw]` stored
//! as `i8` with one real scale per output channel (weight = `q * scale[co]`), read in
//! place (from a model file in flash), never expanded into a weight tensor.
//!
//! - Forward: `y = b + sum(q * scale[co] * x)`; backward-input:
//!   `gx += sum_co q * scale[co] * gy`. No weight gradient: the weights are frozen.
//! - Each tap's weight is dequantized once (`q as f32 * scale`) and used for a whole
//!   row, in the reference kernels' own loop nest ([`super::conv2d_forward`]), so the
//!   result equals the reference convolution on the dequantized weights, bit for bit.
//! - Plain loop nests with no scratch memory (the device runs size-first kernels);
//!   generic over the scalar type so that the graph's generic model runner can call it.
//! - [`Int8`] reads the weights: a `[i8]` slice, or [`PackedI8`], four weights to a
//!   word of the graph's arena (a model file's bytes mapped as words).

use super::{conv2d_backward_input_by, conv2d_forward_by, ConvGeom};
use crate::scalar::Scalar;

/// Where the int8 weights come from: `q(i)` is weight `i` in row-major order.
pub trait Int8 {
    /// Weight `i`.
    fn q(&self, i: usize) -> i8;
}

impl Int8 for [i8] {
    fn q(&self, i: usize) -> i8 {
        self[i]
    }
}

/// Int8 weights packed four to a word, little-endian, as a model file stores them
/// (weight `i` is byte `i % 4` of word `i / 4`'s bits).
#[derive(Clone, Copy, Debug)]
pub struct PackedI8<'a, S>(pub &'a [S]);

impl<S: Scalar> Int8 for PackedI8<'_, S> {
    fn q(&self, i: usize) -> i8 {
        (self.0[i / 4].to_bits() >> (8 * (i % 4))) as u8 as i8
    }
}

/// Number of words [`PackedI8`] takes for `n` weights.
pub const fn packed_words(n: usize) -> usize {
    n.div_ceil(4)
}

fn weight<S: Scalar>(q: &(impl Int8 + ?Sized), scales: &[S], oc: usize, i: usize) -> S {
    S::from_f32(q.q(i) as f32) * scales[oc]
}

/// `y = conv(x, q * scale) + b`.
pub fn conv2d_q8_forward<S: Scalar>(
    g: &ConvGeom,
    x: &[S],
    q: &(impl Int8 + ?Sized),
    scales: &[S],
    b: Option<&[S]>,
    y: &mut [S],
) {
    conv2d_forward_by(g, x, |oc, i| weight(q, scales, oc, i), b, y)
}

/// `gx += conv_transpose(gy, q * scale)`: the gradient with respect to the input.
pub fn conv2d_q8_backward_input<S: Scalar>(
    g: &ConvGeom,
    gy: &[S],
    q: &(impl Int8 + ?Sized),
    scales: &[S],
    gx: &mut [S],
) {
    conv2d_backward_input_by(g, gy, |oc, i| weight(q, scales, oc, i), gx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::conv::{conv2d_backward_input, conv2d_forward};

    /// A small deterministic generator (no dependency).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u32 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) as u32
        }
        fn f(&mut self) -> f32 {
            self.next() as f32 / (1u64 << 31) as f32 - 1.0
        }
        fn i8(&mut self) -> i8 {
            ((self.next() % 255) as i32 - 127) as i8
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn geom(
        n: usize,
        c_in: usize,
        h: usize,
        w: usize,
        c_out: usize,
        k: [usize; 2],
        s: [usize; 2],
        pad: [usize; 2],
        dil: [usize; 2],
        groups: usize,
    ) -> ConvGeom {
        let out =
            |len: usize, k: usize, s: usize, p: usize, d: usize| (len + 2 * p - d * (k - 1) - 1) / s + 1;
        ConvGeom {
            n,
            c_in,
            h,
            w,
            c_out,
            kh: k[0],
            kw: k[1],
            oh: out(h, k[0], s[0], pad[0], dil[0]),
            ow: out(w, k[1], s[1], pad[1], dil[1]),
            stride: s,
            pad,
            dil,
            groups,
        }
    }

    fn pack(q: &[i8]) -> Vec<f32> {
        let mut words = vec![0f32; packed_words(q.len())];
        for (k, w) in words.iter_mut().enumerate() {
            let mut b = [0u8; 4];
            for (j, v) in b.iter_mut().enumerate() {
                *v = q.get(4 * k + j).map_or(0, |&q| q as u8);
            }
            *w = f32::from_bits(u32::from_le_bytes(b));
        }
        words
    }

    #[test]
    fn matches_the_reference_on_dequantized_weights() {
        let mut r = Lcg(7);
        let cases = [
            // n, c_in, h, w, c_out, k, stride, pad, dil, groups
            geom(1, 1, 9, 7, 3, [3, 3], [2, 2], [1, 1], [1, 1], 1),
            geom(2, 4, 6, 5, 4, [3, 3], [1, 1], [1, 1], [1, 1], 4),
            geom(3, 6, 7, 8, 4, [1, 1], [1, 1], [0, 0], [1, 1], 2),
            geom(2, 8, 11, 9, 8, [3, 3], [2, 2], [1, 1], [1, 1], 8),
            geom(1, 3, 10, 13, 5, [2, 3], [1, 2], [0, 2], [2, 1], 1),
            geom(2, 5, 5, 5, 7, [1, 1], [2, 1], [1, 0], [1, 1], 1),
        ];
        for g in &cases {
            let nw = g.c_out * g.cin_g() * g.taps();
            let q: Vec<i8> = (0..nw).map(|_| r.i8()).collect();
            let scales: Vec<f32> = (0..g.c_out).map(|_| (r.f().abs() + 0.01) / 127.0).collect();
            let w: Vec<f32> = (0..nw)
                .map(|i| q[i] as f32 * scales[i / (nw / g.c_out)])
                .collect();
            let x: Vec<f32> = (0..g.n * g.c_in * g.h * g.w).map(|_| r.f()).collect();
            let b: Vec<f32> = (0..g.c_out).map(|_| r.f()).collect();
            let ny = g.n * g.c_out * g.oh * g.ow;
            let (mut want, mut got, mut got_p) = (vec![0.0; ny], vec![1.0; ny], vec![2.0; ny]);
            conv2d_forward(g, &x, &w, Some(&b), &mut want);
            conv2d_q8_forward(g, &x, &q[..], &scales, Some(&b), &mut got);
            conv2d_q8_forward(g, &x, &PackedI8(&pack(&q)), &scales, Some(&b), &mut got_p);
            assert_eq!(want, got, "{g:?}");
            assert_eq!(want, got_p, "{g:?}");
            conv2d_forward(g, &x, &w, None, &mut want);
            conv2d_q8_forward(g, &x, &q[..], &scales, None, &mut got);
            assert_eq!(want, got, "{g:?}");
            let gy: Vec<f32> = (0..ny).map(|_| r.f()).collect();
            let gx0: Vec<f32> = (0..x.len()).map(|_| r.f()).collect();
            let (mut want, mut got) = (gx0.clone(), gx0.clone());
            conv2d_backward_input(g, &gy, &w, &mut want);
            conv2d_q8_backward_input(g, &gy, &PackedI8(&pack(&q)), &scales, &mut got);
            assert_eq!(want, got, "{g:?}");
        }
    }

    #[test]
    fn packed_weights_read_every_byte() {
        let q: Vec<i8> = vec![-128, -1, 0, 1, 127, 5, -7];
        let words = pack(&q);
        assert_eq!(words.len(), 2);
        let p = PackedI8(&words);
        assert_eq!((0..q.len()).map(|i| p.q(i)).collect::<Vec<_>>(), q);
    }
}
