//! Fuzz target: see `torchlet_cli::fuzzing::model_file_commands`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| torchlet_cli::fuzzing::model_file_commands(data));
