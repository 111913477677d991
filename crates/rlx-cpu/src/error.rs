//! CPU executor errors.
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum CpuError {
    /// An op could not run on these inputs; names the node and what is wrong.
    #[error("node {node} ({op}): {msg}")]
    Op {
        node: String,
        op: &'static str,
        msg: String,
    },
    #[error("input \"{name}\": {msg}")]
    Input { name: String, msg: String },
    #[error("param \"{name}\": {msg}")]
    Param { name: String, msg: String },
    #[error("graph: {0}")]
    Graph(#[from] rlx_ir::IrError),
}

/// Shorthand for an op error inside a thunk; the executor fills in the node label.
pub fn op_err(msg: impl Into<String>) -> CpuError {
    CpuError::Op {
        node: String::new(),
        op: "",
        msg: msg.into(),
    }
}
