//! After setup, a training step allocates nothing from the heap: a counting global
//! allocator watches 20 steps at two input sizes. It counts only the test thread's
//! allocations: the test harness's own threads allocate at times of their choosing
//! (under load this made the test fail now and then with a few stray allocations).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use torchlet::init::Rng;
use torchlet::nn::digits_fcn;
use torchlet::optim::Sgd;
use torchlet::Graph;

struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Set on the test thread while the steps run (const-initialised: reading it
    /// never allocates).
    static WATCHED: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if WATCHED.try_with(Cell::get).unwrap_or(false) {
            ALLOCS.fetch_add(1, Ordering::SeqCst);
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn a_training_step_allocates_nothing_after_setup() {
    let mut arena = vec![0.0f32; 128 * 1024];
    let mut g: Graph<f32, 32> = Graph::new(&mut arena);
    let model = digits_fcn(&mut g, &mut Rng::new(1)).unwrap();
    let mut sgd = Sgd::new(&mut g, 0.01, 0.9, 0.0).unwrap();
    let image = vec![0.3f32; 28 * 28];
    let before = ALLOCS.load(Ordering::SeqCst);
    WATCHED.with(|w| w.set(true));
    let mut last = 0.0;
    for i in 0..20 {
        let (h, w) = if i % 2 == 0 { (28, 28) } else { (12, 20) };
        g.zero_grad();
        let x = g.input(&[1, 1, h, w], &image[..h * w]).unwrap();
        let logits = model.forward(&mut g, x).unwrap();
        let loss = g.cross_entropy(logits, &[7]).unwrap();
        last = g.data(loss).unwrap()[0];
        g.backward(loss).unwrap();
        sgd.step(&mut g).unwrap();
        g.end_step();
    }
    WATCHED.with(|w| w.set(false));
    let after = ALLOCS.load(Ordering::SeqCst);
    assert_eq!(after - before, 0, "heap allocations during 20 training steps");
    assert!(last.is_finite() && last < 2.3, "the steps trained (loss {last})");
}
