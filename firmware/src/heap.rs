//! A heap used exactly once: the program takes its arena from it at boot, with the size
//! the meta plan asked for, and then never allocates again. The wrapper counts
//! allocations so a program can prove that (`allocations()` stays 1).

use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicU32, Ordering};
use embedded_alloc::LlffHeap;

/// `embedded-alloc`'s linked-list heap plus an allocation counter.
pub struct CountingHeap {
    heap: LlffHeap,
    count: AtomicU32,
}

impl CountingHeap {
    /// A heap with no memory yet (see [`CountingHeap::init`]).
    pub const fn empty() -> Self {
        CountingHeap {
            heap: LlffHeap::empty(),
            count: AtomicU32::new(0),
        }
    }

    /// Hands the heap its memory.
    ///
    /// # Safety
    /// Call once, before any allocation, with memory used for nothing else.
    pub unsafe fn init(&self, start: usize, size: usize) {
        // SAFETY: forwarded contract.
        unsafe { self.heap.init(start, size) }
    }

    /// Allocations so far.
    pub fn allocations(&self) -> u32 {
        self.count.load(Ordering::Relaxed)
    }

    /// Bytes in use.
    pub fn used(&self) -> usize {
        self.heap.used()
    }

    /// Bytes free.
    pub fn free(&self) -> usize {
        self.heap.free()
    }
}

// SAFETY: forwards to LlffHeap, which is a correct allocator; the counter is a side effect.
unsafe impl GlobalAlloc for CountingHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // load + store: thumbv6m has no atomic read-modify-write; allocation is single-threaded.
        self.count
            .store(self.count.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        // SAFETY: forwarded contract.
        unsafe { self.heap.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract.
        unsafe { self.heap.dealloc(ptr, layout) }
    }
}
