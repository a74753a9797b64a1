//! group_norm: `torch.nn.functional.group_norm`, the normalisation that works at
//! batch 1. Each sample's channels are split into `num_groups` groups, each normalised
//! by its own mean and biased variance; then a per-channel affine (optional).
//! The record saves each set's mean and inverse standard deviation
//! (`2 * batch * num_groups` values); backward reads the input and the weight.

use super::batch_norm::{non_negative_real, norm_geom, per_channel};
use super::registry::{need, opt, real, Attrs, OpSpec};
use crate::arena::Span;
use crate::error::{Error, Result};
use crate::graph::reads;
use crate::graph::{word, Graph, NodeId, Op, OpKind, Tensor, NO_PARAMS};
use crate::kernels::norm as k;
use crate::scalar::Scalar;

const OP: &str = "group_norm";

/// group_norm's records: `params[0]` is `num_groups`.
static GROUP_NORM: OpKind = OpKind {
    name: OP,
    reads_inputs: reads(0b011),
    reads_output: false,
};

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// `F.group_norm(x, num_groups, weight, bias, eps)` on `[N, C, ...]` (rank 2 to 4);
    /// `num_groups` must divide `C`; weight and bias have `C` values.
    pub fn group_norm(
        &mut self,
        x: Tensor,
        num_groups: usize,
        weight: Option<Tensor>,
        bias: Option<Tensor>,
        eps: f32,
    ) -> Result<Tensor> {
        let xi = self.id(x)?;
        let wi = weight.map(|t| self.id(t)).transpose()?;
        let bi = bias.map(|t| self.id(t)).transpose()?;
        let xs = self.nodes[xi].shape();
        let g = norm_geom(OP, xs)?;
        if num_groups == 0 || g.c % num_groups != 0 {
            return Err(Error::InvalidParam {
                op: OP,
                what: "num_groups must be at least 1 and divide the channels",
                value: num_groups as i64,
            });
        }
        for (i, what) in [
            (wi, "weight has {found} values, the input has {expected} channels"),
            (bi, "bias has {found} values, the input has {expected} channels"),
        ] {
            if let Some(i) = i {
                per_channel(OP, what, self.nodes[i].shape(), g.c)?;
            }
        }
        non_negative_real(OP, "eps must be finite and at least 0", eps)?;
        let mut params = NO_PARAMS;
        params[0] = word(num_groups, OP)?;
        let sets = g.n.checked_mul(num_groups).ok_or(Error::Overflow { op: OP })?;
        let saved_len = sets.checked_mul(2).ok_or(Error::Overflow { op: OP })?;
        let rg = self.needs_grad(&[Some(xi), wi, bi]);
        let op = match rg {
            true => Op::new(&GROUP_NORM, [Some(xi), wi, bi], params),
            false => Op::LEAF,
        };
        let out = self.push(xs, op, Some(Self::group_norm_rule), rg, saved_len)?;
        let node = self.nodes[out.id as usize];
        let (saved, xd) = (node.saved, self.nodes[xi].data);
        let e = S::from_f32(eps);
        self.exec([xd], saved, |[x], s| k::group_stats(g, num_groups, x, e, s))?;
        let span = |i: Option<usize>| i.map_or(Span::EMPTY, |i| self.nodes[i].data);
        let (w, b) = (span(wi), span(bi));
        let cpg = g.c / num_groups;
        let set = move |n: usize, ch: usize| n * num_groups + ch / cpg;
        self.exec([xd, saved, w, b], node.data, |[x, s, w, b], y| {
            k::normalize(g, x, s, sets, set, w, b, y)
        })?;
        Ok(out)
    }

    /// group_norm's backward rule, recorded by [`Graph::group_norm`].
    fn group_norm_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let op = g.record(i, &GROUP_NORM)?;
        let groups = op.params[0] as usize;
        g.group_norm_backward(i, op.input(0), op.opt_input(1), op.opt_input(2), groups)
    }

    fn group_norm_backward(
        &mut self,
        i: usize,
        x: NodeId,
        w: Option<NodeId>,
        b: Option<NodeId>,
        groups: usize,
    ) -> Result<()> {
        let gy = self.grads_for(i)?;
        let (xn, saved) = (self.nodes[x as usize], self.nodes[i].saved);
        let g = norm_geom(OP, xn.shape())?;
        let (sets, cpg) = (g.n * groups, g.c / groups);
        let set = move |n: usize, ch: usize| n * groups + ch / cpg;
        let wd = w.map_or(Span::EMPTY, |w| self.nodes[w as usize].data);
        if let Some(gx) = self.grad_of(x) {
            self.exec([xn.data, gy, saved, wd], gx, |[x, gy, s, w], gx| {
                k::group_norm_backward_input(g, groups, x, gy, s, w, gx)
            })?;
        }
        if let Some(gw) = w.and_then(|w| self.grad_of(w)) {
            self.exec([xn.data, gy, saved], gw, |[x, gy, s], gw| {
                k::affine_grads(g, x, gy, s, sets, set, gw, &mut [])
            })?;
        }
        if let Some(gb) = b.and_then(|b| self.grad_of(b)) {
            self.exec([xn.data, gy, saved], gb, |[x, gy, s], gb| {
                k::affine_grads(g, x, gy, s, sets, set, &mut [], gb)
            })?;
        }
        Ok(())
    }

    fn group_norm_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        let groups = a.int("num_groups")?.ok_or(Error::InvalidParam {
            op: OP,
            what: "missing parameter num_groups",
            value: 0,
        })?;
        let groups = usize::try_from(groups).map_err(|_| Error::InvalidParam {
            op: OP,
            what: "num_groups must be at least 1 and divide the channels",
            value: groups,
        })?;
        let eps = real(a, "eps", 1e-5)? as f32;
        g.group_norm(need(OP, t, 0)?, groups, opt(t, 1), opt(t, 2), eps)
    }

    /// group_norm by name (`num_groups`, `eps`); gradients for input, weight and bias.
    pub(crate) const GROUP_NORM_SPEC: OpSpec<S, N> = OpSpec {
        name: OP,
        inputs: &["input", "weight", "bias"],
        params: &["num_groups", "eps"],
        call: Self::group_norm_call,
        in_place: None,
    };
}
