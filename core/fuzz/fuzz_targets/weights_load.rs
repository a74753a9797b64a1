//! Fuzz target: see `torchlet_tests::fuzzing::weights_load`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| torchlet_tests::fuzzing::weights_load(data));
