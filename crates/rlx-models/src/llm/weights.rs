//! The decoder's params and how each is filled: tensors read from the model file's mapping
//! (packed types as U8 `[N, row_bytes]`, never unpacked; F32/F16/BF16 in their own dtype,
//! matrices transposed once to `[K, N]`), RoPE tables computed, KV caches zeroed. Every
//! tensor's shape is checked against what the config implies.
//!
//! The file is a [`TensorStore`]: a GGUF, or a Hugging Face folder whose tensors are known
//! by their GGUF names (`crate::hf::decoder` maps them).
use super::config::WeightFormat;
use crate::ModelError;
use rlx_io::gguf::Gguf;
use rlx_ir::{DType, HostTensor, QuantScheme, Shape, SharedBytes};
use std::borrow::Cow;

/// One stored tensor: row-major shape (outermost first, so a linear layer's weight is
/// `[n_out, n_in]`), storage format and bytes.
pub struct StoredTensor<'a> {
    pub shape: Vec<usize>,
    pub format: WeightFormat,
    pub data: Cow<'a, [u8]>,
}

/// Where a decoder's tensors come from, by their GGUF names.
pub trait TensorStore {
    /// The architecture name, for errors.
    fn arch(&self) -> String;
    /// Tensor `name`, `Ok(None)` when the store has no such tensor.
    fn tensor(&self, name: &str) -> Result<Option<StoredTensor<'_>>, ModelError>;
    /// Tensor `name`'s bytes as they are stored, shared with the store without a copy
    /// (`Ok(None)` where the store cannot share them: it then serves [`TensorStore::tensor`]).
    fn shared(&self, _name: &str) -> Result<Option<SharedBytes>, ModelError> {
        Ok(None)
    }
}

impl TensorStore for Gguf {
    fn arch(&self) -> String {
        (self.metadata().get_str("general.architecture"))
            .unwrap_or("?")
            .to_string()
    }

    fn tensor(&self, name: &str) -> Result<Option<StoredTensor<'_>>, ModelError> {
        let Ok(info) = Gguf::tensor(self, name) else {
            return Ok(None);
        };
        let ty = info.ggml_type()?;
        let format = WeightFormat::of(ty).ok_or_else(|| ModelError::UnsupportedTensorType {
            name: name.to_string(),
            ty: ty.name().to_string(),
        })?;
        Ok(Some(StoredTensor {
            shape: info.shape(),
            format,
            data: Cow::Borrowed(self.tensor_data(info)?),
        }))
    }

    fn shared(&self, name: &str) -> Result<Option<SharedBytes>, ModelError> {
        let Ok(info) = Gguf::tensor(self, name) else {
            return Ok(None);
        };
        Ok(Some(self.tensor_data_shared(info)?))
    }
}

/// Where a param's values come from.
#[derive(Clone, Debug, PartialEq)]
pub enum ParamSource {
    /// GGUF tensor `name`, whose row-major shape must be `expected`; `transpose` stores a
    /// 2-D plain tensor as `[cols, rows]`.
    Tensor {
        name: String,
        expected: Vec<usize>,
        transpose: bool,
    },
    /// `cos` (or `sin`) of `p · freq_scale · base^(-2i / n_rot)`, `[ctx, n_rot/2]`.
    Rope {
        base: f32,
        freq_scale: f32,
        n_rot: usize,
        sin: bool,
    },
    /// Zeros (a KV cache before its first write).
    Zeros,
    /// Several GGUF tensors of one type stacked along their first dim (rows), e.g. q/k/v
    /// as one `[Nq+Nk+Nv, K]` weight so a layer runs one product instead of three; each
    /// part `(name, expected shape)`, then transposed like `Tensor` when asked.
    Rows {
        parts: Vec<(String, Vec<usize>)>,
        transpose: bool,
        /// Packed parts of another scheme are rewritten as this one, losslessly (see
        /// [`widen_to_q8_0`]); `None`: every part must already be the param's type.
        to: Option<QuantScheme>,
    },
}

impl ParamSource {
    pub(crate) fn tensor(name: &str, expected: &[usize], transpose: bool) -> ParamSource {
        ParamSource::Tensor {
            name: name.to_string(),
            expected: expected.to_vec(),
            transpose,
        }
    }
}

/// One param of the graph: its name, its shape in the graph and where it comes from.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamDecl {
    pub name: String,
    pub shape: Shape,
    pub source: ParamSource,
}

/// Every param's value in `decls` order, each handed to `set` as soon as it is read, so a
/// load holds one tensor beside what `set` keeps rather than a second copy of the model.
pub fn load_each(
    gguf: &(impl TensorStore + ?Sized),
    decls: &[ParamDecl],
    mut set: impl FnMut(&str, HostTensor) -> Result<(), ModelError>,
) -> Result<(), ModelError> {
    decls.iter().try_for_each(|d| set(&d.name, value(gguf, d)?))
}

/// A param's value as [`load_each_shared`] hands it over.
#[derive(Debug)]
pub enum ParamValue {
    /// Bytes made for the param (computed, transposed, stacked or copied).
    Host(HostTensor),
    /// A U8 param whose bytes are a stored tensor's as they are, shared with the store.
    Shared {
        shape: Vec<usize>,
        bytes: SharedBytes,
    },
}

/// [`load_each`], handing packed weights that need no rearranging over as the store's own
/// bytes ([`TensorStore::shared`]): a mapped GGUF's tensors reach the executor without a copy.
pub fn load_each_shared(
    store: &(impl TensorStore + ?Sized),
    decls: &[ParamDecl],
    mut set: impl FnMut(&str, ParamValue) -> Result<(), ModelError>,
) -> Result<(), ModelError> {
    decls.iter().try_for_each(|d| {
        if let ParamSource::Tensor {
            name,
            expected,
            transpose: false,
        } = &d.source
        {
            if d.shape.dtype == DType::U8 {
                if let Some(bytes) = store.shared(name)? {
                    checked(store, d, name, expected)?;
                    let shape = dims(d)?;
                    return set(&d.name, ParamValue::Shared { shape, bytes });
                }
            }
        }
        set(&d.name, ParamValue::Host(value(store, d)?))
    })
}

/// Every param's value, in `decls` order.
pub fn load(
    gguf: &(impl TensorStore + ?Sized),
    decls: &[ParamDecl],
) -> Result<Vec<(String, HostTensor)>, ModelError> {
    let mut all = Vec::with_capacity(decls.len());
    load_each(gguf, decls, |name, value| {
        all.push((name.to_string(), value));
        Ok(())
    })?;
    Ok(all)
}

fn dims(d: &ParamDecl) -> Result<Vec<usize>, ModelError> {
    d.shape
        .static_dims()
        .ok_or_else(|| ModelError::Config(format!("param {} has a symbolic shape", d.name)))
}

fn value(gguf: &(impl TensorStore + ?Sized), d: &ParamDecl) -> Result<HostTensor, ModelError> {
    let shape = dims(d)?;
    match &d.source {
        ParamSource::Zeros => {
            let bytes = d.shape.byte_size().unwrap_or(0);
            Ok(HostTensor::new(&shape, d.shape.dtype, vec![0; bytes])?)
        }
        ParamSource::Rope {
            base,
            freq_scale,
            n_rot,
            sin,
        } => Ok(rope_table(shape[0], *n_rot, *base, *freq_scale, *sin)),
        ParamSource::Tensor {
            name,
            expected,
            transpose,
        } => tensor(gguf, d, name, expected, *transpose),
        ParamSource::Rows {
            parts,
            transpose,
            to,
        } => rows(gguf, d, parts, *transpose, *to),
    }
}

/// The parts' bytes one after another (row-major `[ΣN, K]`), transposed to `[K, ΣN]` when
/// asked; every part is checked like a single tensor.
fn rows(
    gguf: &(impl TensorStore + ?Sized),
    d: &ParamDecl,
    parts: &[(String, Vec<usize>)],
    transpose: bool,
    to: Option<QuantScheme>,
) -> Result<HostTensor, ModelError> {
    let mut data = Vec::new();
    let mut n = 0;
    for (name, expected) in parts {
        let one = ParamDecl {
            name: name.clone(),
            shape: rlx_ir::Shape::new(expected, d.shape.dtype),
            source: d.source.clone(),
        };
        // Untransposed, packed or plain: the part's own bytes.
        let t = if d.shape.dtype == DType::U8 {
            let mut rb = dims(d)?.last().copied().unwrap_or(0);
            // A part stored as another scheme: read with its own row size, then widened.
            let own = match gguf.tensor(name)?.map(|t| t.format) {
                Some(WeightFormat::Packed(s)) if to.is_some_and(|t| t != s) => Some(s),
                _ => None,
            };
            if let (Some(s), Some(&k)) = (own, expected.last()) {
                rb = k / s.block_len() * s.block_bytes();
            }
            let mut p = one.clone();
            p.shape = rlx_ir::Shape::new(&[expected[0], rb], DType::U8);
            let mut t = tensor(gguf, &p, name, expected, false)?;
            if let Some(s) = own {
                t.data = widen_to_q8_0(s, &t.data).ok_or_else(|| {
                    ModelError::Config(format!(
                        "tensor {name}: {s:?} rows cannot be stored as {to:?} beside the \
                         other parts of {}",
                        d.name
                    ))
                })?;
            }
            t
        } else {
            tensor(gguf, &one, name, expected, false)?
        };
        data.extend_from_slice(&t.data);
        n += expected[0];
    }
    let shape = dims(d)?;
    let es = d.shape.dtype.size_bytes();
    if transpose {
        let k = shape[0];
        data = transpose_bytes(&data, n, k, es);
    }
    Ok(HostTensor::new(&shape, d.shape.dtype, data)?)
}

/// Q4_0 / Q5_0 blocks rewritten as Q8_0 blocks of exactly the same values: the same f16
/// scale d, each quant as the i8 `q − 8` / `q − 16` (within −16..15). A layer whose q/k/v
/// mix these types (llama.cpp's Q4_K_M gives 896-wide q/k Q5_0 and v Q8_0) then runs them as
/// one product: the widened parts read more bytes, the layer one launch less. `None` for a
/// scheme that is not exactly a Q8_0 (a min term, or 256-value super-blocks).
pub fn widen_to_q8_0(s: QuantScheme, bytes: &[u8]) -> Option<Vec<u8>> {
    let (bb, qh_at, qs_at, bias) = match s {
        QuantScheme::Q8_0 => return Some(bytes.to_vec()),
        QuantScheme::Q4_0 => (18, None, 2, 8),
        QuantScheme::Q5_0 => (22, Some(2), 6, 16),
        _ => return None,
    };
    if !bytes.len().is_multiple_of(bb) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / bb * 34);
    for b in bytes.chunks_exact(bb) {
        out.extend_from_slice(&b[..2]);
        let qh = qh_at.map_or(0, |o| {
            u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
        });
        for e in 0..32 {
            let byte = b[qs_at + e % 16];
            let nib = if e < 16 { byte & 15 } else { byte >> 4 };
            let q = nib as i32 | (((qh >> e) & 1) << 4) as i32;
            out.push((q - bias) as i8 as u8);
        }
    }
    Some(out)
}

/// RoPE table `[ctx, n_rot/2]`; angles in f64 so late positions keep their precision.
pub fn rope_table(ctx: usize, n_rot: usize, base: f32, freq_scale: f32, sin: bool) -> HostTensor {
    let half = n_rot / 2;
    let mut v = Vec::with_capacity(ctx * half);
    for p in 0..ctx {
        for i in 0..half {
            let inv = (base as f64).powf(-2.0 * i as f64 / n_rot as f64);
            let a = p as f64 * freq_scale as f64 * inv;
            v.push(if sin { a.sin() } else { a.cos() } as f32);
        }
    }
    HostTensor::from_f32(&[ctx, half], &v)
}

/// Tensor `name` of the store, checked against the shape `expected` and the param's dtype;
/// returns it with the dtype its bytes are stored as in the graph.
fn checked<'a>(
    gguf: &'a (impl TensorStore + ?Sized),
    d: &ParamDecl,
    name: &str,
    expected: &[usize],
) -> Result<(StoredTensor<'a>, DType), ModelError> {
    let info = gguf
        .tensor(name)?
        .ok_or_else(|| ModelError::MissingTensor {
            name: name.to_string(),
            arch: gguf.arch(),
        })?;
    if info.shape != expected {
        return Err(ModelError::TensorShape {
            name: name.to_string(),
            expected: expected.to_vec(),
            got: info.shape,
        });
    }
    let format = info.format;
    let want = match format {
        WeightFormat::Packed(_) => DType::U8,
        // A half matrix held as packed rows of the F16 / BF16 scheme: its bytes as they are.
        WeightFormat::Plain(DType::F16 | DType::BF16) if d.shape.dtype == DType::U8 => DType::U8,
        WeightFormat::Plain(dt) => dt,
    };
    if want != d.shape.dtype {
        return Err(ModelError::Config(format!(
            "tensor {name} is {format:?} in the file but the graph was built for {}: rebuild \
             the graph from this file's config",
            d.shape.dtype
        )));
    }
    Ok((info, want))
}

fn tensor(
    gguf: &(impl TensorStore + ?Sized),
    d: &ParamDecl,
    name: &str,
    expected: &[usize],
    transpose: bool,
) -> Result<HostTensor, ModelError> {
    let (info, want) = checked(gguf, d, name, expected)?;
    let bytes: &[u8] = &info.data;
    let shape = dims(d)?;
    let data = if transpose {
        let (rows, cols) = match expected {
            [r, c] => (*r, *c),
            _ => {
                return Err(ModelError::Config(format!(
                    "tensor {name}: only a matrix can be transposed, got {expected:?}"
                )))
            }
        };
        transpose_bytes(bytes, rows, cols, want.size_bytes())
    } else {
        bytes.to_vec()
    };
    Ok(HostTensor::new(&shape, want, data)?)
}

/// `[rows, cols]` elements of `es` bytes → `[cols, rows]`.
fn transpose_bytes(src: &[u8], rows: usize, cols: usize, es: usize) -> Vec<u8> {
    let mut out = vec![0u8; src.len()];
    for r in 0..rows {
        for c in 0..cols {
            let s = (r * cols + c) * es;
            let t = (c * rows + r) * es;
            out[t..t + es].copy_from_slice(&src[s..s + es]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ggml's decode of one Q4_0 / Q5_0 / Q8_0 block, in f64.
    fn decode(s: QuantScheme, b: &[u8]) -> Vec<f64> {
        let d = half::f16::from_le_bytes([b[0], b[1]]).to_f64();
        (0..32)
            .map(|e| match s {
                QuantScheme::Q8_0 => d * (b[2 + e] as i8) as f64,
                QuantScheme::Q4_0 => {
                    let byte = b[2 + e % 16];
                    let q = if e < 16 { byte & 15 } else { byte >> 4 };
                    d * (q as f64 - 8.0)
                }
                _ => {
                    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
                    let byte = b[6 + e % 16];
                    let q =
                        if e < 16 { byte & 15 } else { byte >> 4 } as u32 | ((qh >> e) & 1) << 4;
                    d * (q as f64 - 16.0)
                }
            })
            .collect()
    }

    #[test]
    fn widening_to_q8_0_keeps_every_value() {
        let mut rng = rlx_testutil::Rng::new("widening_to_q8_0_keeps_every_value");
        for (s, bb) in [(QuantScheme::Q4_0, 18), (QuantScheme::Q5_0, 22)] {
            let mut bytes: Vec<u8> = (0..bb * 40).map(|_| rng.next_u64() as u8).collect();
            for b in bytes.chunks_exact_mut(bb) {
                let d = half::f16::from_f64(rng.range(-0.1, 0.1));
                b[..2].copy_from_slice(&d.to_le_bytes());
            }
            let wide = widen_to_q8_0(s, &bytes).unwrap();
            assert_eq!(wide.len(), 40 * 34);
            for (a, b) in bytes.chunks_exact(bb).zip(wide.chunks_exact(34)) {
                assert_eq!(decode(s, a), decode(QuantScheme::Q8_0, b), "{s:?}");
            }
        }
        assert!(widen_to_q8_0(QuantScheme::Q4_1, &[0; 20]).is_none());
        assert!(widen_to_q8_0(QuantScheme::Q5_0, &[0; 23]).is_none());
    }

    #[test]
    fn transpose_moves_whole_elements() {
        // [2, 3] of 2-byte elements 0..6 → [3, 2].
        let src: Vec<u8> = (0..6u8).flat_map(|x| [x, 100 + x]).collect();
        let t = transpose_bytes(&src, 2, 3, 2);
        let got: Vec<u8> = t.chunks(2).map(|c| c[0]).collect();
        assert_eq!(got, [0, 3, 1, 4, 2, 5]);
        assert!(t.chunks(2).all(|c| c[1] == 100 + c[0]));
    }

    #[test]
    fn rope_table_starts_at_angle_zero() {
        let c = rope_table(3, 4, 10000.0, 1.0, false).to_f32_vec();
        let s = rope_table(3, 4, 10000.0, 1.0, true).to_f32_vec();
        assert_eq!(&c[..2], &[1.0, 1.0]);
        assert_eq!(&s[..2], &[0.0, 0.0]);
        // Position 1, pair 0 rotates by one radian; pair 1 by base^(-1/2) = 0.01.
        assert!((c[2] - 1f32.cos()).abs() < 1e-6);
        assert!((s[3] - 0.01f32.sin()).abs() < 1e-7);
    }
}
