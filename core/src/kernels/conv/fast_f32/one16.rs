//! `one.rs`'s forward with AVX-512F: 16 consecutive flat outputs per vector, each
//! output's sum in the 8-lane kernel's order (bias, then the taps in order).
//!
//! - [`forward`] reads the input plane in place, or near its first and last rows
//!   from a copy between zeros, and masks the outer kernel columns' multiply-adds where
//!   they would cross a row end (`one_centre.rs`). (Masked loads from `one.rs`'s
//!   three copies cost more than the copies: their lanes' zeroing competes with the
//!   multiply-adds; a masked multiply-add costs what a plain one does.)
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

use super::avx512::{
    fma16, fma16_where, load16, load16_first, prefetch, splat16, store16, store16_first, F16,
};
use super::one::{Buf, Flat, Fwd, X_WORDS};
use super::one16_s2::Split;
use super::one_centre::Centre;
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
            src: Source {
                buf: self.buf,
                x: &[],
                centre: None,
            },
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
    let Some(c) = Centre::new(g, 16 * VM) else {
        return false;
    };
    if c.hw < 16 {
        return false;
    }
    forward_from(g, Copies::Centre(&c), x, w, b, y);
    true
}

/// Where the tiles of this file and of `one_weight16.rs` read each sample's input
/// plane: at stride 1 the plane itself (`one_centre.rs`, this file's forward) or
/// `one.rs`'s three copies (`one_weight16.rs`), at stride 2 `one16_s2.rs`'s six.
pub(super) enum Copies<'a> {
    Same(&'a Flat),
    Centre(&'a Centre),
    Halved(&'a Split),
}

impl Copies<'_> {
    /// Words of the copies.
    pub(super) fn words(&self) -> usize {
        match self {
            Copies::Same(f) => 3 * f.chan,
            Copies::Centre(c) => c.words,
            Copies::Halved(s) => s.words(),
        }
    }

    /// Where tap `t` reads, past an output's flat position.
    pub(super) fn off(&self, t: usize) -> usize {
        match self {
            Copies::Same(f) => f.off(t),
            Copies::Centre(c) => c.off(t),
            Copies::Halved(s) => s.off(t),
        }
    }

    /// The copies of the input plane `x` (for [`Copies::Centre`], of its ends).
    #[target_feature(enable = "avx2,fma,avx512f")]
    pub(super) fn fill(&self, buf: &mut [f32], x: &[f32]) {
        match self {
            Copies::Same(f) => f.fill16(buf, x),
            Copies::Centre(c) => c.fill(buf, x),
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
    // Zeroed for the words used (a third of the buffer or less for `Centre`).
    let (mut small, mut large);
    let buf = match copies.words() {
        n if n <= X_WORDS / 3 => {
            small = [0.0f32; X_WORDS / 3];
            &mut small[..n]
        }
        n => {
            large = Buf([0.0f32; X_WORDS]);
            &mut large.0[..n]
        }
    };
    let offs: [usize; 9] = core::array::from_fn(|t| copies.off(t));
    let centre = match copies {
        Copies::Centre(c) => Some(c),
        _ => None,
    };
    for grp in 0..g.groups {
        let blocks = Blocks::new(w, b, grp * cout, cout);
        for n in 0..g.n {
            let x = &x[(n * g.c_in + grp) * plane..][..plane];
            copies.fill(buf, x);
            let dst = &mut y[(n * g.c_out + grp * cout) * hw..][..cout * hw];
            let src = Source { buf, x, centre };
            blocks.run(&src, &offs, hw, dst);
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
    /// tap `t` reading `src` at `offs[t]` past the output's flat position.
    #[target_feature(enable = "avx2,fma,avx512f")]
    fn run(&self, src: &Source, offs: &[usize; 9], hw: usize, dst: &mut [f32]) {
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
                src: *src,
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

/// Where a sample's tiles read.
#[derive(Clone, Copy)]
struct Source<'a> {
    /// The copies.
    buf: &'a [f32],
    /// With [`Copies::Centre`]: the input plane and its layout.
    x: &'a [f32],
    centre: Option<&'a Centre>,
}

/// [`forward`]'s tiles for one block of output channels over one sample.
struct Fwd16<'a> {
    hw: usize,
    src: Source<'a>,
    /// Tap offsets and `[tap][channel]` weights, as in `Fwd`.
    offs: &'a [usize],
    wk: &'a [[f32; CB]],
    bias: &'a [f32; CB],
}

impl Fwd16<'_> {
    /// Every output of `B` channels (planes `h * w` apart in `dst`).
    #[target_feature(enable = "avx2,fma,avx512f")]
    fn plane<const B: usize>(&self, dst: &mut [f32]) {
        match self.src.centre {
            Some(_) => self.plane_as::<B, true>(dst),
            None => self.plane_as::<B, false>(dst),
        }
    }

    /// [`Self::plane`], reading as [`Copies::Centre`] where `M`.
    #[target_feature(enable = "avx2,fma,avx512f")]
    fn plane_as<const B: usize, const M: bool>(&self, dst: &mut [f32]) {
        let hw = self.hw;
        // Words from the last 64-byte boundary to the first output.
        let skew = (dst.as_ptr() as usize / 4) % 16;
        let mut p = 0;
        if skew != 0 {
            self.tile::<B, 1, M>(0, dst);
            p = 16 - skew;
        }
        while hw - p >= 16 * VM {
            self.tile::<B, VM, M>(p, dst);
            p += 16 * VM;
        }
        let left = (hw - p) / 16;
        if left >= 3 {
            self.tile::<B, 3, M>(p, dst);
            p += 48;
        }
        match (hw - p) / 16 {
            2 => self.tile::<B, 2, M>(p, dst),
            1 => self.tile::<B, 1, M>(p, dst),
            _ => {}
        }
        p += (hw - p) / 16 * 16;
        if p < hw {
            self.tile::<B, 1, M>(hw - 16, dst);
        }
    }

    /// One tap's multiply-adds into `acc`, reading `src` from `at`; only in the lanes of
    /// `keep` where `M`.
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline]
    fn tap<const B: usize, const V: usize, const M: bool>(
        &self,
        acc: &mut [[F16; V]; B],
        src: &[f32],
        at: usize,
        wt: &[f32; CB],
        keep: &[u16; V],
    ) {
        let r = &src[at..][..16 * V];
        let mut xv = [splat16(0.0); V];
        for (v, x) in xv.iter_mut().enumerate() {
            *x = load16(&r[16 * v..]);
        }
        for (a, &wv) in acc.iter_mut().zip(wt) {
            let wv = splat16(wv);
            for ((av, &x), &k) in a.iter_mut().zip(&xv).zip(keep) {
                *av = if M {
                    fma16_where(wv, x, *av, k)
                } else {
                    fma16(wv, x, *av)
                };
            }
        }
    }

    /// `B` channels x `V` vectors from position `p`.
    #[target_feature(enable = "avx2,fma,avx512f")]
    #[inline(never)]
    fn tile<const B: usize, const V: usize, const M: bool>(&self, p: usize, dst: &mut [f32]) {
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
        // Lanes kept by the kernel's columns 0 and 2; where the taps read (`offs`
        // past `p`, less `sub`).
        let mut keep = [[u16::MAX; V]; 2];
        let (mut src, mut sub) = (self.src.buf, 0);
        if let (true, Some(c)) = (M, self.src.centre) {
            let mut r = c.column(p);
            let [left, right] = &mut keep;
            for (l, rt) in left.iter_mut().zip(right) {
                [*l, *rt] = c.keep(r);
                r = c.column_after(r);
            }
            if c.inner(p, p + 16 * V) {
                (src, sub) = (self.src.x, c.at);
            }
        }
        for (offs, wk) in self.offs.chunks_exact(3).zip(self.wk.chunks_exact(3)) {
            self.tap::<B, V, M>(&mut acc, src, offs[0] + p - sub, &wk[0], &keep[0]);
            self.tap::<B, V, false>(&mut acc, src, offs[1] + p - sub, &wk[1], &keep[0]);
            self.tap::<B, V, M>(&mut acc, src, offs[2] + p - sub, &wk[2], &keep[1]);
        }
        for (o, a) in acc.iter().enumerate() {
            let d = &mut dst[o * hw + p..][..16 * V];
            for (v, &av) in a.iter().enumerate() {
                store16(av, &mut d[16 * v..]);
            }
        }
    }
}
