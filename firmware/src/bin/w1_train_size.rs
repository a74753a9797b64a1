//! The smallest program that trains W1, built to measure the engine's own code size:
//! what a device needs to train the network (parameters and their initialisation, the
//! meta plan, forward with only W1's ops, cross-entropy, backward, the SGD update, and
//! the engine's errors), with the same boot, defmt and exit as `fault`, which has no
//! engine. `size-report.sh` reports this program's `.text` and `.rodata` minus
//! `fault`'s as the engine's code. It also checks what it runs: two training steps at
//! two input sizes, each step's arena high-water equal to its plan, finite losses.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use torchlet::{Error, Graph};
use torchlet_firmware::w1::{plan_step, Model, Recipe, TAPE};
use torchlet_firmware::{code, counter, exit};

/// Plain SGD as GUIDE.md's W1 (lr 0.01; momentum 0 keeps no state in the arena).
const RECIPE: Recipe = Recipe {
    lr: 0.01,
    momentum: 0.0,
};
/// 96 KiB: a batch-1 step at 28x28 plans 87,420 bytes.
const ARENA_WORDS: usize = 24 * 1024;
static mut ARENA: [f32; ARENA_WORDS] = [0.0; ARENA_WORDS];
/// Two of GUIDE.md's W1 cases: batch 1 at 28x28, then at 12x20 in the same graph.
const SIZES: [(usize, usize); 2] = [(28, 28), (12, 20)];

fn run() -> Result<bool, Error> {
    // SAFETY: the only reference to ARENA, taken once at boot.
    #[allow(static_mut_refs)]
    let arena: &'static mut [f32] = unsafe { &mut ARENA };
    let mut g: Graph<f32, TAPE> = Graph::new(arena);
    let mut model = Model::new(&mut g, RECIPE)?;
    let cap = g.arena().capacity_bytes();
    let mut ok = true;
    for (h, w) in SIZES {
        let planned = plan_step::<TAPE>(h, w, RECIPE, cap)?;
        g.reset_high_water();
        let loss = model.train_step(&mut g, (h, w), 3, |d| {
            for (i, v) in d.iter_mut().enumerate() {
                *v = (i % 7) as f32 / 7.0;
            }
        })?;
        let high = g.arena().high_water_bytes();
        defmt::info!(
            "train step {=usize}x{=usize}: loss {=f32}, high-water {=usize} bytes (plan {=usize})",
            h,
            w,
            loss,
            high,
            planned
        );
        ok &= high == planned && loss.is_finite();
    }
    Ok(ok)
}

#[entry]
fn main() -> ! {
    // The same boot as `fault` (SysTick counts instructions for defmt's timestamps).
    let cp = cortex_m::Peripherals::take().unwrap_or_else(|| exit(code::ENGINE_ERROR));
    counter::start(cp.SYST);
    match run() {
        Ok(true) => {
            defmt::info!("PASS w1_train_size");
            exit(code::OK)
        }
        Ok(false) => {
            defmt::error!("FAIL: a step's high-water mark differed from its plan, or a loss was not finite");
            exit(code::CHECK_FAILED)
        }
        Err(e) => {
            defmt::error!("engine error: {}", e);
            exit(code::ENGINE_ERROR)
        }
    }
}
