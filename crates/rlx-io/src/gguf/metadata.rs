//! The metadata key/value section: decoding (keys unique, as llama.cpp requires) and typed
//! getters whose errors name the key and the type found, so a model builder can `?` them.
use super::reader::Reader;
use super::value::{read_type, read_value, Array, Strings, Value};
use super::GgufError;
use std::collections::HashMap;

/// Every key/value pair in file order, with a by-key index.
#[derive(Debug, Clone, Default)]
pub struct Metadata {
    entries: Vec<(String, Value)>,
    index: HashMap<String, usize>,
}

/// The smallest key/value pair: an empty key (8), a type id (4), one byte of value.
const MIN_KV_SIZE: u64 = 13;

impl Metadata {
    pub(crate) fn read(r: &mut Reader<'_>, count: u64, count_at: u64) -> Result<Self, GgufError> {
        let n = r.check_count(count, MIN_KV_SIZE, count_at, "metadata key/value count")?;
        let mut m = Metadata {
            entries: Vec::with_capacity(r.capacity::<(String, Value)>(n)),
            index: HashMap::with_capacity(r.capacity::<(String, usize)>(n)),
        };
        for _ in 0..n {
            let offset = r.pos();
            let key = r.name("metadata key")?;
            if m.index.contains_key(&key) {
                return Err(GgufError::DuplicateKey { offset, key });
            }
            let ty = read_type(r)?;
            let value = read_value(r, ty)?;
            m.index.insert(key.clone(), m.entries.len());
            m.entries.push((key, value));
        }
        Ok(m)
    }

    /// Every pair in file order.
    pub fn entries(&self) -> &[(String, Value)] {
        &self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.index.get(key).map(|&i| &self.entries[i].1)
    }

    /// The value, or [`GgufError::MissingKey`].
    pub fn require(&self, key: &str) -> Result<&Value, GgufError> {
        self.get(key).ok_or_else(|| GgufError::MissingKey {
            key: key.to_string(),
        })
    }

    /// A string value as text.
    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        match self.require(key)? {
            Value::String(b) => std::str::from_utf8(b).map_err(|_| GgufError::NotUtf8 {
                key: key.to_string(),
                index: None,
            }),
            v => Err(wrong_type(key, "string", v)),
        }
    }

    /// Any non-negative integer that fits in a usize, whatever its stored width: counts
    /// (layers, heads, context length) are u32 in most files but not in all.
    pub fn get_usize(&self, key: &str) -> Result<usize, GgufError> {
        let v = self.require(key)?;
        v.as_u64()
            .and_then(|x| usize::try_from(x).ok())
            .ok_or_else(|| wrong_type(key, "a non-negative integer", v))
    }

    /// A string array's items as text.
    pub fn get_str_array(&self, key: &str) -> Result<Vec<&str>, GgufError> {
        let s = self.get_strings(key)?;
        s.iter()
            .enumerate()
            .map(|(i, b)| {
                std::str::from_utf8(b).map_err(|_| GgufError::NotUtf8 {
                    key: key.to_string(),
                    index: Some(i),
                })
            })
            .collect()
    }

    /// A string array's items as stored (what a tokenizer vocabulary needs).
    pub fn get_strings(&self, key: &str) -> Result<&Strings, GgufError> {
        match self.require(key)? {
            Value::Array(Array::String(s)) => Ok(s),
            v => Err(wrong_type(key, "array[string]", v)),
        }
    }

    pub fn get_array(&self, key: &str) -> Result<&Array, GgufError> {
        match self.require(key)? {
            Value::Array(a) => Ok(a),
            v => Err(wrong_type(key, "array", v)),
        }
    }
}

fn wrong_type(key: &str, expected: &'static str, found: &Value) -> GgufError {
    GgufError::WrongType {
        key: key.to_string(),
        expected,
        found: found.type_name(),
    }
}

/// Exact-type scalar getters: `get_u32("llama.block_count")` fails with the type found
/// when the file stores something else.
macro_rules! scalar_getters {
    ($($fn:ident, $variant:ident, $t:ty, $name:literal;)*) => {
        impl Metadata {
            $(
                #[doc = concat!("A `", $name, "` value; [`GgufError::WrongType`] for any other type.")]
                pub fn $fn(&self, key: &str) -> Result<$t, GgufError> {
                    match self.require(key)? {
                        Value::$variant(x) => Ok(*x),
                        v => Err(wrong_type(key, $name, v)),
                    }
                }
            )*
        }
    };
}

scalar_getters! {
    get_u8, U8, u8, "u8";
    get_i8, I8, i8, "i8";
    get_u16, U16, u16, "u16";
    get_i16, I16, i16, "i16";
    get_u32, U32, u32, "u32";
    get_i32, I32, i32, "i32";
    get_u64, U64, u64, "u64";
    get_i64, I64, i64, "i64";
    get_f32, F32, f32, "f32";
    get_f64, F64, f64, "f64";
    get_bool, Bool, bool, "bool";
}

/// Exact-type array getters: `get_f32_array("tokenizer.ggml.scores")`.
macro_rules! array_getters {
    ($($fn:ident, $variant:ident, $t:ty, $name:literal;)*) => {
        impl Metadata {
            $(
                #[doc = concat!("An `", $name, "` value's items; [`GgufError::WrongType`] for any other type.")]
                pub fn $fn(&self, key: &str) -> Result<&[$t], GgufError> {
                    match self.require(key)? {
                        Value::Array(Array::$variant(x)) => Ok(x),
                        v => Err(wrong_type(key, $name, v)),
                    }
                }
            )*
        }
    };
}

array_getters! {
    get_u8_array, U8, u8, "array[u8]";
    get_i32_array, I32, i32, "array[i32]";
    get_u32_array, U32, u32, "array[u32]";
    get_i64_array, I64, i64, "array[i64]";
    get_u64_array, U64, u64, "array[u64]";
    get_f32_array, F32, f32, "array[f32]";
    get_f64_array, F64, f64, "array[f64]";
    get_bool_array, Bool, bool, "array[bool]";
}
