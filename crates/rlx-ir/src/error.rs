//! IR errors.
use crate::NodeId;
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum IrError {
    /// A builder call whose inputs do not fit the op.
    #[error("cannot add {op} as node {node} (inputs {inputs}): {msg}")]
    Build {
        op: crate::OpKind,
        node: NodeId,
        inputs: String,
        msg: String,
    },
    /// The verifier found a broken node.
    #[error("node {node} ({op}{name}): {msg}")]
    Verify {
        node: NodeId,
        op: crate::OpKind,
        name: String,
        msg: String,
    },
    /// Two inputs (or two params) share a name, so a run could never tell them apart.
    #[error("{kind} name \"{name}\" is used by both {first} and {second}")]
    DuplicateName {
        kind: crate::OpKind,
        name: String,
        first: NodeId,
        second: NodeId,
    },
    #[error("graph output {0} does not exist")]
    BadOutput(NodeId),
    #[error("node id {0} does not exist")]
    UnknownNode(NodeId),
    #[error("tensor: {0}")]
    Tensor(String),
    #[error("malformed graph bytes at offset {offset}: {msg}")]
    Decode { offset: usize, msg: String },
    #[error("malformed graph JSON: {0}")]
    Json(String),
    /// A file could not be read or written.
    #[error("i/o: {0}")]
    Io(String),
    /// An error while saving or loading the named file.
    #[error("{path}: {error}")]
    File { path: String, error: Box<IrError> },
}
