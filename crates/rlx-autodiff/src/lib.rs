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
mod error;
mod grad;
pub mod rules;
pub mod util;

pub use error::AdError;
pub use grad::{grad, grad_with_loss, D_OUTPUT};
pub use util::unbroadcast;
