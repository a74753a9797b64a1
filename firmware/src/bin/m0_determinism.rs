//! The fixed-point determinism run on thumbv6m (QEMU `mps2-an385`: the run's 288 KiB
//! arena needs more RAM than the micro:bit has): prints `DETERMINISM_HASH <hex>`, which
//! must equal the host's and wasm32's (`.ci/stages/40-fixed.sh` compares them). Exits
//! `CHECK_FAILED` if Q16 arithmetic saturated in any step.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use torchlet::Q16;
use torchlet_determinism::{run, ARENA_WORDS};
use torchlet_firmware::{code, exit};

#[entry]
fn main() -> ! {
    let mut arena = [Q16(0); ARENA_WORDS];
    match run(&mut arena) {
        Ok(o) => {
            defmt::println!("DETERMINISM_HASH {=u64:016x}", o.hash);
            defmt::println!(
                "saturated steps {=u32}, last loss raw {=i32}",
                o.saturated_steps,
                o.last_loss
            );
            exit(if o.saturated_steps == 0 {
                code::OK
            } else {
                code::CHECK_FAILED
            })
        }
        Err(e) => {
            defmt::error!("error: {}", e);
            exit(code::ENGINE_ERROR)
        }
    }
}
