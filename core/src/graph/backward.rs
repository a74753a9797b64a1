//! Backward: the tape walked in reverse, with memory handed back as it goes.
//!
//! - A dry run first: the same walk with the arena in bookkeeping-only mode. If the
//!   arena would run out, the error comes before any gradient or parameter changes;
//!   the node table and the scratch top are then restored.
//! - Gradients are allocated lazily, when the node that produces them runs, and each
//!   node's output gradient and saved values are released right after its backward
//!   has run (scratch compacts, see `memory.rs`), so live gradients form a stack
//!   (on hosts and wasm their own, `arena/grads.rs`).
//! - Data of tensors the caller freed goes as soon as no pending backward reads it.
//! - The walk calls each record's rule and nothing else: a rule allocates its inputs'
//!   gradients ([`Graph::grads_for`]) or hands its own over in place (reshape, relu_).
//! - Parameter gradients are persistent and accumulate with `+=` across backward
//!   calls, unless an optimizer set a hook ([`ParamHook`], fused SGD through
//!   [`Graph::set_fused_sgd`]): the walk calls it with each parameter as soon as the
//!   parameter's last consumer on the tape has run, and conv2d and linear may update
//!   their parameters directly ([`Graph::with_direct_params`]).

use super::{BackwardFn, Graph, NodeId};
use crate::arena::Span;
use crate::error::{Error, Phase, Result};
use crate::optim::HookFn;
#[cfg(doc)]
use crate::optim::ParamHook;
use crate::scalar::Scalar;
use crate::Tensor;

/// What a walk may change in a node, saved before a dry run.
#[derive(Clone, Copy, Default)]
struct Mem {
    data: Span,
    saved: Span,
    /// The node's gradient offset and flags (which hold whether it has a gradient
    /// and whether backward ran through it).
    grad_off: usize,
    flags: u8,
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Gradients of `loss` (a one-element tensor) with respect to every parameter and
    /// every input created with a gradient, accumulated with `+=` into their gradient
    /// buffers. Intermediate gradients are not kept (as in PyTorch). On
    /// [`Error::ArenaExhausted`] nothing has changed: parameters, their gradients and
    /// the step's tensors are as before.
    pub fn backward(&mut self, loss: Tensor) -> Result<()> {
        let id = self.id(loss)?;
        if self.nodes[id].shape().numel() != 1 {
            return Err(Error::NoGradient {
                what: "loss must have exactly one element (use backward_with for others)",
            });
        }
        self.backward_seeded(id, None)
    }

    /// Like [`Graph::backward`] from any tensor `t`, with `seed` as the gradient flowing
    /// into it (PyTorch's `t.backward(gradient)`); `seed` has `t`'s number of elements.
    pub fn backward_with(&mut self, t: Tensor, seed: &[S]) -> Result<()> {
        let id = self.id(t)?;
        let n = self.nodes[id].shape().numel();
        if seed.len() != n && !self.arena.is_meta() {
            return Err(Error::ShapeMismatch {
                op: "backward_with",
                what: "seed has {found} values, the tensor has {expected} elements",
                expected: n,
                found: seed.len(),
            });
        }
        self.backward_seeded(id, Some(seed))
    }

    fn backward_seeded(&mut self, id: usize, seed: Option<&[S]>) -> Result<()> {
        self.forward_high_water = self.arena.high_water_bytes();
        if self.arena.is_meta() && !self.grad_enabled() {
            // A planner's inference pass of a step that calls backward itself.
            return Ok(());
        }
        if !self.nodes[id].requires_grad() {
            return Err(Error::NoGradient {
                what: "nothing that requires a gradient led to this tensor",
            });
        }
        if !self.arena.is_meta() {
            if self.param_hook.is_some() {
                self.check_fused_start(id, seed)?;
            }
            self.dry_run(id)?;
        }
        self.walk(id, seed)
    }

    /// The walk in bookkeeping-only mode, then the node table and scratch top put back:
    /// `Err` if the real walk would run out of arena. Its own frame, never inlined, so
    /// the node snapshot (`N` records of spans) is off the stack before the real walk
    /// calls the rules and kernels (on a Cortex-M0 with 16 KiB of RAM that matters).
    #[inline(never)]
    fn dry_run(&mut self, id: usize) -> Result<()> {
        let mut snap = [Mem::default(); N];
        for (m, n) in snap.iter_mut().zip(self.nodes.iter()) {
            *m = Mem {
                data: n.data,
                saved: n.saved,
                grad_off: n.grad_off,
                flags: n.flags,
            };
        }
        let top = self.arena.mark();
        #[cfg(not(target_arch = "arm"))]
        let grads = self.arena.grads_mark();
        self.arena.set_dry(true);
        // The real walk counts the work: the dry one does not.
        let work = self.macs();
        let dry = self.walk(id, None);
        self.work_restore(work);
        self.arena.set_dry(false);
        #[cfg(not(target_arch = "arm"))]
        self.arena.set_grads_bottom(grads);
        for (n, m) in self.nodes.iter_mut().zip(snap.iter()) {
            n.data = m.data;
            n.saved = m.saved;
            n.grad_off = m.grad_off;
            n.flags = m.flags;
        }
        self.arena.set_scratch_top(top);
        dry
    }

    /// A zeroed gradient for node `j` unless it has one.
    pub(crate) fn ensure_grad(&mut self, j: usize) -> Result<()> {
        if self.nodes[j].requires_grad() && self.nodes[j].grad().is_none() {
            let g = self.arena.alloc_grad(self.nodes[j].shape().numel())?;
            self.nodes[j].set_grad(Some(g));
        }
        Ok(())
    }

    fn walk(&mut self, id: usize, seed: Option<&[S]>) -> Result<()> {
        self.set_site(self.nodes[id].op().name(), Phase::Backward);
        self.ensure_grad(id)?;
        if let (Some(g), false) = (self.nodes[id].grad(), self.arena.is_meta()) {
            let dst = self.arena.get_mut(g);
            match seed {
                None => {
                    if let Some(v) = dst.first_mut() {
                        *v += S::ONE;
                    }
                }
                Some(seed) => {
                    for (d, &s) in dst.iter_mut().zip(seed) {
                        *d += s;
                    }
                }
            }
        }
        let hook = self.param_hook;
        for i in (self.n_params..=id).rev() {
            let n = self.nodes[i];
            if n.requires_grad() && !n.op().is_leaf() && n.grad().is_some() {
                if n.spent() {
                    return Err(Error::NoGradient {
                        what: "backward already ran through this part of the step",
                    });
                }
                let rule = n.backward.ok_or(Error::InvalidState {
                    what: "record without a backward rule (engine bug)",
                })?;
                self.set_site(n.op().name(), Phase::Backward);
                rule(self, i)?;
                self.nodes[i].set_spent();
                if let Some(h) = hook {
                    self.finish_params(i, h.finished)?;
                }
            }
            // The output gradient and the saved values have served their purpose.
            self.defer_reclaims();
            if !n.op().is_leaf() {
                if let Some(g) = self.nodes[i].take_grad() {
                    self.reclaim(g);
                }
            }
            if self.nodes[i].spent() {
                let s = self.nodes[i].saved;
                self.reclaim(s);
            }
            self.reclaim_if_unused(i);
            // Inputs whose last reader was this node can go now, before their turn.
            for j in n.op().inputs().into_iter().flatten() {
                self.reclaim_if_unused(j as usize);
            }
            self.close_pending();
        }
        if let Some(h) = hook {
            for j in 0..self.n_params {
                (h.finished)(self, j)?;
            }
        }
        #[cfg(not(target_arch = "arm"))]
        self.grads_to_scratch();
        Ok(())
    }

    /// Whether a record before `i` that backward has not run through yet reads node `p`.
    fn pending_reader(&self, p: usize, i: usize) -> bool {
        self.nodes[self.n_params..i]
            .iter()
            .any(|c| c.requires_grad() && !c.spent() && c.op().inputs().contains(&Some(p as NodeId)))
    }

    /// Hands every parameter node `i` read whose gradient is now final (no pending
    /// record reads it) to the optimizer's hook.
    fn finish_params(&mut self, i: usize, finished: HookFn<S, N>) -> Result<()> {
        for j in self.nodes[i].op().inputs().into_iter().flatten() {
            let j = j as usize;
            if j < self.n_params && !self.pending_reader(j, i) {
                finished(self, j)?;
            }
        }
        Ok(())
    }

    /// For a rule whose kernel can write input `j`'s whole gradient: when `j` needs a
    /// gradient, has none yet and is not a parameter, allocates one without clearing
    /// it and returns `true`, and the rule must then write every element (or clear
    /// it). Otherwise as [`Graph::ensure_grad`], `false`. Cortex-M always clears.
    pub(crate) fn grad_to_overwrite(&mut self, i: usize, j: usize) -> Result<bool> {
        let fresh = self.new_grad(j)?;
        self.sink_out_grad(i, &[fresh]);
        Ok(fresh.is_some())
    }

    /// The gradient of node `i`'s output, after giving each of its inputs that needs
    /// one a (zeroed) gradient: what a rule calls first.
    pub(crate) fn grads_for(&mut self, i: usize) -> Result<Span> {
        let mut fresh = [None; 3];
        for (f, j) in fresh.iter_mut().zip(self.nodes[i].op().inputs()) {
            if let Some(j) = j {
                *f = self.new_grad(j as usize)?;
            }
        }
        self.sink_out_grad(i, &fresh);
        for j in fresh.into_iter().flatten() {
            if let Some(g) = self.nodes[j].grad() {
                self.arena.fill(g, S::ZERO);
            }
        }
        self.out_grad(i)
    }

    /// Gives node `j` a gradient if it needs one and has none. `Some(j)` when that is
    /// a new one on the gradient stack, not cleared (hosts and wasm, not parameters);
    /// otherwise it is cleared ([`Graph::ensure_grad`]).
    fn new_grad(&mut self, j: usize) -> Result<Option<usize>> {
        let n = self.nodes[j];
        #[cfg(not(target_arch = "arm"))]
        if n.requires_grad() && n.grad().is_none() && j >= self.n_params {
            let g = self.arena.alloc_grad_unset(n.shape().numel())?;
            self.nodes[j].set_grad(Some(g));
            return Ok(Some(j));
        }
        let _ = n;
        self.ensure_grad(j).map(|_| None)
    }

    /// After the `fresh` input gradients were allocated right below node `i`'s output
    /// gradient: moves the output gradient below them when it is the shorter
    /// ([`crate::arena::Arena::sink_below_fresh`]), so that freeing it after the rule
    /// moves nothing.
    fn sink_out_grad(&mut self, i: usize, fresh: &[Option<usize>]) {
        #[cfg(not(target_arch = "arm"))]
        {
            let Some(gy) = self.nodes[i].grad() else {
                return;
            };
            let spans = fresh.iter().flatten().filter_map(|&j| self.nodes[j].grad());
            let words = spans.map(|g| g.len).sum();
            if let Some(off) = self.arena.sink_below_fresh(gy, words) {
                for &j in fresh.iter().flatten() {
                    let g = self.nodes[j].grad().map(|g| Span {
                        off: g.off + gy.len,
                        ..g
                    });
                    self.nodes[j].set_grad(g);
                }
                self.nodes[i].set_grad(Some(Span { off, ..gy }));
            }
        }
        #[cfg(target_arch = "arm")]
        let _ = (i, fresh);
    }

    /// For rules that pass their output gradient on unchanged or masked (reshape,
    /// relu_): when input `x` needs a gradient, has none yet and is not a parameter,
    /// `pass(graph, gy)` may prepare `gy` in place and `gy` becomes `x`'s gradient (no
    /// second buffer). `Ok(false)`: the rule must take the general path.
    pub(crate) fn pass_grad_in_place(
        &mut self,
        i: usize,
        x: NodeId,
        pass: impl FnOnce(&mut Self, Span) -> Result<()>,
    ) -> Result<bool> {
        let x = x as usize;
        let xn = self.nodes[x];
        if !xn.requires_grad() || xn.grad().is_some() || x < self.n_params {
            return Ok(false);
        }
        let gy = self.out_grad(i)?;
        pass(self, gy)?;
        self.nodes[x].set_grad(Some(gy));
        self.nodes[i].set_grad(None);
        Ok(true)
    }

    /// Runs `general`, the backward of a record whose input 0 is data and inputs 1 and
    /// 2 (when present) are parameters whose gradients are kernels linear in the
    /// output gradient (conv2d, linear). When the optimizer's hook allows it
    /// ([`ParamHook::direct`]), the output gradient is first scaled by `-lr` in place
    /// and the parameters stand in for their gradients, so that the weight and bias
    /// kernels accumulate straight into them (`p += (-lr * gy) (x) x`) and no
    /// parameter gradient is ever stored; the input gradient, computed from the
    /// unchanged weights, is then scaled back by `-1/lr`. Only when the parameters have
    /// no other pending use and the input gradient is fresh; otherwise `general` runs
    /// as is. One call of `general`, through a pointer, so its kernels are linked once.
    /// Before anything is written, an update that could be non-finite is refused
    /// (`check_direct`).
    pub(crate) fn with_direct_params(&mut self, i: usize, general: BackwardFn<S, N>) -> Result<()> {
        match self.param_hook.and_then(|h| h.direct_update) {
            Some(direct) => direct(self, i, general),
            None => general(self, i),
        }
    }

    /// [`Graph::with_direct_params`] under a hook that allows direct updates: named only
    /// by [`Graph::set_fused_sgd`], so a program that never fuses SGD does not link it.
    pub(crate) fn direct_update(g: &mut Graph<'_, S, N>, i: usize, general: BackwardFn<S, N>) -> Result<()> {
        g.direct_update_of(i, general)
    }

    fn direct_update_of(&mut self, i: usize, general: BackwardFn<S, N>) -> Result<()> {
        let op = self.nodes[i].op();
        let (x, params) = (op.input(0) as usize, [op.opt_input(1), op.opt_input(2)]);
        let lr = self.param_hook.and_then(|h| h.direct());
        let direct = lr.is_some()
            && params.into_iter().flatten().all(|p| {
                let p = p as usize;
                p < self.n_params
                    && self.nodes[p].requires_grad()
                    && self.nodes[p].grad().is_none()
                    && !self.pending_reader(p, i)
            })
            && (!self.nodes[x].requires_grad() || self.nodes[x].grad().is_none());
        let (Some(lr), true) = (lr, direct) else {
            return general(self, i);
        };
        let gy = self.out_grad(i)?;
        // Nothing written yet: refuse an update that could be non-finite.
        self.check_direct(x, params, lr, gy)?;
        self.ensure_grad(x)?;
        let neg = S::from_f32(-lr);
        self.exec([], gy, |[], g| g.iter_mut().for_each(|v| *v = *v * neg))?;
        for p in params.into_iter().flatten() {
            let p = p as usize;
            let d = self.nodes[p].data;
            self.nodes[p].set_grad(Some(d));
        }
        let r = general(self, i);
        for p in params.into_iter().flatten() {
            self.nodes[p as usize].set_grad(None);
        }
        r?;
        if let Some(gx) = self.grad_of(x as NodeId) {
            // The inverse of the factor applied (for fixed point, of its rounded
            // value), in the scalar's own arithmetic: no float division is linked.
            let inv = S::ONE.div(neg);
            self.exec([], gx, |[], g| g.iter_mut().for_each(|v| *v = *v * inv))?;
        }
        Ok(())
    }
}
