//! `TensorProto` → `HostTensor`: every dtype rlx can hold, from `raw_data` (little-endian) or
//! the typed fields, and external data files. ONNX integer types rlx lacks widen without loss
//! (I8/I16/U16 → I32, U32/U64 → I64; a U64 above i64::MAX is an error), so values survive;
//! the float8 / float4 / 4-bit / 2-bit types are unpacked into their carriers (`lowp.rs`).
use crate::lowp::{int32_bytes, Lowp};
use crate::proto::{tensor_proto::DataType as P, TensorProto};
use crate::OnnxError;
use half::{bf16, f16};
use rlx_ir::{DType, HostTensor};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path};

/// The rlx dtype an ONNX element type code is held in, or None when rlx has no way to hold it.
pub fn rlx_dtype(code: i32) -> Option<DType> {
    if let Some(l) = Lowp::of(code) {
        return Some(l.carrier());
    }
    Some(match P::try_from(code).ok()? {
        P::Float => DType::F32,
        P::Double => DType::F64,
        P::Float16 => DType::F16,
        P::Bfloat16 => DType::BF16,
        P::Int32 | P::Int16 | P::Int8 | P::Uint16 => DType::I32,
        P::Int64 | P::Uint32 | P::Uint64 => DType::I64,
        P::Uint8 => DType::U8,
        P::Bool => DType::Bool,
        _ => return None,
    })
}

/// The ONNX name of an element type code, for messages.
pub fn onnx_dtype_name(code: i32) -> String {
    P::try_from(code)
        .map(|d| d.as_str_name().to_string())
        .unwrap_or_else(|_| format!("data type {code}"))
}

/// The ONNX element type code of an rlx dtype (the dtype a Cast to it means).
pub fn onnx_code(dt: DType) -> i32 {
    (match dt {
        DType::F32 => P::Float,
        DType::F64 => P::Double,
        DType::F16 => P::Float16,
        DType::BF16 => P::Bfloat16,
        DType::I32 => P::Int32,
        DType::I64 => P::Int64,
        DType::U8 => P::Uint8,
        DType::Bool => P::Bool,
    }) as i32
}

/// Bytes per element in ONNX's raw_data for the codes rlx reads.
fn raw_size(p: P) -> usize {
    match p {
        P::Double | P::Int64 | P::Uint64 => 8,
        P::Float | P::Int32 | P::Uint32 => 4,
        P::Float16 | P::Bfloat16 | P::Int16 | P::Uint16 => 2,
        _ => 1,
    }
}

fn terr(name: &str, msg: impl Into<String>) -> OnnxError {
    OnnxError::Tensor {
        name: name.to_string(),
        msg: msg.into(),
    }
}

/// Decode one tensor. `base_dir` is the model's folder (external data is looked up there,
/// and only there); None refuses external data.
pub fn decode_tensor(t: &TensorProto, base_dir: Option<&Path>) -> Result<HostTensor, OnnxError> {
    let name = t.name.clone().unwrap_or_default();
    let code = t.data_type.unwrap_or(0);
    let p = P::try_from(code).map_err(|_| terr(&name, format!("unknown data type {code}")))?;
    let dtype = rlx_dtype(code).ok_or_else(|| OnnxError::UnsupportedType {
        what: format!("tensor \"{name}\""),
        msg: format!("element type {}", onnx_dtype_name(code)),
    })?;
    if t.segment.is_some() {
        return Err(OnnxError::UnsupportedType {
            what: format!("tensor \"{name}\""),
            msg: "segmented tensors".into(),
        });
    }
    let mut dims = Vec::with_capacity(t.dims.len());
    for &d in &t.dims {
        dims.push(usize::try_from(d).map_err(|_| terr(&name, format!("negative dim {d}")))?);
    }
    let numel = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| terr(&name, format!("dims {dims:?} overflow")))?;
    let lowp = Lowp::of(code);
    let want_raw = match lowp {
        Some(l) => l.packed_len(numel),
        None => numel.checked_mul(raw_size(p)),
    }
    .filter(|&b| b <= isize::MAX as usize)
    .ok_or_else(|| terr(&name, format!("dims {dims:?} are too large")))?;

    let external = t.data_location == Some(1);
    let raw: Option<Vec<u8>> = if external {
        Some(read_external(t, &name, base_dir, want_raw)?)
    } else {
        t.raw_data.clone()
    };
    if let Some(l) = lowp {
        let packed = match raw {
            Some(raw) => raw,
            None => int32_bytes(&t.int32_data).map_err(|m| terr(&name, m))?,
        };
        let out = l.unpack(&packed, numel).map_err(|m| terr(&name, m))?;
        return HostTensor::new(&dims, dtype, out).map_err(|e| terr(&name, e.to_string()));
    }
    // Reserved only once the data is known to hold `numel` values: the dims alone are a
    // claim a tiny file can make about gigabytes.
    let mut out = Vec::new();
    if let Some(raw) = raw {
        if raw.len() != want_raw {
            return Err(terr(
                &name,
                format!(
                    "raw data holds {} bytes, {dims:?} of {} needs {want_raw}",
                    raw.len(),
                    p.as_str_name()
                ),
            ));
        }
        out.reserve_exact(numel * dtype.size_bytes());
        widen_raw(p, &raw, &mut out).map_err(|m| terr(&name, m))?;
    } else {
        typed_fields(t, p, numel, &mut out).map_err(|m| terr(&name, m))?;
    }
    HostTensor::new(&dims, dtype, out).map_err(|e| terr(&name, e.to_string()))
}

/// Raw little-endian bytes of ONNX type `p` into rlx storage bytes.
fn widen_raw(p: P, raw: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    match p {
        P::Int8 => raw
            .iter()
            .for_each(|&b| out.extend_from_slice(&(b as i8 as i32).to_le_bytes())),
        P::Int16 => raw.chunks_exact(2).for_each(|c| {
            out.extend_from_slice(&(i16::from_le_bytes([c[0], c[1]]) as i32).to_le_bytes())
        }),
        P::Uint16 => raw.chunks_exact(2).for_each(|c| {
            out.extend_from_slice(&(u16::from_le_bytes([c[0], c[1]]) as i32).to_le_bytes())
        }),
        P::Uint32 => raw.chunks_exact(4).for_each(|c| {
            let v = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            out.extend_from_slice(&(v as i64).to_le_bytes())
        }),
        P::Uint64 => {
            for c in raw.chunks_exact(8) {
                let v = u64::from_le_bytes(c.try_into().expect("8-byte chunk"));
                push_u64(v, out)?;
            }
        }
        // Bool bytes are 0 / 1 in ONNX; anything nonzero is true.
        P::Bool => raw.iter().for_each(|&b| out.push((b != 0) as u8)),
        _ => out.extend_from_slice(raw),
    }
    Ok(())
}

fn push_u64(v: u64, out: &mut Vec<u8>) -> Result<(), String> {
    let v = i64::try_from(v).map_err(|_| format!("uint64 value {v} does not fit in i64"))?;
    out.extend_from_slice(&v.to_le_bytes());
    Ok(())
}

/// The typed repeated fields (`float_data`, `int32_data` …) into rlx storage bytes.
fn typed_fields(t: &TensorProto, p: P, numel: usize, out: &mut Vec<u8>) -> Result<(), String> {
    let have = match p {
        P::Float => t.float_data.len(),
        P::Double => t.double_data.len(),
        P::Int64 => t.int64_data.len(),
        P::Uint32 | P::Uint64 => t.uint64_data.len(),
        _ => t.int32_data.len(),
    };
    if have != numel {
        return Err(format!(
            "holds {have} values in its typed field, its dims need {numel}"
        ));
    }
    match p {
        P::Float => t
            .float_data
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        P::Double => t
            .double_data
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        P::Int64 => t
            .int64_data
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        P::Uint32 | P::Uint64 => {
            for &v in &t.uint64_data {
                if p == P::Uint32 && v > u32::MAX as u64 {
                    return Err(format!("uint32 value {v} is out of range"));
                }
                push_u64(v, out)?;
            }
        }
        // int32_data carries every narrower type, f16 / bf16 as their bit patterns.
        P::Float16 | P::Bfloat16 => t.int32_data.iter().for_each(|&v| {
            let bits = v as u16;
            let b = if p == P::Float16 {
                f16::from_bits(bits).to_le_bytes()
            } else {
                bf16::from_bits(bits).to_le_bytes()
            };
            out.extend_from_slice(&b)
        }),
        P::Uint8 => t.int32_data.iter().for_each(|&v| out.push(v as u8)),
        P::Bool => t.int32_data.iter().for_each(|&v| out.push((v != 0) as u8)),
        P::Int8 => t
            .int32_data
            .iter()
            .for_each(|&v| out.extend_from_slice(&(v as i8 as i32).to_le_bytes())),
        P::Int16 => t
            .int32_data
            .iter()
            .for_each(|&v| out.extend_from_slice(&(v as i16 as i32).to_le_bytes())),
        P::Uint16 => t
            .int32_data
            .iter()
            .for_each(|&v| out.extend_from_slice(&(v as u16 as i32).to_le_bytes())),
        _ => t
            .int32_data
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
    }
    Ok(())
}

/// The bytes of an external-data tensor: `location` (relative, inside `base_dir`),
/// `offset` and `length`, every one checked against the file.
fn read_external(
    t: &TensorProto,
    name: &str,
    base_dir: Option<&Path>,
    want: usize,
) -> Result<Vec<u8>, OnnxError> {
    let get = |k: &str| {
        t.external_data
            .iter()
            .find(|e| e.key.as_deref() == Some(k))
            .and_then(|e| e.value.clone())
    };
    let location = get("location").unwrap_or_default();
    let err = |msg: String| OnnxError::ExternalData {
        name: name.to_string(),
        file: location.clone(),
        msg,
    };
    let base = base_dir.ok_or_else(|| err("no model folder to read it from".into()))?;
    let rel = Path::new(&location);
    if location.is_empty()
        || !rel
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(err(
            "the location must be a relative path inside the model's folder".into(),
        ));
    }
    let num = |k: &str| -> Result<Option<u64>, OnnxError> {
        get(k)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| err(format!("{k} \"{v}\" is not a number")))
            })
            .transpose()
    };
    let offset = num("offset")?.unwrap_or(0);
    let length = num("length")?;
    let path = base.join(rel);
    let mut f = std::fs::File::open(&path).map_err(|e| err(e.to_string()))?;
    let size = f.metadata().map_err(|e| err(e.to_string()))?.len();
    let len = length.unwrap_or(size.saturating_sub(offset));
    if offset.checked_add(len).is_none_or(|end| end > size) {
        return Err(err(format!(
            "offset {offset} + length {len} runs past the file's {size} bytes"
        )));
    }
    if len != want as u64 {
        return Err(err(format!(
            "length {len} disagrees with the {want} bytes the dims need"
        )));
    }
    f.seek(SeekFrom::Start(offset))
        .map_err(|e| err(e.to_string()))?;
    let mut buf = vec![0u8; want];
    f.read_exact(&mut buf).map_err(|e| err(e.to_string()))?;
    Ok(buf)
}
