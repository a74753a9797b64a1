//! `one.rs`'s forward with AVX-512F: 16 consecutive flat outputs per vector, each
//! output's sum in the 8-lane kernel's order (bias, then the taps in order).
//!
//! - [`forward`] reads `one.rs`'s three zero-bordered copies of the input plane
//!   (`Flat`, filled 16 words at a time) with plain loads: masked loads, which would
//!   spare the copies, cost more than the copies (their lanes' zeroing competes with
//!   the multiply-adds).
//! - A tile is up to 8 output channels x `V <= 3` vectors: per tap `V` loads and 8
//!   broadcast weights feed `8 V` multiply-adds; the broadcasts, not the loads, are
//!   what fewer channels per tile would save, and 8 channels need W1's input read once.
//! - Tiles start where the first channel's output is 64-byte aligned, after one
//!   vector at position 0, so that their stores write whole cache lines; a plane's
//!   last vector may overlap the one before it (it stores the same values again).
//! - A tile first prefetches its output lines into L1, so that its stores do not wait
//!   for them (the output outgrows L1; with no other core holding a line, it arrives
//!   writable).
//! - `Fwd::plane16` runs the same tiles for `one.rs`'s blocks of 4 channels (its
//!   8-lane forward, which `forward8` reaches where [`forward`] declines).

use super::avx512::{fma16, load16, load16_first, prefetch, splat16, store16, store16_first};
use super::one::{Buf, Flat, Fwd, X_WORDS};
use super::one16_s2::Split;
use crate::kernels::conv::ConvGeom;

impl Fwd<'_> {
    /// Every output of `B <= 4` channels (planes `h * w` apart in `dst`) with
    /// [`forward`]'s tiles; `false` (nothing written) for planes under 16 words.
    #[target_feature(enable = "avx2,fma,avx512f")]
    pub(super) fn plane16<const B: usize>(&self, dst: &mut [f32]) -> bool {
        if self.hw < 16 {
            return false;
        }
        let mut wk = [[0.0f32; CB]; 9];
        for (d, s) in wk.iter_mut().zip(self.wk) {
            d[..s.len()].copy_from_slice(s);
        }
        let mut bias = [0.0f32; CB];
        bias[..self.bias.len()].copy_from_slice(self.bias);
        let t = Fwd16 {
            hw: self.hw,
            buf: self.buf,
            offs: self.offs,
            wk: &wk,
            bias: &bias,
        };
        t.plane::<B>(dst);
        true
    }
}

/// Output channels per tile of [`forward`], and its most vectors per tile.
const CB: usize = 8;
const VM: usize = 3;

/// `y = conv(x, w) + b` for the convolutions `one.rs` covers, planes of 16 words and
/// more; `false` (nothing written) for other shapes.
#[target_feature(enable = "avx2,fma,avx512f")]
pub(super) fn forward(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) -> bool {
    let Some(f) = Flat::new(g) else {
        return false;
    };
    if f.hw < 16 {
        return false;
    }
    forward_from(g, Copies::Same(&f), x, w, b, y);
    true
}

/// Where each sample's input plane is copied and read by the tiles of this file and of
/// `one_weight16.rs`: `one.rs`'s three copies (stride 1) or `one16_s2.rs`'s six
/// (stride 2).
pub(super) enum Copies<'a> {
    Same(&'a Flat),
    Halved(&'a Split),
}

impl Copies<'_> {
    /// Words of the copies.
    pub(super) fn words(&self) -> usize {
        match self {
            Copies::Same(f) => 3 * f.chan,
            Copies::Halved(s) => s.words(),
        }
    }

    /// Where tap `t` reads, past an output's flat position.
    pub(super) fn off(&self, t: usize) -> usize {
        match self {
            Copies::Same(f) => f.off(t),
            Copies::Halved(s) => s.off(t),
        }
    }

    /// The copies of the input plane `x`.
    #[target_feature(enable = "avx2,fma,avx512f")]
    pub(super) fn fill(&self, buf: &mut [f32], x: &[f32]) {
        match self {
            Copies::Same(f) => f.fill16(buf, x),
            Copies::Halved(s) => s.fill(buf, x),
        }
    }
}

/// `y = conv(x, w) + b` with the taps read from `copies` of each input plane.
#[target_feature(enable = "avx2,fma,avx512f")]
pub(super) fn forward_from(
    g: &ConvGeom,
    copies: Copies,
    x: &[f32],
    w: &[f32],
    b: Option<&[f32]>,
    y: &mut [f32],
) {
    let cout = g.c_out / g.groups;
    let (plane, hw) = (g.h * g.w, g.oh * g.ow);
    let mut buf = Buf([0.0f32; X_WORDS]);
    let buf = &mut buf.0[..copies.words()];
    let offs: [usize; 9] = core::array::from_fn(|t| copies.off(t));
    for grp in 0..g.groups {
        let blocks = Blocks::new(w, b, grp * cout, cout);
        for n in 0..g.n {
            copies.fill(buf, &x[(n * g.c_in + grp) * plane..][..plane]);
            let dst = &mut y[(n * g.c_out + grp * cout) * hw..][..cout * hw];
            blocks.run(buf, &offs, hw, dst);
        }
    }
}

/// One group's output channels in blocks of up to [`CB`]: their weights and biases,
/// built once where the group has one block.
struct Blocks<'a> {
    w: &'a [f32],
    b: Option<&'a [f32]>,
    /// The group's first channel and channel count.
    ch: usize,
    cout: usize,
    tables: Option<Tables>,
}

impl<'a> Blocks<'a> {
    /// The `cout` channels from `ch`.
    fn new(w: &'a [f32], b: Option<&'a [f32]>, ch: usize, cout: usize) -> Self {
        // One block's tables serve every sample; more blocks are rebuilt per sample.
        let tables = (cout <= CB).then(|| Tables::new(w, b, ch, cout));
        Blocks {
            w,
            b,
            ch,
            cout,
            tables,
        }
    }

    /// Every output of the group's channels over one sample (`dst`, planes `hw` apart),
    /// tap `t` reading `buf` at `offs[t]` past the output's flat position.
    #[target_feature(enable = "avx2,fma,avx512f")]
    fn run(&self, buf: &[f32], offs: &[usize; 9], hw: usize, dst: &mut [f32]) {
        for o0 in (0..self.cout).step_by(CB) {
            let nb = CB.min(self.cout - o0);
            let built;
            let tb = match &self.tables {
                Some(t) => t,
                None => {
                    built = Tables::new(self.w, self.b, self.ch + o0, nb);
                    &built
                }
            };
            let t = Fwd16 {
                hw,
                buf,
                offs,
                wk: &tb.wk,
                bias: &tb.bias,
            };
            let dst = &mut dst[o0 * hw..][..nb * hw];
            match nb {
                8 => t.plane::<8>(dst),
                7 => t.plane::<7>(dst),
                6 => t.plane::<6>(dst),
                5 => t.plane::<5>(dst),
                4 => t.plane::<4>(dst),
                3 => t.plane::<3>(dst),
                2 => t.plane::<2>(dst),
                _ => t.plane::<1>(dst),
            }
        }
    }
}

/// One block's weights `[tap][channel]` and biases; a short block repeats its last
/// channel.
struct Tables {
    wk: [[f32; CB]; 9],
    bias: [f32; CB],
}

impl Tables {
    /// The block of `nb <= CB` channels from channel `ch`.
    fn new(w: &[f32], b: Option<&[f32]>, ch: usize, nb: usize) -> Tables {
        let mut t = Tables {
            wk: [[0.0f32; CB]; 9],
            bias: [0.0f32; CB],
        };
        for (o, bo) in t.bias.iter_mut().enumerate() {
            let c = ch + o.min(nb - 1);
            for (tp, wt) in t.wk.iter_mut().enumerate() {
                wt[o] = w[c * 9 + tp];
            }
            *bo = b.map_or(0.0, |b| b[c]);
        }
        t
    }
}

impl Flat {
    /// `Flat::fill` 16 words at a time.
    #[target_feature(enable = "avx2,fma,avx512f")]
    pub(super) fn fill16(&self, buf: &mut [f32], x: &[f32]) {
        let x = &x[..self.hw];
        let (at, c, hw) = (self.at, self.chan, self.hw);
        let buf = &mut buf[..3 * c];
        for (q, v) in x.chunks_exact(16).enumerate() {
            let v = load16(v);
            for kx in 0..3 {
                store16(v, &mut buf[kx * c + at + 16 * q..]);
            }
        }
        let full = hw / 16 * 16;
        if full < hw {
            let v = load16_first(&x[full..], hw - full);
            for kx in 0..3 {
                store16_first(v, &mut buf[kx * c + at + full..], hw - full);
            }
        }
        for r in 0..self.h {
            buf[at + r * self.w + self.w - 1] = 0.0;
            buf[2 * c + at + r * self.w] = 0.0;
        }
    }
}

/// [`forward`]'s tiles for one block of output channels over one sample.
struct Fwd16<'a> {
    hw: usize,
    buf: &'a [f32],
    /// Tap offsets and `[tap][channel]` weights, as in `Fwd`.
    offs: &'a [usize],
    wk: &'a [[f32; CB]],
    bias: &'a [f32; CB],
}

impl Fwd16<'_> {
    /// Every output of `B` channels (planes `h * w` apart in `dst`).
    #[target_feature(enable = "avx2,fma,avx512f")]
    fn plane<const B: usize>(&self, dst: &mut [f32]) {
        let hw = self.hw;
        // Words from the last 64-byte boundary to the first output.
        let skew = (dst.as_ptr() as usize / 4) % 16;
        let mut p = 0;
        if skew != 0 {
            self.tile::<B, 1>(0, dst);
            p = 16 - skew;
        }
        while hw - p >= 16 * VM {
            self.tile::<B, VM>(p, dst);
            p += 16 * VM;
        }
        let left = (hw - p) / 16;
        if left >= 3 {
            self.tile::<B, 3>(p, dst);
            p += 48;
        }
        match (hw - p) / 16 {
            2 => self.tile::<B, 2>(p, dst),
            1 => self.tile::<B, 1>(p, dst),
            _ => {}
        }
        p += (hw - p) / 16 * 16;
        if p < hw {
            self.tile::<B, 1>(hw - 16, dst);
        }
    }

    /// `B` channels x `V` vectors from position `p`.
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline(never)]
    fn tile<const B: usize, const V: usize>(&self, p: usize, dst: &mut [f32]) {
        let hw = self.hw;
        // The stores below then find their lines in L1 instead of stalling on them.
        for o in 0..B {
            for v in 0..V {
                prefetch(&dst[(o * hw + p + 16 * v).min(dst.len())..]);
            }
        }
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
        for (o, a) in acc.iter().enumerate() {
            let d = &mut dst[o * hw + p..][..16 * V];
            for (v, &av) in a.iter().enumerate() {
                store16(av, &mut d[16 * v..]);
            }
        }
    }
}
