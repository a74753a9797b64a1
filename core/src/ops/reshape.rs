//! reshape and flatten: views that share the input's data; their gradient is copied
//! back element by element.

use crate::error::{Error, Result};
use crate::graph::{Graph, Node, NodeId, Op, Tensor};
use crate::kernels::elementwise::grad_map;
use crate::scalar::Scalar;
use crate::shape::{Shape, MAX_RANK};

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// The same elements under another shape with as many elements.
    pub fn reshape(&mut self, x: Tensor, dims: &[usize]) -> Result<Tensor> {
        let xi = self.id(x)?;
        let xn = self.nodes[xi];
        let shape = Shape::new(dims)?;
        if shape.numel() != xn.shape.numel() {
            return Err(Error::ShapeMismatch {
                op: "reshape",
                what: "element count",
                expected: xn.shape.numel(),
                found: shape.numel(),
            });
        }
        self.ensure_room()?;
        let rg = self.needs_grad(&[Some(xi)]);
        let op = if rg {
            Op::Reshape { x: xi as NodeId }
        } else {
            Op::Leaf
        };
        let mut node = Node::new(shape, xn.data, op, rg, crate::arena::Span::EMPTY);
        node.view = true;
        let t = self.push_node(node)?;
        self.trace_last(0);
        Ok(t)
    }

    /// Merges dimensions `start_dim..` into one (`torch.flatten(x, start_dim)`).
    pub fn flatten(&mut self, x: Tensor, start_dim: usize) -> Result<Tensor> {
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
        self.reshape(x, &dims[..=start_dim])
    }

    pub(crate) fn reshape_backward(&mut self, i: usize, x: NodeId) -> Result<()> {
        let gy = self.out_grad(i)?;
        if let Some(gx) = self.grad_of(x) {
            self.exec([gy, gy], gx, |[gy, s], gx| grad_map(gy, s, gx, |g, _| g))?;
        }
        Ok(())
    }
}
