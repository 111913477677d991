//! safetensors model weights (Hugging Face's format), memory-mapped: one file, or a folder
//! whose `model.safetensors.index.json` spreads the tensors over shards. The header is parsed
//! by the `safetensors` crate (which checks that offsets are in bounds, ordered and cover the
//! data exactly); tensor bytes are borrowed from the mapping, never copied until a caller
//! converts them. Lookups check the name, shape and dtype a model expects and say which file
//! broke the expectation.
mod error;

pub use error::SafetensorsError;

use memmap2::Mmap;
use rlx_ir::{DType, HostTensor};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A shard's bytes: a file's mapping, or a buffer handed in (`from_bytes`).
enum Bytes {
    Map(Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Map(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// One mapped file and where its data section starts.
struct Shard {
    path: PathBuf,
    map: Bytes,
    data_start: usize,
}

/// Where one tensor lives.
#[derive(Clone, Debug)]
struct Entry {
    shard: usize,
    dtype: safetensors::Dtype,
    shape: Vec<usize>,
    /// The dtype as the file spells it.
    dtype_name: String,
    /// Byte range in the shard's data section.
    range: (usize, usize),
}

/// A view of one tensor's bytes in the mapping.
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a> {
    pub name: &'a str,
    /// The dtype as rlx spells it; `None` for a safetensors dtype rlx has no type for.
    pub dtype: Option<DType>,
    /// The dtype as the file spells it (`F32`, `BF16`, `F8_E4M3`, …).
    pub file_dtype: &'a str,
    pub shape: &'a [usize],
    /// Little-endian row-major element bytes.
    pub data: &'a [u8],
    /// The file that holds it.
    pub path: &'a Path,
}

/// The tensors of a safetensors file or sharded folder.
pub struct SafeTensors {
    shards: Vec<Shard>,
    tensors: BTreeMap<String, Entry>,
    /// How errors name this set of files (a file, or a folder's index).
    desc: String,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SafetensorsError + '_ {
    move |source| SafetensorsError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn rlx_dtype(d: safetensors::Dtype) -> Option<DType> {
    use safetensors::Dtype as S;
    Some(match d {
        S::F32 => DType::F32,
        S::F16 => DType::F16,
        S::BF16 => DType::BF16,
        S::F64 => DType::F64,
        S::I32 => DType::I32,
        S::I64 => DType::I64,
        S::U8 => DType::U8,
        S::BOOL => DType::Bool,
        _ => return None,
    })
}

impl SafeTensors {
    /// A `.safetensors` file, a `model.safetensors.index.json`, or a folder holding either
    /// (the index wins when both are there, as transformers does).
    pub fn open(path: impl AsRef<Path>) -> Result<SafeTensors, SafetensorsError> {
        let path = path.as_ref();
        if path.is_dir() {
            let index = path.join("model.safetensors.index.json");
            let single = path.join("model.safetensors");
            return if index.is_file() {
                Self::open_index(&index)
            } else if single.is_file() {
                Self::open_file(&single)
            } else {
                Err(SafetensorsError::NoWeights {
                    dir: path.to_path_buf(),
                })
            };
        }
        if path.extension().is_some_and(|e| e == "json") {
            return Self::open_index(path);
        }
        Self::open_file(path)
    }

    /// One `.safetensors` file.
    pub fn open_file(path: impl AsRef<Path>) -> Result<SafeTensors, SafetensorsError> {
        let path = path.as_ref();
        let mut st = SafeTensors {
            shards: Vec::new(),
            tensors: BTreeMap::new(),
            desc: path.display().to_string(),
        };
        st.add_shard(path)?;
        Ok(st)
    }

    /// A sharded checkpoint: the index's `weight_map` (tensor → shard file beside it). Every
    /// shard it names is mapped; each mapped tensor must be in the shard the index says.
    pub fn open_index(index: impl AsRef<Path>) -> Result<SafeTensors, SafetensorsError> {
        let index = index.as_ref();
        let bad = |reason: String| SafetensorsError::Index {
            path: index.to_path_buf(),
            reason,
        };
        let text = std::fs::read_to_string(index).map_err(io(index))?;
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let map = json
            .get("weight_map")
            .and_then(|m| m.as_object())
            .ok_or_else(|| bad("no \"weight_map\" object".into()))?;
        let dir = index.parent().unwrap_or(Path::new("."));
        let mut files: Vec<String> = Vec::new();
        let mut want: Vec<(String, String)> = Vec::with_capacity(map.len());
        for (name, file) in map {
            let file = file
                .as_str()
                .ok_or_else(|| bad(format!("weight_map[\"{name}\"] is not a file name")))?;
            // A shard is a file beside the index: no paths out of the folder.
            if file.contains('/') || file.contains('\\') || file.starts_with("..") {
                return Err(bad(format!(
                    "shard name \"{file}\" is not a plain file name"
                )));
            }
            if !files.iter().any(|f| f == file) {
                files.push(file.to_string());
            }
            want.push((name.clone(), file.to_string()));
        }
        let mut st = SafeTensors {
            shards: Vec::new(),
            tensors: BTreeMap::new(),
            desc: index.display().to_string(),
        };
        for f in &files {
            st.add_shard(&dir.join(f))?;
        }
        for (name, file) in want {
            let shard = dir.join(&file);
            let ok = st
                .tensors
                .get(&name)
                .is_some_and(|e| st.shards[e.shard].path == shard);
            if !ok {
                return Err(SafetensorsError::ShardMismatch {
                    index: index.to_path_buf(),
                    shard,
                    name,
                });
            }
        }
        Ok(st)
    }

    /// A safetensors file held in memory (`name` stands for its path in errors).
    pub fn from_bytes(name: &str, bytes: Vec<u8>) -> Result<SafeTensors, SafetensorsError> {
        let mut st = SafeTensors {
            shards: Vec::new(),
            tensors: BTreeMap::new(),
            desc: name.to_string(),
        };
        st.add_bytes(Path::new(name), Bytes::Owned(bytes))?;
        Ok(st)
    }

    fn add_shard(&mut self, path: &Path) -> Result<(), SafetensorsError> {
        let file = std::fs::File::open(path).map_err(io(path))?;
        // SAFETY: the mapping is read-only; a file changed underneath us while mapped is
        // outside what any reader of mapped weights can guard against (as with GGUF).
        let map = unsafe { Mmap::map(&file) }.map_err(io(path))?;
        self.add_bytes(path, Bytes::Map(map))
    }

    fn add_bytes(&mut self, path: &Path, map: Bytes) -> Result<(), SafetensorsError> {
        let (n, meta) = safetensors::SafeTensors::read_metadata(&map).map_err(|e| {
            SafetensorsError::Header {
                path: path.to_path_buf(),
                reason: e.to_string(),
            }
        })?;
        let shard = self.shards.len();
        for (name, info) in meta.tensors() {
            if let Some(prev) = self.tensors.get(&name) {
                return Err(SafetensorsError::Duplicate {
                    name,
                    first: self.shards[prev.shard].path.clone(),
                    second: path.to_path_buf(),
                });
            }
            self.tensors.insert(
                name,
                Entry {
                    shard,
                    dtype: info.dtype,
                    dtype_name: format!("{:?}", info.dtype),
                    shape: info.shape.clone(),
                    range: info.data_offsets,
                },
            );
        }
        self.shards.push(Shard {
            path: path.to_path_buf(),
            map,
            data_start: 8 + n,
        });
        Ok(())
    }

    /// Tensor names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// The files mapped (one per shard).
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.shards.iter().map(|s| s.path.as_path())
    }

    /// Tensor `name`, or an error naming it and the files searched.
    pub fn get(&self, name: &str) -> Result<TensorRef<'_>, SafetensorsError> {
        let (key, e) =
            self.tensors
                .get_key_value(name)
                .ok_or_else(|| SafetensorsError::Missing {
                    name: name.to_string(),
                    source_desc: self.desc.clone(),
                })?;
        let s = &self.shards[e.shard];
        // `read_metadata` checked that the ranges tile the data section exactly.
        let data = &s.map[s.data_start + e.range.0..s.data_start + e.range.1];
        Ok(TensorRef {
            name: key,
            dtype: rlx_dtype(e.dtype),
            file_dtype: &e.dtype_name,
            shape: &e.shape,
            data,
            path: &s.path,
        })
    }

    /// Tensor `name`, which must have `shape` and be F32, F16 or BF16.
    pub fn float(&self, name: &str, shape: &[usize]) -> Result<TensorRef<'_>, SafetensorsError> {
        let t = self.get(name)?;
        if t.shape != shape {
            return Err(SafetensorsError::Shape {
                name: name.to_string(),
                path: t.path.to_path_buf(),
                expected: shape.to_vec(),
                got: t.shape.to_vec(),
            });
        }
        match t.dtype {
            Some(DType::F32 | DType::F16 | DType::BF16) => Ok(t),
            _ => Err(SafetensorsError::Dtype {
                name: name.to_string(),
                path: t.path.to_path_buf(),
                got: t.file_dtype.to_string(),
                expected: "F32, F16, BF16",
            }),
        }
    }
}

impl TensorRef<'_> {
    /// The tensor as a host tensor of its own dtype (one copy of its bytes).
    pub fn to_host(&self) -> Result<HostTensor, SafetensorsError> {
        let dtype = self.dtype.ok_or_else(|| SafetensorsError::Dtype {
            name: self.name.to_string(),
            path: self.path.to_path_buf(),
            got: self.file_dtype.to_string(),
            expected: "a dtype rlx has (F32, F16, BF16, F64, I32, I64, U8, BOOL)",
        })?;
        HostTensor::new(self.shape, dtype, self.data.to_vec()).map_err(|e| {
            SafetensorsError::Header {
                path: self.path.to_path_buf(),
                reason: format!("tensor \"{}\": {e}", self.name),
            }
        })
    }

    /// Element count.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

#[cfg(test)]
mod tests;
