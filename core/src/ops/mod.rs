//! Ops: one file per op family, each holding its ops' validation, shape rule, forward
//! call, backward rule and entry points side by side.
//!
//! Every op follows the same steps: look up the inputs (stale handles are refused),
//! validate sizes with checked arithmetic, record the output (tape room and arena
//! space are checked before anything is written), then run the kernel unless the
//! graph only plans.
//!
//! # The ops
//!
//! By their `torch.nn.functional` names (the names a model file, the conformance door
//! and [`crate::nn::Layer::op`] use); each is a [`Graph`] method of the same name, with
//! forward and backward, in `f32` and Q16.16.
//!
//! | family | ops | file |
//! |---|---|---|
//! | convolution | `conv2d`, `conv1d`, `conv_transpose2d`, `linear` | `conv.rs`, `conv1d.rs`, `conv_transpose.rs`, `linear.rs` |
//! | pooling | `max_pool2d`, `avg_pool2d`, `adaptive_avg_pool2d`, `adaptive_max_pool2d` | `pool.rs`, `adaptive_max.rs` |
//! | activation | `relu`, `leaky_relu`, `sigmoid`, `tanh`, `silu`, `relu6`, `hardswish`, `hardsigmoid`, `softmax`, `log_softmax` | `activation.rs`, `hard.rs`, `softmax.rs` |
//! | normalisation, regularisation | `batch_norm`, `group_norm`, `dropout` | `batch_norm.rs`, `group_norm.rs`, `dropout.rs` |
//! | element-wise | `add`, `sub`, `mul`, `div` (broadcasting), `affine_scalar`, `mul_scalar`, `add_scalar` | `elementwise.rs`, `scalar_affine.rs` |
//! | shape | `flatten`, `unsqueeze`, `squeeze`, `cat`, `permute`, `slice`, `channel_shuffle`, `pad`, `interpolate`, `sum`, `mean` | `reshape.rs`, `layout.rs`, `slice.rs`, `shuffle.rs`, `pad.rs`, `interpolate.rs`, `reduce.rs` |
//! | loss | `cross_entropy` (per-pixel, `ignore_index`), `nll_loss`, `mse_loss` | `loss.rs`, `nll.rs` |
//!
//! In-place forms for memory: [`Graph::relu_`], [`Graph::relu6_`], [`Graph::batch_norm_`]
//! (fixed statistics), [`Graph::add_`]; a model file's nodes use them through
//! [`OpSpec::in_place`](registry::OpSpec::in_place). Frozen int8 convolutions: `qconv.rs`
//! (Q16 graphs, forward) and `conv_int8.rs` (`f32` graphs, forward and backward-input).
//!
//! # How to add an op
//!
//! An op lives in its own file here (or beside its family, as `tanh` in
//! `activation.rs`), plus one registration line; its kernel lives under `kernels/`.
//! Take `activation.rs` (one input, no parameters) or `conv.rs` (three inputs,
//! parameters) as the model. The file holds:
//!
//! 1. **Its record kind**: a `static` `OpKind` (`graph/node.rs`) with the
//!    PyTorch name and what its backward reads (`reads_inputs`: per input, the
//!    inputs whose gradients read its data, so a convolution with a frozen weight
//!    keeps nothing of its input; `reads_output` for its own output); memory
//!    reclamation frees everything else early.
//! 2. **Its parameters**, if backward needs them: `impl Packed for MyParams` packing
//!    them into the record's six half-words (`Params`, checked: a value that does not
//!    fit is `Error::Overflow`) and back.
//! 3. **The `Graph` method** (`pub fn my_op(&mut self, ..) -> Result<Tensor>`): look up
//!    the inputs with `self.id`, validate, decide `rg = self.needs_grad(..)`, build
//!    `Op::new(&MY_OP, inputs, params)` (or `Op::LEAF` when `!rg`), `self.push` the
//!    output with the rule, and run the kernel through `self.exec` (nothing runs in a
//!    meta graph).
//! 4. **Its backward rule** (`fn my_op_rule(g: &mut Graph<'_, S, N>, i: usize)`): read
//!    the record with `g.record(i, &MY_OP)`, get the output gradient with
//!    `g.grads_for(i)` (which gives each input that needs one a gradient), and
//!    accumulate into `g.grad_of(input)` through `g.exec`. The backward walk calls
//!    it and nothing else; rules may hand their gradient over in place
//!    (`pass_grad_in_place`) or update parameters directly under fused SGD
//!    (`with_direct_params`).
//! 5. **Its no-grad form**, if frozen layers use it: a method in an
//!    `impl NoGrad { .. }` block in the same file, calling the op's `_with` form with
//!    no rule, so a program that only calls that links no backward code.
//! 6. **Its by-name entry**: `fn my_op_call(g, inputs, attrs)` reading its keyword
//!    parameters from [`registry::Attrs`] (PyTorch's names and defaults), and a
//!    `pub(crate) const MY_OP_SPEC: OpSpec` with its `torch.nn.functional` name,
//!    input names and parameter names, and `in_place: None`.
//! 7. **Its in-place form**, if it has one (it overwrites its input, as
//!    [`Graph::relu_`]): `fn my_op_in_place(g, inputs, attrs) -> Option<Result<Tensor>>`
//!    answering `None` when the form does not apply to these inputs and parameters
//!    (so the op runs out of place), and `in_place: Some(Self::my_op_in_place)` in
//!    the spec. [`crate::model::Model::forward`] then runs it on a node whose input 0
//!    nothing else reads, with no edit in `model/`.
//!
//! The one line elsewhere: `Graph::MY_OP_SPEC,` in [`OpSpec::ALL`] below. That makes
//! it callable from the conformance door (`tests/src/conformance.rs` dispatches by
//! name), from a model file's nodes, and, for an op with one tensor input, a layer:
//! [`crate::nn::Layer::op`]`("my_op")` in a [`crate::nn::Sequential`] and
//! `{"type": "my_op", ...}` in the wasm package's `Model.fromLayers`. Its tests:
//! cases in the golden script (`tests/golden/make_golden_vocab.py`) and a gradient
//! check. Only a layer that owns parameters (a convolution, a norm) needs a struct
//! in `nn/` and a variant of [`crate::nn::Layer`].

pub mod activation;
pub mod adaptive_max;
pub mod batch_norm;
pub mod conv;
pub mod conv1d;
pub mod conv_int8;
pub mod conv_transpose;
pub mod dropout;
pub mod elementwise;
pub mod group_norm;
pub mod hard;
pub mod interpolate;
pub mod layout;
pub mod linear;
pub mod loss;
pub mod nll;
pub mod pad;
pub mod pool;
pub mod qconv;
pub mod reduce;
pub mod registry;
pub mod reshape;
pub mod scalar_affine;
pub mod shuffle;
pub mod slice;
pub mod softmax;

use crate::arena::Span;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::scalar::Scalar;
use registry::OpSpec;

impl<S: Scalar, const N: usize> OpSpec<S, N> {
    /// Every op that can be called by name ([`OpSpec::find`]): one line per op.
    pub const ALL: &'static [OpSpec<S, N>] = &[
        Graph::CONV2D_SPEC,
        Graph::LINEAR_SPEC,
        Graph::MAX_POOL2D_SPEC,
        Graph::AVG_POOL2D_SPEC,
        Graph::ADAPTIVE_AVG_POOL2D_SPEC,
        Graph::ADAPTIVE_MAX_POOL2D_SPEC,
        Graph::RELU_SPEC,
        Graph::LEAKY_RELU_SPEC,
        Graph::SIGMOID_SPEC,
        Graph::TANH_SPEC,
        Graph::SILU_SPEC,
        Graph::RELU6_SPEC,
        Graph::HARDSWISH_SPEC,
        Graph::HARDSIGMOID_SPEC,
        Graph::ADD_SPEC,
        Graph::MUL_SPEC,
        Graph::SUB_SPEC,
        Graph::DIV_SPEC,
        Graph::SOFTMAX_SPEC,
        Graph::LOG_SOFTMAX_SPEC,
        Graph::FLATTEN_SPEC,
        Graph::UNSQUEEZE_SPEC,
        Graph::SQUEEZE_SPEC,
        Graph::CAT_SPEC,
        Graph::PERMUTE_SPEC,
        Graph::SLICE_SPEC,
        Graph::CHANNEL_SHUFFLE_SPEC,
        Graph::SUM_SPEC,
        Graph::MEAN_SPEC,
        Graph::CROSS_ENTROPY_SPEC,
        Graph::NLL_LOSS_SPEC,
        Graph::MSE_LOSS_SPEC,
        Graph::PAD_SPEC,
        Graph::INTERPOLATE_SPEC,
        Graph::BATCH_NORM_SPEC,
        Graph::GROUP_NORM_SPEC,
        Graph::DROPOUT_SPEC,
        Graph::AFFINE_SCALAR_SPEC,
        Graph::MUL_SCALAR_SPEC,
        Graph::ADD_SCALAR_SPEC,
        Graph::CONV1D_SPEC,
        Graph::CONV_TRANSPOSE2D_SPEC,
    ];
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Runs `f` on `R` read views and one write view, unless the graph only plans or
    /// the write view is empty. (A kernel's only effect is its write view; with it
    /// empty, the loops of some kernels would still count through the other dims of an
    /// empty tensor, which may be huge: found by fuzzing.) Counts the views' elements
    /// as the kernel's work ([`Graph::macs`]), in a meta graph too.
    pub(crate) fn exec<const R: usize>(
        &mut self,
        reads: [Span; R],
        write: Span,
        f: impl FnOnce([&[S]; R], &mut [S]),
    ) -> Result<()> {
        let work = crate::graph::touched(&reads, write);
        self.exec_n(reads, write, work, f)
    }

    /// [`Graph::exec`] counting `work` (multiply-accumulates of a convolution, computed
    /// next to its shape rule) instead of the views' elements.
    pub(crate) fn exec_n<const R: usize>(
        &mut self,
        reads: [Span; R],
        write: Span,
        work: u64,
        f: impl FnOnce([&[S]; R], &mut [S]),
    ) -> Result<()> {
        if write.len == 0 {
            return Ok(());
        }
        self.count(work);
        if self.arena.is_meta() {
            return Ok(());
        }
        let (r, w) = self.arena.views(reads, write)?;
        f(r, w);
        Ok(())
    }

    /// Runs `f` on read views and two write views, unless the graph only plans, and
    /// counts `work` (the kernels that also write what backward keeps).
    pub(crate) fn exec2<const R: usize>(
        &mut self,
        reads: [Span; R],
        writes: [Span; 2],
        work: u64,
        f: impl FnOnce([&[S]; R], &mut [S], &mut [S]),
    ) -> Result<()> {
        self.count(work);
        if self.arena.is_meta() {
            return Ok(());
        }
        let (r, a, b) = self.arena.views2(reads, writes[0], writes[1])?;
        f(r, a, b);
        Ok(())
    }

    /// The gradient span of node `i`, which backward allocated before replaying.
    pub(crate) fn out_grad(&self, i: usize) -> Result<Span> {
        self.nodes[i].grad().ok_or(Error::InvalidState {
            what: "output gradient missing during backward (engine bug)",
        })
    }
}

/// Refuses a stride, padding or dilation over a word: what the tape can record, and
/// what keeps the kernels' signed index arithmetic in range on 32-bit targets, with or
/// without gradients.
pub(crate) fn window_words(op: &'static str, stride: usize, pad: usize, dil: usize) -> Result<()> {
    for (v, what) in [
        (stride, "stride must be at most 65535"),
        (pad, "padding must be at most 65535"),
        (dil, "dilation must be at most 65535"),
    ] {
        if v > u16::MAX as usize {
            return Err(Error::InvalidParam {
                op,
                what,
                value: i64::try_from(v).unwrap_or(i64::MAX),
            });
        }
    }
    Ok(())
}

/// The output length of a sliding window, as PyTorch computes it for conv and pool:
/// `floor_or_ceil((len + 2*pad - dil*(k-1) - 1) / stride) + 1`, with the ceil-mode rule
/// that the last window must start inside the input or the left padding.
pub(crate) fn window_out(
    op: &'static str,
    len: usize,
    k: usize,
    stride: usize,
    pad: usize,
    dil: usize,
    ceil_mode: bool,
) -> Result<usize> {
    let ovf = Error::Overflow { op };
    if k == 0 {
        return Err(Error::InvalidParam {
            op,
            what: "kernel size must be at least 1",
            value: 0,
        });
    }
    if stride == 0 {
        return Err(Error::InvalidParam {
            op,
            what: "stride must be at least 1",
            value: 0,
        });
    }
    if dil == 0 {
        return Err(Error::InvalidParam {
            op,
            what: "dilation must be at least 1",
            value: 0,
        });
    }
    window_words(op, stride, pad, dil)?;
    let eff = dil.checked_mul(k - 1).and_then(|v| v.checked_add(1)).ok_or(ovf)?;
    let padded = pad.checked_mul(2).and_then(|p| p.checked_add(len)).ok_or(ovf)?;
    if eff > padded {
        return Err(Error::ShapeMismatch {
            op,
            what: "the input is {found} long with padding, shorter than the kernel's span of {expected}",
            expected: eff,
            found: padded,
        });
    }
    let span = padded - eff;
    let mut out = if ceil_mode {
        span.div_ceil(stride) + 1
    } else {
        span / stride + 1
    };
    if ceil_mode && (out - 1) * stride >= len + pad {
        out -= 1;
    }
    Ok(out)
}

/// Checks that a shape has the given rank.
pub(crate) fn expect_rank(op: &'static str, what: &'static str, rank: usize, want: usize) -> Result<()> {
    if rank == want {
        Ok(())
    } else {
        Err(Error::ShapeMismatch {
            op,
            what,
            expected: want,
            found: rank,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::registry::OpSpec;

    #[test]
    fn the_op_table_lists_every_op() {
        let src = include_str!("mod.rs");
        let table = src
            .split("//! # The ops")
            .nth(1)
            .and_then(|t| t.split("//! # How to add").next());
        let docs = table.expect("the op table section");
        for spec in OpSpec::<f32, 8>::ALL {
            assert!(
                docs.contains(&format!("`{}`", spec.name)),
                "{} missing from the op table",
                spec.name
            );
        }
    }
}
