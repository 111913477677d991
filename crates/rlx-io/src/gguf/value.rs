//! GGUF metadata values: the 13 value types, scalars, strings and (nested) arrays, and their
//! decoding.
//!
//! Arrays are stored typed (`Vec<f32>`, `Vec<i32>`, …), not as a `Vec<Value>`, so an array
//! takes about the memory its encoding takes; a string array is one byte buffer plus end
//! offsets (a 49152-token vocabulary is two allocations, not 49152).
//!
//! String values keep their bytes as stored. The spec says UTF-8, llama.cpp does not check,
//! and a tokenizer needs a vocabulary entry's exact bytes; so decoding never fails on
//! invalid UTF-8 in a value, and the text getters ([`Value::as_str`], the metadata getters)
//! are where it is refused. Keys and tensor names must be UTF-8 (they are identifiers).
use super::reader::Reader;
use super::GgufError;
use std::fmt::Write as _;

/// Nested arrays deeper than this are refused: the decoder recurses per level, and a hostile
/// file of 12-byte array headers must not run it out of stack. llama.cpp refuses any nesting.
pub const MAX_ARRAY_DEPTH: usize = 8;

/// A GGUF value type id, as stored before each value (and before an array's elements).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    pub fn from_id(id: u32) -> Option<ValueType> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }

    /// The fewest bytes one value of this type takes encoded (an empty string, an empty array).
    fn min_size(self) -> u64 {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | F32 => 4,
            U64 | I64 | F64 | String => 8,
            Array => 12,
        }
    }
}

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    /// The bytes as stored: UTF-8 by the spec, not checked until read as text.
    String(Vec<u8>),
    Array(Array),
}

/// A typed array; `Array` holds arrays of arrays (each inner array has its own type).
#[derive(Debug, Clone, PartialEq)]
pub enum Array {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
    String(Strings),
    Array(Vec<Array>),
}

/// An array of strings as one buffer: item `i` is `bytes[ends[i-1]..ends[i]]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Strings {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Strings {
    pub fn len(&self) -> usize {
        self.ends.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
    /// Item `i`'s bytes as stored.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let end = *self.ends.get(i)?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        Some(&self.bytes[start..end])
    }
    /// Item `i` as text; None when out of range or not UTF-8.
    pub fn get_str(&self, i: usize) -> Option<&str> {
        std::str::from_utf8(self.get(i)?).ok()
    }
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        (0..self.len()).map(|i| self.get(i).unwrap_or_default())
    }
    pub fn push(&mut self, s: &[u8]) {
        self.bytes.extend_from_slice(s);
        self.ends.push(self.bytes.len());
    }
}

impl<S: AsRef<[u8]>> FromIterator<S> for Strings {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let mut s = Strings::default();
        for item in iter {
            s.push(item.as_ref());
        }
        s
    }
}

impl Value {
    /// The type as a reader would name it: "u32", "string", "array[f32]", "array[array]".
    pub fn type_name(&self) -> String {
        match self {
            Value::Array(a) => format!("array[{}]", a.elem_type().name()),
            v => v.value_type().name().to_string(),
        }
    }

    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F32(_) => ValueType::F32,
            Value::F64(_) => ValueType::F64,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
        }
    }

    /// A string value as text; None for other types and for bytes that are not UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

    /// Any integer value that is non-negative and fits, whatever its stored width (writers
    /// disagree on whether a count is u32, i32 or u64).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// For display: scalars in full, strings quoted (lossy), arrays as their first
    /// `max_items` items and the count when longer.
    pub fn summary(&self, max_items: usize) -> String {
        let mut s = String::new();
        self.write_summary(&mut s, max_items);
        s
    }

    fn write_summary(&self, s: &mut String, max_items: usize) {
        match self {
            Value::U8(v) => write!(s, "{v}"),
            Value::I8(v) => write!(s, "{v}"),
            Value::U16(v) => write!(s, "{v}"),
            Value::I16(v) => write!(s, "{v}"),
            Value::U32(v) => write!(s, "{v}"),
            Value::I32(v) => write!(s, "{v}"),
            Value::U64(v) => write!(s, "{v}"),
            Value::I64(v) => write!(s, "{v}"),
            Value::F32(v) => write!(s, "{v}"),
            Value::F64(v) => write!(s, "{v}"),
            Value::Bool(v) => write!(s, "{v}"),
            Value::String(b) => write!(s, "{:?}", abbreviate(&String::from_utf8_lossy(b))),
            Value::Array(a) => {
                a.write_summary(s, max_items);
                Ok(())
            }
        }
        .unwrap_or(());
    }
}

/// Long strings (a chat template) cut to their first 60 characters for display.
fn abbreviate(s: &str) -> String {
    const MAX: usize = 60;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}… ({} chars)", &s[..i], s.chars().count()),
        None => s.to_string(),
    }
}

impl Array {
    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::F64(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::String(v) => v.len(),
            Array::Array(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn elem_type(&self) -> ValueType {
        match self {
            Array::U8(_) => ValueType::U8,
            Array::I8(_) => ValueType::I8,
            Array::U16(_) => ValueType::U16,
            Array::I16(_) => ValueType::I16,
            Array::U32(_) => ValueType::U32,
            Array::I32(_) => ValueType::I32,
            Array::U64(_) => ValueType::U64,
            Array::I64(_) => ValueType::I64,
            Array::F32(_) => ValueType::F32,
            Array::F64(_) => ValueType::F64,
            Array::Bool(_) => ValueType::Bool,
            Array::String(_) => ValueType::String,
            Array::Array(_) => ValueType::Array,
        }
    }

    fn write_summary(&self, s: &mut String, max_items: usize) {
        fn items<T: std::fmt::Display>(s: &mut String, v: &[T], max: usize) {
            for (i, x) in v.iter().take(max).enumerate() {
                let sep = if i == 0 { "" } else { ", " };
                let _ = write!(s, "{sep}{x}");
            }
        }
        let n = self.len();
        s.push('[');
        match self {
            Array::U8(v) => items(s, v, max_items),
            Array::I8(v) => items(s, v, max_items),
            Array::U16(v) => items(s, v, max_items),
            Array::I16(v) => items(s, v, max_items),
            Array::U32(v) => items(s, v, max_items),
            Array::I32(v) => items(s, v, max_items),
            Array::U64(v) => items(s, v, max_items),
            Array::I64(v) => items(s, v, max_items),
            Array::F32(v) => items(s, v, max_items),
            Array::F64(v) => items(s, v, max_items),
            Array::Bool(v) => items(s, v, max_items),
            Array::String(v) => {
                let quoted: Vec<String> = v
                    .iter()
                    .take(max_items)
                    .map(|b| format!("{:?}", abbreviate(&String::from_utf8_lossy(b))))
                    .collect();
                items(s, &quoted, max_items)
            }
            Array::Array(v) => {
                for (i, a) in v.iter().take(max_items).enumerate() {
                    if i > 0 {
                        s.push_str(", ");
                    }
                    a.write_summary(s, max_items);
                }
            }
        }
        if n > max_items {
            let _ = write!(s, ", … ({n} items)");
        }
        s.push(']');
    }
}

/// Decode one value of type `ty` (the type id has been read already).
pub(crate) fn read_value(r: &mut Reader<'_>, ty: ValueType) -> Result<Value, GgufError> {
    Ok(match ty {
        ValueType::U8 => Value::U8(r.u8("u8 value")?),
        ValueType::I8 => Value::I8(r.u8("i8 value")? as i8),
        ValueType::U16 => Value::U16(r.u16("u16 value")?),
        ValueType::I16 => Value::I16(r.u16("i16 value")? as i16),
        ValueType::U32 => Value::U32(r.u32("u32 value")?),
        ValueType::I32 => Value::I32(r.u32("i32 value")? as i32),
        ValueType::U64 => Value::U64(r.u64("u64 value")?),
        ValueType::I64 => Value::I64(r.u64("i64 value")? as i64),
        ValueType::F32 => Value::F32(f32::from_bits(r.u32("f32 value")?)),
        ValueType::F64 => Value::F64(f64::from_bits(r.u64("f64 value")?)),
        ValueType::Bool => Value::Bool(read_bool(r)?),
        ValueType::String => Value::String(r.string_bytes("string value")?.to_vec()),
        ValueType::Array => Value::Array(read_array(r, 1)?),
    })
}

fn read_bool(r: &mut Reader<'_>) -> Result<bool, GgufError> {
    let offset = r.pos();
    match r.u8("bool value")? {
        0 => Ok(false),
        1 => Ok(true),
        value => Err(GgufError::BadBool { offset, value }),
    }
}

pub(crate) fn read_type(r: &mut Reader<'_>) -> Result<ValueType, GgufError> {
    let offset = r.pos();
    let id = r.u32("value type")?;
    ValueType::from_id(id).ok_or(GgufError::BadValueType { offset, id })
}

/// An array body: element type, u64 count, the elements. `depth` is this array's nesting
/// level (1 for an array that is a key's value).
fn read_array(r: &mut Reader<'_>, depth: usize) -> Result<Array, GgufError> {
    let offset = r.pos();
    if depth > MAX_ARRAY_DEPTH {
        return Err(GgufError::TooDeep {
            offset,
            max: MAX_ARRAY_DEPTH,
        });
    }
    let ty = read_type(r)?;
    let count_at = r.pos();
    let count = r.u64("array length")?;
    let n = r.check_count(count, ty.min_size(), count_at, "array length")?;

    /// A fixed-width array: one bounds check for all of it, then a plain decode.
    macro_rules! fixed {
        ($variant:ident, $t:ty, $what:literal) => {{
            const W: usize = std::mem::size_of::<$t>();
            let bytes = r.take((n * W) as u64, $what)?;
            Array::$variant(
                bytes
                    .chunks_exact(W)
                    .map(|c| <$t>::from_le_bytes(c.try_into().unwrap_or_default()))
                    .collect(),
            )
        }};
    }
    Ok(match ty {
        ValueType::U8 => fixed!(U8, u8, "u8 array"),
        ValueType::I8 => fixed!(I8, i8, "i8 array"),
        ValueType::U16 => fixed!(U16, u16, "u16 array"),
        ValueType::I16 => fixed!(I16, i16, "i16 array"),
        ValueType::U32 => fixed!(U32, u32, "u32 array"),
        ValueType::I32 => fixed!(I32, i32, "i32 array"),
        ValueType::U64 => fixed!(U64, u64, "u64 array"),
        ValueType::I64 => fixed!(I64, i64, "i64 array"),
        ValueType::F32 => fixed!(F32, f32, "f32 array"),
        ValueType::F64 => fixed!(F64, f64, "f64 array"),
        ValueType::Bool => {
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(read_bool(r)?);
            }
            Array::Bool(v)
        }
        ValueType::String => {
            let mut s = Strings {
                bytes: Vec::new(),
                ends: Vec::with_capacity(r.capacity::<usize>(n)),
            };
            for _ in 0..n {
                s.push(r.string_bytes("string array item")?);
            }
            Array::String(s)
        }
        ValueType::Array => {
            let mut v = Vec::with_capacity(r.capacity::<Array>(n));
            for _ in 0..n {
                v.push(read_array(r, depth + 1)?);
            }
            Array::Array(v)
        }
    })
}
