//! Only linker scripts: copies the memory map of the board for the target being built
//! (`memory/<target>.x`) to OUT_DIR as `memory.x`, where cortex-m-rt's `link.x` finds it.

use std::{env, fs, path::PathBuf};

fn main() {
    let target = env::var("TARGET").unwrap_or_default();
    let src = match target.as_str() {
        "thumbv7em-none-eabihf" => "memory/mps2-an386.x",
        "thumbv6m-none-eabi" => "memory/microbit.x",
        other => panic!("torchlet-firmware: no memory map for target {other}"),
    };
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    fs::copy(src, out.join("memory.x")).expect("copy memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-changed=build.rs");
}
