//! Smallest end-to-end check of the firmware front end: one W1 training step
//! (forward, backward, SGD) at 28x28 on the Cortex-M4F, with the meta plan, the real
//! high-water mark and the instruction count reported through defmt.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use torchlet::{init::Rng, nn::digits_fcn, optim::Sgd, Graph};
use torchlet_firmware::{code, counter, exit};

const TAPE: usize = 32;
const ARENA_WORDS: usize = 80 * 1024;
static mut ARENA: [f32; ARENA_WORDS] = [0.0; ARENA_WORDS];

fn plan(h: usize, w: usize) -> Result<usize, torchlet::Error> {
    let mut g: Graph<f32, TAPE> = Graph::meta(usize::MAX);
    let mut rng = Rng::new(0);
    let model = digits_fcn(&mut g, &mut rng)?;
    let mut sgd = Sgd::new(&mut g, 0.01, 0.0, 0.0)?;
    let x = g.input(&[1, 1, h, w], &[])?;
    let logits = model.forward(&mut g, x)?;
    let loss = g.cross_entropy(logits, &[])?;
    g.backward(loss)?;
    sgd.step(&mut g)?;
    Ok(g.arena().high_water_bytes())
}

fn run() -> Result<(), torchlet::Error> {
    let (h, w) = (28, 28);
    let planned = plan(h, w)?;
    defmt::info!("plan {=usize}x{=usize}: {=usize} arena bytes", h, w, planned);
    // SAFETY: the only reference to ARENA, taken once at boot.
    #[allow(static_mut_refs)]
    let arena: &'static mut [f32] = unsafe { &mut ARENA };
    let mut g: Graph<f32, TAPE> = Graph::new(arena);
    let mut rng = Rng::new(1);
    let model = digits_fcn(&mut g, &mut rng)?;
    let mut sgd = Sgd::new(&mut g, 0.01, 0.0, 0.0)?;
    let t0 = counter::instructions();
    g.zero_grad();
    let x = g.input_with(&[1, 1, h, w], |d| {
        for (i, v) in d.iter_mut().enumerate() {
            *v = (i % 7) as f32 / 7.0;
        }
    })?;
    let logits = model.forward(&mut g, x)?;
    let loss = g.cross_entropy(logits, &[3])?;
    let l = g.data(loss)?[0];
    g.backward(loss)?;
    sgd.step(&mut g)?;
    let high = g.arena().high_water_bytes();
    g.end_step();
    let n = counter::instructions() - t0;
    defmt::info!("step loss {=f32}, {=u64} instructions", l, n);
    defmt::info!("high-water {=usize} bytes (plan {=usize})", high, planned);
    if high != planned || !l.is_finite() {
        defmt::error!("FAIL: plan and real step differ, or the loss is not finite");
        exit(code::CHECK_FAILED);
    }
    Ok(())
}

#[entry]
fn main() -> ! {
    let cp = cortex_m::Peripherals::take().unwrap_or_else(|| exit(code::ENGINE_ERROR));
    counter::start(cp.SYST);
    match run() {
        Ok(()) => {
            defmt::info!("PASS w1_step");
            exit(code::OK)
        }
        Err(e) => {
            defmt::error!("engine error: {}", e);
            exit(code::ENGINE_ERROR)
        }
    }
}
