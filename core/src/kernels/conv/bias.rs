//! Bias gradient of a convolution for `f32`: `gb[oc] += sum over samples and positions
//! of gy`, with eight lane-wise partial sums (one serial chain of additions is bound by
//! the adder's latency; eight independent chains vectorise and pipeline).

use super::ConvGeom;

/// `gb += sum(gy)` per output channel, as [`crate::kernels::conv::conv2d_backward_bias`]
/// up to the order of the additions.
pub fn conv2d_backward_bias(g: &ConvGeom, gy: &[f32], gb: &mut [f32]) {
    let op = g.oh * g.ow;
    for (oc, gbv) in gb.iter_mut().enumerate() {
        let mut lanes = [0.0f32; 8];
        let mut tail = 0.0f32;
        for n in 0..g.n {
            let plane = &gy[(n * g.c_out + oc) * op..][..op];
            let mut chunks = plane.chunks_exact(8);
            for c in &mut chunks {
                for (l, &v) in lanes.iter_mut().zip(c) {
                    *l += v;
                }
            }
            tail += chunks.remainder().iter().sum::<f32>();
        }
        *gbv += lanes.iter().sum::<f32>() + tail;
    }
}
