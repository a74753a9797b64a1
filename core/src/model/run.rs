//! [`Model`]: a checked model file's tensors created in a [`Graph`], and its nodes run
//! on the tape by op name.
//!
//! - Tensors become graph parameters in file order, one after the other, so tensor
//!   `k` is parameter `first + k` ([`Model::param`]); the model keeps no table.
//! - [`Model::forward`] keeps the node outputs in a table of `N` entries on the stack
//!   (`N` is the graph's tape capacity: every node output is a tape record, so a model
//!   that fits the tape fits the table). A first pass over the nodes notes each
//!   value's last reader; after a node runs, inputs it read last are freed
//!   ([`Graph::free`]), and an op with an in-place form ([`OpSpec::in_place`]: relu,
//!   relu6, batch_norm with fixed statistics) whose input nothing else reads runs in
//!   place, as [`Sequential`](crate::nn::Sequential) does with relu.

use super::attrs::NodeAttrs;
use super::error::{ModelResult, Site};
use super::file::{ModelFile, TensorRecord};
use super::format::MAX_NODE_INPUTS;
use super::in_place::f32_slice;
use super::int8;
use super::{DimSpec, TensorKind, ValueRef};
use crate::error::{Error, Result};
use crate::graph::{Graph, NodeId, Tensor, PARAM_GEN};
use crate::ops::registry::{Attrs, OpSpec};
use crate::scalar::Scalar;

/// Where a tensor of the file goes in the graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// A trainable parameter ([`Graph::param`]); values copied.
    Train,
    /// Frozen, copied into the arena ([`Graph::buffer`]): no gradient, still writable
    /// (BatchNorm's running statistics).
    Frozen,
    /// Frozen and read in place from the file's bytes ([`Graph::external`]): no arena
    /// bytes. Only [`Model::in_place`] (an `f32` graph) can do it.
    InPlace,
}

impl Placement {
    /// The file's default: trainable parameters train, the rest is frozen (copied).
    pub fn default_for(kind: TensorKind) -> Placement {
        match kind {
            TensorKind::Param { trainable: true } => Placement::Train,
            _ => Placement::Frozen,
        }
    }
}

/// A model file whose tensors live in a graph: run it with [`Model::forward`].
#[derive(Clone, Copy, Debug)]
pub struct Model<'m> {
    file: ModelFile<'m>,
    first: usize,
}

/// Value `k` of the forward table, and the node that reads it last.
#[derive(Clone, Copy)]
struct Slot {
    t: Option<Tensor>,
    last: usize,
}

/// `last` of a value the model returns: never freed.
const KEEP: usize = usize::MAX;

type External<'a, 'm, S, const N: usize> = fn(&mut Graph<'a, S, N>, &[usize], &'m [u8]) -> Result<Tensor>;

impl<'m> Model<'m> {
    /// Creates the file's tensors in `g` with their default placement
    /// ([`Placement::default_for`]), values converted with `Scalar::from_f32`. On an
    /// error the tensors created so far stay in the graph (start from a new one).
    pub fn new<S: Scalar, const N: usize>(
        g: &mut Graph<'_, S, N>,
        file: ModelFile<'m>,
    ) -> ModelResult<'m, Self> {
        Self::with_placement(g, file, |t| Placement::default_for(t.kind))
    }

    /// [`Model::new`] with the placement of each tensor chosen by `place` (freeze a
    /// backbone, train a frozen-by-default layer). [`Placement::InPlace`] is refused
    /// here ([`Error::Unsupported`]): use [`Model::in_place`].
    pub fn with_placement<'a, S: Scalar, const N: usize>(
        g: &mut Graph<'a, S, N>,
        file: ModelFile<'m>,
        place: impl FnMut(&TensorRecord<'m>) -> Placement,
    ) -> ModelResult<'m, Self> {
        let refuse: External<'a, 'm, S, N> = |_, _, _| {
            Err(Error::Unsupported {
                op: "model: in-place tensors need Model::in_place (an f32 graph)",
            })
        };
        Self::build(g, file, place, refuse)
    }

    /// [`Model::with_placement`] on an `f32` graph that lives no longer than the file's
    /// bytes, where [`Placement::InPlace`] tensors are read from those bytes (which
    /// must sit at a 4-byte aligned address, as a `static` in flash can). A frozen
    /// int8 tensor that only convolutions read stays in place whether placed
    /// [`Placement::Frozen`] or [`Placement::InPlace`] (see `model/int8.rs`).
    pub fn in_place<const N: usize>(
        g: &mut Graph<'m, f32, N>,
        file: ModelFile<'m>,
        mut place: impl FnMut(&TensorRecord<'m>) -> Placement,
    ) -> ModelResult<'m, Self> {
        let ext: External<'m, 'm, f32, N> = |g, dims, data| g.external(dims, f32_slice(data)?);
        let place = |t: &TensorRecord<'m>| int8::in_place_placement(&file, t, place(t));
        // The whole file mapped once, so each in-place tensor takes no slot of its own
        // (an arena maps few slices). A misaligned file is refused per tensor below.
        let whole = file.as_bytes();
        if let Ok(all) = f32_slice(&whole[..whole.len() & !3]) {
            g.arena.map_external(all).map_err(|e| Site::File.error(e))?;
        }
        Self::build(g, file, place, ext)
    }

    fn build<'a, S: Scalar, const N: usize>(
        g: &mut Graph<'a, S, N>,
        file: ModelFile<'m>,
        mut place: impl FnMut(&TensorRecord<'m>) -> Placement,
        external: External<'a, 'm, S, N>,
    ) -> ModelResult<'m, Self> {
        let first = g.num_params();
        for t in file.tensors() {
            let site = Site::Tensor {
                index: t.index,
                name: t.name,
            };
            let at = |e| site.error(e);
            let p = place(&t);
            let packed = [t.data.len() / 4];
            let dims = match t.int8 && p == Placement::InPlace {
                true => &packed[..], // scales and packed weights (`ops/conv_int8.rs`)
                false => t.shape.dims(),
            };
            let h = match p {
                Placement::Train => g.param(dims),
                Placement::Frozen => g.buffer(dims),
                Placement::InPlace => external(g, dims, t.data),
            }
            .map_err(at)?;
            if h.id as usize != first + t.index {
                return Err(at(Error::InvalidState {
                    what: "model: tensors must be created one after the other",
                }));
            }
            if p != Placement::InPlace && !g.is_meta() {
                for (d, v) in g.param_data_mut(h).map_err(at)?.iter_mut().zip(t.values()) {
                    *d = S::from_f32(v);
                }
            }
        }
        Ok(Model { file, first })
    }

    /// The file.
    pub fn file(&self) -> &ModelFile<'m> {
        &self.file
    }

    /// The graph's handle of tensor `k` (file order).
    pub fn param(&self, k: usize) -> Option<Tensor> {
        (k < self.file.num_tensors()).then_some(Tensor {
            id: (self.first + k) as NodeId,
            gen: PARAM_GEN,
        })
    }

    /// The graph's handle of the tensor called `name` (its PyTorch name).
    pub fn param_named(&self, name: &str) -> Option<Tensor> {
        self.file.tensor(name).and_then(|t| self.param(t.index))
    }

    /// Position of tensor 0 among the graph's parameters.
    pub fn first_param(&self) -> usize {
        self.first
    }

    /// Runs the model on `inputs` (one per graph input, in order) and returns its first
    /// output; other outputs stay recorded (see [`Model::forward_into`]).
    pub fn forward<S: Scalar, const N: usize>(
        &self,
        g: &mut Graph<'_, S, N>,
        inputs: &[Tensor],
    ) -> ModelResult<'m, Tensor> {
        let mut out = [Tensor {
            id: 0,
            gen: PARAM_GEN,
        }];
        self.forward_into(g, inputs, &mut out)?;
        Ok(out[0])
    }

    /// Runs the model and writes its first `outputs.len()` outputs.
    pub fn forward_into<S: Scalar, const N: usize>(
        &self,
        g: &mut Graph<'_, S, N>,
        inputs: &[Tensor],
        outputs: &mut [Tensor],
    ) -> ModelResult<'m, ()> {
        self.forward_with(g, inputs, outputs, |_, _, _| {})
    }

    /// [`Model::forward_into`], calling `each(node, g, output)` after every node with
    /// the node's index and its output, before anything is freed (per-node output
    /// shapes, PyTorch's forward hooks).
    pub fn forward_with<'a, S: Scalar, const N: usize>(
        &self,
        g: &mut Graph<'a, S, N>,
        inputs: &[Tensor],
        outputs: &mut [Tensor],
        mut each: impl FnMut(usize, &Graph<'a, S, N>, Tensor),
    ) -> ModelResult<'m, ()> {
        self.check_inputs(g, inputs)?;
        let f = &self.file;
        if f.num_nodes() > N {
            return Err(Site::File.error(Error::TapeFull {
                capacity: N,
                needed: Some(f.num_nodes()),
            }));
        }
        let mut table = [Slot { t: None, last: 0 }; N];
        for n in f.nodes() {
            table[n.index].last = n.index;
            for r in n.inputs() {
                if let Some(ValueRef::Node(m)) = r {
                    table[m].last = n.index;
                }
            }
        }
        for r in f.outputs() {
            if let ValueRef::Node(m) = r {
                table[m].last = KEEP;
            }
        }
        for n in f.nodes() {
            let site = n.site();
            let at = |e| site.error(e);
            let mut ins = [None; MAX_NODE_INPUTS];
            let mut count = 0;
            for (slot, r) in ins.iter_mut().zip(n.inputs()) {
                *slot = match r {
                    None => None,
                    Some(r) => Some(self.value(r, inputs, &table).map_err(at)?),
                };
                count += 1;
            }
            let ins = &ins[..count];
            // Input 0, when the model made it, this node reads it last and only once.
            let own = match n.inputs().next() {
                Some(Some(ValueRef::Node(m))) if table[m].last == n.index => {
                    let reads = n.inputs().filter(|r| *r == Some(ValueRef::Node(m))).count();
                    (reads == 1).then_some(m)
                }
                _ => None,
            };
            let attrs = InMode {
                attrs: &n.attrs,
                training: g.is_training(),
            };
            let spec = OpSpec::<S, N>::find(n.op)
                .ok_or(Error::Unsupported {
                    op: "model: unknown op",
                })
                .map_err(at)?;
            let in_place = match own {
                Some(_) => run_in_place(g, spec, ins, &attrs),
                None => None,
            };
            let y = match (in_place, own) {
                (Some(y), Some(m)) => {
                    table[m].t = None;
                    y
                }
                _ => int8::run_conv(g, f, &n, ins, &attrs).unwrap_or_else(|| (spec.call)(g, ins, &attrs)),
            }
            .map_err(at)?;
            each(n.index, g, y);
            table[n.index].t = Some(y);
            for r in n.inputs() {
                if let Some(ValueRef::Node(m)) = r {
                    if table[m].last == n.index {
                        if let Some(t) = table[m].t.take() {
                            g.free(t).map_err(at)?;
                        }
                    }
                }
            }
            if table[n.index].last == n.index {
                table[n.index].t = None;
                g.free(y).map_err(at)?;
            }
        }
        for (o, (k, r)) in outputs.iter_mut().zip(f.outputs().enumerate()) {
            let site = Site::Output { index: k };
            *o = self.value(r, inputs, &table).map_err(|e| site.error(e))?;
        }
        Ok(())
    }

    /// Checks that the model runs at the smallest input sizes it declares: builds it
    /// on a meta graph with room for `N` records and runs a forward pass with
    /// gradients on, so a shape that cannot work (a linear layer whose in-features
    /// do not match, a pool larger than its input) is an error naming its node before
    /// any data exists. It runs in eval mode: what it checks is the model, not a
    /// condition of one training batch (BatchNorm's batch statistics need more than
    /// one value per channel, which a batch of one at the smallest size may not give).
    pub fn check<S: Scalar, const N: usize>(file: ModelFile<'m>) -> ModelResult<'m, ()> {
        let mut g: Graph<'_, S, N> = Graph::meta(usize::MAX);
        let m = Model::new(&mut g, file)?;
        g.set_training(false);
        let mut xs = [Tensor {
            id: 0,
            gen: PARAM_GEN,
        }; MAX_NODE_INPUTS];
        if file.num_inputs() > xs.len() {
            return Err(Site::File.error(Error::Unsupported {
                op: "model check: more than 8 graph inputs",
            }));
        }
        for (x, rec) in xs.iter_mut().zip(file.inputs()) {
            let site = Site::Input {
                index: rec.index,
                name: rec.name,
            };
            *x = g.input(rec.min_shape().dims(), &[]).map_err(|e| site.error(e))?;
        }
        m.forward(&mut g, &xs[..file.num_inputs()]).map(|_| ())
    }

    fn value(&self, r: ValueRef, inputs: &[Tensor], table: &[Slot]) -> Result<Tensor> {
        let gone = Error::InvalidState {
            what: "model: a value was freed before its last reader (engine bug)",
        };
        match r {
            ValueRef::Input(k) => inputs.get(k).copied().ok_or(gone),
            ValueRef::Tensor(k) => self.param(k).ok_or(gone),
            ValueRef::Node(m) => table.get(m).and_then(|s| s.t).ok_or(gone),
        }
    }

    /// Checks the caller's inputs against the declared dims.
    fn check_inputs<S: Scalar, const N: usize>(
        &self,
        g: &Graph<'_, S, N>,
        inputs: &[Tensor],
    ) -> ModelResult<'m, ()> {
        if inputs.len() != self.file.num_inputs() {
            return Err(Site::File.error(Error::ShapeMismatch {
                op: "model",
                what: "the model takes {expected} inputs, {found} were given",
                expected: self.file.num_inputs(),
                found: inputs.len(),
            }));
        }
        for (rec, &t) in self.file.inputs().zip(inputs) {
            let site = Site::Input {
                index: rec.index,
                name: rec.name,
            };
            let shape = g.shape(t).map_err(|e| site.error(e))?;
            let mismatch = |what, expected, found| {
                site.error(Error::ShapeMismatch {
                    op: "model",
                    what,
                    expected,
                    found,
                })
            };
            if shape.rank() != rec.dims().len() {
                let what = "the input has {found} dims, the model's input {expected}";
                return Err(mismatch(what, rec.dims().len(), shape.rank()));
            }
            for (&d, &want) in shape.dims().iter().zip(rec.dims()) {
                match want {
                    DimSpec::Fixed(n) if d != n => {
                        return Err(mismatch(
                            "an input dim is {found}, the model fixes it at {expected}",
                            n,
                            d,
                        ))
                    }
                    DimSpec::Free { min } if d < min => {
                        return Err(mismatch(
                            "an input dim is {found}, the model needs at least {expected}",
                            min,
                            d,
                        ))
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

/// A node's attributes, with `training` (BatchNorm, dropout) taken from the graph's mode
/// ([`Graph::set_training`]) when the node does not fix it: a loaded model follows the
/// graph's mode as a PyTorch module follows `model.train()` / `model.eval()`.
struct InMode<'a, 'm> {
    attrs: &'a NodeAttrs<'m>,
    training: bool,
}

impl Attrs for InMode<'_, '_> {
    fn int(&self, name: &str) -> Result<Option<i64>> {
        self.attrs.int(name)
    }
    fn ints(&self, name: &str, out: &mut [i64]) -> Result<Option<usize>> {
        self.attrs.ints(name, out)
    }
    fn float(&self, name: &str) -> Result<Option<f64>> {
        self.attrs.float(name)
    }
    fn float_at(&self, name: &str, k: usize) -> Result<Option<f64>> {
        self.attrs.float_at(name, k)
    }
    fn flag(&self, name: &str) -> Result<Option<bool>> {
        match self.attrs.flag(name)? {
            None if name == "training" => Ok(Some(self.training)),
            v => Ok(v),
        }
    }
    fn string(&self, name: &str) -> Result<Option<&str>> {
        self.attrs.string(name)
    }
}

/// Runs `spec`'s in-place form ([`OpSpec::in_place`]) on its input 0, which nothing
/// else reads, when the op has one, the graph may overwrite that input, and the form
/// applies now; `None` otherwise (run it out of place). An in-place form refused after
/// this check would be an engine bug, reported as its error.
fn run_in_place<S: Scalar, const N: usize>(
    g: &mut Graph<'_, S, N>,
    spec: &OpSpec<S, N>,
    ins: &[Option<Tensor>],
    attrs: &dyn Attrs,
) -> Option<Result<Tensor>> {
    let in_place = spec.in_place?;
    let x = ins.first().copied().flatten()?;
    if !g.can_overwrite_tensor(x) {
        return None;
    }
    in_place(g, ins, attrs)
}
