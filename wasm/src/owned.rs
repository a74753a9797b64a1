//! A [`Graph`] that owns its arena.
//!
//! The engine's `Graph<'a, ..>` borrows a caller-provided buffer, which is what a
//! microcontroller wants. A JavaScript object, however, must own everything it uses.
//! This module pairs a heap buffer with the graph that borrows it: the only `unsafe`
//! of the front end.
//!
//! - The buffer is a leaked `Box<[f32]>` (a raw pointer), so moving the struct does not
//!   move the memory the graph points into.
//! - The graph is only lent out through [`OwnedGraph::with`], whose closure must work
//!   for any lifetime, so it cannot keep or swap out the `'static` graph.
//! - `Drop` drops the graph first, then frees the buffer.
#![allow(unsafe_code)]

use core::mem::ManuallyDrop;
use torchlet::Graph;

/// Tape capacity: parameters, the input and every op record of one step. W1 needs
/// about 32; the JS layer specs are limited so that they fit (see `spec.rs`).
pub const TAPE: usize = 96;

/// A graph and the heap arena it borrows.
pub struct OwnedGraph {
    graph: ManuallyDrop<Graph<'static, f32, TAPE>>,
    buf: *mut [f32],
}

impl OwnedGraph {
    /// A graph over a fresh zeroed arena of `words` f32 words.
    pub fn new(words: usize) -> Self {
        let buf: *mut [f32] = Box::into_raw(vec![0.0f32; words].into_boxed_slice());
        // SAFETY: `buf` comes from `Box::into_raw`, so it is valid, aligned and not
        // aliased. The `'static` borrow is handed only to `graph`, which is never given
        // out by value (see `with`) and is dropped in `Drop` before the box is freed.
        let slice: &'static mut [f32] = unsafe { &mut *buf };
        OwnedGraph {
            graph: ManuallyDrop::new(Graph::new(slice)),
            buf,
        }
    }

    /// Lends the graph to `f` for a lifetime `f` cannot name, so it cannot escape.
    pub fn with<R>(&mut self, f: impl for<'b> FnOnce(&mut Graph<'b, f32, TAPE>) -> R) -> R {
        f(&mut self.graph)
    }

    /// Read-only access (arena byte counts).
    pub fn get(&self) -> &Graph<'static, f32, TAPE> {
        &self.graph
    }
}

impl Drop for OwnedGraph {
    fn drop(&mut self) {
        // SAFETY: the graph (the only borrower of the buffer) is dropped first and never
        // used again; `buf` came from `Box::into_raw` and is freed exactly once, here.
        unsafe {
            ManuallyDrop::drop(&mut self.graph);
            drop(Box::from_raw(self.buf));
        }
    }
}
