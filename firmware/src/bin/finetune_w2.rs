//! On-device fine-tuning of W2 ("mobile-fcn": BatchNorm, ReLU6, depthwise-separable
//! inverted residual blocks) in 64 KiB of RAM (f32, Cortex-M4F, QEMU `mps2-an386`
//! linked with `memory/mps2-an386-64k.x`: statics, heap and stack share 64 KiB).
//!
//! - The model file in flash (`assets/w2_pretrained.tlm`: W2 pretrained in PyTorch on
//!   the 28x28 digits by `tests/golden/make_w2.py`, exported to ONNX and converted by
//!   `torchlet convert`, see `make_w2_model.sh`) is checked once and run by op name.
//! - Only the biases and the classifier train (TinyTL's bias-only update); every
//!   other tensor, BatchNorm's statistics included, is read in place from flash
//!   (`torchlet_firmware::w2`, which says what the run checks).
//! - Prints the planner's bytes of a 28x28 training step for the full update (batch
//!   statistics, every parameter and statistic in RAM) and for this choice.
#![no_std]
#![no_main]

torchlet_firmware::w2_program!(
    "finetune_w2",
    include_bytes!("../../assets/w2_pretrained.tlm"),
    include_bytes!("../../assets/digits_cropped.bin")
);
