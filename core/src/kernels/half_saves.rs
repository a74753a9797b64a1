//! Normalised values kept in 16 bits for a gradient that only sums products with them
//! (a BatchNorm scale's, under [`Graph::set_compact_saves`](crate::Graph::set_compact_saves)):
//! two values per scalar word, element `2k` in the low half of word `k`, `2k + 1` in
//! the high half. The encoding is the scalar type's ([`Scalar::to_half`]).

use super::norm::NormGeom;
use crate::scalar::Scalar;

/// Words that hold `n` 16-bit values.
pub fn half_words(n: usize) -> usize {
    n.div_ceil(2)
}

/// Value `e` of `packed`.
#[inline(always)]
fn half_at<S: Scalar>(packed: &[S], e: usize) -> S {
    let word = packed[e / 2].to_bits();
    S::from_half((word >> (16 * (e % 2))) as u16)
}

/// `packed` = `(x - mean) * inv_std` per channel, in 16 bits; `stats` is
/// `[mean; c]` then `[inverse std; c]`.
pub fn pack_normalized<S: Scalar>(g: NormGeom, x: &[S], stats: &[S], packed: &mut [S]) {
    let xhat = |e: usize| {
        let ch = e / g.inner % g.c;
        ((x[e] - stats[ch]) * stats[g.c + ch]).to_half()
    };
    for (k, word) in packed.iter_mut().enumerate() {
        let lo = xhat(2 * k);
        let hi = if 2 * k + 1 < x.len() { xhat(2 * k + 1) } else { 0 };
        *word = S::from_bits(u32::from(lo) | u32::from(hi) << 16);
    }
}

/// `gw[ch] += sum gy * xhat` with `xhat` read from `packed`.
pub fn packed_weight_grads<S: Scalar>(g: NormGeom, packed: &[S], gy: &[S], gw: &mut [S]) {
    for (ch, w) in gw.iter_mut().enumerate().take(g.c) {
        let mut acc = S::acc_zero();
        for b in 0..g.n {
            let at = (b * g.c + ch) * g.inner;
            for (j, &gv) in gy[at..at + g.inner].iter().enumerate() {
                acc = S::mac(acc, gv, half_at(packed, at + j));
            }
        }
        *w += S::from_acc(acc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixed::Q16;

    /// Packing then summing equals the sum over the rounded values, element by element,
    /// with an odd count (a half-filled last word).
    fn round_trip<S: Scalar>() {
        let g = NormGeom { n: 3, c: 2, inner: 5 };
        let x: Vec<S> = (0..30)
            .map(|i| S::from_f32((i as f32 * 0.37).sin() * 3.0))
            .collect();
        let stats = [0.5, -0.25, 2.0, 0.75].map(S::from_f32);
        let mut packed = vec![S::ZERO; half_words(x.len())];
        pack_normalized(g, &x, &stats, &mut packed);
        let gy: Vec<S> = (0..30).map(|i| S::from_f32(i as f32 * 0.1 - 1.0)).collect();
        let mut gw = [S::ONE; 2];
        packed_weight_grads(g, &packed, &gy, &mut gw);
        for (ch, &got) in gw.iter().enumerate() {
            let mut want = 0.0f32;
            for b in 0..3 {
                for j in 0..5 {
                    let e = (b * 2 + ch) * 5 + j;
                    let xhat = ((x[e] - stats[ch]) * stats[2 + ch]).to_half();
                    want += gy[e].to_f32() * S::from_half(xhat).to_f32();
                    // The rounding is close: within 1/256 of the value (bf16, Q8.8).
                    let exact = ((x[e] - stats[ch]) * stats[2 + ch]).to_f32();
                    let back = S::from_half(xhat).to_f32();
                    assert!(
                        (back - exact).abs() <= exact.abs() / 256.0 + 1.0 / 256.0,
                        "{exact} {back}"
                    );
                }
            }
            assert!(
                (got.to_f32() - 1.0 - want).abs() < 1e-3,
                "{ch}: {} vs {want}",
                got.to_f32() - 1.0
            );
        }
    }

    #[test]
    fn f32_round_trip() {
        round_trip::<f32>();
    }

    #[test]
    fn q16_round_trip() {
        round_trip::<Q16>();
    }
}
