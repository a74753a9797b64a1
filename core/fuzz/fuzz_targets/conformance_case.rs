//! Fuzz target: see `torchlet_tests::fuzzing::conformance_case`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| torchlet_tests::fuzzing::conformance_case(data));
