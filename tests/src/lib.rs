//! Host-side helpers shared by the tests, the conformance runner and the examples:
//! the JSON op door ([`conformance`]), the MNIST data file ([`digits`]), the firmware's
//! samples file ([`samples_file`]) and the W1 training loop ([`train`]).

// The examples name this crate `torchlet_tests`; `train` includes one of them.
extern crate self as torchlet_tests;

pub mod conformance;
pub mod digits;
pub mod fuzzing;
pub mod safetensors;
pub mod samples_file;
pub mod train;
pub mod varsize;
pub mod varsize_train;
