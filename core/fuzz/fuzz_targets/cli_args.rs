//! Fuzz target: see `torchlet_cli::fuzzing::cli_args`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| torchlet_cli::fuzzing::cli_args(data));
