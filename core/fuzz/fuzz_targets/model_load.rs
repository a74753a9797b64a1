//! Fuzz target: see `torchlet_tests::fuzzing::model_load`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| torchlet_tests::fuzzing::model_load(data));
