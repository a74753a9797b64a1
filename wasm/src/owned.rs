//! A [`Graph`] that owns its arena, and a [`Model`] that owns its file's bytes.
//!
//! The engine's `Graph<'a, ..>` borrows a caller-provided buffer, which is what a
//! microcontroller wants. A JavaScript object, however, must own everything it uses.
//! This module pairs a heap buffer with the graph that borrows it, and a model file's
//! bytes with the [`Model`] that reads them in place: the only `unsafe` of the front end.
//!
//! - The buffer is a leaked `Box<[f32]>` (a raw pointer), so moving the struct does not
//!   move the memory the graph points into.
//! - The graph is only lent out through [`OwnedGraph::with`], whose closure must work
//!   for any lifetime, so it cannot keep or swap out the `'static` graph.
//! - `Drop` drops the graph first, then frees the buffer.
//! - [`OwnedModel`] lends its `Model<'static>` only as `&Model<'_>`, tied to its own
//!   borrow (the model is covariant in the file's lifetime), and frees the bytes on drop.
#![allow(unsafe_code)]

use crate::limits;
use core::mem::ManuallyDrop;
use torchlet::model::{Model, ModelFile, Placement, TensorRecord};
use torchlet::Graph;

/// Tape capacity of every graph in the module: parameters, the input and every op
/// record of one step. A loaded model needs the most (W1 as layers about 32; the JS
/// layer specs are limited so that they fit, see `spec.rs`). One capacity for all: the
/// ops are generic over it, so a second one would put a second copy of every op in
/// the download.
pub const TAPE: usize = 1024;

/// A graph and the heap arena it borrows.
pub struct OwnedGraph<const N: usize = TAPE> {
    graph: ManuallyDrop<Graph<'static, f32, N>>,
    buf: *mut [f32],
}

impl<const N: usize> OwnedGraph<N> {
    /// A graph over a fresh zeroed arena of `words` f32 words, or the error saying
    /// that the module cannot have that many ([`limits::zeroed_f32s`]).
    pub fn new(words: usize) -> Result<Self, String> {
        let buf: *mut [f32] = Box::into_raw(limits::zeroed_f32s("an arena", words)?);
        // SAFETY: `buf` comes from `Box::into_raw`, so it is valid, aligned and not
        // aliased. The `'static` borrow is handed only to `graph`, which is never given
        // out by value (see `with`) and is dropped in `Drop` before the box is freed.
        let slice: &'static mut [f32] = unsafe { &mut *buf };
        Ok(OwnedGraph {
            graph: ManuallyDrop::new(Graph::new(slice)),
            buf,
        })
    }

    /// Lends the graph to `f` for a lifetime `f` cannot name, so it cannot escape.
    pub fn with<R>(&mut self, f: impl for<'b> FnOnce(&mut Graph<'b, f32, N>) -> R) -> R {
        f(&mut self.graph)
    }

    /// Read-only access (arena byte counts).
    pub fn get(&self) -> &Graph<'static, f32, N> {
        &self.graph
    }
}

impl<const N: usize> Drop for OwnedGraph<N> {
    fn drop(&mut self) {
        // SAFETY: the graph (the only borrower of the buffer) is dropped first and never
        // used again; `buf` came from `Box::into_raw` and is freed exactly once, here.
        unsafe {
            ManuallyDrop::drop(&mut self.graph);
            drop(Box::from_raw(self.buf));
        }
    }
}

/// A model file's bytes on the heap and the [`Model`] built from them, which reads its
/// graph and names from those bytes.
pub struct OwnedModel {
    model: Model<'static>,
    bytes: *mut [u8],
}

impl OwnedModel {
    /// Checks `bytes` as a model file ([`ModelFile::parse`]) and creates its tensors in
    /// `g`, each where `place` says ([`Model::with_placement`]); the error names what is
    /// wrong and where.
    pub fn with_placement<const N: usize>(
        bytes: Vec<u8>,
        g: &mut Graph<'_, f32, N>,
        place: impl FnMut(&TensorRecord<'_>) -> Placement,
    ) -> Result<Self, String> {
        let buf: *mut [u8] = Box::into_raw(bytes.into_boxed_slice());
        // SAFETY: `buf` comes from `Box::into_raw` and is only freed in `Drop` (or below,
        // on error, after the last use of `slice`: the error is turned into a `String`
        // first). The model built on it is lent out only as `&Model<'_>` (see `get`).
        let slice: &'static [u8] = unsafe { &*buf };
        let r = ModelFile::parse(slice)
            .and_then(|f| Model::with_placement(g, f, place))
            .map_err(|e| e.to_string());
        match r {
            Ok(model) => Ok(OwnedModel { model, bytes: buf }),
            Err(e) => {
                // SAFETY: nothing borrows the buffer any more (see above).
                unsafe { drop(Box::from_raw(buf)) };
                Err(e)
            }
        }
    }

    /// The model, for no longer than this value lives.
    pub fn get(&self) -> &Model<'_> {
        &self.model
    }
}

impl Drop for OwnedModel {
    fn drop(&mut self) {
        // SAFETY: `model` (a plain view without `Drop`) is never used again; `bytes`
        // came from `Box::into_raw` and is freed exactly once, here.
        unsafe { drop(Box::from_raw(self.bytes)) }
    }
}
