//! Optimizer errors: each names the pass and, where there is one, the node.
use rlx_ir::{IrError, NodeId};
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum OptError {
    /// A pass met a node it cannot handle (a malformed input graph, a bad evaluator result).
    #[error("pass {pass}: node {node} ({op}): {msg}")]
    Node {
        pass: &'static str,
        node: NodeId,
        op: &'static str,
        msg: String,
    },
    /// The graph a pass produced (or was given, `pass` = "input") fails the verifier.
    #[error("pass {pass}: graph fails verification: {source}")]
    Verify {
        pass: &'static str,
        #[source]
        source: IrError,
    },
    /// An IR call failed while a pass rebuilt the graph.
    #[error("pass {pass}: {source}")]
    Ir {
        pass: &'static str,
        #[source]
        source: IrError,
    },
    /// Memory planning was given inconsistent inputs.
    #[error("memory plan: node {node}: {msg}")]
    Plan { node: NodeId, msg: String },
}
