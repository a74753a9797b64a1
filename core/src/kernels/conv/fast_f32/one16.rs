//! `one.rs`'s forward tiles with AVX-512F: 16 consecutive flat outputs per vector,
//! each output's sum in the 8-lane kernel's order (bias, then the taps in order).

use super::avx512::{fma16, load16, splat16, store16};
use super::one::Fwd;

impl Fwd<'_> {
    /// Every output of `B` channels (planes `h * w` apart in `dst`); `false` (nothing
    /// written) for planes under 16 words. A plane not a multiple of 16 ends with a
    /// vector at `h * w - 16`, overlapping the one before it.
    #[target_feature(enable = "avx2,fma,avx512f")]
    pub(super) fn plane16<const B: usize>(&self, dst: &mut [f32]) -> bool {
        let hw = self.hw;
        if hw < 16 {
            return false;
        }
        let mut p = 0;
        while hw - p >= 48 {
            self.tile16::<B, 3>(p, dst);
            p += 48;
        }
        if hw - p >= 32 {
            self.tile16::<B, 2>(p, dst);
            p += 32;
        }
        if hw - p >= 16 {
            self.tile16::<B, 1>(p, dst);
            p += 16;
        }
        if p < hw {
            self.tile16::<B, 1>(hw - 16, dst);
        }
        true
    }

    /// `B` channels x `V` 16-lane vectors from position `p`.
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline(never)]
    fn tile16<const B: usize, const V: usize>(&self, p: usize, dst: &mut [f32]) {
        let mut acc = [[splat16(0.0); V]; B];
        for (a, &v) in acc.iter_mut().zip(self.bias) {
            *a = [splat16(v); V];
        }
        for (&off, wt) in self.offs.iter().zip(self.wk) {
            let r = &self.buf[off + p..][..16 * V];
            let mut xv = [splat16(0.0); V];
            for (v, x) in xv.iter_mut().enumerate() {
                *x = load16(&r[16 * v..]);
            }
            for (a, &wv) in acc.iter_mut().zip(wt) {
                let wv = splat16(wv);
                for (av, &x) in a.iter_mut().zip(&xv) {
                    *av = fma16(wv, x, *av);
                }
            }
        }
        let hw = self.hw;
        for (o, a) in acc.iter().enumerate() {
            let d = &mut dst[o * hw + p..][..16 * V];
            for (v, &av) in a.iter().enumerate() {
                store16(av, &mut d[16 * v..]);
            }
        }
    }
}
