//! GGUF (llama.cpp's model file), versions 2 and 3, little-endian: header, typed metadata,
//! tensor table and memory-mapped tensor data.
//!
//! ```text
//! "GGUF" | u32 version | u64 tensor_count | u64 kv_count
//! kv_count × (string key, u32 type, value)
//! tensor_count × (string name, u32 n_dims, n_dims × u64 dim, u32 ggml type, u64 offset)
//! padding to `general.alignment` (u32, default 32) | data section
//! ```
//!
//! The whole file is validated when it is opened: every count, length and offset against
//! the bytes that are there, so a corrupt or hostile file is a [`GgufError`] naming the
//! byte offset, never a panic. A count is checked against the remaining bytes (at the
//! smallest encoding of its items) before anything is allocated for it, no preallocation is
//! larger than the bytes left, and what decoding builds in memory is a small multiple of
//! the bytes it decoded (tensor data is never copied). After a successful open,
//! [`Gguf::tensor_data`] is a plain slice of the mapping.
//!
//! Refused, with the reason: v1 files (32-bit counts; llama.cpp refuses them too),
//! big-endian files, an alignment that is not a u32 power of two, duplicate keys or tensor
//! names, more than 4 dims, counts that overflow, tensors outside the file or overlapping.
//! Accepted where llama.cpp is stricter: nested arrays (up to [`MAX_ARRAY_DEPTH`] levels),
//! string values that are not UTF-8 (kept as bytes), tensors placed in any aligned,
//! non-overlapping order, tensor names of 64 bytes or more (GGML_MAX_NAME), ggml type ids
//! this reader does not know (an error only when that tensor's size or data is asked for).
mod error;
mod ggml_type;
mod metadata;
mod reader;
mod tensor;
mod value;

pub use error::GgufError;
pub use ggml_type::{GgmlType, UnsupportedQuant};
pub use metadata::Metadata;
pub use tensor::{TensorInfo, MAX_DIMS};
pub use value::{Array, Strings, Value, ValueType, MAX_ARRAY_DEPTH};

use reader::Reader;
use rlx_ir::{ByteOwner, SharedBytes};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
/// The alignment of the data section and of every tensor when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
pub const ALIGNMENT_KEY: &str = "general.alignment";

/// An opened GGUF file.
pub struct Gguf {
    /// Shared so tensors can be handed out as [`SharedBytes`] that outlive this value.
    bytes: Arc<Storage>,
    version: u32,
    metadata: Metadata,
    tensors: Vec<TensorInfo>,
    index: HashMap<String, usize>,
    alignment: u64,
    data_start: u64,
}

enum Storage {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped(m) => m,
            Storage::Owned(v) => v,
        }
    }

    /// Map the pages of `range` now (a hint; errors are ignored): bytes shared with a
    /// compute kernel would otherwise fault in page by page during the first token.
    fn prefault(&self, range: std::ops::Range<usize>) {
        #[cfg(target_os = "linux")]
        if let Storage::Mapped(m) = self {
            // Linux < 5.14 has no MADV_POPULATE_READ: read-ahead at least.
            if m.advise_range(memmap2::Advice::PopulateRead, range.start, range.len())
                .is_err()
            {
                let _ = m.advise_range(memmap2::Advice::WillNeed, range.start, range.len());
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = range;
    }
}

impl AsRef<[u8]> for Storage {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
    }
}

impl std::fmt::Debug for Gguf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gguf")
            .field("version", &self.version)
            .field("metadata", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .field("alignment", &self.alignment)
            .field("data_start", &self.data_start)
            .finish()
    }
}

impl Gguf {
    /// Map `path` and validate it. Errors other than I/O come wrapped in
    /// [`GgufError::File`] naming the path ([`GgufError::root`] unwraps).
    pub fn open(path: impl AsRef<Path>) -> Result<Gguf, GgufError> {
        let path = path.as_ref();
        let io = |source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        // Mapping an empty file fails on some systems; it is a truncated header either way.
        let storage = if len == 0 {
            Storage::Owned(Vec::new())
        } else {
            // SAFETY: the mapping is read-only and private to this value. Another process
            // truncating or rewriting the file while it is mapped would change the bytes under
            // us (or fault): the same contract every mmap-based model loader has; a model file
            // is not expected to change while it is loaded.
            Storage::Mapped(unsafe { memmap2::Mmap::map(&file) }.map_err(io)?)
        };
        Gguf::parse(storage).map_err(|e| GgufError::File {
            path: path.to_path_buf(),
            source: Box::new(e),
        })
    }

    /// Parse a file held in memory (a copy is kept): the same validation as [`Gguf::open`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Gguf, GgufError> {
        Gguf::parse(Storage::Owned(bytes.to_vec()))
    }

    fn parse(storage: Storage) -> Result<Gguf, GgufError> {
        let bytes = storage.bytes();
        let file_len = bytes.len() as u64;
        let mut r = Reader::new(bytes);
        let version = read_header(&mut r)?;
        let tensors_at = r.pos();
        let tensor_count = r.u64("tensor count")?;
        let kvs_at = r.pos();
        let kv_count = r.u64("metadata key/value count")?;
        let metadata = Metadata::read(&mut r, kv_count, kvs_at)?;
        let alignment = alignment(&metadata)?;
        let (mut tensors, index) = tensor::read_table(&mut r, tensor_count, tensors_at)?;
        // The data section starts at the next multiple of the alignment; a file with no
        // tensor data may end before it (gguf-py writes no padding after an empty table).
        let data_start = r
            .pos()
            .checked_next_multiple_of(alignment)
            .unwrap_or(u64::MAX);
        tensor::place(&mut tensors, data_start, alignment, file_len)?;
        Ok(Gguf {
            bytes: Arc::new(storage),
            version,
            metadata,
            tensors,
            index,
            alignment,
            data_start,
        })
    }

    /// 2 or 3.
    pub fn version(&self) -> u32 {
        self.version
    }

    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Every tensor in table order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    pub fn tensor(&self, name: &str) -> Result<&TensorInfo, GgufError> {
        self.index
            .get(name)
            .map(|&i| &self.tensors[i])
            .ok_or_else(|| GgufError::MissingTensor {
                name: name.to_string(),
            })
    }

    /// The data section's alignment (`general.alignment` or 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// The file offset of the data section (tensor offsets are relative to it).
    pub fn data_start(&self) -> u64 {
        self.data_start
    }

    /// The file's size in bytes.
    pub fn file_len(&self) -> u64 {
        self.bytes.bytes().len() as u64
    }

    /// A tensor's bytes, as stored (packed blocks for quantized types).
    pub fn tensor_data(&self, t: &TensorInfo) -> Result<&[u8], GgufError> {
        let range = self.data_range(t)?;
        Ok(&self.bytes.bytes()[range])
    }

    /// Where `t`'s bytes lie in the storage. The range was checked against the file when it
    /// was read; checking again keeps a TensorInfo from another file from indexing out of
    /// bounds.
    fn data_range(&self, t: &TensorInfo) -> Result<std::ops::Range<usize>, GgufError> {
        let r = t.file_range()?;
        let range = r.start as usize..r.end as usize;
        match self.bytes.bytes().get(range.clone()) {
            Some(_) => Ok(range),
            None => Err(self.out_of_bounds(t, range)),
        }
    }

    fn out_of_bounds(&self, t: &TensorInfo, range: std::ops::Range<usize>) -> GgufError {
        GgufError::OutOfBounds {
            tensor: t.name().to_string(),
            start: range.start as u64,
            end: range.end as u64,
            file_len: self.file_len(),
        }
    }

    /// [`Gguf::tensor_data`] as bytes shared with the file's mapping: no copy, and they stay
    /// valid after this value is dropped (a CPU executor keeps packed weights this way). Their
    /// pages are mapped in now, as llama.cpp's loader does (`MAP_POPULATE`).
    pub fn tensor_data_shared(&self, t: &TensorInfo) -> Result<SharedBytes, GgufError> {
        let range = self.data_range(t)?;
        self.bytes.prefault(range.clone());
        let owner: ByteOwner = self.bytes.clone();
        // `data_range` checked the range against these very bytes.
        SharedBytes::new(owner, range.clone()).ok_or_else(|| self.out_of_bounds(t, range))
    }
}

/// Magic and version; returns the version.
fn read_header(r: &mut Reader<'_>) -> Result<u32, GgufError> {
    let magic = r.take(4, "magic")?;
    if magic != GGUF_MAGIC {
        let mut found = [0u8; 4];
        found.copy_from_slice(magic);
        return Err(GgufError::BadMagic { found });
    }
    let version = r.u32("version")?;
    match version {
        2 | 3 => Ok(version),
        1 => Err(GgufError::V1),
        // A big-endian v2/v3 reads as 0x0?000000 here: the low half is zero (llama.cpp's test).
        raw if raw & 0xFFFF == 0 && raw != 0 => Err(GgufError::BigEndian { raw }),
        version => Err(GgufError::UnsupportedVersion { version }),
    }
}

fn alignment(m: &Metadata) -> Result<u64, GgufError> {
    match m.get(ALIGNMENT_KEY) {
        None => Ok(DEFAULT_ALIGNMENT),
        Some(Value::U32(a)) if a.is_power_of_two() => Ok(u64::from(*a)),
        Some(v) => Err(GgufError::BadAlignment {
            value: format!("{} ({})", v.summary(4), v.type_name()),
        }),
    }
}
