//! Benchmark and size probe (not run by CI): W1's frozen trunk with int8 convolutions
//! (`g.no_grad().conv2d_q8`), weights in flash. Compare with `m0_frozen_q16` (same
//! weights in Q16.16 through `Graph::external` + `conv2d`): same checksum, and the
//! difference of their `.text` is the convolution code each links. Runs on QEMU
//! `mps2-an385` (feature `mps2-an385`).
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use torchlet::fixed::{QConv2dWeights, QScale};
use torchlet::{Conv2dParams, Graph, Q16};
use torchlet_firmware::frozen_trunk::{self as trunk, B1, B2, B3, SCALE};
use torchlet_firmware::{code, counter, exit};

static Q1: [i8; 72] = trunk::q8(1);
static Q2: [i8; 1152] = trunk::q8(2);
static Q3: [i8; 4608] = trunk::q8(3);
static S1: [QScale; 8] = [SCALE; 8];
static S2: [QScale; 16] = [SCALE; 16];
static S3: [QScale; 32] = [SCALE; 32];

const fn checked(w: Result<QConv2dWeights<'static>, torchlet::Error>) -> QConv2dWeights<'static> {
    match w {
        Ok(w) => w,
        Err(_) => panic!("invalid frozen weights"),
    }
}

static W: [QConv2dWeights<'static>; 3] = [
    checked(QConv2dWeights::new([8, 1, 3, 3], &Q1, &S1, Some(&B1))),
    checked(QConv2dWeights::new([16, 8, 3, 3], &Q2, &S2, Some(&B2))),
    checked(QConv2dWeights::new([32, 16, 3, 3], &Q3, &S3, Some(&B3))),
];

#[entry]
fn main() -> ! {
    let cp = cortex_m::Peripherals::take().unwrap_or_else(|| exit(code::ENGINE_ERROR));
    counter::start(cp.SYST);
    let mut buf = [Q16(0); 16 * 1024];
    let mut g: Graph<Q16, 16> = Graph::new(&mut buf);
    let p = Conv2dParams::padded(1);
    match trunk::run(&mut g, |g, x, l| g.no_grad().conv2d_q8(x, &W[l], p)) {
        Ok((sum, cost)) => trunk::report("int8", sum, cost),
        Err(_) => exit(code::ENGINE_ERROR),
    }
    exit(code::OK)
}
