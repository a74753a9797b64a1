//! Bad input on the device, each reported through defmt with the engine's error and
//! handled without a fault (Cortex-M4F, QEMU `mps2-an386`):
//!
//! 1. a corrupt weights blob (one flipped byte): refused by the checksum, the weights
//!    already loaded are kept;
//! 2. a sample larger than the arena's plan allows (a real digit on a 28x28 canvas
//!    when the arena was sized for the cropped digits): refused by the planner before
//!    any data is touched, and by the real step too; the weights are kept;
//! 3. a tape too small for the step: a step over two samples (their losses summed,
//!    one backward) needs 35 records, more than W1's tape of [`TAPE`] (32) holds; the
//!    planner and the step fail with the tape error, weights are kept. (One tape size
//!    for the whole program: each capacity `N` is a separate copy of the engine's
//!    code, about 20 KB, and this program must stay under 128 KiB of flash.)
//!
//! After each, a normal training step must still succeed. Exits 0 only when every
//! error came as expected.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use torchlet::{Error, Graph};
use torchlet_firmware::assets::{Sample, Samples};
use torchlet_firmware::w1::{forward_w1, plan_step, Model, Recipe, TAPE};
use torchlet_firmware::{code, counter, exit, weights};

static WEIGHTS: &[u8] = include_bytes!("../../assets/w1_pretrained.tlw");
static SAMPLES: &[u8] = include_bytes!("../../assets/digits_cropped.bin");
const WEIGHTS_LEN: usize = include_bytes!("../../assets/w1_pretrained.tlw").len();

const RECIPE: Recipe = Recipe {
    lr: 0.005,
    momentum: 0.9,
};
const ARENA_WORDS: usize = 64 * 1024;
static mut ARENA: [f32; ARENA_WORDS] = [0.0; ARENA_WORDS];
static mut CORRUPT: [u8; WEIGHTS_LEN] = [0; WEIGHTS_LEN];

fn check(ok: bool, what: &str) -> bool {
    if ok {
        defmt::info!("ok: {=str}", what);
    } else {
        defmt::error!("FAIL: {=str}", what);
    }
    ok
}

/// One training step over two samples, their losses summed before one backward:
/// 8 parameters + 2 x (input + 12 ops) + the sum = 35 records. On error the step's
/// scratch is released and the weights are unchanged (SGD runs last).
fn two_sample_step<const N: usize>(
    m: &mut Model,
    g: &mut Graph<'_, f32, N>,
    pair: [&Sample<'_>; 2],
) -> Result<f32, Error> {
    let r = (|| {
        g.zero_grad();
        let mut losses = [None; 2];
        for (l, s) in losses.iter_mut().zip(pair) {
            let x = g.input_with(&[1, 1, s.h, s.w], |d| s.fill(d))?;
            let logits = forward_w1(&m.net, g, x)?;
            *l = Some(g.cross_entropy(logits, &[s.label as usize])?);
        }
        let [Some(a), Some(b)] = losses else {
            return Err(Error::InvalidState { what: "two losses" });
        };
        let loss = g.add(a, b)?;
        let l = g.data(loss)?.first().copied().unwrap_or(0.0);
        g.backward(loss)?;
        m.sgd.step(g)?;
        Ok(l)
    })();
    g.end_step();
    r
}

fn run(arena: &'static mut [f32], corrupt: &'static mut [u8]) -> Result<bool, Error> {
    let samples = Samples::parse(SAMPLES)?;
    let mut firsts = samples.finetune();
    let empty = Error::Corrupt {
        what: "samples: fewer than two",
    };
    let digit = firsts.next().ok_or(empty)?;
    let second = firsts.next().ok_or(empty)?;
    let mut all_ok = true;

    // 3. A tape too small for the step: planner and real step both answer the tape
    // error (the planner runs the same two-sample step on a meta graph).
    {
        let pair = [&digit, &second];
        let planned = (|| {
            let mut meta: Graph<f32, TAPE> = Graph::meta(usize::MAX);
            let mut m = Model::new(&mut meta, RECIPE)?;
            two_sample_step(&mut m, &mut meta, pair)?;
            Ok::<_, Error>(meta.arena().high_water_bytes())
        })();
        if let Err(e) = planned {
            defmt::warn!(
                "two-sample step on a tape of {=usize} records: the planner says: {}",
                TAPE,
                e
            );
        }
        let mut small: Graph<f32, TAPE> = Graph::new(&mut arena[..]);
        let mut model = Model::new(&mut small, RECIPE)?;
        weights::load(&mut small, WEIGHTS)?;
        let before = weights::fingerprint(&small);
        let r = two_sample_step(&mut model, &mut small, pair);
        if let Err(e) = r {
            defmt::warn!(
                "two-sample step on a tape of {=usize} records: training step refused: {}; weights kept",
                TAPE,
                e
            );
        }
        all_ok &= check(
            matches!(planned, Err(Error::TapeFull { .. }))
                && matches!(r, Err(Error::TapeFull { .. }))
                && weights::fingerprint(&small) == before,
            "tape too small: TapeFull from planner and step, weights unchanged",
        );
    }

    // The arena for the cropped digits: the largest plan over the shipped sizes.
    let mut largest = 0;
    for s in samples.iter() {
        largest = largest.max(plan_step::<TAPE>(s.h, s.w, RECIPE, usize::MAX)?);
    }
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena[..largest / 4]);
    let mut model = Model::new(&mut g, RECIPE)?;
    weights::load(&mut g, WEIGHTS)?;
    let good = weights::fingerprint(&g);
    defmt::info!(
        "arena {=usize} bytes (largest plan of the shipped sizes)",
        largest
    );

    // 1. A corrupt weights blob.
    corrupt.copy_from_slice(WEIGHTS);
    corrupt[WEIGHTS_LEN / 2] ^= 0x40;
    let r = weights::load(&mut g, corrupt);
    if let Err(e) = r {
        defmt::warn!("corrupt weights blob refused: {}; weights kept", e);
    }
    all_ok &= check(
        matches!(r, Err(Error::Corrupt { .. })) && weights::fingerprint(&g) == good,
        "corrupt weights: Corrupt error, weights unchanged",
    );

    // 2. A sample larger than the plan allows: the digit on a 28x28 canvas.
    let (h, w) = (28, 28);
    let planned = plan_step::<TAPE>(h, w, RECIPE, g.arena().capacity_bytes());
    if let Err(e) = planned {
        defmt::warn!("sample {=usize}x{=usize} skipped, the planner says: {}", h, w, e);
    }
    let r = model.train_step(&mut g, (h, w), digit.label as usize, |d| {
        digit.fill_padded(d, h, w)
    });
    if let Err(e) = r {
        defmt::warn!(
            "sample {=usize}x{=usize} given anyway: step refused: {}; weights kept",
            h,
            w,
            e
        );
    }
    all_ok &= check(
        matches!(planned, Err(Error::ArenaExhausted { .. }))
            && matches!(r, Err(Error::ArenaExhausted { .. }))
            && weights::fingerprint(&g) == good,
        "oversized sample: ArenaExhausted from planner and step, weights unchanged",
    );

    // The engine is still usable: a normal step trains.
    let loss = model.train_step(&mut g, (digit.h, digit.w), digit.label as usize, |d| {
        digit.fill(d)
    })?;
    defmt::info!("normal step after the errors: loss {=f32}", loss);
    all_ok &= check(
        loss.is_finite() && weights::fingerprint(&g) != good,
        "a normal step after the errors updates the weights",
    );
    Ok(all_ok)
}

#[entry]
fn main() -> ! {
    let cp = cortex_m::Peripherals::take().unwrap_or_else(|| exit(code::ENGINE_ERROR));
    counter::start(cp.SYST);
    // SAFETY: the only references to these statics, taken once at boot.
    #[allow(static_mut_refs)]
    let (arena, corrupt) = unsafe { (&mut ARENA[..], &mut CORRUPT[..]) };
    match run(arena, corrupt) {
        Ok(true) => {
            defmt::info!("PASS bad_input");
            exit(code::OK)
        }
        Ok(false) => exit(code::CHECK_FAILED),
        Err(e) => {
            defmt::error!("engine error: {}", e);
            exit(code::ENGINE_ERROR)
        }
    }
}
