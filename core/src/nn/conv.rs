//! Convolution layers beyond the square [`Conv2d`]: a rectangular-kernel `Conv2d`
//! constructor, [`Conv1d`] and [`ConvTranspose2d`], each initialised as PyTorch does
//! (`U(-1/sqrt(fan_in), 1/sqrt(fan_in))` for weight and bias, `fan_in` read off the
//! weight as `weight.size(1) * kernel taps`).

use super::Conv2d;
use crate::error::{Error, Result};
use crate::graph::{Graph, Tensor};
use crate::init::{uniform_fan_in, Rng};
use crate::ops::conv::Conv2dParams;
use crate::ops::conv1d::Conv1dParams;
use crate::ops::conv_transpose::ConvTranspose2dParams;
use crate::scalar::Scalar;

/// Refuses `groups` that is zero or does not divide both channel counts.
fn check_groups(op: &'static str, groups: usize, in_ch: usize, out_ch: usize) -> Result<()> {
    if groups == 0 || !in_ch.is_multiple_of(groups) || !out_ch.is_multiple_of(groups) {
        return Err(Error::InvalidParam {
            op,
            what: "groups must divide the input and output channels",
            value: groups as i64,
        });
    }
    Ok(())
}

/// A weight of `dims` and an optional bias of `out` values, PyTorch's initialisation.
fn weight_and_bias<S: Scalar, const N: usize>(
    g: &mut Graph<'_, S, N>,
    dims: &[usize],
    out: usize,
    bias: bool,
    rng: &mut Rng,
) -> Result<(Tensor, Option<Tensor>)> {
    let weight = g.param(dims)?;
    let fan_in = dims[1..].iter().product();
    uniform_fan_in(g, weight, fan_in, rng)?;
    let bias = match bias {
        true => {
            let b = g.param(&[out])?;
            uniform_fan_in(g, b, fan_in, rng)?;
            Some(b)
        }
        false => None,
    };
    Ok((weight, bias))
}

impl Conv2d {
    /// A `kernel[0] x kernel[1]` convolution from `in_ch` to `out_ch` channels
    /// (`nn.Conv2d(in_ch, out_ch, (kh, kw))`); stride, padding and dilation are
    /// per-dimension in `params`.
    pub fn rect<S: Scalar, const N: usize>(
        g: &mut Graph<'_, S, N>,
        in_ch: usize,
        out_ch: usize,
        kernel: [usize; 2],
        params: Conv2dParams,
        bias: bool,
        rng: &mut Rng,
    ) -> Result<Self> {
        check_groups("Conv2d", params.groups, in_ch, out_ch)?;
        let dims = [out_ch, in_ch / params.groups, kernel[0], kernel[1]];
        let (weight, bias) = weight_and_bias(g, &dims, out_ch, bias, rng)?;
        Ok(Conv2d { weight, bias, params })
    }
}

/// A 1-D convolution layer over `[N, C, L]` (`nn.Conv1d`).
#[derive(Clone, Copy, Debug)]
pub struct Conv1d {
    /// `[out, in/groups, k]`.
    pub weight: Tensor,
    /// `[out]`, if the layer has a bias.
    pub bias: Option<Tensor>,
    /// Stride, padding, dilation, groups.
    pub params: Conv1dParams,
}

impl Conv1d {
    /// A width-`kernel` convolution from `in_ch` to `out_ch` channels.
    pub fn new<S: Scalar, const N: usize>(
        g: &mut Graph<'_, S, N>,
        in_ch: usize,
        out_ch: usize,
        kernel: usize,
        params: Conv1dParams,
        bias: bool,
        rng: &mut Rng,
    ) -> Result<Self> {
        check_groups("Conv1d", params.groups, in_ch, out_ch)?;
        let dims = [out_ch, in_ch / params.groups, kernel];
        let (weight, bias) = weight_and_bias(g, &dims, out_ch, bias, rng)?;
        Ok(Conv1d { weight, bias, params })
    }

    /// Applies the layer.
    pub fn forward<S: Scalar, const N: usize>(&self, g: &mut Graph<'_, S, N>, x: Tensor) -> Result<Tensor> {
        g.conv1d(x, self.weight, self.bias, self.params)
    }
}

/// A 2-D transposed convolution layer (`nn.ConvTranspose2d`), the learned upsampling
/// of segmentation nets. Its parameters are kept as 16-bit values (the op records them
/// so anyway), which keeps [`super::Layer`] at its size: firmware holds a `Sequential`
/// within a 16 KiB RAM budget.
#[derive(Clone, Copy, Debug)]
pub struct ConvTranspose2d {
    /// `[in, out/groups, kh, kw]`.
    pub weight: Tensor,
    /// `[out]`, if the layer has a bias.
    pub bias: Option<Tensor>,
    /// stride, padding, output_padding, dilation (rows, columns each), groups.
    sizes: [u16; 9],
}

impl ConvTranspose2d {
    /// A `kernel[0] x kernel[1]` transposed convolution from `in_ch` to `out_ch`
    /// channels.
    pub fn new<S: Scalar, const N: usize>(
        g: &mut Graph<'_, S, N>,
        in_ch: usize,
        out_ch: usize,
        kernel: [usize; 2],
        params: ConvTranspose2dParams,
        bias: bool,
        rng: &mut Rng,
    ) -> Result<Self> {
        check_groups("ConvTranspose2d", params.groups, in_ch, out_ch)?;
        let p = params;
        let all = [
            p.stride[0],
            p.stride[1],
            p.padding[0],
            p.padding[1],
            p.output_padding[0],
            p.output_padding[1],
            p.dilation[0],
            p.dilation[1],
            p.groups,
        ];
        let mut sizes = [0u16; 9];
        for (d, &v) in sizes.iter_mut().zip(&all) {
            *d = u16::try_from(v).map_err(|_| Error::Overflow {
                op: "ConvTranspose2d",
            })?;
        }
        let dims = [in_ch, out_ch / params.groups, kernel[0], kernel[1]];
        let (weight, bias) = weight_and_bias(g, &dims, out_ch, bias, rng)?;
        Ok(ConvTranspose2d { weight, bias, sizes })
    }

    /// Stride, padding, output_padding, groups, dilation.
    pub fn params(&self) -> ConvTranspose2dParams {
        let u = |k: usize| usize::from(self.sizes[k]);
        ConvTranspose2dParams {
            stride: [u(0), u(1)],
            padding: [u(2), u(3)],
            output_padding: [u(4), u(5)],
            groups: u(8),
            dilation: [u(6), u(7)],
        }
    }

    /// Applies the layer.
    pub fn forward<S: Scalar, const N: usize>(&self, g: &mut Graph<'_, S, N>, x: Tensor) -> Result<Tensor> {
        g.conv_transpose2d(x, self.weight, self.bias, self.params())
    }
}

// A layer stays small: W1 firmware holds a `Sequential<12>` of them. BatchNorm2d (four
// tensor handles, two numbers) is the largest arm: at most 16 words (64 bytes on 32-bit
// targets).
const _: () = assert!(core::mem::size_of::<super::Layer>() <= 16 * core::mem::size_of::<usize>());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_have_pytorch_shapes_and_bounds_and_run() {
        let mut arena = vec![0.0f32; 1 << 14];
        let mut g: Graph<f32, 32> = Graph::new(&mut arena);
        let mut rng = Rng::new(1);
        let p2 = Conv2dParams {
            stride: [1, 2],
            padding: [2, 0],
            ..Default::default()
        };
        let c2 = Conv2d::rect(&mut g, 4, 6, [5, 3], p2, true, &mut rng).unwrap();
        let p1 = Conv1dParams {
            groups: 2,
            padding: 1,
            ..Default::default()
        };
        let c1 = Conv1d::new(&mut g, 4, 6, 3, p1, true, &mut rng).unwrap();
        let pt = ConvTranspose2dParams {
            stride: [2, 2],
            output_padding: [1, 0],
            ..Default::default()
        };
        let ct = ConvTranspose2d::new(&mut g, 6, 4, [2, 3], pt, false, &mut rng).unwrap();
        assert!(ct.bias.is_none());
        assert_eq!(ct.params(), pt);
        let big = ConvTranspose2dParams {
            output_padding: [65_536, 0],
            ..pt
        };
        assert!(ConvTranspose2d::new(&mut g, 6, 4, [2, 3], big, false, &mut rng).is_err());
        // Layer keeps its size (firmware RAM).
        assert!(core::mem::size_of::<ConvTranspose2d>() <= core::mem::size_of::<Conv2d>());
        assert!(core::mem::size_of::<Conv1d>() <= core::mem::size_of::<Conv2d>());
        for (t, dims, fan_in) in [
            (c2.weight, &[6, 4, 5, 3][..], 60.0f32),
            (c1.weight, &[6, 2, 3][..], 6.0),
            (ct.weight, &[6, 4, 2, 3][..], 24.0),
        ] {
            assert_eq!(g.shape(t).unwrap().dims(), dims);
            let bound = 1.0 / fan_in.sqrt();
            let d = g.param_data_mut(t).unwrap();
            assert!(d.iter().all(|v| v.abs() <= bound));
            assert!(d.iter().any(|v| v.abs() > bound / 2.0));
        }
        assert!(Conv1d::new(&mut g, 4, 5, 3, p1, true, &mut rng).is_err());
        assert!(Conv2d::rect(
            &mut g,
            4,
            6,
            [3, 3],
            Conv2dParams { groups: 0, ..p2 },
            true,
            &mut rng
        )
        .is_err());
        let x = g.input(&[1, 4, 7, 8], &[0.5; 224]).unwrap();
        let y = c2.forward(&mut g, x).unwrap();
        assert_eq!(g.shape(y).unwrap().dims(), &[1, 6, 7, 3]);
        let z = ct.forward(&mut g, y).unwrap();
        assert_eq!(g.shape(z).unwrap().dims(), &[1, 4, 15, 7]);
        let s = g.input(&[2, 4, 9], &[0.25; 72]).unwrap();
        let t = c1.forward(&mut g, s).unwrap();
        assert_eq!(g.shape(t).unwrap().dims(), &[2, 6, 9]);
    }
}
