//! Benchmark and size probe (not run by CI): W1's frozen trunk with Q16.16
//! convolutions on `Graph::external` weights; the counterpart of `m0_frozen_q8` (same
//! weights, same checksum). Runs on QEMU `mps2-an385` (feature `mps2-an385`).
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use torchlet::{Conv2dParams, Graph, Q16};
use torchlet_firmware::frozen_trunk::{self as trunk, B1, B2, B3};
use torchlet_firmware::{code, counter, exit};

static W1: [Q16; 72] = trunk::q16(1);
static W2: [Q16; 1152] = trunk::q16(2);
static W3: [Q16; 4608] = trunk::q16(3);

#[entry]
fn main() -> ! {
    let cp = cortex_m::Peripherals::take().unwrap_or_else(|| exit(code::ENGINE_ERROR));
    counter::start(cp.SYST);
    let mut buf = [Q16(0); 16 * 1024];
    let mut g: Graph<Q16, 16> = Graph::new(&mut buf);
    let ext = (|| {
        Ok::<_, torchlet::Error>([
            g.external(&[8, 1, 3, 3], &W1)?,
            g.external(&[8], &B1)?,
            g.external(&[16, 8, 3, 3], &W2)?,
            g.external(&[16], &B2)?,
            g.external(&[32, 16, 3, 3], &W3)?,
            g.external(&[32], &B3)?,
        ])
    })()
    .unwrap_or_else(|_| exit(code::ENGINE_ERROR));
    let p = Conv2dParams::padded(1);
    let conv =
        |g: &mut Graph<'_, Q16, 16>, x, l: usize| g.no_grad().conv2d(x, ext[2 * l], Some(ext[2 * l + 1]), p);
    match trunk::run(&mut g, conv) {
        Ok((sum, cost)) => trunk::report("q16.16", sum, cost),
        Err(_) => exit(code::ENGINE_ERROR),
    }
    exit(code::OK)
}
