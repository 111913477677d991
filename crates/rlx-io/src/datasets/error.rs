//! Dataset errors: every one names the file (or the embedded source) it is about.
use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum DatasetError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A malformed IDX file. For gzip files `offset` counts decompressed bytes.
    #[error("{path}: malformed IDX at byte {offset}: {msg}")]
    Idx {
        path: PathBuf,
        offset: u64,
        msg: String,
    },
    /// The gzip stream itself is broken (bad header, bad CRC, cut off mid-block).
    #[error("{path}: gzip stream broken after {offset} decompressed bytes: {source}")]
    Gzip {
        path: PathBuf,
        offset: u64,
        #[source]
        source: std::io::Error,
    },
    #[error("{images} holds {n_images} images but {labels} holds {n_labels} labels")]
    CountMismatch {
        images: PathBuf,
        n_images: usize,
        labels: PathBuf,
        n_labels: usize,
    },
    #[error("{dir}: found neither {name} nor {name}.gz")]
    NotFound { dir: PathBuf, name: String },
    #[error("{source_name} line {line}: {msg}")]
    Csv {
        source_name: String,
        line: usize,
        msg: String,
    },
    #[error("{0}")]
    BadArgument(String),
}

pub type Result<T, E = DatasetError> = std::result::Result<T, E>;
