//! W1 on the variable-size digits, with the input preparation as a parameter: the
//! `varsize_digits` example's training code (`train`, `Prep`, `Settings`), which is the
//! single copy and is written out there in full; the end-to-end test runs it from here.

#[allow(dead_code)] // the example's `main` and its reports
#[path = "../examples/varsize_digits.rs"]
mod example;

pub use example::{epoch_steps, evaluate, train, Epoch, Prep, Settings};
