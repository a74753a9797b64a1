//! nll_loss over `[N, C]` or `[N, C, d1, ...]` log-probabilities with class targets
//! (`[N]` or `[N, d1, ...]`, row-major), `ignore_index` and a `mean` (over the
//! targets not ignored) or `sum` reduction; and the general cross_entropy built on it
//! (log_softmax over the classes, then nll_loss). Targets are validated before
//! anything is recorded. Backward reads only the targets it saved.

use super::registry::{need, Attrs, OpSpec};
use crate::error::{Error, Result};
use crate::graph::{reads, touched};
use crate::graph::{Graph, NodeId, Op, OpKind, Tensor, NO_PARAMS};
use crate::scalar::Scalar;
use crate::shape::Shape;

static NLL_LOSS: OpKind = OpKind {
    name: "nll_loss",
    reads_inputs: reads(0),
    reads_output: false,
};

/// How a loss reduces its per-target terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// The mean over the targets that are not ignored (NaN in f32 when all are).
    Mean,
    /// The sum.
    Sum,
}

/// Parameters of [`Graph::nll_loss`] and [`Graph::cross_entropy_with`]
/// (`torch.nn.functional` defaults: ignore_index -100, mean).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LossParams {
    /// Targets equal to this are skipped (segmentation datasets use 255).
    pub ignore_index: i64,
    /// Mean or sum.
    pub reduction: Reduction,
}

impl Default for LossParams {
    fn default() -> Self {
        LossParams {
            ignore_index: -100,
            reduction: Reduction::Mean,
        }
    }
}

/// Saved marker of an ignored target.
const IGNORED: u32 = u32::MAX;

/// `(N, C, inner)` of a loss input, after checking the targets' count and values.
fn check<T: Iterator<Item = i64>>(
    op: &'static str,
    x: Shape,
    n_targets: usize,
    targets: T,
    p: &LossParams,
    meta: bool,
) -> Result<(usize, usize, usize)> {
    if x.rank() < 2 {
        return Err(Error::ShapeMismatch {
            op,
            what: "input rank (batch, classes, ...); at least",
            expected: 2,
            found: x.rank(),
        });
    }
    let (n, c) = (x.dim(0), x.dim(1));
    let inner: usize = x.dims()[2..].iter().product();
    if n == 0 || c == 0 || inner == 0 {
        return Err(Error::ShapeMismatch {
            op,
            what: "zero-sized batch, class or spatial dimension",
            expected: 1,
            found: 0,
        });
    }
    if meta && n_targets == 0 {
        return Ok((n, c, inner));
    }
    if n_targets != n * inner {
        return Err(Error::ShapeMismatch {
            op,
            what: "number of targets vs input batch x spatial elements",
            expected: n * inner,
            found: n_targets,
        });
    }
    for t in targets {
        if t != p.ignore_index && (t < 0 || t >= c as i64) {
            return Err(Error::InvalidParam {
                op,
                what: "target class index out of range (and not ignore_index)",
                value: t,
            });
        }
    }
    Ok((n, c, inner))
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Negative log-likelihood of log-probabilities `x: [N, C, ...]` at class
    /// `targets` (`N * d1 * ...` of them, row-major). A meta graph accepts empty targets.
    pub fn nll_loss(&mut self, x: Tensor, targets: &[i64], p: LossParams) -> Result<Tensor> {
        self.nll_loss_by(x, targets.len(), targets.iter().copied(), p)
    }

    /// Cross-entropy of `logits: [N, C, ...]` at class `targets` with `ignore_index`
    /// and a reduction: log_softmax over dim 1, then [`Graph::nll_loss`]. (The
    /// [`Graph::cross_entropy`] form for `[B, C]` keeps only the softmax and the targets.)
    pub fn cross_entropy_with(&mut self, logits: Tensor, targets: &[i64], p: LossParams) -> Result<Tensor> {
        self.cross_entropy_general(logits, targets.len(), targets.iter().copied(), p)
    }

    pub(crate) fn cross_entropy_general(
        &mut self,
        logits: Tensor,
        n: usize,
        targets: impl Iterator<Item = i64> + Clone,
        p: LossParams,
    ) -> Result<Tensor> {
        let li = self.id(logits)?;
        let meta = self.arena.is_meta();
        check(
            "cross_entropy",
            self.nodes[li].shape(),
            n,
            targets.clone(),
            &p,
            meta,
        )?;
        let mark = (self.arena.mark(), self.nodes.len());
        let lp = self.log_softmax(logits, 1)?;
        match self.nll_loss_by(lp, n, targets, p) {
            Ok(t) => Ok(t),
            Err(e) => {
                // Out of room for the loss: drop the log_softmax record again.
                self.nodes.truncate(mark.1);
                self.arena.release(mark.0);
                Err(e)
            }
        }
    }

    fn nll_loss_by(
        &mut self,
        x: Tensor,
        n_targets: usize,
        targets: impl Iterator<Item = i64> + Clone,
        p: LossParams,
    ) -> Result<Tensor> {
        const OP: &str = "nll_loss";
        let xi = self.id(x)?;
        let xn = self.nodes[xi];
        let meta = self.arena.is_meta();
        let (n, c, inner) = check(OP, xn.shape(), n_targets, targets.clone(), &p, meta)?;
        let rg = self.needs_grad(&[Some(xi)]);
        let mut params = NO_PARAMS;
        params[0] = (p.reduction == Reduction::Sum) as u16;
        let op = match rg {
            true => Op::new(&NLL_LOSS, [Some(xi), None, None], params),
            false => Op::LEAF,
        };
        let saved = if rg { n * inner } else { 0 };
        let out = self.push(Shape::scalar(), op, Some(Self::nll_loss_rule), rg, saved)?;
        let node = self.nodes[out.id as usize];
        self.count(touched(&[xn.data, node.saved], node.data));
        if meta {
            return Ok(out);
        }
        let ([x], y, sv) = self.arena.views2([xn.data], node.data, node.saved)?;
        let (mut total, mut count) = (S::acc_zero(), 0usize);
        for (j, t) in targets.enumerate() {
            let keep = t != p.ignore_index;
            if keep {
                let (b, i) = (j / inner, j % inner);
                total = S::acc_add(total, x[(b * c + t as usize) * inner + i]);
                count += 1;
            }
            if let Some(s) = sv.get_mut(j) {
                *s = S::from_bits(if keep { t as u32 } else { IGNORED });
            }
        }
        let total = -S::from_acc(total);
        y[0] = match p.reduction {
            Reduction::Sum => total,
            Reduction::Mean => total.div(S::from_count(count)),
        };
        Ok(out)
    }

    /// nll_loss's backward rule, recorded by [`Graph::nll_loss`].
    fn nll_loss_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &NLL_LOSS)?;
        g.nll_loss_backward(i, op.input(0), op.params[0] == 1)
    }

    fn nll_loss_backward(&mut self, i: usize, x: NodeId, sum: bool) -> Result<()> {
        let gy = self.grads_for(i)?;
        let saved = self.nodes[i].saved;
        let xs = self.nodes[x as usize].shape();
        let (c, inner) = (xs.dim(1), xs.dims()[2..].iter().product::<usize>());
        if let Some(gx) = self.grad_of(x) {
            self.exec([gy, saved], gx, |[gy, ts], gx| {
                let count = ts.iter().filter(|t| t.to_bits() != IGNORED).count();
                let scale = if sum {
                    gy[0]
                } else {
                    gy[0].div(S::from_count(count))
                };
                for (j, t) in ts.iter().enumerate() {
                    let t = t.to_bits();
                    if t != IGNORED {
                        let (b, k) = (j / inner, j % inner);
                        gx[(b * c + t as usize) * inner + k] += -scale;
                    }
                }
            })?;
        }
        Ok(())
    }

    /// The loss parameters of a call by name: `ignore_index`, `reduction`.
    pub(crate) fn loss_params(op: &'static str, a: &dyn Attrs) -> Result<LossParams> {
        let reduction = match a.string("reduction")? {
            None | Some("mean") => Reduction::Mean,
            Some("sum") => Reduction::Sum,
            Some(_) => {
                return Err(Error::Unsupported {
                    op: "loss reduction other than mean or sum",
                })
            }
        };
        let _ = op;
        Ok(LossParams {
            ignore_index: a.int("ignore_index")?.unwrap_or(-100),
            reduction,
        })
    }

    /// The integer list `target` of a call by name: its length, after checking that
    /// every element is a whole number.
    pub(crate) fn int_targets(op: &'static str, a: &dyn Attrs) -> Result<usize> {
        let n = a.ints("target", &mut [])?.ok_or(Error::InvalidParam {
            op,
            what: "missing input tensor target",
            value: 0,
        })?;
        for k in 0..n {
            let v = a.float_at("target", k)?.unwrap_or(f64::NAN);
            // A whole number of moderate size (NaN fails the range test).
            if !(v > -9.0e15 && v < 9.0e15 && (v as i64) as f64 == v) {
                return Err(Error::InvalidParam {
                    op,
                    what: "target must be whole numbers",
                    value: v as i64,
                });
            }
        }
        Ok(n)
    }

    fn nll_loss_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        const OP: &str = "nll_loss";
        let p = Self::loss_params(OP, a)?;
        let n = Self::int_targets(OP, a)?;
        let class = |k| {
            a.float_at("target", k)
                .ok()
                .flatten()
                .map_or(i64::MIN, |v| v as i64)
        };
        g.nll_loss_by(need(OP, t, 0)?, n, (0..n).map(class), p)
    }

    /// nll_loss by name (`reduction`, `ignore_index`; targets are the list `target`).
    pub(crate) const NLL_LOSS_SPEC: OpSpec<S, N> = OpSpec {
        name: "nll_loss",
        inputs: &["input"],
        params: &["target", "ignore_index", "reduction"],
        call: Self::nll_loss_call,
        in_place: None,
    };
}
