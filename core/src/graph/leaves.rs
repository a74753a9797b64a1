//! Leaves of the graph: parameters, external (read-in-place) tensors, buffers and a
//! step's inputs.

use super::{Graph, Node, NodeId, Op, Tensor, PARAM_GEN};
use crate::arena::Span;
use crate::error::{Error, Phase, Result};
use crate::scalar::Scalar;
use crate::shape::Shape;

impl<'a, S: Scalar, const N: usize> Graph<'a, S, N> {
    /// A trainable parameter of the given shape, zero-filled, with a gradient buffer
    /// beside it. Parameters are created at setup, before the first step records.
    pub fn param(&mut self, dims: &[usize]) -> Result<Tensor> {
        if self.nodes.len() != self.n_params {
            return Err(Error::InvalidState {
                what: "parameters must be created before a step records ops",
            });
        }
        let shape = Shape::new(dims)?;
        self.ensure_room()?;
        let n = shape.numel();
        // Fused SGD keeps no gradient buffer: backward applies the update directly.
        let copies = if self.param_hook.is_some() { 1 } else { 2 };
        let both = n.checked_mul(copies).ok_or(Error::Overflow { op: "param" })?;
        // One allocation for data and gradient, so a failure leaves nothing behind.
        self.set_site("param", Phase::Setup);
        let span = self.arena.alloc_persistent(both)?;
        let mut node = Node::new(
            shape,
            Span {
                off: span.off,
                len: n,
            },
            Op::LEAF,
            None,
            true,
            Span::EMPTY,
        );
        if self.param_hook.is_none() {
            node.set_grad(Some(Span {
                off: span.off + n,
                len: n,
            }));
        }
        let id = self.nodes.len();
        self.nodes.push(node).map_err(|_| self.tape_full())?;
        self.n_params += 1;
        Ok(Tensor {
            id: id as NodeId,
            gen: PARAM_GEN,
        })
    }

    /// A frozen tensor whose values stay where they are (`data`, typically a `static`
    /// array in flash): no arena bytes, no gradient, never written. Ops read it in
    /// place, so a network whose frozen layers are larger than the RAM can still run;
    /// a meta graph plans it the same way (it counts nothing for it). Like
    /// [`Graph::param`], it is created at setup, before a step records ops, and lives
    /// for the whole run; optimizers skip it. `data` must hold exactly the shape's
    /// number of elements ([`Error::ShapeMismatch`] otherwise).
    pub fn external(&mut self, dims: &[usize], data: &'a [S]) -> Result<Tensor> {
        if self.nodes.len() != self.n_params {
            return Err(Error::InvalidState {
                what: "external tensors must be created before a step records ops",
            });
        }
        let shape = Shape::new(dims)?;
        if shape.numel() != data.len() {
            return Err(Error::ShapeMismatch {
                op: "external",
                what: "data has {found} values, the shape holds {expected}",
                expected: shape.numel(),
                found: data.len(),
            });
        }
        self.ensure_room()?;
        self.set_site("external", Phase::Setup);
        let span = self.arena.map_external(data)?;
        let id = self.nodes.len();
        self.push_node(Node::new(shape, span, Op::LEAF, None, false, Span::EMPTY))?;
        self.n_params += 1;
        Ok(Tensor {
            id: id as NodeId,
            gen: PARAM_GEN,
        })
    }

    /// A persistent, non-trainable tensor of the given shape, zero-filled (PyTorch's
    /// buffers, e.g. BatchNorm's running statistics): it lives with the parameters,
    /// shares their numbering and handles (so it is saved and loaded with them), is
    /// writable through [`Graph::param_data_mut`], and has no gradient; optimizers
    /// skip it. Created at setup, before a step records ops.
    pub fn buffer(&mut self, dims: &[usize]) -> Result<Tensor> {
        if self.nodes.len() != self.n_params {
            return Err(Error::InvalidState {
                what: "buffers must be created before a step records ops",
            });
        }
        let shape = Shape::new(dims)?;
        self.ensure_room()?;
        self.set_site("buffer", Phase::Setup);
        let span = self.arena.alloc_persistent(shape.numel())?;
        let id = self.nodes.len();
        self.push_node(Node::new(shape, span, Op::LEAF, None, false, Span::EMPTY))?;
        self.n_params += 1;
        Ok(Tensor {
            id: id as NodeId,
            gen: PARAM_GEN,
        })
    }

    /// Long-lived zeroed words for optimizer `op`'s state, taken next to the parameters.
    pub(crate) fn alloc_state(&mut self, op: &'static str, len: usize) -> Result<Span> {
        if self.nodes.len() != self.n_params {
            return Err(Error::InvalidState {
                what: "optimizer state must be created before a step records ops",
            });
        }
        self.set_site(op, Phase::Optimizer);
        self.arena.alloc_persistent(len)
    }

    /// An input tensor holding a copy of `data` (which must have exactly the shape's
    /// number of elements; a meta graph also accepts an empty slice). Data that is NaN
    /// or infinite is refused with [`Error::NonFinite`] unless
    /// [`Graph::set_check_finite`] turned the check off.
    pub fn input(&mut self, dims: &[usize], data: &[S]) -> Result<Tensor> {
        self.input_leaf("input", dims, false, |dst| {
            if dst.len() == data.len() {
                dst.copy_from_slice(data);
                Ok(())
            } else {
                Err(data.len())
            }
        })
    }

    /// An input whose gradient is wanted (gradient checks, the conformance runner).
    pub fn input_with_grad(&mut self, dims: &[usize], data: &[S]) -> Result<Tensor> {
        self.input_leaf("input_with_grad", dims, true, |dst| {
            if dst.len() == data.len() {
                dst.copy_from_slice(data);
                Ok(())
            } else {
                Err(data.len())
            }
        })
    }

    /// An input filled in place by `fill` (for example converting `u8` pixels), so no
    /// intermediate buffer is needed. `fill` is not called in a meta graph. What it
    /// wrote is checked as [`Graph::input`] checks its data.
    pub fn input_with(&mut self, dims: &[usize], fill: impl FnOnce(&mut [S])) -> Result<Tensor> {
        self.input_leaf("input_with", dims, false, |dst| {
            fill(dst);
            Ok(())
        })
    }

    fn input_leaf(
        &mut self,
        op: &'static str,
        dims: &[usize],
        requires_grad: bool,
        fill: impl FnOnce(&mut [S]) -> core::result::Result<(), usize>,
    ) -> Result<Tensor> {
        let shape = Shape::new(dims)?;
        let mark = self.arena.mark();
        let t = self.push(shape, Op::LEAF, None, requires_grad, 0)?;
        if !self.arena.is_meta() {
            let span = self.nodes[t.id as usize].data;
            let err = match fill(self.arena.get_mut(span)) {
                Err(found) => Some(Error::ShapeMismatch {
                    op,
                    what: "data has {found} values, the shape holds {expected}",
                    expected: shape.numel(),
                    found,
                }),
                Ok(()) => self.check_input(op, span),
            };
            if let Some(e) = err {
                self.nodes.pop();
                self.arena.release(mark);
                return Err(e);
            }
        }
        Ok(t)
    }
}
