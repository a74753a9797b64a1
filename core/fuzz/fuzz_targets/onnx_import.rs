//! Fuzz target: see `torchlet_tests::fuzzing::onnx_import`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| torchlet_tests::fuzzing::onnx_import(data));
