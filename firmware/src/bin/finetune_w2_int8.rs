//! `finetune_w2` with the convolution weights stored as int8 with a scale per output
//! channel (`assets/w2_int8.tlm`: `make_w2_model.sh --int8`, that is `torchlet
//! convert --freeze ... --int8-frozen`, 40,872 bytes instead of 88,728). The frozen
//! int8 weights are read in place from flash by the int8 convolution kernels, and
//! gradients still flow through them to the biases below. The same run and checks as
//! `finetune_w2` (`torchlet_firmware::w2`); the full update is not planned, since
//! int8 weights cannot train.
#![no_std]
#![no_main]

torchlet_firmware::w2_program!(
    "finetune_w2_int8",
    include_bytes!("../../assets/w2_int8.tlm"),
    include_bytes!("../../assets/digits_cropped.bin")
);
