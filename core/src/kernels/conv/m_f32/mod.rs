//! Register-tiled `f32` convolutions for Cortex-M (M4F, M7: 32 single-precision FPU
//! registers), `f32`'s kernel set when `target_arch = "arm"` with the hard-float ABI
//! (see `kernels/set.rs`), and tested on every host.
//!
//! - [`conv`]: forward and backward-input (stride 1) on one correlation driver;
//!   [`weight`]: backward-weight. Planes are copied in bands of rows, zero-padded and
//!   phase-split, into a stack buffer (`band.rs`), so inner loops have no border
//!   branches; register tiles (`tile.rs`) hold 4 output channels x 4 outputs, or for a
//!   single channel 1 x 8 outputs, or 2 rows x 7 outputs sharing each input window
//!   (3x3 stride-1 kernels, rows of whole tiles).
//! - Why not the host kernels (`fast_f32`): their 8-lane tiles of 4 channels need 32
//!   accumulators, and their buffers are 80 KiB of stack; here the stack is bounded by
//!   [`STACK_WORDS`] words (about 11 KiB) whatever the shape, and nothing comes from
//!   the arena.
//! - MobileNet's layers have their own tiles: 1x1 convolutions (stride 1, no padding)
//!   as matrix products of 4 x 4 (forward, backward-input) and 4 x 2 (backward-weight)
//!   register tiles (`pointwise.rs`); depthwise 3x3 convolutions on a 2-row x 4-output
//!   tile that holds the 9 weights, and a backward-weight tile with all 9 sums
//!   (`depthwise.rs`). Their innermost loops are inline assembly on the M4F
//!   (`micro.rs`, `micro_dw.rs`: one `VLDM` loads a run of words, which LLVM does not
//!   form), the same loops in Rust elsewhere; the device checks the assembly against
//!   the generic kernels (`firmware` `kernel_bench`), the host tests the Rust loops.
//! - The other tiles are plain safe Rust, written so that LLVM keeps them in registers
//!   at the firmware's `opt-level = "s"` (which unrolls no loop): the lanes are
//!   unrolled by a macro. On the M4F every multiply-add is one `VMLA.F32`, which rounds
//!   like a multiply followed by an add, so forward results equal the generic kernel's.
//! - Every kernel falls back to the generic one for shapes it does not cover (a kernel
//!   whose weights for 4 output channels exceed [`PACK_WORDS`], a row wider than the
//!   band buffer), and is tested against it on random shapes (`tests.rs`).

pub mod conv;
pub mod weight;

pub(crate) mod band;
pub(crate) mod depthwise;
pub(crate) mod micro;
pub(crate) mod micro_dw;
pub(crate) mod pointwise;
pub(crate) mod tile;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_mobile;

pub use conv::{conv2d_backward_input, conv2d_forward};
pub use weight::conv2d_backward_weight;

/// Words of the stack buffer holding a band of padded input planes (8 KiB): fewer
/// instructions per MAC on W1's convolutions (`firmware` `kernel_bench`) than half of
/// it, which takes more bands and passes over the channels.
pub const BUF_WORDS: usize = 2048;
/// Words of the stack buffer holding packed weights of one block of output channels
/// (2.25 KiB: 4 channels x 16 input channels x 3x3 taps).
pub const PACK_WORDS: usize = 576;
/// Words of the stack buffer holding the output gradient of 4 channels for a band
/// (backward-weight; 3 KiB, a band of 6 rows of 28 outputs).
pub const GY_WORDS: usize = 768;
/// Output channels per register tile.
pub(crate) const OB: usize = 4;
/// The most stack the kernels' buffers take, in words: band, packed weights and their
/// group offsets (forward and backward-input; backward-weight takes the band and
/// [`GY_WORDS`], less).
pub const STACK_WORDS: usize = BUF_WORDS + PACK_WORDS + PACK_WORDS / OB;
// The stack bound the module doc promises (about 11 KiB), checked at compile time.
const _: () = assert!(STACK_WORDS * 4 <= 12 * 1024);
