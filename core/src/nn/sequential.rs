//! [`Sequential`]: layers applied in order, held inline (no heap), with errors that
//! name the layer.

use super::Layer;
use crate::error::{Error, Result};
use crate::graph::{Graph, Tensor};
use crate::scalar::Scalar;
use crate::shape::Shape;
use core::fmt;

/// Layers applied in order, stored inline: at most `L` of them.
#[derive(Clone, Debug, Default)]
pub struct Sequential<const L: usize> {
    layers: heapless::Vec<Layer, L>,
}

impl<const L: usize> Sequential<L> {
    /// An empty sequence.
    pub fn new() -> Self {
        Sequential {
            layers: heapless::Vec::new(),
        }
    }

    /// Appends a layer; errors when all `L` places are taken.
    pub fn push(&mut self, layer: Layer) -> Result<()> {
        self.layers.push(layer).map_err(|_| Error::InvalidParam {
            op: "Sequential::push",
            what: "no room for another layer; capacity",
            value: L as i64,
        })
    }

    /// The layers.
    pub fn layers(&self) -> &[Layer] {
        &self.layers
    }

    /// Applies every layer in order. The intermediate tensors are the sequence's own:
    /// each is freed once the next layer has used it, and a ReLU overwrites its input
    /// in place when nothing needs that input for backward, so a step holds only what
    /// backward needs (see [`Graph::free`], [`Graph::relu_`]). An error names the
    /// layer that raised it ([`LayerError`]; `?` turns it into the plain [`Error`]).
    // LayerError is the engine's Copy error plus the failing layer's input shape, by
    // value, so that it needs no allocation; it is only built on the error path.
    #[allow(clippy::result_large_err)]
    pub fn forward<S: Scalar, const N: usize>(
        &self,
        g: &mut Graph<'_, S, N>,
        input: Tensor,
    ) -> core::result::Result<Tensor, LayerError> {
        self.forward_with(g, input, |_, _, _| Ok(()))
    }

    /// [`Sequential::forward`], calling `each(g, layer, output)` after every layer (for
    /// example to record the output shapes of a plan).
    // LayerError is the engine's Copy error plus the failing layer's input shape, by
    // value, so that it needs no allocation; it is only built on the error path.
    #[allow(clippy::result_large_err)]
    pub fn forward_with<'a, S: Scalar, const N: usize>(
        &self,
        g: &mut Graph<'a, S, N>,
        input: Tensor,
        mut each: impl FnMut(&Graph<'a, S, N>, &Layer, Tensor) -> Result<()>,
    ) -> core::result::Result<Tensor, LayerError> {
        let mut x = input;
        for (index, layer) in self.layers.iter().enumerate() {
            let owned = x != input;
            let site = LayerSite {
                index,
                kind: layer.name(),
                input: g.shape(x).unwrap_or_default(),
            };
            let at = |error| LayerError { layer: site, error };
            let y = match layer {
                Layer::Relu if owned && g.can_overwrite_tensor(x) => g.relu_(x).map_err(at)?,
                _ => {
                    let y = layer.forward(g, x).map_err(at)?;
                    // (Dropout in eval mode returns its input itself.)
                    if owned && y != x {
                        g.free(x).map_err(at)?;
                    }
                    y
                }
            };
            x = y;
            each(g, layer, x).map_err(at)?;
        }
        Ok(x)
    }
}

/// Which layer of a [`Sequential`] raised an error, and on what input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerSite {
    /// Position in the sequence, from 0.
    pub index: usize,
    /// The layer's op name ([`Layer::name`]).
    pub kind: &'static str,
    /// The shape of the layer's input (empty if the input handle was invalid).
    pub input: Shape,
}

/// An error raised inside [`Sequential::forward`]: the engine's [`Error`] and the
/// layer it came from. `?` converts it into the plain [`Error`] (dropping the layer);
/// print it, or return it as `Box<dyn Error>`, to keep the layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerError {
    /// Where.
    pub layer: LayerSite,
    /// What.
    pub error: Error,
}

impl From<LayerError> for Error {
    fn from(e: LayerError) -> Error {
        e.error
    }
}

impl PartialEq<Error> for LayerError {
    fn eq(&self, other: &Error) -> bool {
        self.error == *other
    }
}

impl fmt::Display for LayerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let LayerSite { index, kind, input } = self.layer;
        write!(f, "layer {index} ({kind}, input {input:?}): {}", self.error)
    }
}

impl core::error::Error for LayerError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        Some(&self.error)
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for LayerError {
    fn format(&self, f: defmt::Formatter) {
        let LayerSite { index, kind, input } = self.layer;
        defmt::write!(
            f,
            "layer {=usize} ({=str}, input {}): {}",
            index,
            kind,
            input,
            self.error
        )
    }
}
