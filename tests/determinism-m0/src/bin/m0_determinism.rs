//! The fixed-point determinism run on thumbv6m: prints `DETERMINISM_HASH <hex>`, which
//! must equal the host's and wasm32's (`.ci/stages/40-fixed.sh` compares them).
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use torchlet::Q16;
use torchlet_determinism::{run, ARENA_WORDS};
use torchlet_determinism_m0::exit;

#[entry]
fn main() -> ! {
    let mut arena = [Q16(0); ARENA_WORDS];
    match run(&mut arena) {
        Ok(o) => {
            semihosting::println!("DETERMINISM_HASH {:016x}", o.hash);
            semihosting::println!(
                "saturated steps {}, last loss raw {}",
                o.saturated_steps,
                o.last_loss
            );
            exit(if o.saturated_steps == 0 { 0 } else { 1 })
        }
        Err(e) => {
            semihosting::println!("error: {}", e);
            exit(2)
        }
    }
}
