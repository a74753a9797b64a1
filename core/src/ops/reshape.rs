//! reshape, flatten, unsqueeze and squeeze: views that share the input's data; their
//! gradient is copied back element by element.

use super::registry::{need, uint, Attrs, OpSpec};
use crate::error::{Error, Result};
use crate::graph::reads;
use crate::graph::{BackwardFn, Graph, NoGrad, Node, NodeId, Op, OpKind, Tensor};
use crate::kernels::elementwise::grad_map;
use crate::scalar::Scalar;
use crate::shape::{Shape, MAX_RANK};

/// reshape's (and flatten's) records: a view, whose backward reads no data.
static RESHAPE: OpKind = OpKind {
    name: "reshape",
    reads_inputs: reads(0),
    reads_output: false,
};

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// The same elements under another shape with as many elements.
    pub fn reshape(&mut self, x: Tensor, dims: &[usize]) -> Result<Tensor> {
        self.reshape_with(x, dims, Some(Self::reshape_rule))
    }

    /// Records reshape with `rule` as its backward; `None` records no gradient path.
    pub(crate) fn reshape_with(
        &mut self,
        x: Tensor,
        dims: &[usize],
        rule: Option<BackwardFn<S, N>>,
    ) -> Result<Tensor> {
        let xi = self.id(x)?;
        let xn = self.nodes[xi];
        let shape = Shape::new(dims)?;
        if shape.numel() != xn.shape().numel() {
            return Err(Error::ShapeMismatch {
                op: "reshape",
                what: "the new shape has {found} elements, the input {expected}",
                expected: xn.shape().numel(),
                found: shape.numel(),
            });
        }
        self.ensure_room()?;
        let rg = rule.is_some() && self.needs_grad(&[Some(xi)]);
        let op = match rg {
            true => Op::unary(&RESHAPE, xi),
            false => Op::LEAF,
        };
        let mut node = Node::new(shape, xn.data, op, rule, rg, crate::arena::Span::EMPTY);
        node.set_view();
        let t = self.push_node(node)?;
        self.report_trace(0);
        Ok(t)
    }

    /// Merges dimensions `start_dim..` into one (`torch.flatten(x, start_dim)`).
    pub fn flatten(&mut self, x: Tensor, start_dim: usize) -> Result<Tensor> {
        self.flatten_with(x, start_dim, Some(Self::reshape_rule))
    }

    /// Records flatten (a reshape) with `rule` as its backward; `None` records no
    /// gradient path.
    pub(crate) fn flatten_with(
        &mut self,
        x: Tensor,
        start_dim: usize,
        rule: Option<BackwardFn<S, N>>,
    ) -> Result<Tensor> {
        let s = self.shape(x)?;
        if start_dim >= s.rank().max(1) {
            return Err(Error::InvalidParam {
                op: "flatten",
                what: "start_dim must be below the rank",
                value: start_dim as i64,
            });
        }
        let mut dims = [0usize; MAX_RANK];
        dims[..start_dim].copy_from_slice(&s.dims()[..start_dim]);
        dims[start_dim] = s.dims()[start_dim..].iter().product();
        self.reshape_with(x, &dims[..=start_dim], rule)
    }

    /// A dim of size 1 inserted at `dim` (`torch.unsqueeze`; negative counts from the
    /// end of the new rank).
    pub fn unsqueeze(&mut self, x: Tensor, dim: i64) -> Result<Tensor> {
        let s = self.shape(x)?;
        let d = super::softmax::norm_dim("unsqueeze", dim, s.rank() + 1)?;
        if s.rank() >= MAX_RANK {
            return Err(Error::InvalidParam {
                op: "unsqueeze",
                what: "the result would be past the maximum rank of 4; input rank",
                value: s.rank() as i64,
            });
        }
        let mut dims = [1usize; MAX_RANK];
        dims[..d].copy_from_slice(&s.dims()[..d]);
        dims[d + 1..=s.rank()].copy_from_slice(&s.dims()[d..]);
        self.reshape_with(x, &dims[..=s.rank()], Some(Self::reshape_rule))
    }

    /// Dim `dim` removed when its size is 1, else the same shape (`torch.squeeze(x, dim)`).
    pub fn squeeze(&mut self, x: Tensor, dim: i64) -> Result<Tensor> {
        let s = self.shape(x)?;
        let d = super::softmax::norm_dim("squeeze", dim, s.rank())?;
        let mut dims = [0usize; MAX_RANK];
        let mut r = 0;
        for (k, &v) in s.dims().iter().enumerate() {
            if k != d || v != 1 {
                dims[r] = v;
                r += 1;
            }
        }
        self.reshape_with(x, &dims[..r], Some(Self::reshape_rule))
    }

    fn unsqueeze_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        g.unsqueeze(need("unsqueeze", t, 0)?, a.int("dim")?.unwrap_or(0))
    }

    fn squeeze_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        g.squeeze(need("squeeze", t, 0)?, a.int("dim")?.unwrap_or(0))
    }

    /// unsqueeze by name (`dim`).
    pub(crate) const UNSQUEEZE_SPEC: OpSpec<S, N> = OpSpec {
        name: "unsqueeze",
        inputs: &["input"],
        params: &["dim"],
        call: Self::unsqueeze_call,
        in_place: None,
    };
    /// squeeze by name (`dim`).
    pub(crate) const SQUEEZE_SPEC: OpSpec<S, N> = OpSpec {
        name: "squeeze",
        inputs: &["input"],
        params: &["dim"],
        call: Self::squeeze_call,
        in_place: None,
    };

    /// reshape's backward rule, recorded by [`Graph::reshape`].
    fn reshape_rule(g: &mut Graph<'_, S, N>, i: usize) -> Result<()> {
        let x = g.record(i, &RESHAPE)?.input(0);
        // The output gradient becomes the input's as is, when the input has none yet.
        if g.pass_grad_in_place(i, x, |_, _| Ok(()))? {
            return Ok(());
        }
        g.reshape_backward(i, x)
    }

    fn reshape_backward(&mut self, i: usize, x: NodeId) -> Result<()> {
        let gy = self.grads_for(i)?;
        if let Some(gx) = self.grad_of(x) {
            self.exec([gy, gy], gx, |[gy, s], gx| grad_map(gy, s, gx, |g, _| g))?;
        }
        Ok(())
    }

    fn flatten_call(g: &mut Graph<'_, S, N>, t: &[Option<Tensor>], a: &dyn Attrs) -> Result<Tensor> {
        let start_dim = uint(a, "flatten", "start_dim", 0)?;
        g.flatten(need("flatten", t, 0)?, start_dim)
    }

    /// flatten by name (`start_dim`, default 0).
    pub(crate) const FLATTEN_SPEC: OpSpec<S, N> = OpSpec {
        name: "flatten",
        inputs: &["input"],
        params: &["start_dim"],
        call: Self::flatten_call,
        in_place: None,
    };
}

impl<S: Scalar, const N: usize> NoGrad<'_, '_, S, N> {
    /// [`Graph::reshape`] without gradients.
    pub fn reshape(&mut self, x: Tensor, dims: &[usize]) -> Result<Tensor> {
        self.g.reshape_with(x, dims, None)
    }

    /// [`Graph::flatten`] without gradients.
    pub fn flatten(&mut self, x: Tensor, start_dim: usize) -> Result<Tensor> {
        self.g.flatten_with(x, start_dim, None)
    }
}
