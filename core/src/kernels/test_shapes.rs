//! Shared by the specialised kernels' tests (`conv/fast_f32`, `conv/m_f32`,
//! `conv/q16`): random data and valid convolution geometries to check them against
//! the generic kernels.

use crate::init::Rng;
use crate::kernels::conv::ConvGeom;

pub(crate) fn random(rng: &mut Rng, len: usize) -> Vec<f32> {
    (0..len).map(|_| rng.uniform(-1.0, 1.0)).collect()
}

/// A valid geometry, or `None` when the kernel does not fit the padded input.
#[allow(clippy::too_many_arguments)]
pub(crate) fn geom(
    n: usize,
    c_in: usize,
    c_out: usize,
    hw: [usize; 2],
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 2],
    d: [usize; 2],
    groups: usize,
) -> Option<ConvGeom> {
    let out = |i: usize| {
        let span = (k[i] - 1) * d[i] + 1;
        (hw[i] + 2 * p[i]).checked_sub(span).map(|v| v / s[i] + 1)
    };
    Some(ConvGeom {
        n,
        c_in,
        h: hw[0],
        w: hw[1],
        c_out,
        kh: k[0],
        kw: k[1],
        oh: out(0)?,
        ow: out(1)?,
        stride: s,
        pad: p,
        dil: d,
        groups,
    })
}
