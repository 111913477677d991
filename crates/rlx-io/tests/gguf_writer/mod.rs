//! A GGUF writer for tests, written from the spec (not from the reader) so round trips check
//! the reader against an independent encoding. It also writes what a valid writer never
//! would (any version, any alignment key, tensor offsets given by hand) for the hostile-file
//! tests. Shared with the fuzz crate's tests through `#[path]`.
#![allow(dead_code)]
use rlx_io::gguf::{Array, Value};

pub struct Tensor {
    pub name: String,
    /// ggml order, innermost first.
    pub dims: Vec<u64>,
    pub type_id: u32,
    pub data: Vec<u8>,
    /// Written instead of the laid-out offset when set.
    pub offset: Option<u64>,
}

pub struct Writer {
    pub version: u32,
    pub kvs: Vec<(String, Value)>,
    pub tensors: Vec<Tensor>,
    /// What the layout pads to; the `general.alignment` key is only written if in `kvs`.
    pub alignment: u64,
}

/// The spec's value type ids.
fn type_id(v: &Value) -> u32 {
    match v {
        Value::U8(_) => 0,
        Value::I8(_) => 1,
        Value::U16(_) => 2,
        Value::I16(_) => 3,
        Value::U32(_) => 4,
        Value::I32(_) => 5,
        Value::F32(_) => 6,
        Value::Bool(_) => 7,
        Value::String(_) => 8,
        Value::Array(_) => 9,
        Value::U64(_) => 10,
        Value::I64(_) => 11,
        Value::F64(_) => 12,
    }
}

fn array_type_id(a: &Array) -> u32 {
    match a {
        Array::U8(_) => 0,
        Array::I8(_) => 1,
        Array::U16(_) => 2,
        Array::I16(_) => 3,
        Array::U32(_) => 4,
        Array::I32(_) => 5,
        Array::F32(_) => 6,
        Array::Bool(_) => 7,
        Array::String(_) => 8,
        Array::Array(_) => 9,
        Array::U64(_) => 10,
        Array::I64(_) => 11,
        Array::F64(_) => 12,
    }
}

pub fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s);
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.push(*x as u8),
        Value::U16(x) => out.extend(x.to_le_bytes()),
        Value::I16(x) => out.extend(x.to_le_bytes()),
        Value::U32(x) => out.extend(x.to_le_bytes()),
        Value::I32(x) => out.extend(x.to_le_bytes()),
        Value::U64(x) => out.extend(x.to_le_bytes()),
        Value::I64(x) => out.extend(x.to_le_bytes()),
        Value::F32(x) => out.extend(x.to_bits().to_le_bytes()),
        Value::F64(x) => out.extend(x.to_bits().to_le_bytes()),
        Value::Bool(x) => out.push(u8::from(*x)),
        Value::String(b) => put_str(out, b),
        Value::Array(a) => put_array(out, a),
    }
}

fn put_array(out: &mut Vec<u8>, a: &Array) {
    out.extend(array_type_id(a).to_le_bytes());
    out.extend((a.len() as u64).to_le_bytes());
    // Each element encoded as the scalar of that type would be.
    let items: Vec<Value> = match a {
        Array::U8(v) => v.iter().map(|&x| Value::U8(x)).collect(),
        Array::I8(v) => v.iter().map(|&x| Value::I8(x)).collect(),
        Array::U16(v) => v.iter().map(|&x| Value::U16(x)).collect(),
        Array::I16(v) => v.iter().map(|&x| Value::I16(x)).collect(),
        Array::U32(v) => v.iter().map(|&x| Value::U32(x)).collect(),
        Array::I32(v) => v.iter().map(|&x| Value::I32(x)).collect(),
        Array::U64(v) => v.iter().map(|&x| Value::U64(x)).collect(),
        Array::I64(v) => v.iter().map(|&x| Value::I64(x)).collect(),
        Array::F32(v) => v.iter().map(|&x| Value::F32(x)).collect(),
        Array::F64(v) => v.iter().map(|&x| Value::F64(x)).collect(),
        Array::Bool(v) => v.iter().map(|&x| Value::Bool(x)).collect(),
        Array::String(v) => v.iter().map(|b| Value::String(b.to_vec())).collect(),
        Array::Array(v) => {
            for inner in v {
                put_array(out, inner);
            }
            return;
        }
    };
    for item in &items {
        put_value(out, item);
    }
}

fn pad_to(out: &mut Vec<u8>, alignment: u64) {
    while !(out.len() as u64).is_multiple_of(alignment) {
        out.push(0);
    }
}

/// Where each tensor's data went: (offset in the data section, file offset of the section).
pub struct Layout {
    pub offsets: Vec<u64>,
    pub data_start: u64,
}

impl Writer {
    pub fn new(version: u32) -> Writer {
        Writer {
            version,
            kvs: vec![],
            tensors: vec![],
            alignment: 32,
        }
    }

    pub fn kv(mut self, key: &str, v: Value) -> Writer {
        self.kvs.push((key.to_string(), v));
        self
    }

    pub fn tensor(mut self, name: &str, dims: &[u64], type_id: u32, data: Vec<u8>) -> Writer {
        self.tensors.push(Tensor {
            name: name.to_string(),
            dims: dims.to_vec(),
            type_id,
            data,
            offset: None,
        });
        self
    }

    pub fn bytes(&self) -> Vec<u8> {
        self.write().0
    }

    pub fn write(&self) -> (Vec<u8>, Layout) {
        let mut out = b"GGUF".to_vec();
        out.extend(self.version.to_le_bytes());
        out.extend((self.tensors.len() as u64).to_le_bytes());
        out.extend((self.kvs.len() as u64).to_le_bytes());
        for (k, v) in &self.kvs {
            put_str(&mut out, k.as_bytes());
            out.extend(type_id(v).to_le_bytes());
            put_value(&mut out, v);
        }
        let mut offsets = vec![];
        let mut next = 0u64;
        for t in &self.tensors {
            put_str(&mut out, t.name.as_bytes());
            out.extend((t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                out.extend(d.to_le_bytes());
            }
            out.extend(t.type_id.to_le_bytes());
            offsets.push(next);
            out.extend(t.offset.unwrap_or(next).to_le_bytes());
            next += (t.data.len() as u64).next_multiple_of(self.alignment);
        }
        let mut data_start = out.len() as u64;
        if !self.tensors.is_empty() {
            pad_to(&mut out, self.alignment);
            data_start = out.len() as u64;
            for t in &self.tensors {
                out.extend(&t.data);
                pad_to(&mut out, self.alignment);
            }
        }
        (
            out,
            Layout {
                offsets,
                data_start,
            },
        )
    }
}

/// A small valid file with a bit of everything: several metadata types (nested array
/// included) and F32, F16, Q8_0 and Q4_K tensors; the seed of the truncation and mutation
/// tests.
pub fn sample(version: u32) -> Vec<u8> {
    let bytes = |n: usize, k: u8| (0..n).map(|i| (i as u8).wrapping_mul(k)).collect();
    Writer::new(version)
        .kv("general.architecture", Value::String(b"llama".to_vec()))
        .kv("llama.block_count", Value::U32(2))
        .kv("llama.rope.freq_base", Value::F32(10000.0))
        .kv("flag", Value::Bool(true))
        .kv(
            "tokenizer.ggml.tokens",
            Value::Array(Array::String(["a", "bc", ""].into_iter().collect())),
        )
        .kv(
            "nested",
            Value::Array(Array::Array(vec![
                Array::I32(vec![1, -2]),
                Array::F64(vec![0.5]),
            ])),
        )
        .tensor("w.f32", &[3, 2], 0, bytes(24, 7))
        .tensor("w.f16", &[5], 1, bytes(10, 3))
        .tensor("w.q8_0", &[32, 2], 8, bytes(68, 5))
        .tensor("w.q4_k", &[256], 12, bytes(144, 11))
        .bytes()
}
