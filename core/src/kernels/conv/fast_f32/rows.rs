//! Row tiles of the packed 3x3 strip kernels (`strip.rs`), for outputs at least 8 wide.
//!
//! - A tile is `B` output channels x `V` vectors of 8 outputs of one output row, at
//!   columns `cols[v]` (every `cols[v] + 8 <= ow`), so its vectors map onto the output
//!   as they are: no staging buffer and no search for row ends, as the strip tiles
//!   need when positions run across rows.
//! - Forward only (the outputs are overwritten with bias + correlation): the row is
//!   covered left to right, and the last vector of a row starts at `ow - 8`, so it may
//!   overlap the one before it and store some outputs twice, with the same value.
//!   Accumulating (backward-input) would add those twice: it keeps the strip tiles.
//! - Per input channel and kernel row, one bounds check per vector; the packed weights
//!   (`[row][channel]`, `B` per row) are read without checks.

use super::avx2::{fma, load, splat, store};
use super::strip::{Strip, OB};

/// Row tiles over one sample's padded planes (see the module docs).
pub(super) struct Rows<'a> {
    pub(super) strip: &'a Strip,
    pub(super) buf: &'a [f32],
    /// `[input channel][tap][channel of the block]`, `9 * B` words per input channel.
    pub(super) pack: &'a [f32],
    /// The bias of each channel of the block (zeros past `B`).
    pub(super) bias: [f32; OB],
}

impl Rows<'_> {
    /// Whether row tiles cover outputs `ow` wide.
    pub(super) fn fit(ow: usize) -> bool {
        ow >= 8
    }

    /// Every output of `B` channels (planes `oh * ow` apart in `dst`).
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn all<const B: usize>(&self, dst: &mut [f32]) {
        let [oh, ow] = self.strip.out;
        for oy in 0..oh {
            let mut ox = 0;
            while ox < ow {
                let left = ow - ox;
                if left >= 16 {
                    self.tile::<B, 2>(oy, [ox, ox + 8], dst);
                    ox += 16;
                } else if left > 8 {
                    self.tile::<B, 2>(oy, [ox, ow - 8], dst);
                    ox = ow;
                } else {
                    self.tile::<B, 1>(oy, [ow - 8], dst);
                    ox = ow;
                }
            }
        }
    }

    /// `B` channels x `V` vectors of row `oy` at columns `cols`.
    #[target_feature(enable = "avx2,fma")]
    fn tile<const B: usize, const V: usize>(&self, oy: usize, cols: [usize; V], dst: &mut [f32]) {
        let [oh, ow] = self.strip.out;
        let plane = oh * ow;
        let at = oy * ow;
        let mut acc = [[splat(0.0); V]; B];
        for (a, &v) in acc.iter_mut().zip(&self.bias) {
            *a = [splat(v); V];
        }
        let (row, chan) = (self.strip.row, self.strip.chan);
        for (i, wi) in self.pack.chunks_exact(9 * B).enumerate() {
            for ky in 0..3 {
                let base = i * chan + (oy + ky) * row;
                let mut r: [&[f32]; V] = [&[]; V];
                for (rv, &c) in r.iter_mut().zip(&cols) {
                    *rv = &self.buf[base + c..][..10];
                }
                let wr = &wi[3 * B * ky..][..3 * B];
                for kx in 0..3 {
                    let mut x = [splat(0.0); V];
                    for (xv, rv) in x.iter_mut().zip(&r) {
                        *xv = load(&rv[kx..]);
                    }
                    for (o, a) in acc.iter_mut().enumerate() {
                        let wv = splat(wr[kx * B + o]);
                        for (av, &xv) in a.iter_mut().zip(&x) {
                            *av = fma(wv, xv, *av);
                        }
                    }
                }
            }
        }
        for (o, a) in acc.iter().enumerate() {
            for (&av, &c) in a.iter().zip(&cols) {
                store(av, &mut dst[o * plane + at + c..]);
            }
        }
    }
}
