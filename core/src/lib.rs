//! torchlet: a `no_std` tensor engine that **trains** tiny convolutional networks on
//! microcontrollers and in the browser, with a PyTorch-style define-by-run autograd.
//!
//! # Layers (each uses only the ones below it)
//!
//! | layer | modules | what it does |
//! |---|---|---|
//! | conveniences | [`nn`], [`model`], [`optim`], [`init`], [`io`] | layers and [`nn::Sequential`], model files run by op name ([`model::Model`]), SGD and Adam, seeded init, weights files |
//! | recording | [`Graph`] | inputs, parameters, op calls, [`Graph::backward`], meta planning |
//! | ops | [`ops`] | validate, shape rule, allocate, call the kernel, backward rule |
//! | memory | [`Arena`], [`Shape`] | one caller buffer, two ends, exact high-water mark |
//! | kernels | `kernels` (private; [`bench`](mod@bench) for benches) | pure math on slices, chosen per scalar type by [`Scalar::Kernels`] |
//!
//! - **One arena.** All memory comes from a buffer the caller hands over: parameters,
//!   gradients and optimizer state at one end, the step's activations, saved values and
//!   activation gradients at the other, released by [`Graph::end_step`].
//! - **A tape of fixed capacity.** `Graph<S, N>` holds at most `N` records; a step that
//!   needs more gets [`Error::TapeFull`]. The tape is rebuilt every step, so the forward
//!   code may branch on the input size.
//! - **Only the backward code a program records.** Each record holds its op's backward
//!   rule as a function pointer chosen when the op records, so a firmware image links
//!   the rules of the ops it calls with gradients and no others; [`Graph::no_grad`]
//!   runs frozen layers without naming any backward code.
//! - **Meta execution.** [`Graph::meta`] runs the same step code without data and tells
//!   the exact arena bytes a real step needs.
//! - **Numbers.** Everything is generic over [`Scalar`]; `f32` and the Q16.16 fixed-point
//!   [`Q16`] (integer-only, bit-identical on every target: see [`fixed`]) are provided.
//!
//! # The no-panic contract
//! Every public function that takes shapes, sizes, parameters or data returns
//! [`Result`], with an [`Error`] naming the op and the sizes. A failed call leaves the
//! graph usable: parameters and the long-lived arena region are untouched, and the
//! scratch it had taken is given back.
//!
//! # Features
//! - default: `no_std`, no `alloc`.
//! - `std`: host conveniences.
//! - `defmt`: `defmt::Format` for [`Error`] and [`Shape`].
//! - `micromath`: fast approximate `f32` `exp`/`ln`/`sqrt`/`tanh`/`sigmoid` instead of
//!   `libm` (see [`fmath`]).
//! - `small-kernels`: size first; the `f32` convolutions run the plain generic kernels
//!   on every target instead of the register-tiled ones (Cortex-M with an FPU, hosts,
//!   wasm): less code, several times the instructions per MAC on a Cortex-M4F.
//!
//! # Example: one training step of a tiny CNN
//! ```
//! use torchlet::{nn, optim::Sgd, init::Rng, Graph};
//!
//! # fn main() -> Result<(), torchlet::Error> {
//! let mut arena = vec![0.0f32; 16 * 1024];        // 64 KiB, from anywhere
//! let mut g: Graph<f32, 32> = Graph::new(&mut arena);
//! g.set_fused_sgd(0.01)?;                         // SGD applied inside backward
//! let mut rng = Rng::new(0);
//! let model = nn::digits_fcn(&mut g, &mut rng)?;  // W1: 6,218 parameters
//!
//! for (h, w) in [(28, 28), (12, 20)] {            // any size, step to step
//!     let image = vec![0.5f32; h * w];
//!     let x = g.input(&[1, 1, h, w], &image)?;
//!     let logits = model.forward(&mut g, x)?;
//!     let loss = g.cross_entropy(logits, &[3])?;
//!     g.backward(loss)?;                          // also updates the parameters
//!     g.end_step();
//! }
//! // With gradient buffers and a separate optimizer instead:
//! let mut arena = vec![0.0f32; 32 * 1024];
//! let mut g: Graph<f32, 32> = Graph::new(&mut arena);
//! let model = nn::digits_fcn(&mut g, &mut rng)?;
//! let mut sgd = Sgd::new(&mut g, 0.01, 0.9, 0.0)?;
//! g.zero_grad();
//! let x = g.input(&[1, 1, 12, 20], &[0.5; 12 * 20])?;
//! let logits = model.forward(&mut g, x)?;
//! let loss = g.cross_entropy(logits, &[3])?;
//! g.backward(loss)?;
//! sgd.step(&mut g)?;
//! g.end_step();
//! # Ok(()) }
//! ```
#![cfg_attr(not(any(test, feature = "std")), no_std)]
#![deny(unsafe_code)]
#![deny(missing_docs)]
#![deny(rustdoc::broken_intra_doc_links)]

mod arena;
mod error;
mod graph;
mod kernels;
mod scalar;
mod shape;

pub mod bench;
pub mod data;
pub mod fixed;
pub mod fmath;
pub mod init;
pub mod io;
pub mod metrics;
pub mod model;
pub mod nn;
pub mod ops;
pub mod optim;
pub mod plan;
pub mod schedule;
pub mod summary;

pub use arena::Arena;
pub use error::{Error, Phase, Real, Result};
pub use fixed::Q16;
pub use graph::{Graph, NoGrad, Tensor, TraceEvent, TraceFn};
pub use ops::batch_norm::BatchNormParams;
pub use ops::conv::Conv2dParams;
pub use ops::conv1d::Conv1dParams;
pub use ops::conv_transpose::ConvTranspose2dParams;
pub use ops::interpolate::InterpMode;
pub use ops::nll::{LossParams, Reduction};
pub use ops::pad::{PadMode, PadParams};
pub use ops::pool::Pool2dParams;
pub use scalar::Scalar;
pub use shape::{Shape, MAX_RANK};

// The README's Rust blocks are doctests of this crate, so its example cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
mod readme_doctest {}
