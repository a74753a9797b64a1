//! Workload W1 ("digits-fcn") on the device: the meta plan of a training step, one
//! training step on a sample at its own size, and held-out accuracy. The same step
//! code runs on the meta graph and on the real one, so the plan is exact.
//!
//! The step, the plan and the accuracy are written once for any [`Net`]: W1's
//! hand-written layers (`Sequential<12>`, through [`forward_w1`]) or a network loaded
//! from a model file (`torchlet::model::Model`, see `crate::finetune`).

use crate::assets::Sample;
use torchlet::init::Rng;
use torchlet::nn::{digits_fcn, Layer, Sequential};
use torchlet::optim::Sgd;
use torchlet::{Error, Graph, Tensor};

/// Tape capacity W1 needs: 8 parameters, 1 input, 12 op records (with room to spare).
pub const TAPE: usize = 32;

/// The fine-tuning optimizer's settings.
#[derive(Clone, Copy)]
pub struct Recipe {
    /// SGD learning rate.
    pub lr: f32,
    /// SGD momentum.
    pub momentum: f32,
}

/// A network the training step runs: its forward pass on the tape, one sample in
/// (`[1, 1, h, w]`), logits out.
pub trait Net {
    /// The logits of `x`.
    fn forward<const N: usize>(&self, g: &mut Graph<'_, f32, N>, x: Tensor) -> Result<Tensor, Error>;
}

impl Net for Sequential<12> {
    fn forward<const N: usize>(&self, g: &mut Graph<'_, f32, N>, x: Tensor) -> Result<Tensor, Error> {
        forward_w1(self, g, x)
    }
}

impl Net for torchlet::model::Model<'_> {
    fn forward<const N: usize>(&self, g: &mut Graph<'_, f32, N>, x: Tensor) -> Result<Tensor, Error> {
        torchlet::model::Model::forward(self, g, &[x]).map_err(Error::from)
    }
}

/// The model and its optimizer, built on a graph.
pub struct Model<M = Sequential<12>> {
    /// The layers (W1's by default).
    pub net: M,
    /// SGD with momentum, state in the graph's long-lived region.
    pub sgd: Sgd,
}

impl Model {
    /// Creates W1's parameters (initialised, to be overwritten by loaded weights) and the
    /// optimizer state in `g`.
    pub fn new<const N: usize>(g: &mut Graph<'_, f32, N>, r: Recipe) -> Result<Self, Error> {
        let net = digits_fcn(g, &mut Rng::new(0))?;
        Self::with_net(g, net, r)
    }
}

impl<M: Net> Model<M> {
    /// `net` (its parameters already in `g`) and the optimizer state, created in `g`.
    pub fn with_net<const N: usize>(g: &mut Graph<'_, f32, N>, net: M, r: Recipe) -> Result<Self, Error> {
        let sgd = Sgd::new(g, r.lr, r.momentum, 0.0)?;
        Ok(Model { net, sgd })
    }

    /// One training step (forward, cross-entropy, backward, SGD) on one sample;
    /// `fill` writes the `h x w` input. Returns the loss. On error the step's scratch is
    /// released and the weights are unchanged (SGD runs last).
    pub fn train_step<const N: usize>(
        &mut self,
        g: &mut Graph<'_, f32, N>,
        (h, w): (usize, usize),
        label: usize,
        fill: impl FnOnce(&mut [f32]),
    ) -> Result<f32, Error> {
        let mut fill = Some(fill);
        let r = self.try_step(g, (h, w), label, &mut |d| {
            if let Some(f) = fill.take() {
                f(d)
            }
        });
        g.end_step();
        r
    }

    /// The step behind [`Model::train_step`], taking `fill` as a trait object: one copy
    /// of the step's code for every caller (the planner's empty fill and the real
    /// samples' fill were two inlined copies).
    fn try_step<const N: usize>(
        &mut self,
        g: &mut Graph<'_, f32, N>,
        (h, w): (usize, usize),
        label: usize,
        fill: &mut dyn FnMut(&mut [f32]),
    ) -> Result<f32, Error> {
        g.zero_grad();
        let x = g.input_with(&[1, 1, h, w], fill)?;
        let logits = self.net.forward(g, x)?;
        // The input's memory goes now unless backward reads it (a first layer that
        // trains its weights).
        g.free(x)?;
        let loss = g.cross_entropy(logits, &[label])?;
        let l = g.data(loss)?.first().copied().unwrap_or(0.0);
        g.backward(loss)?;
        self.sgd.step(g)?;
        Ok(l)
    }

    /// The predicted class of one sample (gradients off).
    pub fn predict<const N: usize>(&self, g: &mut Graph<'_, f32, N>, s: &Sample) -> Result<usize, Error> {
        g.set_grad_enabled(false);
        let r = (|| {
            let x = g.input_with(&[1, 1, s.h, s.w], |d| s.fill(d))?;
            let logits = self.net.forward(g, x)?;
            let row = g.data(logits)?;
            Ok((0..row.len())
                .max_by(|&a, &b| row[a].total_cmp(&row[b]))
                .unwrap_or(0))
        })();
        g.end_step();
        g.set_grad_enabled(true);
        r
    }

    /// Correct predictions over `samples`, and how many there were.
    pub fn correct<'b, const N: usize>(
        &self,
        g: &mut Graph<'_, f32, N>,
        samples: impl Iterator<Item = Sample<'b>>,
    ) -> Result<(usize, usize), Error> {
        let (mut ok, mut n) = (0, 0);
        for s in samples {
            ok += (self.predict(g, &s)? == s.label as usize) as usize;
            n += 1;
        }
        Ok((ok, n))
    }
}

/// Arena bytes one training step at `h x w` needs (parameters, gradients and optimizer
/// state included), asked of a meta graph of `capacity_bytes`: `usize::MAX` answers
/// "how much?", an arena's real size answers "does it fit?" (with the engine's
/// [`Error::ArenaExhausted`] when it does not).
pub fn plan_step<const N: usize>(
    h: usize,
    w: usize,
    r: Recipe,
    capacity_bytes: usize,
) -> Result<usize, Error> {
    plan_step_with::<N, _>(h, w, r, capacity_bytes, |g| digits_fcn(g, &mut Rng::new(0)))
}

/// [`plan_step`] for the network `build` creates in the meta graph (as it does in the
/// real one, so the plan is exact).
pub fn plan_step_with<const N: usize, M: Net>(
    h: usize,
    w: usize,
    r: Recipe,
    capacity_bytes: usize,
    build: impl FnOnce(&mut Graph<'static, f32, N>) -> Result<M, Error>,
) -> Result<usize, Error> {
    let mut g: Graph<'static, f32, N> = Graph::meta(capacity_bytes);
    let net = build(&mut g)?;
    let mut m = Model::with_net(&mut g, net, r)?;
    m.train_step(&mut g, (h, w), 0, |_| {})?;
    Ok(g.arena().high_water_bytes())
}

/// W1's forward, as `Sequential::forward` computes it (each intermediate freed once used,
/// ReLU in place when backward does not need its input), but with only the ops W1 has.
/// `Sequential::forward` dispatches over every `Layer` kind at run time and so links the
/// forward code of all of them (sigmoid, tanh, average pooling ...); this keeps
/// `finetune` inside its 128 KiB of flash. Another layer kind is an error.
pub fn forward_w1<const N: usize>(
    net: &Sequential<12>,
    g: &mut Graph<'_, f32, N>,
    input: Tensor,
) -> Result<Tensor, Error> {
    let mut x = input;
    for layer in net.layers() {
        let owned = x != input;
        if matches!(layer, Layer::Relu) && owned && g.can_overwrite_tensor(x) {
            x = g.relu_(x)?;
            continue;
        }
        let y = match layer {
            Layer::Conv2d(c) => c.forward(g, x)?,
            Layer::Relu => g.relu(x)?,
            Layer::MaxPool2d(p) => g.max_pool2d(x, *p)?,
            Layer::AdaptiveAvgPool2d(s) => g.adaptive_avg_pool2d(x, *s)?,
            Layer::Flatten(d) => g.flatten(x, *d)?,
            Layer::Linear(l) => l.forward(g, x)?,
            _ => {
                return Err(Error::Unsupported {
                    op: "forward_w1: a layer W1 does not have",
                })
            }
        };
        if owned {
            g.free(x)?;
        }
        x = y;
    }
    Ok(x)
}
