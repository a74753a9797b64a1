//! One W1 training step for each of GUIDE.md's W1 cases (batch 1 at 28x28, batch 1 at
//! 12x20, batch 32 at 28x28) on the Cortex-M4F, in one run and one graph with no
//! rebuild: the meta plan, the real high-water mark (which must equal it), and the
//! instructions of forward, backward and the SGD update. The smallest end-to-end
//! check of the firmware. W1 runs through `forward_w1` (only W1's ops, as `finetune`);
//! the engine's code size is measured on the smaller `w1_train_size`.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use torchlet::{init::Rng, nn::digits_fcn, optim::Sgd, Error, Graph};
use torchlet_firmware::w1::forward_w1;
use torchlet_firmware::{code, counter, exit};

const TAPE: usize = 32;
/// 1 MiB: batch 1 fits; batch 32 at 28x28 does not (its plan is about 6.7 MB, more
/// than the board's 4 MiB of RAM), and the planner says so before any data moves.
const ARENA_WORDS: usize = 256 * 1024;
static mut ARENA: [f32; ARENA_WORDS] = [0.0; ARENA_WORDS];
const CASES: [(usize, usize, usize); 3] = [(1, 28, 28), (1, 12, 20), (32, 28, 28)];
const MAX_BATCH: usize = 32;

/// Forward, backward and update of one step at `[batch, 1, h, w]`, on a real or a
/// meta graph; returns the loss and the instructions of each phase.
fn step<const N: usize>(
    g: &mut Graph<'_, f32, N>,
    net: &torchlet::nn::Sequential<12>,
    sgd: &mut Sgd,
    (batch, h, w): (usize, usize, usize),
) -> Result<(f32, [u64; 3]), Error> {
    let labels = [3usize; MAX_BATCH];
    g.zero_grad();
    let t0 = counter::instructions();
    let x = g.input_with(&[batch, 1, h, w], |d| {
        for (i, v) in d.iter_mut().enumerate() {
            *v = (i % 7) as f32 / 7.0;
        }
    })?;
    let logits = forward_w1(net, g, x)?;
    let loss = g.cross_entropy(logits, &labels[..batch])?;
    let t1 = counter::instructions();
    g.backward(loss)?;
    let t2 = counter::instructions();
    sgd.step(g)?;
    let t3 = counter::instructions();
    let l = g.data(loss)?.first().copied().unwrap_or(0.0);
    Ok((l, [t1 - t0, t2 - t1, t3 - t2]))
}

fn plan(case: (usize, usize, usize), capacity_bytes: usize) -> Result<usize, Error> {
    let mut g: Graph<f32, TAPE> = Graph::meta(capacity_bytes);
    let net = digits_fcn(&mut g, &mut Rng::new(0))?;
    let mut sgd = Sgd::new(&mut g, 0.01, 0.0, 0.0)?;
    step(&mut g, &net, &mut sgd, case)?;
    Ok(g.arena().high_water_bytes())
}

fn run() -> Result<bool, Error> {
    // SAFETY: the only reference to ARENA, taken once at boot.
    #[allow(static_mut_refs)]
    let arena: &'static mut [f32] = unsafe { &mut ARENA };
    let mut g: Graph<f32, TAPE> = Graph::new(arena);
    let net = digits_fcn(&mut g, &mut Rng::new(1))?;
    let mut sgd = Sgd::new(&mut g, 0.01, 0.0, 0.0)?;
    let mut ok = true;
    for (batch, h, w) in CASES {
        let planned = plan((batch, h, w), usize::MAX)?;
        defmt::info!(
            "plan batch {=usize} {=usize}x{=usize}: {=usize} arena bytes",
            batch,
            h,
            w,
            planned
        );
        let cap = g.arena().capacity_bytes();
        if let Err(e) = plan((batch, h, w), cap) {
            defmt::warn!(
                "batch {=usize} {=usize}x{=usize} not run: the planner says it does not fit the {=usize}-byte arena: {}",
                batch, h, w, cap, e
            );
            continue;
        }
        g.reset_high_water();
        let r = step(&mut g, &net, &mut sgd, (batch, h, w));
        let high = g.arena().high_water_bytes();
        g.end_step();
        let (loss, [fwd, bwd, upd]) = r?;
        defmt::info!(
            "step batch {=usize} {=usize}x{=usize}: loss {=f32}, {=u64} instructions (forward {=u64}, backward {=u64}, SGD {=u64}), high-water {=usize} bytes (plan {=usize})",
            batch, h, w, loss, fwd + bwd + upd, fwd, bwd, upd, high, planned
        );
        ok &= high == planned && loss.is_finite();
    }
    Ok(ok)
}

#[entry]
fn main() -> ! {
    let cp = cortex_m::Peripherals::take().unwrap_or_else(|| exit(code::ENGINE_ERROR));
    counter::start(cp.SYST);
    match run() {
        Ok(true) => {
            defmt::info!("PASS w1_step");
            exit(code::OK)
        }
        Ok(false) => {
            defmt::error!(
                "FAIL: a real step's high-water mark differed from its plan, or a loss was not finite"
            );
            exit(code::CHECK_FAILED)
        }
        Err(e) => {
            defmt::error!("engine error: {}", e);
            exit(code::ENGINE_ERROR)
        }
    }
}
