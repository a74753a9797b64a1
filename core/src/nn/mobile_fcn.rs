//! Reference workload W2, "mobile-fcn": a MobileNetV2-style network of depthwise-
//! separable inverted residual blocks with BatchNorm and ReLU6, written with the
//! [`Block`] trait. Its parameters are created in PyTorch's `state_dict` order (the
//! model of `tests/golden/make_w2.py`), buffers included, so weights line up by position.

use super::{BatchNorm2d, Block, Conv2d, Dropout, Linear};
use crate::error::Result;
use crate::graph::{Graph, Tensor};
use crate::init::Rng;
use crate::ops::conv::Conv2dParams;
use crate::scalar::Scalar;

/// A convolution without bias, BatchNorm and, optionally, ReLU6.
#[derive(Clone, Copy, Debug)]
pub struct ConvBn {
    /// The convolution.
    pub conv: Conv2d,
    /// Its BatchNorm.
    pub bn: BatchNorm2d,
    /// Whether ReLU6 follows.
    pub relu6: bool,
}

impl ConvBn {
    /// `k x k` convolution (padding `k / 2`) from `cin` to `cout` channels.
    pub fn new<S: Scalar, const N: usize>(
        g: &mut Graph<'_, S, N>,
        (cin, cout, k): (usize, usize, usize),
        stride: usize,
        groups: usize,
        relu6: bool,
        rng: &mut Rng,
    ) -> Result<Self> {
        let p = Conv2dParams {
            stride: [stride; 2],
            padding: [k / 2; 2],
            groups,
            ..Conv2dParams::default()
        };
        let conv = Conv2d::new(g, cin, cout, k, p, false, rng)?;
        let bn = BatchNorm2d::new(g, cout)?;
        Ok(ConvBn { conv, bn, relu6 })
    }
}

impl<S: Scalar, const N: usize> Block<S, N> for ConvBn {
    fn forward(&self, g: &mut Graph<'_, S, N>, x: Tensor) -> Result<Tensor> {
        let c = self.conv.forward(g, x)?;
        let b = self.bn.forward_consuming(g, c)?;
        if !self.relu6 {
            return Ok(b);
        }
        g.relu6_(b)
    }
}

/// Expand 1x1 (absent at expansion 1), depthwise 3x3, project 1x1; `x + block(x)` when
/// the stride is 1 and the channels stay.
#[derive(Clone, Copy, Debug)]
pub struct InvertedResidual {
    /// The 1x1 expansion (`None` at expansion 1).
    pub expand: Option<ConvBn>,
    /// The depthwise 3x3 convolution.
    pub depthwise: ConvBn,
    /// The 1x1 projection (no ReLU6).
    pub project: ConvBn,
    /// Whether the input is added to the output.
    pub residual: bool,
}

impl InvertedResidual {
    /// A block from `cin` to `cout` channels.
    pub fn new<S: Scalar, const N: usize>(
        g: &mut Graph<'_, S, N>,
        (cin, cout): (usize, usize),
        stride: usize,
        expansion: usize,
        rng: &mut Rng,
    ) -> Result<Self> {
        let mid = cin * expansion;
        let expand = match expansion {
            1 => None,
            _ => Some(ConvBn::new(g, (cin, mid, 1), 1, 1, true, rng)?),
        };
        let depthwise = ConvBn::new(g, (mid, mid, 3), stride, mid, true, rng)?;
        let project = ConvBn::new(g, (mid, cout, 1), 1, 1, false, rng)?;
        Ok(InvertedResidual {
            expand,
            depthwise,
            project,
            residual: stride == 1 && cin == cout,
        })
    }
}

impl<S: Scalar, const N: usize> Block<S, N> for InvertedResidual {
    fn forward(&self, g: &mut Graph<'_, S, N>, x: Tensor) -> Result<Tensor> {
        let e = match &self.expand {
            Some(c) => c.forward(g, x)?,
            None => x,
        };
        let d = self.depthwise.forward(g, e)?;
        if e != x {
            g.free(e)?;
        }
        let p = self.project.forward(g, d)?;
        g.free(d)?;
        if !self.residual {
            return Ok(p);
        }
        // The projection's output has no other reader: the sum takes over its memory.
        if g.can_overwrite_tensor(p) {
            return g.add_(p, x);
        }
        let y = g.add(x, p)?;
        g.free(p)?;
        Ok(y)
    }
}

/// W2: stem conv3x3 stride 2 (1->8) + BN + ReLU6; five inverted residual blocks;
/// global average pool; dropout 0.1; linear 32->10. 18,602 parameters; inputs of at
/// least 16x16 (any size, step to step).
#[derive(Clone, Copy, Debug)]
pub struct MobileFcn {
    /// The stem.
    pub stem: ConvBn,
    /// (8->8, s1, x1), (8->16, s2, x4), (16->16, s1, x4), (16->32, s2, x4), (32->32, s1, x4).
    pub blocks: [InvertedResidual; 5],
    /// Dropout before the classifier.
    pub dropout: Dropout,
    /// The classifier.
    pub fc: Linear,
}

/// W2 with PyTorch's initialisation (BatchNorm: weight 1, bias 0).
pub fn mobile_fcn<S: Scalar, const N: usize>(g: &mut Graph<'_, S, N>, rng: &mut Rng) -> Result<MobileFcn> {
    let stem = ConvBn::new(g, (1, 8, 3), 2, 1, true, rng)?;
    let mut block = |cin, cout, stride, e| InvertedResidual::new(g, (cin, cout), stride, e, rng);
    let blocks = [
        block(8, 8, 1, 1)?,
        block(8, 16, 2, 4)?,
        block(16, 16, 1, 4)?,
        block(16, 32, 2, 4)?,
        block(32, 32, 1, 4)?,
    ];
    let dropout = Dropout::new(0.1)?;
    let fc = Linear::new(g, 32, 10, true, rng)?;
    Ok(MobileFcn {
        stem,
        blocks,
        dropout,
        fc,
    })
}

impl<S: Scalar, const N: usize> Block<S, N> for MobileFcn {
    fn forward(&self, g: &mut Graph<'_, S, N>, x: Tensor) -> Result<Tensor> {
        let mut y = self.stem.forward(g, x)?;
        for b in &self.blocks {
            let z = b.forward(g, y)?;
            g.free(y)?;
            y = z;
        }
        let p = g.adaptive_avg_pool2d(y, [1, 1])?;
        g.free(y)?;
        let f = g.flatten(p, 1)?;
        let d = self.dropout.forward(g, f)?;
        if d != f {
            g.free(f)?;
        }
        let out = self.fc.forward(g, d)?;
        g.free(d)?;
        Ok(out)
    }
}
