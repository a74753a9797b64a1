//! Only linker scripts: copies the memory map of the board being built for to OUT_DIR
//! as `memory.x`, where cortex-m-rt's `link.x` finds it:
//! - `thumbv7em-none-eabihf`: `memory/mps2-an386.x` (Cortex-M4F, 4 MiB of RAM), or
//!   with the feature `ram64k` `memory/mps2-an386-64k.x` (the same board, the program
//!   limited to 64 KiB of RAM: `finetune_w2`);
//! - `thumbv6m-none-eabi`: `memory/microbit.x` (Cortex-M0, 16 KiB of RAM), or with the
//!   feature `mps2-an385` `memory/mps2-an385.x` (4 MiB of RAM, for the programs that
//!   need more than the micro:bit has).
//!
//! The runner (`qemu.sh`) picks the QEMU machine from the memory map linked in.

use std::{env, fs, path::PathBuf};

fn main() {
    let target = env::var("TARGET").unwrap_or_default();
    let an385 = env::var_os("CARGO_FEATURE_MPS2_AN385").is_some();
    let ram64k = env::var_os("CARGO_FEATURE_RAM64K").is_some();
    let src = match (target.as_str(), an385) {
        ("thumbv7em-none-eabihf", _) if ram64k => "memory/mps2-an386-64k.x",
        ("thumbv7em-none-eabihf", _) => "memory/mps2-an386.x",
        ("thumbv6m-none-eabi", false) => "memory/microbit.x",
        ("thumbv6m-none-eabi", true) => "memory/mps2-an385.x",
        (other, _) => panic!("torchlet-firmware: no memory map for target {other}"),
    };
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    fs::copy(src, out.join("memory.x")).expect("copy memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-changed=build.rs");
}
