//! The M0 program's recipe and sizes, shared with the host exporter that simulates it
//! (`tests/examples/export_m0_assets.rs`), so both run the same numbers.

/// Bytes of the static arena (Q16 words): what is left of the 16 KiB of RAM after the
/// stack's measured high-water mark and the other statics (24 bytes), with a margin.
/// 9,984 bytes fitted a 6,116-byte stack; tape records that hold their backward rule
/// and the Q16 3-wide row kernels' weight table took the stack past that, so the arena
/// gave 512 bytes back (the program fails its RAM check if it runs out). More arena
/// lets more digits keep more pixels.
pub const ARENA_BYTES: usize = 9472;
/// Fused SGD learning rate of the head.
pub const LR: f32 = 0.03;
/// Passes over the fine-tuning digits.
pub const EPOCHS: usize = 3;
