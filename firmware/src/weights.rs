//! Loading pretrained weights from flash into a graph's parameters, in the project's
//! weights format ([`torchlet::io`]: versioned, CRC-32 checked, every check done
//! before the first parameter is written, so a bad blob keeps the old weights).

use torchlet::{Error, Graph};

/// Checks `bytes` and copies the values into the parameters of `g`.
pub fn load<const N: usize>(g: &mut Graph<'_, f32, N>, bytes: &[u8]) -> Result<(), Error> {
    torchlet::io::load(g, bytes)
}

/// A rotate-xor hash of the parameters' current values, to show that a refused load (or a
/// failed step) left them untouched.
pub fn fingerprint<const N: usize>(g: &Graph<'_, f32, N>) -> u32 {
    let mut c = 0u32;
    for i in 0..g.num_params() {
        if let Some(data) = g.param_handle(i).and_then(|t| g.data(t).ok()) {
            for v in data {
                c = c.rotate_left(5) ^ v.to_bits();
            }
        }
    }
    c
}
