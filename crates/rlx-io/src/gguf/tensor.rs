//! The tensor table: one entry per tensor (name, dims, ggml type, data offset), decoded with
//! every size checked, then laid against the data section: each sized tensor's bytes must be
//! aligned, inside the file and disjoint from every other tensor's.
//!
//! llama.cpp is stricter on placement: it wants the tensors packed in table order, each at
//! the previous one's padded end. We accept any aligned, non-overlapping placement (what the
//! spec allows), so a file llama.cpp loads always loads here.
use super::ggml_type::GgmlType;
use super::reader::Reader;
use super::GgufError;
use std::collections::HashMap;

/// GGML_MAX_DIMS.
pub const MAX_DIMS: u32 = 4;

/// One tensor's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    name: String,
    dims: Vec<u64>,
    type_id: u32,
    offset: u64,
    n_elements: u64,
    /// None when the type id is unknown.
    n_bytes: Option<u64>,
    /// Where the data section starts in the file (so a range is absolute).
    data_start: u64,
}

impl TensorInfo {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The dims as ggml stores them: innermost (contiguous) first, `ne[0]` is a row.
    pub fn ggml_dims(&self) -> &[u64] {
        &self.dims
    }

    /// The dims row-major, outermost first: the shape a `[rows, cols]` weight has in
    /// PyTorch or the rlx IR. Every dim fits a usize (checked when the file was read).
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().map(|&d| d as usize).collect()
    }

    pub fn n_elements(&self) -> u64 {
        self.n_elements
    }

    /// The raw type id as stored.
    pub fn type_id(&self) -> u32 {
        self.type_id
    }

    /// The ggml type, or [`GgufError::UnknownType`] for an id this reader does not know.
    pub fn ggml_type(&self) -> Result<GgmlType, GgufError> {
        GgmlType::from_id(self.type_id).ok_or_else(|| self.unknown())
    }

    /// The offset of its data from the start of the data section, as stored.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The size of its data in bytes.
    pub fn n_bytes(&self) -> Result<u64, GgufError> {
        self.n_bytes.ok_or_else(|| self.unknown())
    }

    /// Its data's byte range in the file (checked in bounds when the file was read).
    pub fn file_range(&self) -> Result<std::ops::Range<u64>, GgufError> {
        let start = self.data_start + self.offset;
        Ok(start..start + self.n_bytes()?)
    }

    fn unknown(&self) -> GgufError {
        GgufError::UnknownType {
            tensor: self.name.clone(),
            id: self.type_id,
        }
    }
}

/// The smallest entry: empty name (8), n_dims (4), type (4), offset (8).
const MIN_ENTRY_SIZE: u64 = 24;

/// Decode `count` entries; `data_start` is filled in by [`place`].
pub(crate) fn read_table(
    r: &mut Reader<'_>,
    count: u64,
    count_at: u64,
) -> Result<(Vec<TensorInfo>, HashMap<String, usize>), GgufError> {
    let n = r.check_count(count, MIN_ENTRY_SIZE, count_at, "tensor count")?;
    let mut tensors = Vec::with_capacity(r.capacity::<TensorInfo>(n));
    let mut index = HashMap::with_capacity(r.capacity::<(String, usize)>(n));
    for i in 0..n {
        let at = r.pos();
        let name = r.name("tensor name")?;
        if index.contains_key(&name) {
            return Err(GgufError::DuplicateTensor { offset: at, name });
        }
        let dims_at = r.pos();
        let n_dims = r.u32("tensor n_dims")?;
        if n_dims > MAX_DIMS {
            return Err(GgufError::TooManyDims {
                offset: dims_at,
                tensor: name,
                n_dims,
            });
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            dims.push(r.u64("tensor dim")?);
        }
        let overflow = |name: String, dims: Vec<u64>| GgufError::DimsOverflow {
            offset: dims_at,
            tensor: name,
            dims,
        };
        // ggml holds dims and counts in i64, we hand them out as usize: both must hold.
        let limit = (i64::MAX as u64).min(usize::MAX as u64);
        let n_elements = dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
            .filter(|&e| e <= limit && dims.iter().all(|&d| d <= limit));
        let Some(n_elements) = n_elements else {
            return Err(overflow(name, dims));
        };
        let type_id = r.u32("tensor type")?;
        let n_bytes = match GgmlType::from_id(type_id) {
            None => None,
            Some(ty) => {
                let row = dims.first().copied().unwrap_or(1);
                if !row.is_multiple_of(ty.block_size()) {
                    return Err(GgufError::PartialBlock {
                        offset: dims_at,
                        tensor: name,
                        ty: ty.name(),
                        row,
                        block: ty.block_size(),
                    });
                }
                match ty.bytes_for(n_elements).filter(|&b| b <= limit) {
                    Some(b) => Some(b),
                    None => return Err(overflow(name, dims)),
                }
            }
        };
        let offset = r.u64("tensor data offset")?;
        index.insert(name.clone(), i);
        tensors.push(TensorInfo {
            name,
            dims,
            type_id,
            offset,
            n_elements,
            n_bytes,
            data_start: 0,
        });
    }
    Ok((tensors, index))
}

/// Fix every tensor's data section start and check the placement: aligned offsets, ranges
/// inside the file, no two sized tensors sharing a byte. A tensor of unknown type has no
/// known size, so only its offset is checked (aligned, not past the end of the file).
pub(crate) fn place(
    tensors: &mut [TensorInfo],
    data_start: u64,
    alignment: u64,
    file_len: u64,
) -> Result<(), GgufError> {
    let mut spans: Vec<(u64, u64, usize)> = Vec::with_capacity(tensors.len());
    for (i, t) in tensors.iter_mut().enumerate() {
        t.data_start = data_start;
        if !t.offset.is_multiple_of(alignment) {
            return Err(GgufError::Misaligned {
                tensor: t.name.clone(),
                offset: t.offset,
                alignment,
            });
        }
        let size = t.n_bytes.unwrap_or(0);
        let start = data_start.checked_add(t.offset);
        let end = start.and_then(|s| s.checked_add(size));
        match (start, end) {
            (Some(s), Some(e)) if e <= file_len => {
                if size > 0 {
                    spans.push((s, e, i));
                }
            }
            _ => {
                return Err(GgufError::OutOfBounds {
                    tensor: t.name.clone(),
                    start: start.unwrap_or(u64::MAX),
                    end: end.unwrap_or(u64::MAX),
                    file_len,
                })
            }
        }
    }
    spans.sort_unstable();
    for w in spans.windows(2) {
        let ((_, end_a, a), (start_b, _, b)) = (w[0], w[1]);
        if start_b < end_a {
            return Err(GgufError::Overlap {
                first: tensors[a].name.clone(),
                second: tensors[b].name.clone(),
                offset: start_b,
            });
        }
    }
    Ok(())
}
