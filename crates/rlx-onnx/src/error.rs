//! The importer's typed errors. Each names what broke: the file, the tensor, or the node
//! (name, op type and the opset it was read under).
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum OnnxError {
    /// A file could not be read.
    #[error("{path}: {msg}")]
    Io { path: String, msg: String },
    /// The bytes are not a valid protobuf message of the expected type.
    #[error("{what}: malformed protobuf: {msg}")]
    Decode { what: String, msg: String },
    /// A tensor whose fields contradict each other (dims vs data length, a bad dtype).
    #[error("tensor \"{name}\": {msg}")]
    Tensor { name: String, msg: String },
    /// A tensor whose bytes live in an external file that cannot be used.
    #[error("tensor \"{name}\": external data \"{file}\": {msg}")]
    ExternalData {
        name: String,
        file: String,
        msg: String,
    },
    /// A node rlx cannot import: an op type, attribute value or dtype it does not map.
    #[error("node \"{node}\" ({op_type}, opset {opset}): unsupported: {what}")]
    Unsupported {
        node: String,
        op_type: String,
        opset: i64,
        what: String,
    },
    /// A node whose inputs or attributes are invalid for its op.
    #[error("node \"{node}\" ({op_type}, opset {opset}): {msg}")]
    Node {
        node: String,
        op_type: String,
        opset: i64,
        msg: String,
    },
    /// The graph as a whole is broken (an unknown value name, a missing output).
    #[error("graph: {0}")]
    Graph(String),
    /// A tensor or value type rlx does not represent (strings, sequences, maps …).
    #[error("{what}: unsupported type: {msg}")]
    UnsupportedType { what: String, msg: String },
    /// Compiling or running the imported graph failed.
    #[error("runtime: {0}")]
    Runtime(String),
}

impl OnnxError {
    /// True for errors that mean "rlx does not do this yet" rather than "this is broken".
    pub fn is_unsupported(&self) -> bool {
        matches!(
            self,
            OnnxError::Unsupported { .. } | OnnxError::UnsupportedType { .. }
        )
    }
}
