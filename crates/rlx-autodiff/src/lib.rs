//! rlx-autodiff: reverse-mode differentiation of rlx graphs, graph → graph.
//!
//! - [`grad`]`(&graph, wrt)` builds a graph with one extra input, `d_output` (the cotangent
//!   of graph output 0, same shape and dtype), whose outputs are `[d_wrt…]`: the
//!   vector-Jacobian product of output 0 with respect to each `wrt` node.
//! - [`grad_with_loss`]`(&graph, wrt)` requires output 0 to be a 1-element loss; the seed
//!   is a constant 1, so no `d_output` input is added, and the outputs are
//!   `[loss, d_wrt…]`.
//!
//! The new graph keeps every forward node under its original id (so all forward inputs and
//! params are still fed the same way) and appends the backward nodes. Only nodes on a path
//! from a `wrt` node to output 0 are differentiated; `StopGradient` blocks; nodes of
//! integer or bool type (labels, indices, masks) carry no gradient. Fan-out is summed with
//! `Add`. An op reached on such a path without a VJP rule is [`AdError::NoRule`], never a
//! silent zero. Each rule lives in `rules/<group>.rs`.
//!
//! Rules exist for: every Activation, every Binary op (max / min split ties evenly),
//! Where, Cast, StopGradient, Compare and ArgMax (no gradient); MatMul, FusedMatMulBiasAct;
//! LayerNorm, RmsNorm, FusedResidualLN, FusedResidualRmsNorm, FusedSwiGLU; Reduce (all
//! five), Softmax, SoftmaxCrossEntropy (dense targets, both inputs),
//! SoftmaxCrossEntropyWithLogits (emits SoftmaxCrossEntropyBackward); Reshape, Transpose,
//! Expand, Narrow, Concat, Gather, Pad, Slice; Attention (by decomposition into
//! primitives, every layout / mask / GQA), Rope; Conv (emits Conv2dBackwardInput /
//! Conv2dBackwardWeight), Pool (MaxPool2dBackward; average pooling as a depthwise
//! Conv2dBackwardInput), ResizeNearest2x; Fft, LogMel (emits LogMelBackward).
//! Without a rule (an error if reached), each listed by name in [`rules::vjp`]: DequantMatMul,
//! Dequantize, CacheWrite and Attention over a cache (`past`: inference state),
//! the fusion regions (autodiff runs before fusion), and the backward ops themselves (no
//! second order).
//!
//! [`optim::train_step`] appends SGD-momentum / Adam / AdamW updates to the gradient graph
//! so one graph performs a whole training step; [`optim::train_step_with`] lets a rewrite
//! such as [`all_reduce_grads`] (data parallelism: gradients averaged over the ranks in
//! DDP-style buckets) run between the backward pass and the update.
mod error;
mod grad;
pub mod grad_sync;
pub mod optim;
pub mod rules;
pub mod util;

pub use error::AdError;
pub use grad::{grad, grad_with_loss, D_OUTPUT};
pub use grad_sync::{all_reduce_grads, GradBucket, DEFAULT_BUCKET_BYTES};
pub use optim::{train_step, train_step_with, Optimizer, TrainStep};
pub use util::unbroadcast;
