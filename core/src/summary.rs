//! Model summary (like `torchinfo.summary`): for a [`Sequential`] at a given input
//! size, each layer's kind, output shape, parameter count and the step's arena bytes,
//! from a meta run, so it costs no data and no kernel time at any input size.
//!
//! - [`Sequential::summary`] mirrors the model's parameters (same shapes, same order,
//!   so the same handles) into a meta graph, records one forward pass at the input
//!   size, then backward from the output: the totals equal a real step's.
//! - The rows are a fixed-capacity list ([`Summary::rows`]): the data is there in
//!   `no_std`; `Display` prints the table.
//! - Frozen external tensors are mirrored as parameters, so their bytes are counted
//!   (a real graph keeps them out of the arena).

use crate::error::Result;
use crate::graph::Graph;
use crate::nn::{Layer, Sequential};
use crate::plan::Thousands;
use crate::scalar::Scalar;
use crate::shape::Shape;
use core::fmt;

/// One layer of a [`Summary`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerRow {
    /// Position in the sequence, from 0.
    pub index: usize,
    /// The layer's op name ([`Layer::name`]).
    pub kind: &'static str,
    /// The shape of its output.
    pub output: Shape,
    /// Elements of its parameters (weight and bias).
    pub params: usize,
    /// Arena bytes in use once the layer has run in a training step (parameters,
    /// gradients and what backward keeps so far).
    pub bytes: usize,
}

/// A model's layers and totals at one input size (see the module docs).
#[derive(Clone, Debug)]
pub struct Summary<const L: usize> {
    /// The input's shape.
    pub input: Shape,
    /// One row per layer, in order.
    pub rows: heapless::Vec<LayerRow, L>,
    /// Elements of every parameter of the graph.
    pub param_elements: usize,
    /// Parameters and their gradients.
    pub persistent_bytes: usize,
    /// High-water mark of the training forward pass.
    pub forward_bytes: usize,
    /// High-water mark of forward and backward: the arena a training step needs
    /// (optimizer state not included: the summary creates none).
    pub step_bytes: usize,
    /// Tape records of the step: the least `N` of a graph that runs it.
    pub records: usize,
}

impl<const L: usize> Sequential<L> {
    /// The model's summary at `input` (for example `[1, 1, 28, 28]`); `g` is the graph
    /// the model's parameters live in (read for their shapes only). Errors are the
    /// ones the forward pass would give at that size, naming the layer.
    pub fn summary<S: Scalar, const N: usize>(
        &self,
        g: &Graph<'_, S, N>,
        input: &[usize],
    ) -> Result<Summary<L>> {
        let mut m: Graph<'static, S, N> = Graph::meta(usize::MAX);
        let mut param_elements = 0;
        for i in 0..g.num_param_tensors() {
            let shape = g.shape(g.param_handle(i).ok_or(crate::Error::StaleTensor)?)?;
            m.param(shape.dims())?;
            param_elements += shape.numel();
        }
        let persistent_bytes = m.arena().used_bytes();
        let x = m.input(input, &[])?;
        let mut rows = heapless::Vec::new();
        let y = self.forward_with(&mut m, x, |m, layer, y| {
            let row = LayerRow {
                index: rows.len(),
                kind: layer.name(),
                output: m.shape(y)?,
                params: layer_params(m, layer)?,
                bytes: m.arena().used_bytes(),
            };
            let _ = rows.push(row); // at most L layers: always room
            Ok(())
        })?;
        let forward_bytes = m.arena().high_water_bytes();
        m.backward_with(y, &[])?;
        Ok(Summary {
            input: Shape::new(input)?,
            rows,
            param_elements,
            persistent_bytes,
            forward_bytes,
            step_bytes: m.arena().high_water_bytes(),
            records: m.tape_len(),
        })
    }

    /// Elements of the layers' parameters (weights and biases).
    pub fn num_param_elements<S: Scalar, const N: usize>(&self, g: &Graph<'_, S, N>) -> Result<usize> {
        self.layers()
            .iter()
            .try_fold(0, |n, l| Ok(n + layer_params(g, l)?))
    }
}

/// Elements of a layer's weight and bias.
fn layer_params<S: Scalar, const N: usize>(g: &Graph<'_, S, N>, layer: &Layer) -> Result<usize> {
    let (w, b) = match layer {
        Layer::Conv2d(c) => (Some(c.weight), c.bias),
        Layer::Linear(l) => (Some(l.weight), l.bias),
        // Parameters only: BatchNorm's running statistics are buffers, as in torchinfo.
        Layer::BatchNorm2d(l) => (l.weight, l.bias),
        Layer::GroupNorm(l) => (l.weight, l.bias),
        _ => return Ok(0),
    };
    [w, b]
        .into_iter()
        .flatten()
        .try_fold(0, |n, t| Ok(n + g.shape(t)?.numel()))
}

impl<const L: usize> fmt::Display for Summary<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rule = "-------------------------------------------------------------------";
        writeln!(f, "{rule}")?;
        writeln!(
            f,
            "{:<24}{:<22}{:>9}{:>12}",
            "Layer (type)", "Output shape", "Param #", "Bytes"
        )?;
        writeln!(f, "{rule}")?;
        writeln!(f, "{:<24}{:<22}{:>9}{:>12}", "input", Dims(self.input), "", "")?;
        for r in &self.rows {
            let name = Name(r.kind, r.index);
            let (p, b) = (Thousands(r.params), Thousands(r.bytes));
            writeln!(f, "{:<24}{:<22}{:>9}{:>12}", name, Dims(r.output), p, b)?;
        }
        writeln!(f, "{rule}")?;
        writeln!(f, "Total params: {}", Thousands(self.param_elements))?;
        writeln!(
            f,
            "Parameters and gradients: {} bytes",
            Thousands(self.persistent_bytes)
        )?;
        writeln!(
            f,
            "Forward pass (high water): {} bytes",
            Thousands(self.forward_bytes)
        )?;
        writeln!(
            f,
            "Training step (high water): {} bytes",
            Thousands(self.step_bytes)
        )?;
        writeln!(f, "Tape records: {}", self.records)?;
        write!(f, "{rule}")
    }
}

/// A shape as `[1, 8, 28, 28]`, padded like a string.
struct Dims(Shape);

impl fmt::Display for Dims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0u8; 64];
        let mut w = Cursor(&mut buf, 0);
        let _ = fmt::write(&mut w, format_args!("{:?}", self.0));
        let n = w.1;
        f.pad(core::str::from_utf8(&buf[..n]).unwrap_or("?"))
    }
}

/// `conv2d-1`, padded like a string.
struct Name(&'static str, usize);

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0u8; 64];
        let mut w = Cursor(&mut buf, 0);
        let _ = fmt::write(&mut w, format_args!("{}-{}", self.0, self.1));
        let n = w.1;
        f.pad(core::str::from_utf8(&buf[..n]).unwrap_or("?"))
    }
}

/// A fixed buffer as a `fmt::Write` target (for padding formatted text without alloc).
struct Cursor<'b>(&'b mut [u8], usize);

impl fmt::Write for Cursor<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.1 + s.len();
        let dst = self.0.get_mut(self.1..end).ok_or(fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.1 = end;
        Ok(())
    }
}
