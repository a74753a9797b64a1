//! A convolution's bias gradient over 8-lane AVX2 vectors: `gb[oc] += sum(gy)` over
//! the samples and positions of channel `oc`, in four independent vector chains (one
//! chain waits on the adder's latency; SSE2, the build's baseline, has half the
//! width). The order of the additions differs from `conv/bias.rs`: the two agree up
//! to rounding.

use super::avx2::{load, store, F8};
use crate::kernels::conv::ConvGeom;
use core::arch::x86_64::{_mm256_add_ps, _mm256_setzero_ps};

/// `gb += sum(gy)` per output channel.
#[target_feature(enable = "avx2,fma")]
pub(crate) fn conv2d_backward_bias(g: &ConvGeom, gy: &[f32], gb: &mut [f32]) {
    let op = g.oh * g.ow;
    for (oc, gbv) in gb.iter_mut().enumerate().take(g.c_out) {
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut tail = 0.0f32;
        for n in 0..g.n {
            let plane = &gy[(n * g.c_out + oc) * op..][..op];
            let mut quads = plane.chunks_exact(32);
            for q in &mut quads {
                for (k, a) in acc.iter_mut().enumerate() {
                    *a = _mm256_add_ps(*a, load(&q[8 * k..]).0);
                }
            }
            let mut vectors = quads.remainder().chunks_exact(8);
            for v in &mut vectors {
                acc[0] = _mm256_add_ps(acc[0], load(v).0);
            }
            tail += vectors.remainder().iter().sum::<f32>();
        }
        let both = |a, b| _mm256_add_ps(a, b);
        let mut lanes = [0.0f32; 8];
        store(F8(both(both(acc[0], acc[1]), both(acc[2], acc[3]))), &mut lanes);
        *gbv += lanes.iter().sum::<f32>() + tail;
    }
}
