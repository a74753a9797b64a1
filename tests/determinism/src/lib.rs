//! One fixed-point training run, the same on every target, and a hash of its result.
//!
//! - W1 ("digits-fcn") in [`Q16`], seeded initialisation, SGD (lr 0.05, momentum 0.9,
//!   stochastic rounding) with loss scale 256, as the host training uses.
//! - [`STEPS`] steps at mixed input sizes and batch sizes (the size changes every
//!   step, with no rebuild); inputs and labels come from the seeded [`Rng`] with integer
//!   operations only.
//! - The result is FNV-1a 64 over the little-endian raw bytes of every parameter, in
//!   creation order. x86_64 (host test `fixed_determinism`), wasm32
//!   (`tests/determinism-wasm`, run by node) and thumbv6m-none-eabi (the firmware
//!   program `m0_determinism`, run by QEMU) must print the same hash;
//!   `.ci/stages/40-fixed.sh` compares them.
#![no_std]

use torchlet::init::Rng;
use torchlet::nn::digits_fcn;
use torchlet::optim::Sgd;
use torchlet::{fixed, Error, Graph, Scalar, Q16};

/// Training steps of the run.
pub const STEPS: usize = 50;
/// Input sizes `(batch, h, w)`, cycled step by step.
pub const SIZES: [(usize, usize, usize); 4] = [(2, 16, 16), (1, 12, 20), (1, 28, 28), (3, 10, 8)];
/// Arena words the run needs (checked by the host test against the meta plan).
pub const ARENA_WORDS: usize = 72 * 1024;
/// Tape capacity.
pub const TAPE: usize = 32;

/// What a run produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// FNV-1a 64 of the final weights.
    pub hash: u64,
    /// Steps in which Q16 arithmetic saturated.
    pub saturated_steps: u32,
    /// Raw Q16 value of the last step's loss.
    pub last_loss: i32,
}

fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

/// Runs the training in `arena` (at least [`ARENA_WORDS`] words).
pub fn run(arena: &mut [Q16]) -> Result<Outcome, Error> {
    let mut g: Graph<Q16, TAPE> = Graph::new(arena);
    let mut rng = Rng::new(2024);
    let model = digits_fcn(&mut g, &mut rng)?;
    let scale = 256.0;
    let mut sgd = Sgd::new(&mut g, 0.05, 0.9, 0.0)?.with_grad_scale(scale);
    let seed = [Q16::from_f32(scale)];
    let mut labels = [0usize; 4];
    let (mut saturated_steps, mut last_loss) = (0u32, 0i32);
    fixed::take_saturated();
    for step in 0..STEPS {
        let (b, h, w) = SIZES[step % SIZES.len()];
        for l in labels.iter_mut().take(b) {
            *l = rng.below(10);
        }
        g.zero_grad();
        // Pixels: 0 or a random value in [0, 1), about 30 % ink, integer-only.
        let x = g.input_with(&[b, 1, h, w], |dst| {
            for v in dst.iter_mut() {
                let r = rng.next_u32();
                *v = if r % 10 < 3 {
                    Q16((r >> 16) as i32)
                } else {
                    Q16::ZERO
                };
            }
        })?;
        let logits = model.forward(&mut g, x)?;
        let loss = g.cross_entropy(logits, &labels[..b])?;
        last_loss = g.data(loss)?[0].raw();
        g.backward_with(loss, &seed)?;
        let report = sgd.step(&mut g)?;
        g.end_step();
        saturated_steps += report.saturated as u32;
    }
    let mut hash = 0xCBF2_9CE4_8422_2325u64;
    for i in 0..g.num_params() {
        if let Some(t) = g.param_handle(i) {
            for v in g.data(t)? {
                hash = fnv1a(hash, &v.raw().to_le_bytes());
            }
        }
    }
    Ok(Outcome {
        hash,
        saturated_steps,
        last_loss,
    })
}

/// Bytes the run needs, by the meta plan (the same step code without data).
pub fn plan_bytes() -> Result<usize, Error> {
    let mut g: Graph<Q16, TAPE> = Graph::meta(usize::MAX);
    let mut rng = Rng::new(0);
    let model = digits_fcn(&mut g, &mut rng)?;
    let mut sgd = Sgd::new(&mut g, 0.05, 0.9, 0.0)?;
    let mut worst = 0;
    for &(b, h, w) in &SIZES {
        let x = g.input(&[b, 1, h, w], &[])?;
        let logits = model.forward(&mut g, x)?;
        let loss = g.cross_entropy(logits, &[])?;
        g.backward(loss)?;
        sgd.step(&mut g)?;
        worst = worst.max(g.arena().high_water_bytes());
        g.end_step();
    }
    Ok(worst)
}
