//! conv2d with a frozen int8 weight on an `f32` graph: [`Graph::conv2d_int8`], forward
//! and backward-input (gradients flow through the frozen layer to what trains below
//! it, as bias-only fine-tuning needs), no weight gradient.
//!
//! The weight is one frozen tensor holding the output channels' `f32` scales followed
//! by the `i8` weights `[out, in/groups, kh, kw]` packed four to a word: the layout of
//! an int8 tensor of a model file, which [`Model::in_place`](crate::model::Model::in_place)
//! maps without copying. Validation, output shape and bytes are those of
//! [`Graph::conv2d`] with a frozen weight (a meta graph plans it exactly); its record
//! keeps nothing of the input. Kernels: `kernels/conv/q8_f32.rs`.

use super::conv::{geometry_of, Conv2dParams};
use crate::error::{Error, Result};
use crate::graph::{word, Graph, NodeId, Op, OpKind, Params};
use crate::kernels::conv::q8_f32::{conv2d_q8_backward_input, conv2d_q8_forward, packed_words, PackedI8};
use crate::kernels::conv::ConvGeom;
use crate::kernels::KernelSet;
use crate::scalar::Scalar;
use crate::shape::Shape;
use crate::Tensor;

const OP: &str = "conv2d_int8";

/// conv2d_int8's records: the input's gradient reads the weight (which lives as long
/// as the parameters); nothing reads the input.
pub(crate) static CONV2D_INT8: OpKind = OpKind {
    name: OP,
    reads_inputs: [0, 0b001, 0],
    reads_output: false,
};

/// Two values below 256 in one half-word.
fn byte_pair(v: [usize; 2]) -> Result<u16> {
    match (u8::try_from(v[0]), u8::try_from(v[1])) {
        (Ok(a), Ok(b)) => Ok(a as u16 | (b as u16) << 8),
        _ => Err(Error::Overflow { op: OP }),
    }
}

fn pair_of(w: u16) -> [usize; 2] {
    [(w & 0xFF) as usize, (w >> 8) as usize]
}

/// The record's words: stride, padding and dilation (each below 256 per side), then
/// the kernel's height, width and input channels per group.
fn pack(p: &Conv2dParams, dims: [usize; 4]) -> Result<Params> {
    Ok([
        byte_pair(p.stride)?,
        byte_pair(p.padding)?,
        byte_pair(p.dilation)?,
        word(dims[2], OP)?,
        word(dims[3], OP)?,
        word(dims[1], OP)?,
    ])
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// 2-D convolution of `x: [N, C, H, W]` with a frozen int8 weight of shape `dims =
    /// [O, C/groups, kh, kw]` and an optional bias `[O]`; output `[N, O, OH, OW]`.
    /// `w` is a tensor that needs no gradient holding `O` scales then the weights
    /// packed four to a word, little-endian (`O + ceil(numel/4)` values): output channel
    /// `o`'s weights are `q * scale[o]`. Stride, padding and dilation must be below
    /// 256 ([`Error::Overflow`]). Meant for `f32` graphs (the packed words are `f32`
    /// bits).
    pub fn conv2d_int8(
        &mut self,
        x: Tensor,
        w: Tensor,
        dims: [usize; 4],
        b: Option<Tensor>,
        p: Conv2dParams,
    ) -> Result<Tensor> {
        let (xi, wi) = (self.id(x)?, self.id(w)?);
        let bi = b.map(|b| self.id(b)).transpose()?;
        let (xn, wn) = (self.nodes[xi], self.nodes[wi]);
        let bn = bi.map(|i| self.nodes[i]);
        let ws = Shape::new(&dims)?;
        let g = geometry_of(OP, xn.shape(), ws, bn.map(|b| b.shape()), &p)?;
        let want = packed_words(ws.numel())
            .checked_add(g.c_out)
            .ok_or(Error::Overflow { op: OP })?;
        if wn.shape().numel() != want {
            return Err(Error::ShapeMismatch {
                op: OP,
                what:
                    "the int8 weight tensor has {found} words, its scales and packed weights take {expected}",
                expected: want,
                found: wn.shape().numel(),
            });
        }
        if wn.requires_grad() {
            return Err(Error::InvalidParam {
                op: OP,
                what: "an int8 weight is frozen, but this one requires a gradient; node",
                value: wi as i64,
            });
        }
        let rg = self.needs_grad(&[Some(xi), bi]);
        let op = match rg {
            true => Op::new(&CONV2D_INT8, [Some(xi), Some(wi), bi], pack(&p, dims)?),
            false => Op::LEAF,
        };
        let shape = Shape::nchw(g.n, g.c_out, g.oh, g.ow)?;
        let out = self.push(shape, op, Some(Self::conv2d_int8_rule), rg, 0)?;
        let (y, bspan) = (self.nodes[out.id as usize].data, bn.map(|b| b.data));
        let reads = [xn.data, wn.data, bspan.unwrap_or_default()];
        self.exec_n(reads, y, g.macs(), |[x, w, b], y| {
            let (scales, q) = w.split_at(g.c_out);
            conv2d_q8_forward(&g, x, &PackedI8(q), scales, bspan.map(|_| b), y)
        })?;
        Ok(out)
    }

    /// conv2d_int8's backward: the input's and the bias's gradients.
    fn conv2d_int8_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &CONV2D_INT8)?;
        let (x, w, b) = (op.input(0), op.input(1), op.opt_input(2));
        let geom = g.int8_geometry(i, x, &op.params)?;
        let gy = g.grads_for(i)?;
        let wn = g.nodes[w as usize];
        if let Some(gx) = g.grad_of(x) {
            g.exec_n([gy, wn.data], gx, geom.macs(), |[gy, w], gx| {
                let (scales, q) = w.split_at(geom.c_out);
                conv2d_q8_backward_input(&geom, gy, &PackedI8(q), scales, gx)
            })?;
        }
        if let Some(gb) = b.and_then(|b| g.grad_of(b)) {
            g.exec([gy], gb, |[gy], gb| {
                S::Kernels::conv2d_backward_bias(&geom, gy, gb)
            })?;
        }
        Ok(())
    }

    /// The geometry of record `i` (input `x`) from its words.
    fn int8_geometry(&self, i: usize, x: NodeId, w: &Params) -> Result<ConvGeom> {
        let (xs, ys) = (self.nodes[x as usize].shape(), self.nodes[i].shape());
        let (kh, kw, cin_g) = (w[3] as usize, w[4] as usize, (w[5] as usize).max(1));
        let p = Conv2dParams {
            stride: pair_of(w[0]),
            padding: pair_of(w[1]),
            dilation: pair_of(w[2]),
            groups: (xs.dim(1) / cin_g).max(1),
        };
        geometry_of(OP, xs, Shape::new(&[ys.dim(1), cin_g, kh, kw])?, None, &p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_words_round_trip_and_large_values_are_refused() {
        let p = Conv2dParams {
            stride: [2, 1],
            padding: [255, 0],
            dilation: [1, 3],
            groups: 4,
        };
        let w = pack(&p, [8, 2, 3, 5]).unwrap();
        assert_eq!(
            (pair_of(w[0]), pair_of(w[1]), pair_of(w[2])),
            ([2, 1], [255, 0], [1, 3])
        );
        assert_eq!((w[3], w[4], w[5]), (3, 5, 2));
        let big = Conv2dParams {
            padding: [256, 0],
            ..p
        };
        assert!(matches!(pack(&big, [8, 2, 3, 5]), Err(Error::Overflow { .. })));
    }

    #[test]
    fn a_weight_of_the_wrong_length_or_that_trains_is_refused() {
        let mut mem = [0f32; 256];
        let mut g: Graph<'_, f32, 16> = Graph::new(&mut mem);
        let ok = g.buffer(&[2 + 2]).unwrap(); // 2 scales, 8 weights in 2 words
        let short = g.buffer(&[3]).unwrap();
        let trains = g.param(&[4]).unwrap();
        let x = g.input(&[1, 2, 3, 3], &[0.5; 18]).unwrap();
        let dims = [2, 1, 2, 2];
        let p = Conv2dParams {
            groups: 2,
            ..Default::default()
        };
        assert!(g.conv2d_int8(x, ok, dims, None, p).is_ok());
        assert!(matches!(
            g.conv2d_int8(x, short, dims, None, p),
            Err(Error::ShapeMismatch { .. })
        ));
        assert!(matches!(
            g.conv2d_int8(x, trains, dims, None, p),
            Err(Error::InvalidParam { .. })
        ));
    }

    /// Runs conv2d (`int8`: through `conv2d_int8` on packed words) on a trainable input
    /// and bias, backward from `sum(y * seed)`, and returns y, the input's and the
    /// bias's gradients.
    fn run(int8: bool) -> [Vec<f32>; 3] {
        let (q, scales) = (
            [3i8, -127, 64, 0, 1, -5, 100, 7, -1, 2, 127, -64],
            [0.01f32, 0.25],
        );
        let mut mem = [0f32; 1024];
        let mut g: Graph<'_, f32, 32> = Graph::new(&mut mem);
        let x = g.param(&[2, 2, 4, 5]).unwrap();
        let b = g.param(&[2]).unwrap();
        let w = match int8 {
            true => g.buffer(&[2 + 3]).unwrap(),
            false => g.buffer(&[2, 1, 2, 3]).unwrap(),
        };
        let data: Vec<f32> = match int8 {
            true => {
                let mut words = scales.to_vec();
                words.extend(q.chunks(4).map(|c| {
                    f32::from_bits(u32::from_le_bytes([
                        c[0] as u8, c[1] as u8, c[2] as u8, c[3] as u8,
                    ]))
                }));
                words
            }
            false => (0..12).map(|i| q[i] as f32 * scales[i / 6]).collect(),
        };
        g.param_data_mut(w).unwrap().copy_from_slice(&data);
        for (k, v) in g.param_data_mut(x).unwrap().iter_mut().enumerate() {
            *v = (k as f32 * 0.37).sin();
        }
        g.param_data_mut(b).unwrap().copy_from_slice(&[0.5, -1.5]);
        let p = Conv2dParams {
            stride: [2, 1],
            padding: [1, 2],
            dilation: [1, 2],
            groups: 2,
        };
        let y = match int8 {
            true => g.conv2d_int8(x, w, [2, 1, 2, 3], Some(b), p),
            false => g.conv2d(x, w, Some(b), p),
        }
        .unwrap();
        let n = g.data(y).unwrap().len();
        let seed: Vec<f32> = (0..n).map(|k| (k as f32 * 0.71).cos()).collect();
        let out = g.data(y).unwrap().to_vec();
        g.backward_with(y, &seed).unwrap();
        let gx = g.grad(x).unwrap().unwrap().to_vec();
        let gb = g.grad(b).unwrap().unwrap().to_vec();
        [out, gx, gb]
    }

    #[test]
    fn forward_and_gradients_equal_conv2d_on_the_dequantized_weight() {
        let (want, got) = (run(false), run(true));
        for (k, (a, b)) in want.iter().zip(&got).enumerate() {
            assert_eq!(a.len(), b.len());
            for (u, v) in a.iter().zip(b) {
                assert!((u - v).abs() <= 1e-5 * (1.0 + u.abs()), "output {k}: {u} vs {v}");
            }
        }
    }
}
