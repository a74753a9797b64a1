//! Which loop a convolution call takes, chosen from the geometry and the operands'
//! largest magnitudes ([`Plan`]); a function of its own so that tests can check it.

use super::dot::Plan;
use super::{weight, TABLE};
use crate::fixed::Q16;
use crate::kernels::conv::ConvGeom;

/// The loop of one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Path {
    /// Three-wide row kernels ([`super::rows3`]) with split weights, the `i32` sums
    /// flushed every `n` taps (forward, stride-1 backward-input).
    Rows3(usize),
    /// Weight-stationary rows, one split weight per call, flushed every `n` taps.
    RowsW8(usize),
    /// Backward-input tap tables in the given form.
    Table(Plan),
    /// Backward-weight with `gy` split once per output channel, flushed every `n` rows.
    SplitGy(usize),
    /// The general loops (per-output gathers, per-tap dot products) in the given form.
    General(Plan),
}

/// Whether the three-wide row kernels apply: 3 columns, column dilation 1, a flush
/// bound of at least one channel's taps (they flush between channels), and a window
/// whose rows fit their weight tables.
fn rows3_fit(g: &ConvGeom, seg: usize) -> bool {
    g.kw == 3 && g.dil[1] == 1 && seg >= g.kh * g.kw && g.kh <= super::rows3::FORWARD_ROWS
}

/// The forward pass's loop.
pub(crate) fn forward(g: &ConvGeom, x: &[Q16], w: &[Q16]) -> Path {
    let terms = g.c_in / g.groups * g.kh * g.kw;
    if g.stride[1] == 1 {
        if let Plan::Split8(seg) = Plan::for_table(x, w, terms) {
            if rows3_fit(g, seg) {
                return Path::Rows3(seg);
            }
            if seg >= g.kh * g.kw {
                return Path::RowsW8(seg);
            }
        }
    }
    Path::General(Plan::new(x, w, g.kh * g.kw, terms))
}

/// The input gradient's loop.
pub(crate) fn backward_input(g: &ConvGeom, gy: &[Q16], w: &[Q16]) -> Path {
    let terms = g.c_out / g.groups * g.kh * g.kw;
    if g.stride == [1, 1] {
        let plan = Plan::for_table(gy, w, terms);
        match plan {
            Plan::Split8(seg) if rows3_fit(g, seg) => return Path::Rows3(seg),
            // The row form flushes between output channels, so it needs one channel's taps.
            Plan::Split8(seg) if seg >= g.kh * g.kw && terms <= TABLE => return Path::RowsW8(seg),
            Plan::Split8(_) | Plan::Fast16(_) if terms <= TABLE => return Path::Table(plan),
            Plan::Wide if terms <= TABLE => return Path::General(plan),
            _ => {}
        }
    }
    Path::General(Plan::new(gy, w, g.kh * g.kw, terms))
}

/// The weight gradient's loop.
pub(crate) fn backward_weight(g: &ConvGeom, gy: &[Q16], x: &[Q16]) -> Path {
    match Plan::new(gy, x, g.ow, g.n * g.oh * g.ow) {
        Plan::Split8(rows) if g.stride[1] == 1 && g.ow <= weight::GBUF => Path::SplitGy(rows),
        plan => Path::General(plan),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stride-1 convolution with the given channels, kernel, padding and input size.
    fn geom(
        n: usize,
        (c_in, c_out): (usize, usize),
        (kh, kw): (usize, usize),
        pad: usize,
        (h, w): (usize, usize),
    ) -> ConvGeom {
        crate::kernels::test_shapes::geom(n, c_in, c_out, [h, w], [kh, kw], [1, 1], [pad, pad], [1, 1], 1)
            .unwrap()
    }

    /// `len` values of magnitude up to `mag` (real), alternating in sign.
    fn vals(len: usize, mag: f32) -> Vec<Q16> {
        (0..len)
            .map(|i| Q16::from_f32(if i % 2 == 0 { mag } else { -mag }))
            .collect()
    }

    fn paths(g: &ConvGeom, mag: [f32; 3]) -> [Path; 3] {
        let x = vals(g.n * g.c_in * g.h * g.w, mag[0]);
        let w = vals(g.c_out * g.c_in / g.groups * g.kh * g.kw, mag[1]);
        let gy = vals(g.n * g.c_out * g.oh * g.ow, mag[2]);
        [
            forward(g, &x, &w),
            backward_input(g, &gy, &w),
            backward_weight(g, &gy, &x),
        ]
    }

    #[test]
    fn w1_layers_take_the_row_kernels() {
        // W1's three convolutions at 28x28 (batch 1 and 32), operands up to 1 as in
        // training: the three-wide row kernels forward and backward-input (also with 32
        // output channels, more than the tap-table loop holds), gy split once in
        // backward-weight (its planes up to 256 wide).
        for n in [1, 32] {
            for (ch, hw) in [((1, 8), 28), ((8, 16), 14), ((16, 32), 7)] {
                let g = geom(n, ch, (3, 3), 1, (hw, hw));
                let [f, i, w] = paths(&g, [1.0, 1.0, 1.0]);
                assert!(matches!(f, Path::Rows3(s) if s >= 9), "{f:?}");
                assert!(matches!(i, Path::Rows3(s) if s >= 9), "{i:?}");
                assert!(matches!(w, Path::SplitGy(_)), "{w:?}");
            }
        }
        // Backward-input row segments: W1's 7- and 14-wide rows and workload A's 10
        // take the zero-padded rows, 28-wide rows the checked border loop.
        for (len, padded) in [(7, true), (10, true), (14, true), (28, false)] {
            assert_eq!(super::super::input::takes_padded(len), padded, "{len}");
        }
    }

    #[test]
    fn other_shapes_and_magnitudes_take_the_general_loops() {
        // Two-wide kernels: the per-tap rows (forward, backward-input).
        let g = geom(1, (4, 4), (3, 2), 1, (9, 9));
        let [f, i, _] = paths(&g, [1.0, 1.0, 1.0]);
        assert!(
            matches!(f, Path::RowsW8(_)) && matches!(i, Path::RowsW8(_)),
            "{f:?} {i:?}"
        );
        // Operands up to 64: no two-multiply form, no row kernels.
        let g = geom(1, (4, 4), (3, 3), 1, (9, 9));
        let [f, i, w] = paths(&g, [64.0, 64.0, 64.0]);
        assert!(matches!(f, Path::General(Plan::Fast16(_) | Plan::Wide)), "{f:?}");
        assert!(
            matches!(i, Path::Table(Plan::Fast16(_)) | Path::General(_)),
            "{i:?}"
        );
        assert!(matches!(w, Path::General(_)), "{w:?}");
        // Column stride 2: the general loops.
        let mut g = geom(1, (2, 2), (3, 3), 1, (9, 9));
        (g.stride, g.ow) = ([1, 2], 5);
        let [f, i, w] = paths(&g, [1.0, 1.0, 1.0]);
        assert!(
            matches!(f, Path::General(_)) && matches!(i, Path::General(_)),
            "{f:?} {i:?}"
        );
        assert!(matches!(w, Path::General(Plan::Split8(_))), "{w:?}");
        // Output rows wider than the split-gy buffer: the per-tap dot products.
        let g = geom(1, (1, 1), (3, 3), 1, (1, 300));
        let w = paths(&g, [0.1, 0.1, 0.1])[2];
        assert!(matches!(w, Path::General(Plan::Split8(_))), "{w:?}");
    }
}
