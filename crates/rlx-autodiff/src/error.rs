//! Autodiff errors.
use rlx_ir::{IrError, NodeId};
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum AdError {
    /// A node on a path from `wrt` to the output has an op without a VJP rule.
    #[error("node {node} ({op}) lies on the differentiated path but {op} has no VJP rule")]
    NoRule { node: NodeId, op: &'static str },
    /// A rule exists but cannot handle this node's parameters or shapes.
    #[error("node {node} ({op}): cannot differentiate: {msg}")]
    Unsupported {
        node: NodeId,
        op: &'static str,
        msg: String,
    },
    /// A `wrt` entry that is not a float node of the graph.
    #[error("wrt node {node}: {msg}")]
    BadWrt { node: NodeId, msg: String },
    #[error("the graph has no outputs to differentiate")]
    NoOutput,
    /// `grad_with_loss` needs a 1-element output 0.
    #[error("grad_with_loss: output 0 must hold one element, it is {shape}")]
    NotScalarLoss { shape: String },
    /// The graph already has an input with the name autodiff adds.
    #[error("the graph already has an input named {0:?}")]
    NameClash(String),
    /// A train-step request that cannot be built (unknown or mixed-dtype params).
    #[error("optimizer: {0}")]
    Optim(String),
    /// Building a backward node failed (a rule produced ill-shaped ops).
    #[error("building the backward graph: {0}")]
    Ir(#[from] IrError),
}
