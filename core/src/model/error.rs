//! Errors of the model file and of [`Model`](super::Model): the engine's [`Error`] and
//! the place it belongs to (an input, a tensor, a node, an output), with the names
//! borrowed from the file (or the spec), so no allocation is needed.

use crate::error::Error;
use core::fmt;

/// Where in a model an error belongs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Site<'m> {
    /// The file as a whole (magic, version, length, checksum, counts).
    File,
    /// Graph input `index`.
    Input {
        /// Position among the graph's inputs.
        index: usize,
        /// Its name (empty if it could not be read).
        name: &'m str,
    },
    /// Tensor `index` (parameter or buffer).
    Tensor {
        /// Position among the tensors.
        index: usize,
        /// Its PyTorch name (empty if it could not be read).
        name: &'m str,
    },
    /// Node `index`.
    Node {
        /// Position among the nodes.
        index: usize,
        /// Its op's registry name (empty if it could not be read).
        op: &'m str,
        /// The node's name in the source model (empty if none or unreadable).
        name: &'m str,
    },
    /// Output `index`.
    Output {
        /// Position among the outputs.
        index: usize,
    },
}

/// An error of a model file or a model run: what ([`Error`]) and where ([`Site`]).
/// `?` converts it into the plain [`Error`] (dropping the place); print it to keep it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelError<'m> {
    /// Where.
    pub site: Site<'m>,
    /// What.
    pub error: Error,
}

/// Shorthand for results of the model module.
pub type ModelResult<'m, T> = core::result::Result<T, ModelError<'m>>;

impl<'m> Site<'m> {
    /// This place with an error.
    pub fn error(self, error: Error) -> ModelError<'m> {
        ModelError { site: self, error }
    }

    /// This place with [`Error::Corrupt`] `what`.
    pub(crate) fn corrupt(self, what: &'static str) -> ModelError<'m> {
        self.error(Error::Corrupt { what })
    }
}

impl From<ModelError<'_>> for Error {
    fn from(e: ModelError<'_>) -> Error {
        e.error
    }
}

impl fmt::Display for Site<'_> {
    /// `node 3 (conv2d "features.0")`, `tensor 2 "c1.bias"`, `output 0`; names that are
    /// empty (unreadable or absent) are left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, index, name) = match *self {
            Site::File => return write!(f, "model file"),
            Site::Output { index } => return write!(f, "output {index}"),
            Site::Input { index, name } => ("input", index, name),
            Site::Tensor { index, name } => ("tensor", index, name),
            Site::Node { index, op, name } => {
                write!(f, "node {index}")?;
                return match (op.is_empty(), name.is_empty()) {
                    (true, _) => Ok(()),
                    (false, true) => write!(f, " ({op})"),
                    (false, false) => write!(f, " ({op} \"{name}\")"),
                };
            }
        };
        write!(f, "{what} {index}")?;
        if !name.is_empty() {
            write!(f, " \"{name}\"")?;
        }
        Ok(())
    }
}

impl fmt::Display for ModelError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.site, self.error)
    }
}

impl core::error::Error for ModelError<'_> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        Some(&self.error)
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for ModelError<'_> {
    fn format(&self, f: defmt::Formatter) {
        match self.site {
            Site::File => defmt::write!(f, "model file"),
            Site::Input { index, name } => defmt::write!(f, "input {=usize} \"{=str}\"", index, name),
            Site::Tensor { index, name } => defmt::write!(f, "tensor {=usize} \"{=str}\"", index, name),
            Site::Node { index, op, name } => {
                defmt::write!(f, "node {=usize} ({=str} \"{=str}\")", index, op, name)
            }
            Site::Output { index } => defmt::write!(f, "output {=usize}", index),
        }
        defmt::write!(f, ": {}", self.error)
    }
}
