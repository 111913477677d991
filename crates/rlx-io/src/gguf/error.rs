//! GGUF errors. A malformed file's error names the byte offset (from the start of the file)
//! where the reader found the problem, and the key or tensor it was reading when there is one,
//! so a corrupt download can be told from a reader bug.
use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum GgufError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Any other error while reading the file at `path`.
    #[error("{path}: {source}")]
    File {
        path: PathBuf,
        #[source]
        source: Box<GgufError>,
    },
    #[error("not a GGUF file: the first 4 bytes are {found:02x?}, expected \"GGUF\"")]
    BadMagic { found: [u8; 4] },
    #[error("GGUF version 1 is not supported (only v2 and v3): re-convert the model with a current llama.cpp")]
    V1,
    #[error(
        "big-endian GGUF (the version field reads {raw:#010x} little-endian) is not supported"
    )]
    BigEndian { raw: u32 },
    #[error("GGUF version {version} is not supported (only v2 and v3)")]
    UnsupportedVersion { version: u32 },
    /// `need` bytes were wanted at `offset` but only `have` were left in the file.
    #[error("truncated at byte {offset}: {what} needs {need} bytes, {have} left")]
    Truncated {
        offset: u64,
        need: u64,
        have: u64,
        what: &'static str,
    },
    /// A count that cannot fit in what is left of the file even at the smallest encoding of
    /// each element; refused before anything is allocated for it.
    #[error("{what} at byte {offset} is {count}, but the {have} bytes left hold at most {max}")]
    TooLarge {
        offset: u64,
        what: &'static str,
        count: u64,
        have: u64,
        max: u64,
    },
    /// A key or tensor name that is not UTF-8 (string *values* may hold any bytes).
    #[error("{what} at byte {offset} is not valid UTF-8")]
    BadString { offset: u64, what: &'static str },
    #[error("metadata value type {id} at byte {offset} is not a GGUF type (0..=12)")]
    BadValueType { offset: u64, id: u32 },
    #[error("bool at byte {offset} is {value}, not 0 or 1")]
    BadBool { offset: u64, value: u8 },
    #[error("array at byte {offset} nests deeper than {max} levels")]
    TooDeep { offset: u64, max: usize },
    #[error("duplicate metadata key \"{key}\" at byte {offset}")]
    DuplicateKey { offset: u64, key: String },
    #[error("duplicate tensor name \"{name}\" at byte {offset}")]
    DuplicateTensor { offset: u64, name: String },
    #[error("tensor \"{tensor}\" at byte {offset} has {n_dims} dims; GGML allows at most 4")]
    TooManyDims {
        offset: u64,
        tensor: String,
        n_dims: u32,
    },
    /// The element count or byte size of a tensor does not fit in an i64 (what ggml uses).
    #[error(
        "tensor \"{tensor}\" at byte {offset}: dims {dims:?} overflow the element or byte count"
    )]
    DimsOverflow {
        offset: u64,
        tensor: String,
        dims: Vec<u64>,
    },
    #[error("tensor \"{tensor}\" at byte {offset}: rows of {row} elements are not a multiple of {ty}'s block of {block}")]
    PartialBlock {
        offset: u64,
        tensor: String,
        ty: &'static str,
        row: u64,
        block: u64,
    },
    #[error("general.alignment is {value}; it must be a u32 power of two")]
    BadAlignment { value: String },
    #[error(
        "tensor \"{tensor}\": data offset {offset} is not a multiple of the alignment {alignment}"
    )]
    Misaligned {
        tensor: String,
        offset: u64,
        alignment: u64,
    },
    /// The tensor's bytes `[start, end)` (file offsets) run past the end of the file.
    #[error("tensor \"{tensor}\": bytes {start}..{end} lie outside the {file_len}-byte file")]
    OutOfBounds {
        tensor: String,
        start: u64,
        end: u64,
        file_len: u64,
    },
    /// Two tensors share bytes; `offset` is the file offset where `second` starts.
    #[error("tensors \"{first}\" and \"{second}\" overlap at byte {offset}")]
    Overlap {
        first: String,
        second: String,
        offset: u64,
    },
    /// The tensor's ggml type id is not one this reader knows, so its size is unknown.
    #[error("tensor \"{tensor}\" has ggml type id {id}, which this reader does not know")]
    UnknownType { tensor: String, id: u32 },
    #[error("no tensor named \"{name}\"")]
    MissingTensor { name: String },
    #[error("metadata key \"{key}\" is missing")]
    MissingKey { key: String },
    #[error("metadata key \"{key}\" is {found}, expected {expected}")]
    WrongType {
        key: String,
        expected: &'static str,
        found: String,
    },
    /// A string value asked for as text holds bytes that are not UTF-8 (`index` for arrays).
    #[error("metadata key \"{key}\"{} is not valid UTF-8", index.map(|i| format!(" item {i}")).unwrap_or_default())]
    NotUtf8 { key: String, index: Option<usize> },
}

impl GgufError {
    /// The error inside any [`GgufError::File`] wrapper: what went wrong, without the path.
    pub fn root(&self) -> &GgufError {
        match self {
            GgufError::File { source, .. } => source.root(),
            e => e,
        }
    }
}
