//! safetensors errors: each names the file, and the tensor where there is one, so a truncated
//! download, a folder of the wrong model and a dtype the caller can't take are told apart.
use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum SafetensorsError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The header is not a valid safetensors header (bad length, JSON, offsets that overlap
    /// or leave the file).
    #[error("{path}: not a valid safetensors file: {reason}")]
    Header { path: PathBuf, reason: String },
    /// `model.safetensors.index.json` is not valid JSON of the expected form.
    #[error("{path}: not a valid safetensors index: {reason}")]
    Index { path: PathBuf, reason: String },
    /// The index names a shard that does not hold the tensor it maps there.
    #[error("{index}: maps tensor \"{name}\" to {shard}, which does not hold it")]
    ShardMismatch {
        index: PathBuf,
        shard: PathBuf,
        name: String,
    },
    /// Two shards hold the same tensor.
    #[error("tensor \"{name}\" is in both {first} and {second}")]
    Duplicate {
        name: String,
        first: PathBuf,
        second: PathBuf,
    },
    #[error("{dir}: no model.safetensors or model.safetensors.index.json")]
    NoWeights { dir: PathBuf },
    #[error("tensor \"{name}\" is not in {source_desc}")]
    Missing { name: String, source_desc: String },
    #[error("tensor \"{name}\" in {path} has shape {got:?}, expected {expected:?}")]
    Shape {
        name: String,
        path: PathBuf,
        expected: Vec<usize>,
        got: Vec<usize>,
    },
    #[error("tensor \"{name}\" in {path} is {got}; expected one of {expected}")]
    Dtype {
        name: String,
        path: PathBuf,
        got: String,
        expected: &'static str,
    },
}
