//! The fine-tuning run of `finetune` (W1's hand-written layers) and `finetune_model`
//! (a network from a model file), written once for any [`Net`]:
//!
//! - plans the arena per input size with the meta graph (once per size, in a table),
//!   takes exactly the largest plan from the heap, and allocates nothing afterwards;
//!   a model whose largest step does not fit the heap's free bytes is refused first
//!   ([`Error::ArenaExhausted`], logged, exit status 2), not left to a failed allocation;
//! - fine-tunes (batch 1, SGD with momentum) on real digits cropped to their ink's
//!   bounding box at their native, varying sizes, logging loss, instructions and the
//!   arena's real high-water mark per step;
//! - measures held-out accuracy before and after; passes only when it rose by at least
//!   [`Settings::margin_points`] percentage points, every step's high-water equalled
//!   its plan, the arena was the run's one allocation and no sample was skipped.
//!
//! The arena stays allocated after the run (the graph borrows it for `'static`); a
//! program that runs twice needs the heap for both arenas.

use crate::assets::Samples;
use crate::counter;
use crate::heap::CountingHeap;
use crate::w1::{plan_step_with, Model, Net, Recipe};
use heapless::Vec;
use torchlet::{Error, Graph, Phase};

/// What a program fine-tunes with and how much it must gain.
#[derive(Clone, Copy)]
pub struct Settings {
    /// The optimizer's settings.
    pub recipe: Recipe,
    /// Passes over the fine-tuning digits.
    pub epochs: usize,
    /// Held-out accuracy must rise by at least this many percentage points.
    pub margin_points: usize,
}

/// Distinct input sizes a run plans (more are an error).
const MAX_SIZES: usize = 64;

/// The plan of each input size of the samples: `(h, w, bytes)`.
type SizePlans = Vec<(u8, u8, u32), MAX_SIZES>;

/// Plans every input size of `samples` once on meta graphs (in this frame, which is
/// gone before the real graph exists: a device holds one graph at a time).
#[inline(never)]
fn plan_sizes<M: Net, const N: usize>(
    samples: &Samples,
    recipe: Recipe,
    build: &impl Fn(&mut Graph<'static, f32, N>) -> Result<M, Error>,
) -> Result<SizePlans, Error> {
    let mut plans = SizePlans::new();
    for s in samples.iter() {
        if plans.iter().any(|p| (p.0 as usize, p.1 as usize) == (s.h, s.w)) {
            continue;
        }
        let bytes = plan_step_with::<N, M>(s.h, s.w, recipe, usize::MAX, build)?;
        defmt::info!("plan {=usize}x{=usize}: {=usize} arena bytes", s.h, s.w, bytes);
        plans
            .push((s.h as u8, s.w as u8, bytes as u32))
            .map_err(|_| Error::InvalidState {
                what: "finetune: more distinct input sizes than the plan table holds",
            })?;
    }
    Ok(plans)
}

/// The planned bytes of a step at `h x w`.
fn planned(plans: &SizePlans, h: usize, w: usize) -> Option<usize> {
    plans
        .iter()
        .find(|p| (p.0 as usize, p.1 as usize) == (h, w))
        .map(|p| p.2 as usize)
}

/// Min / max / total instructions of the training steps, with the sizes of the extremes.
#[derive(Default)]
struct StepStats {
    n: u64,
    total: u64,
    min: (u64, usize, usize),
    max: (u64, usize, usize),
}

impl StepStats {
    fn add(&mut self, instr: u64, h: usize, w: usize) {
        if self.n == 0 || instr < self.min.0 {
            self.min = (instr, h, w);
        }
        if instr > self.max.0 {
            self.max = (instr, h, w);
        }
        self.n += 1;
        self.total += instr;
    }
}

/// Runs the fine-tuning on the samples file `bytes`. `take_arena(words)` allocates
/// the arena from `heap` (the program's global allocator: this library links no
/// `alloc`). `build` creates the network's parameters in a graph: in the meta graphs
/// of the plans and in the real one (with its values there); `loaded` runs once on the
/// real graph after the network and the optimizer state exist (load weights, log).
/// Returns whether every check held.
pub fn run<M: Net, const N: usize>(
    bytes: &[u8],
    heap: &CountingHeap,
    take_arena: impl FnOnce(usize) -> &'static mut [f32],
    s: Settings,
    build: impl Fn(&mut Graph<'static, f32, N>) -> Result<M, Error>,
    loaded: impl FnOnce(&mut Graph<'static, f32, N>) -> Result<(), Error>,
) -> Result<bool, Error> {
    let allocations_before = heap.allocations();
    let samples = Samples::parse(bytes)?;
    defmt::info!(
        "samples: {=usize} fine-tuning + {=usize} held-out cropped digits, {=usize} bytes of flash",
        samples.n_finetune,
        samples.n_heldout,
        bytes.len()
    );

    // Plan every input size once, on the meta graph; the arena is the largest plan.
    let t0 = counter::instructions();
    let plans = plan_sizes(&samples, s.recipe, &build)?;
    let plan_instr = counter::instructions() - t0;
    let sizes = plans.len();
    let largest = plans.iter().map(|p| p.2 as usize).max().unwrap_or(0);
    defmt::info!(
        "arena plan: {=usize} input sizes, largest step needs {=usize} bytes ({=u64} instructions per plan)",
        sizes,
        largest,
        plan_instr / sizes.max(1) as u64
    );

    // The one allocation: the arena, as large as the plan says, once the heap is known
    // to hold it: a model whose largest step does not fit is refused, naming both.
    heap_holds(heap, largest)?;
    let arena = take_arena(largest / 4);
    let ok = train(arena, &samples, &plans, s, build, loaded)?;
    defmt::info!(
        "heap: {=u32} allocation(s) in total (one arena per run), {=usize} bytes",
        heap.allocations(),
        heap.used()
    );
    Ok(ok && heap.allocations() == allocations_before + 1)
}

/// Refuses an arena of `bytes` that the heap's free bytes cannot hold (the allocator
/// rounds a block up to 8 bytes), instead of failing to allocate it; in its own frame,
/// so that `run`'s stays as it was.
#[inline(never)]
fn heap_holds(heap: &CountingHeap, bytes: usize) -> Result<(), Error> {
    let available = heap.free();
    if bytes.next_multiple_of(8) <= available {
        return Ok(());
    }
    defmt::error!(
        "arena: the largest step needs {=usize} bytes, the heap has {=usize} bytes free",
        bytes,
        available
    );
    Err(Error::ArenaExhausted {
        needed: bytes,
        available,
        op: "",
        phase: Phase::Setup,
        step_bytes: Some(bytes),
    })
}

/// The fine-tuning on the real graph, in its own frame (not live while planning).
#[inline(never)]
fn train<M: Net, const N: usize>(
    arena: &'static mut [f32],
    samples: &Samples,
    plans: &SizePlans,
    s: Settings,
    build: impl Fn(&mut Graph<'static, f32, N>) -> Result<M, Error>,
    loaded: impl FnOnce(&mut Graph<'static, f32, N>) -> Result<(), Error>,
) -> Result<bool, Error> {
    let (recipe, epochs, margin) = (s.recipe, s.epochs, s.margin_points);
    let mut g: Graph<'static, f32, N> = Graph::new(arena);
    let net = build(&mut g)?;
    let mut model = Model::with_net(&mut g, net, recipe)?;
    loaded(&mut g)?;

    let (before, n_test) = model.correct(&mut g, samples.heldout())?;
    defmt::info!("held-out accuracy before: {=usize}/{=usize}", before, n_test);

    let mut stats = StepStats::default();
    let (mut skipped, mut plan_mismatch, mut real_high) = (0usize, 0usize, 0usize);
    let cap = g.arena().capacity_bytes();
    for epoch in 1..=epochs {
        let mut loss_sum = 0.0f32;
        for (i, s) in samples.finetune().enumerate() {
            // A sample whose plan the arena cannot hold is skipped.
            let planned = match planned(plans, s.h, s.w).filter(|&b| b <= cap) {
                Some(b) => b,
                None => {
                    defmt::warn!(
                        "sample {=usize} {=usize}x{=usize} skipped: no plan fits",
                        i,
                        s.h,
                        s.w
                    );
                    skipped += 1;
                    continue;
                }
            };
            g.reset_high_water();
            let t = counter::instructions();
            let step = model.train_step(&mut g, (s.h, s.w), s.label as usize, |d| s.fill(d));
            let instr = counter::instructions() - t;
            let high = g.arena().high_water_bytes();
            match step {
                Ok(loss) => {
                    loss_sum += loss;
                    stats.add(instr, s.h, s.w);
                    plan_mismatch += (high != planned) as usize;
                    real_high = real_high.max(high);
                    defmt::info!(
                        "epoch {=usize} step {=usize} {=usize}x{=usize}: loss {=f32}, {=u64} instructions, arena {=usize} bytes (plan {=usize})",
                        epoch, i, s.h, s.w, loss, instr, high, planned
                    );
                }
                Err(e) => {
                    defmt::warn!("sample {=usize} failed, weights kept: {}", i, e);
                    skipped += 1;
                }
            }
        }
        let (ok, n) = model.correct(&mut g, samples.heldout())?;
        defmt::info!(
            "epoch {=usize}: mean loss {=f32}, held-out accuracy {=usize}/{=usize}",
            epoch,
            loss_sum / samples.n_finetune.max(1) as f32,
            ok,
            n
        );
    }

    let (after, _) = model.correct(&mut g, samples.heldout())?;
    defmt::info!(
        "instructions per training step: mean {=u64}, min {=u64} at {=usize}x{=usize}, max {=u64} at {=usize}x{=usize}",
        stats.total / stats.n.max(1),
        stats.min.0,
        stats.min.1,
        stats.min.2,
        stats.max.0,
        stats.max.1,
        stats.max.2
    );
    defmt::info!(
        "arena: {=usize} bytes, real high-water {=usize} bytes; steps whose high-water differed from the plan: {=usize}",
        cap,
        real_high,
        plan_mismatch
    );
    defmt::info!("skipped samples: {=usize}", skipped);
    defmt::info!(
        "held-out accuracy: before {=usize}/{=usize}, after {=usize}/{=usize} (required: +{=usize} points)",
        before,
        n_test,
        after,
        n_test,
        margin
    );
    let improved = after * 100 >= (before * 100 + margin * n_test);
    Ok(improved && plan_mismatch == 0 && skipped == 0)
}
