//! The shared part of the probes `m0_frozen_q8` and `m0_frozen_q16`: W1's frozen trunk
//! at 28x28 (conv 1->8, relu, pool; conv 8->16, relu, pool; conv 16->32, relu; global pool)
//! with the same weights held two ways: int8 with the scale `2^15 / 2^22 = 2^-7`, and
//! Q16.16 (`q * 2^9`). Every weight is exactly representable in both, so both
//! programs must print the same checksum; their flash sizes differ by the convolution
//! code each links and the weights' bytes.

use crate::counter::measure;
use torchlet::fixed::QScale;
use torchlet::{Error, Graph, Pool2dParams, Tensor, Q16};

/// (c_in, c_out, side) of the three convolutions (3x3, padding 1).
pub const LAYERS: [(usize, usize, usize); 3] = [(1, 8, 28), (8, 16, 14), (16, 32, 7)];

const fn step(s: u32) -> u32 {
    s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223)
}

/// `N` pseudo-random int8 weights.
pub const fn q8<const N: usize>(seed: u32) -> [i8; N] {
    let (mut a, mut s, mut i) = ([0i8; N], seed, 0);
    while i < N {
        s = step(s);
        a[i] = (s >> 24) as i8;
        i += 1;
    }
    a
}

/// The same weights as Q16.16 values (`q * 2^-7`).
pub const fn q16<const N: usize>(seed: u32) -> [Q16; N] {
    let (mut a, mut s, mut i) = ([Q16(0); N], seed, 0);
    while i < N {
        s = step(s);
        a[i] = Q16(((s >> 24) as i8 as i32) << 9);
        i += 1;
    }
    a
}

/// Biases in about `[-0.5, 0.5)`.
pub const fn bias<const N: usize>(seed: u32) -> [Q16; N] {
    let (mut a, mut s, mut i) = ([Q16(0); N], seed, 0);
    while i < N {
        s = step(s);
        a[i] = Q16((s >> 16) as i32 - 32768);
        i += 1;
    }
    a
}

/// The scale `2^-7` of every int8 weight.
pub const SCALE: QScale = QScale {
    mult: 32768,
    shift: 22,
};
pub static B1: [Q16; 8] = bias(11);
pub static B2: [Q16; 16] = bias(12);
pub static B3: [Q16; 32] = bias(13);

/// Runs the trunk on a deterministic 28x28 input, with `conv(g, x, layer)` for the
/// convolutions. Returns a checksum of the 32 features and the instructions of each
/// convolution call.
pub fn run<'a, const N: usize>(
    g: &mut Graph<'a, Q16, N>,
    mut conv: impl FnMut(&mut Graph<'a, Q16, N>, Tensor, usize) -> Result<Tensor, Error>,
) -> Result<(u32, [u64; 3]), Error> {
    let mut y = g.input_with(&[1, 1, 28, 28], |d| {
        for (i, v) in d.iter_mut().enumerate() {
            *v = Q16(((i as u32).wrapping_mul(2_654_435_761) >> 16) as i32);
        }
    })?;
    let mut cost = [0u64; 3];
    for (l, c) in cost.iter_mut().enumerate() {
        let (out, n) = measure(|| conv(g, y, l));
        *c = n;
        let out = out?;
        g.free(y)?;
        let r = g.no_grad().relu_(out)?;
        y = if l < 2 {
            let p = g.no_grad().max_pool2d(r, Pool2dParams::square(2))?;
            g.free(r)?;
            p
        } else {
            r
        };
    }
    let pooled = g.no_grad().adaptive_avg_pool2d(y, [1, 1])?;
    let sum = g
        .data(pooled)?
        .iter()
        .fold(0u32, |h, v| h.rotate_left(5) ^ v.0 as u32);
    Ok((sum, cost))
}

/// Prints the checksum and instructions per MAC (dense count) of each convolution.
pub fn report(name: &str, sum: u32, cost: [u64; 3]) {
    defmt::println!("{=str} frozen W1 trunk at 28x28: checksum {=u32:08x}", name, sum);
    for ((ci, co, side), n) in LAYERS.iter().zip(cost) {
        let macs = (ci * co * 9 * side * side) as u64;
        let per = n * 100 / macs;
        defmt::println!(
            "{=str}  conv {=usize}->{=usize} {=usize}x{=usize}: {=u64} instructions, {=u64}.{=u64:02} per MAC",
            name,
            ci,
            co,
            side,
            side,
            n,
            per / 100,
            per % 100
        );
    }
}
