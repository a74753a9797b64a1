//! cross_entropy (log-softmax inside, mean over the batch) and mse_loss (mean).
//! Both return a scalar (shape `[]`), as PyTorch does.

use super::expect_rank;
use super::nll::Reduction;
use super::registry::{need, Attrs, OpSpec};
use crate::error::{Error, Result};
use crate::graph::{reads, touched};
use crate::graph::{Graph, NodeId, Op, OpKind, Tensor, NO_PARAMS};
use crate::kernels::elementwise::grad_map;
use crate::scalar::Scalar;
use crate::shape::Shape;

/// cross_entropy's records: backward reads the softmax and targets it saved.
static CROSS_ENTROPY: OpKind = OpKind {
    name: "cross_entropy",
    reads_inputs: reads(0),
    reads_output: false,
};
/// mse_loss's records: backward reads both inputs' data.
static MSE_LOSS: OpKind = OpKind {
    name: "mse_loss",
    reads_inputs: reads(0b011),
    reads_output: false,
};

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Mean cross-entropy of `logits: [B, C]` against class indices `targets` (one per
    /// row, each below `C`). Saves the softmax and the targets for backward. A meta
    /// graph accepts empty `targets`.
    pub fn cross_entropy(&mut self, logits: Tensor, targets: &[usize]) -> Result<Tensor> {
        self.cross_entropy_by(logits, targets.len(), targets.iter().copied())
    }

    /// [`Graph::cross_entropy`] with the `n_targets` targets of `targets`.
    fn cross_entropy_by(
        &mut self,
        logits: Tensor,
        n_targets: usize,
        targets: impl Iterator<Item = usize> + Clone,
    ) -> Result<Tensor> {
        const OP: &str = "cross_entropy";
        let li = self.id(logits)?;
        let ln = self.nodes[li];
        expect_rank(
            OP,
            "input has {found} dimensions, expected {expected} (batch, classes)",
            ln.shape().rank(),
            2,
        )?;
        let (b, c) = (ln.shape().dim(0), ln.shape().dim(1));
        if b == 0 || c == 0 {
            return Err(Error::ShapeMismatch {
                op: OP,
                what: "batch or classes is {found}, expected at least {expected}",
                expected: 1,
                found: 0,
            });
        }
        let meta = self.arena.is_meta();
        if !(meta && n_targets == 0) {
            if n_targets != b {
                return Err(Error::ShapeMismatch {
                    op: OP,
                    what: "{found} targets for a batch of {expected}",
                    expected: b,
                    found: n_targets,
                });
            }
            if let Some(t) = targets.clone().find(|&t| t >= c) {
                return Err(Error::InvalidParam {
                    op: OP,
                    what: "target class index out of range",
                    value: t as i64,
                });
            }
        }
        let rg = self.needs_grad(&[Some(li)]);
        let op = match rg {
            true => Op::unary(&CROSS_ENTROPY, li),
            false => Op::LEAF,
        };
        let saved = if rg { b * c + b } else { 0 };
        let out = self.push(Shape::scalar(), op, Some(Self::cross_entropy_rule), rg, saved)?;
        let node = self.nodes[out.id as usize];
        self.count(touched(&[ln.data, node.saved], node.data));
        if !meta {
            let ([x], y, sv) = self.arena.views2([ln.data], node.data, node.saved)?;
            let mut total = S::acc_zero();
            for (row, t) in x.chunks_exact(c).zip(targets.clone()) {
                // log-sum-exp around the row maximum: no overflow for large logits.
                let m = row.iter().copied().fold(S::MIN, |a, v| if v > a { v } else { a });
                let mut sum = S::acc_zero();
                for &v in row {
                    sum = S::acc_add(sum, (v - m).exp());
                }
                let lse = m + S::from_acc(sum).ln();
                total = S::acc_add(total, lse - row[t]);
            }
            if let Some(y0) = y.first_mut() {
                *y0 = S::from_acc(total).div(S::from_count(b));
            }
            if rg {
                let (probs, tsave) = sv.split_at_mut(b * c);
                for ((prow, row), (ts, t)) in probs
                    .chunks_exact_mut(c)
                    .zip(x.chunks_exact(c))
                    .zip(tsave.iter_mut().zip(targets))
                {
                    let m = row.iter().copied().fold(S::MIN, |a, v| if v > a { v } else { a });
                    let mut sum = S::acc_zero();
                    for &v in row {
                        sum = S::acc_add(sum, (v - m).exp());
                    }
                    let lse = m + S::from_acc(sum).ln();
                    for (p, &v) in prow.iter_mut().zip(row) {
                        *p = (v - lse).exp();
                    }
                    *ts = S::from_bits(t as u32);
                }
            }
        }
        Ok(out)
    }

    /// cross_entropy's backward rule, recorded by [`Graph::cross_entropy`].
    fn cross_entropy_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let logits = g.record(i, &CROSS_ENTROPY)?.input(0);
        g.cross_entropy_backward(i, logits)
    }

    fn cross_entropy_backward(&mut self, i: usize, logits: NodeId) -> Result<()> {
        let node = self.nodes[i];
        let gy = self.grads_for(i)?;
        let ln = self.nodes[logits as usize];
        let (b, c) = (ln.shape().dim(0), ln.shape().dim(1));
        if let Some(gx) = self.grad_of(logits) {
            self.exec([gy, node.saved], gx, |[gy, sv], gx| {
                let scale = gy[0].div(S::from_count(b));
                let (probs, ts) = sv.split_at(b * c);
                for ((grow, prow), t) in gx.chunks_exact_mut(c).zip(probs.chunks_exact(c)).zip(ts) {
                    let t = t.to_bits() as usize;
                    for (k, (g, &p)) in grow.iter_mut().zip(prow).enumerate() {
                        let d = if k == t { p - S::ONE } else { p };
                        *g += scale * d;
                    }
                }
            })?;
        }
        Ok(())
    }

    /// Mean squared error of two tensors of the same shape.
    pub fn mse_loss(&mut self, x: Tensor, target: Tensor) -> Result<Tensor> {
        const OP: &str = "mse_loss";
        let (xi, ti) = (self.id(x)?, self.id(target)?);
        let (xn, tn) = (self.nodes[xi], self.nodes[ti]);
        if xn.shape() != tn.shape() {
            return Err(Error::ShapeMismatch {
                op: OP,
                what: "target has {found} elements, the input {expected} (shapes must match)",
                expected: xn.shape().numel(),
                found: tn.shape().numel(),
            });
        }
        let n = xn.shape().numel();
        if n == 0 {
            return Err(Error::ShapeMismatch {
                op: OP,
                what: "input has {found} elements, expected at least {expected}",
                expected: 1,
                found: 0,
            });
        }
        let rg = self.needs_grad(&[Some(xi), Some(ti)]);
        let op = match rg {
            true => Op::new(&MSE_LOSS, [Some(xi), Some(ti), None], NO_PARAMS),
            false => Op::LEAF,
        };
        let out = self.push(Shape::scalar(), op, Some(Self::mse_loss_rule), rg, 0)?;
        let y = self.nodes[out.id as usize].data;
        self.exec([xn.data, tn.data], y, |[x, t], y| {
            let mut acc = S::acc_zero();
            for (&a, &b) in x.iter().zip(t) {
                acc = S::mac(acc, a - b, a - b);
            }
            y[0] = S::from_acc(acc).div(S::from_count(n));
        })?;
        Ok(out)
    }

    /// mse_loss's backward rule, recorded by [`Graph::mse_loss`].
    fn mse_loss_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &MSE_LOSS)?;
        g.mse_loss_backward(i, op.input(0), op.input(1))
    }

    fn mse_loss_backward(&mut self, i: usize, x: NodeId, t: NodeId) -> Result<()> {
        let gy = self.grads_for(i)?;
        let (xn, tn) = (self.nodes[x as usize], self.nodes[t as usize]);
        let n = xn.shape().numel();
        let g0 = if self.arena.is_meta() {
            S::ZERO
        } else {
            self.arena.get(gy).first().copied().unwrap_or(S::ZERO)
        };
        let scale = (g0 + g0).div(S::from_count(n));
        for (dst, sign) in [(x, scale), (t, -scale)] {
            if let Some(gd) = self.grad_of(dst) {
                self.exec([xn.data, tn.data], gd, |[a, b], gd| {
                    grad_map(a, b, gd, |av, bv| sign * (av - bv))
                })?;
            }
        }
        Ok(())
    }

    /// cross_entropy called by name: the class indices are the integer list `target`
    /// (`ignore_index`, `reduction`). `[B, C]` logits with a mean and no ignored
    /// target take [`Graph::cross_entropy`]; anything else the general form
    /// ([`Graph::cross_entropy_with`]).
    fn cross_entropy_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        const OP: &str = "cross_entropy";
        let p = Self::loss_params(OP, a)?;
        let n = Self::int_targets(OP, a)?;
        let class = |k| {
            a.float_at("target", k)
                .ok()
                .flatten()
                .map_or(i64::MIN, |v| v as i64)
        };
        let logits = need(OP, t, 0)?;
        let rank = g.shape(logits)?.rank();
        let plain = rank == 2
            && p.reduction == Reduction::Mean
            && (0..n).all(|k| class(k) >= 0 && class(k) != p.ignore_index);
        if plain {
            let c = g.shape(logits)?.dim(1);
            if let Some(bad) = (0..n).map(class).find(|&v| v >= c as i64) {
                return Err(Error::InvalidParam {
                    op: OP,
                    what: "target class index out of range (and not ignore_index)",
                    value: bad,
                });
            }
            return g.cross_entropy_by(logits, n, (0..n).map(|k| class(k) as usize));
        }
        g.cross_entropy_general(logits, n, (0..n).map(class), p)
    }

    fn mse_loss_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], _: &dyn Attrs) -> Result<Tensor> {
        g.mse_loss(need("mse_loss", t, 0)?, need("mse_loss", t, 1)?)
    }

    /// cross_entropy by name.
    pub(crate) const CROSS_ENTROPY_SPEC: OpSpec<S, N> = OpSpec {
        name: "cross_entropy",
        inputs: &["input"],
        params: &["target", "ignore_index", "reduction"],
        call: Self::cross_entropy_call,
        in_place: None,
    };
    /// mse_loss by name.
    pub(crate) const MSE_LOSS_SPEC: OpSpec<S, N> = OpSpec {
        name: "mse_loss",
        inputs: &["input", "target"],
        params: &[],
        call: Self::mse_loss_call,
        in_place: None,
    };
}
