//! The M0 program's recipe and sizes, shared with the host exporter that simulates it
//! (`tests/examples/export_m0_assets.rs`), so both run the same numbers.

/// Bytes of the static arena (Q16 words): what is left of the 16 KiB of RAM after the
/// stack's measured high-water mark (4,852 bytes with int8 frozen convolutions and an
/// 18-record tape) and the other statics (24 bytes), with a margin of about 750 bytes
/// (the program fails its RAM check if it runs out). More arena lets more digits keep
/// more pixels: at 9,472 bytes 97 of the 100 held-out digits were shrunk, at 10,752
/// 94, and held-out accuracy before fine-tuning rose from 22 to 25 of 100.
pub const ARENA_BYTES: usize = 10752;
/// Fused SGD learning rate of the head.
pub const LR: f32 = 0.03;
/// Passes over the fine-tuning digits.
pub const EPOCHS: usize = 3;
