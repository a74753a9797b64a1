//! Deterministic random numbers and PyTorch's default parameter initialisation.
//!
//! - [`Rng`] is SplitMix64: tiny, fast, and the same sequence on every target.
//! - `nn.Conv2d` and `nn.Linear` use `kaiming_uniform_(a = sqrt(5))` for weights, which
//!   works out to `U(-1/sqrt(fan_in), 1/sqrt(fan_in))`, and the same bound for biases.

use crate::error::Result;
use crate::graph::{Graph, Tensor};
use crate::scalar::Scalar;

/// A seeded SplitMix64 generator.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator from a seed; equal seeds give equal sequences everywhere.
    pub fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// The next 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in `[0, 1)` with 24 bits of resolution.
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u32() >> 8) as f32 * (1.0 / 16_777_216.0)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.next_f32()
    }

    /// Uniform integer in `0..n` (`n > 0`; returns 0 for `n == 0`).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// Fisher-Yates shuffle.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

/// Fills parameter `t` with `U(-1/sqrt(fan_in), 1/sqrt(fan_in))`.
pub fn uniform_fan_in<S: Scalar, const N: usize>(
    g: &mut Graph<'_, S, N>,
    t: Tensor,
    fan_in: usize,
    rng: &mut Rng,
) -> Result<()> {
    let bound = 1.0 / sqrt_count(fan_in.max(1));
    for v in g.param_data_mut(t)? {
        *v = S::from_f32(rng.uniform(-bound, bound));
    }
    Ok(())
}

/// `sqrt(n as f32)`, correctly rounded as `libm::sqrtf` is (so the same bits), in
/// integer arithmetic: on a Cortex-M4F, whose square-root instruction stable `core`
/// does not expose, libm's table-driven `sqrtf` was about 470 bytes of flash for the
/// initialisation's four bounds.
fn sqrt_count(n: usize) -> f32 {
    let bits = (n as f32).to_bits();
    // n as f32 = m * 2^e, m the 24-bit significand with its hidden bit; e made even.
    let mut e = ((bits >> 23) & 0xff) as i32 - 150;
    let mut m = u64::from((bits & 0x7f_ffff) | 0x80_0000);
    if e & 1 != 0 {
        m <<= 1;
        e -= 1;
    }
    // big = m * 4^k in [2^46, 2^48), so its integer square root has 24 bits.
    let k = (46 - (63 - m.leading_zeros() as i32) + 1) / 2;
    let big = m << (2 * k);
    // Integer square root, two bits of `big` per step: r = floor(sqrt(big)).
    let (mut r, mut rem, mut bit) = (0u64, big, 1u64 << 46);
    while bit != 0 {
        if rem >= r + bit {
            rem -= r + bit;
            r = (r >> 1) + bit;
        } else {
            r >>= 1;
        }
        bit >>= 2;
    }
    // Nearest: sqrt(big) >= r + 1/2 exactly when rem > r (a square root of an integer
    // is never a half-integer, so there are no ties). r + 1 <= 2^24 is exact in f32.
    let rounded = (r + u64::from(rem > r)) as u32;
    let scale = f32::from_bits(((127 + e / 2 - k) as u32) << 23);
    rounded as f32 * scale
}

#[cfg(test)]
mod sqrt_tests {
    use super::sqrt_count;

    /// The same bits as libm's correctly rounded `sqrtf`, which it replaces.
    #[test]
    fn sqrt_count_equals_libm() {
        let large = (0..40)
            .map(|i| (1usize << 24) + i * 1_000_003)
            .chain([usize::MAX, 1 << 40, 3 << 50]);
        for n in (1..300_000).chain(large) {
            assert_eq!(
                sqrt_count(n).to_bits(),
                libm::sqrtf(n as f32).to_bits(),
                "n = {n}"
            );
        }
    }
}
