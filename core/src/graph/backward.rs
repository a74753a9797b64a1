//! Backward: the tape walked in reverse, with memory handed back as it goes.
//!
//! - A dry run first: the same walk with the arena in bookkeeping-only mode. If the
//!   arena would run out, the error comes before any gradient or parameter changes;
//!   the node table and the scratch top are then restored.
//! - Gradients are allocated lazily, when the node that produces them runs, and each
//!   node's output gradient and saved values are released right after its backward
//!   has run (scratch compacts, see `memory.rs`), so live gradients form a stack.
//! - Data of tensors the caller freed goes as soon as no pending backward reads it.
//! - Parameter gradients are persistent and accumulate with `+=` across backward
//!   calls, except in fused SGD mode ([`Graph::set_fused_sgd`]): there each
//!   parameter's gradient is a temporary, applied as `p -= lr * g` as soon as its last
//!   consumer on the tape has run, then released.

use super::{Graph, Op};
use crate::arena::Span;
use crate::error::{Error, Result};
use crate::scalar::Scalar;
use crate::Tensor;

/// What a walk may change in a node, saved before a dry run.
#[derive(Clone, Copy, Default)]
struct Mem {
    data: Span,
    saved: Span,
    grad: Option<Span>,
    spent: bool,
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Gradients of `loss` (a one-element tensor) with respect to every parameter and
    /// every input created with a gradient, accumulated with `+=` into their gradient
    /// buffers. Intermediate gradients are not kept (as in PyTorch). On
    /// [`Error::ArenaExhausted`] nothing has changed: parameters, their gradients and
    /// the step's tensors are as before.
    pub fn backward(&mut self, loss: Tensor) -> Result<()> {
        let id = self.id(loss)?;
        if self.nodes[id].shape.numel() != 1 {
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
        let n = self.nodes[id].shape.numel();
        if seed.len() != n && !self.arena.is_meta() {
            return Err(Error::ShapeMismatch {
                op: "backward_with",
                what: "seed length vs tensor elements",
                expected: n,
                found: seed.len(),
            });
        }
        self.backward_seeded(id, Some(seed))
    }

    /// Fused SGD mode: from now on parameters get no gradient buffer, and every
    /// backward applies `p -= lr * grad` itself, each parameter as soon as its gradient
    /// is complete (plain SGD: no momentum, no weight decay). It saves the memory of
    /// all parameter gradients; gradients cannot be read or accumulated across
    /// backward calls. Must be called before any parameter is created.
    pub fn set_fused_sgd(&mut self, lr: f32) -> Result<()> {
        if self.n_params > 0 {
            return Err(Error::InvalidState {
                what: "set_fused_sgd must be called before parameters are created",
            });
        }
        self.fused_lr = Some(lr);
        Ok(())
    }

    fn backward_seeded(&mut self, id: usize, seed: Option<&[S]>) -> Result<()> {
        if !self.nodes[id].requires_grad {
            return Err(Error::NoGradient {
                what: "nothing that requires a gradient led to this tensor",
            });
        }
        if !self.arena.is_meta() {
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
                grad: n.grad,
                spent: n.spent,
            };
        }
        let top = self.arena.mark();
        self.arena.set_dry(true);
        let dry = self.walk(id, None);
        self.arena.set_dry(false);
        for (n, m) in self.nodes.iter_mut().zip(snap.iter()) {
            n.data = m.data;
            n.saved = m.saved;
            n.grad = m.grad;
            n.spent = m.spent;
        }
        self.arena.set_scratch_top(top);
        dry
    }

    /// A zeroed gradient for node `j` unless it has one.
    fn ensure_grad(&mut self, j: usize) -> Result<()> {
        if self.nodes[j].requires_grad && self.nodes[j].grad.is_none() {
            let g = self.arena.alloc_zeroed(self.nodes[j].shape.numel())?;
            self.nodes[j].grad = Some(g);
        }
        Ok(())
    }

    fn walk(&mut self, id: usize, seed: Option<&[S]>) -> Result<()> {
        self.ensure_grad(id)?;
        if let (Some(g), false) = (self.nodes[id].grad, self.arena.is_meta()) {
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
        for i in (self.n_params..=id).rev() {
            let n = self.nodes[i];
            if n.requires_grad && !matches!(n.op, Op::Leaf) && n.grad.is_some() {
                if n.spent {
                    return Err(Error::NoGradient {
                        what: "backward already ran through this part of the step",
                    });
                }
                if !self.pass_grad_in_place(i)? && !self.fused_in_place(i)? {
                    for j in n.op.inputs().into_iter().flatten() {
                        self.ensure_grad(j as usize)?;
                    }
                    self.backward_node(i)?;
                }
                self.nodes[i].spent = true;
                if self.fused_lr.is_some() {
                    self.apply_finished_params(i)?;
                }
            }
            // The output gradient and the saved values have served their purpose.
            if !matches!(n.op, Op::Leaf) {
                if let Some(g) = self.nodes[i].grad.take() {
                    self.reclaim(g);
                }
            }
            if self.nodes[i].spent {
                let s = self.nodes[i].saved;
                self.reclaim(s);
            }
            self.reclaim_if_unused(i);
            // Inputs whose last reader was this node can go now, before their turn.
            for j in n.op.inputs().into_iter().flatten() {
                self.reclaim_if_unused(j as usize);
            }
        }
        if self.fused_lr.is_some() {
            for j in 0..self.n_params {
                self.apply_param(j)?;
            }
        }
        Ok(())
    }

    /// Masked ReLU and reshape hand their output gradient to their input in place
    /// (masked, or as is) when the input has no gradient yet: no second buffer.
    fn pass_grad_in_place(&mut self, i: usize) -> Result<bool> {
        let x = match self.nodes[i].op {
            Op::ReluMasked { x } | Op::Reshape { x } => x as usize,
            _ => return Ok(false),
        };
        let xn = self.nodes[x];
        if !xn.requires_grad || xn.grad.is_some() || x < self.n_params {
            return Ok(false);
        }
        let gy = self.out_grad(i)?;
        if let Op::ReluMasked { .. } = self.nodes[i].op {
            let mask = self.nodes[i].saved;
            self.exec([mask], gy, |[m], g| {
                crate::kernels::compact::relu_mask_in_place(g, m)
            })?;
        }
        self.nodes[x].grad = Some(gy);
        self.nodes[i].grad = None;
        Ok(true)
    }

    /// Fused SGD for conv2d and linear: the output gradient is scaled by `-lr` in
    /// place and the weight and bias kernels accumulate straight into the parameters
    /// (`p += (-lr * gy) (x) x`), so no parameter gradient is ever stored. The input
    /// gradient, computed first from the unchanged weights, is scaled back by `-1/lr`.
    /// Only when the parameters have no other pending use and the input gradient is
    /// fresh; otherwise the general path runs.
    fn fused_in_place(&mut self, i: usize) -> Result<bool> {
        let Some(lr) = self.fused_lr.filter(|&lr| lr != 0.0 && lr.is_finite()) else {
            return Ok(false);
        };
        let (x, w, b) = match self.nodes[i].op {
            Op::Conv2d { x, w, b, .. } | Op::Linear { x, w, b } => (x as usize, w as usize, b),
            _ => return Ok(false),
        };
        let params_ok = [Some(w as u16), b].into_iter().flatten().all(|p| {
            let p = p as usize;
            p < self.n_params
                && self.nodes[p].requires_grad
                && self.nodes[p].grad.is_none()
                && !self.nodes[self.n_params..i]
                    .iter()
                    .any(|c| c.requires_grad && !c.spent && c.op.inputs().contains(&Some(p as u16)))
        });
        let x_fresh = !self.nodes[x].requires_grad || self.nodes[x].grad.is_none();
        if !params_ok || !x_fresh {
            return Ok(false);
        }
        self.ensure_grad(x)?;
        let gy = self.out_grad(i)?;
        let neg = S::from_f32(-lr);
        self.exec([], gy, |[], g| g.iter_mut().for_each(|v| *v = *v * neg))?;
        for p in [Some(w as u16), b].into_iter().flatten() {
            let p = p as usize;
            self.nodes[p].grad = Some(self.nodes[p].data);
        }
        let r = self.backward_node(i);
        for p in [Some(w as u16), b].into_iter().flatten() {
            self.nodes[p as usize].grad = None;
        }
        r?;
        if let Some(gx) = self.grad_of(x as u16) {
            // The inverse of the factor applied (for fixed point, of its rounded
            // value), in the scalar's own arithmetic: no float division is linked.
            let inv = S::ONE.div(neg);
            self.exec([], gx, |[], g| g.iter_mut().for_each(|v| *v = *v * inv))?;
        }
        Ok(true)
    }

    /// Fused SGD: applies and releases the gradient of every parameter node `i` read
    /// that no pending node reads any more.
    fn apply_finished_params(&mut self, i: usize) -> Result<()> {
        for j in self.nodes[i].op.inputs().into_iter().flatten() {
            let j = j as usize;
            if j >= self.n_params {
                continue;
            }
            let pending = self.nodes[self.n_params..i]
                .iter()
                .any(|c| c.requires_grad && !c.spent && c.op.inputs().contains(&Some(j as u16)));
            if !pending {
                self.apply_param(j)?;
            }
        }
        Ok(())
    }

    /// Fused SGD: `p -= lr * g` for parameter `j`, then frees `g`.
    fn apply_param(&mut self, j: usize) -> Result<()> {
        let (Some(g), Some(lr)) = (self.nodes[j].grad, self.fused_lr) else {
            return Ok(());
        };
        let lr = S::from_f32(lr);
        self.exec([g], self.nodes[j].data, |[g], p| {
            for (p, &g) in p.iter_mut().zip(g) {
                *p = *p - lr * g;
            }
        })?;
        self.nodes[j].grad = None;
        self.reclaim(g);
        Ok(())
    }

    /// Runs one record's backward rule: the function its op chose when it recorded
    /// (each lives beside its forward in `ops/`), so only recorded ops' rules are linked.
    fn backward_node(&mut self, i: usize) -> Result<()> {
        if self.arena.is_meta() {
            return Ok(());
        }
        match (self.nodes[i].op, self.nodes[i].backward) {
            (Op::Leaf, _) => Ok(()),
            (_, Some(rule)) => rule(self, i),
            (_, None) => Err(Error::InvalidState {
                what: "record without a backward rule (engine bug)",
            }),
        }
    }
}
