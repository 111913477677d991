//! ONNX's low-precision element types, which rlx holds in a wider *carrier* without loss:
//! FLOAT8E4M3FN / E4M3FNUZ / E5M2 / E5M2FNUZ / E8M0 and FLOAT4E2M1 in F32 (every value of
//! those formats is exact in f32, so the carrier's values all lie on the format's grid), and
//! INT4 / UINT4 / INT2 / UINT2 in I32.
//!
//! Storage (`raw_data`, or `int32_data` with one byte per entry): float8 is one byte per
//! element; 4-bit types pack two elements per byte and 2-bit types four, the first element
//! in the lowest bits; a partial last byte is padded.
use crate::proto::tensor_proto::DataType as P;
use rlx_ir::{DType, E8M0Round, MiniFloat};

/// A low-precision ONNX element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lowp {
    Float(MiniFloat),
    Int { bits: u32, signed: bool },
}

impl Lowp {
    /// The type of ONNX element type code `code`, when it is a low-precision one.
    pub fn of(code: i32) -> Option<Lowp> {
        let f = |m| Some(Lowp::Float(m));
        let i = |bits, signed| Some(Lowp::Int { bits, signed });
        match P::try_from(code).ok()? {
            P::Float8e4m3fn => f(MiniFloat::E4M3FN),
            P::Float8e4m3fnuz => f(MiniFloat::E4M3FNUZ),
            P::Float8e5m2 => f(MiniFloat::E5M2),
            P::Float8e5m2fnuz => f(MiniFloat::E5M2FNUZ),
            P::Float4e2m1 => f(MiniFloat::E2M1),
            P::Float8e8m0 => f(MiniFloat::E8M0 {
                round: E8M0Round::Up,
            }),
            P::Int4 => i(4, true),
            P::Uint4 => i(4, false),
            P::Int2 => i(2, true),
            P::Uint2 => i(2, false),
            _ => None,
        }
    }

    /// The rlx dtype its values are carried in.
    pub fn carrier(self) -> DType {
        match self {
            Lowp::Float(_) => DType::F32,
            Lowp::Int { .. } => DType::I32,
        }
    }

    /// Bits of one stored element.
    pub fn bits(self) -> u32 {
        match self {
            Lowp::Float(m) => m.bits(),
            Lowp::Int { bits, .. } => bits,
        }
    }

    /// The integer range `[lo, hi]` of an integer type.
    pub fn int_range(self) -> Option<(i64, i64)> {
        match self {
            Lowp::Int { bits, signed: true } => Some((-(1 << (bits - 1)), (1 << (bits - 1)) - 1)),
            Lowp::Int {
                bits,
                signed: false,
            } => Some((0, (1 << bits) - 1)),
            Lowp::Float(_) => None,
        }
    }

    /// Bytes that `numel` packed elements take.
    pub fn packed_len(self, numel: usize) -> Option<usize> {
        let per = (8 / self.bits()) as usize;
        Some(numel.checked_add(per - 1)? / per)
    }

    /// The value of one stored code (its low `bits()` bits).
    fn value(self, code: u8) -> Value {
        match self {
            Lowp::Float(m) => Value::F(m.decode(code)),
            Lowp::Int { bits, signed } => {
                let v = (code as i32) & ((1 << bits) - 1);
                let v = if signed && v >= 1 << (bits - 1) {
                    v - (1 << bits)
                } else {
                    v
                };
                Value::I(v)
            }
        }
    }

    /// Packed bytes (raw_data, or the bytes of int32_data) of `numel` elements into the
    /// carrier's little-endian storage bytes.
    pub fn unpack(self, packed: &[u8], numel: usize) -> Result<Vec<u8>, String> {
        let want = self.packed_len(numel).ok_or("too many elements")?;
        if packed.len() != want {
            return Err(format!(
                "holds {} bytes, {numel} elements of {} bits need {want}",
                packed.len(),
                self.bits()
            ));
        }
        let bits = self.bits();
        let per = (8 / bits) as usize;
        let mut out = Vec::with_capacity(numel * 4);
        for k in 0..numel {
            let byte = packed[k / per];
            let code = (byte >> ((k % per) as u32 * bits)) & (((1u16 << bits) - 1) as u8);
            match self.value(code) {
                Value::F(v) => out.extend_from_slice(&v.to_le_bytes()),
                Value::I(v) => out.extend_from_slice(&v.to_le_bytes()),
            }
        }
        Ok(out)
    }
}

enum Value {
    F(f32),
    I(i32),
}

/// `int32_data` entries of a low-precision tensor as the packed bytes they hold (one byte
/// per entry); an entry outside 0..=255 is an error.
pub fn int32_bytes(vals: &[i32]) -> Result<Vec<u8>, String> {
    vals.iter()
        .map(|&v| u8::try_from(v).map_err(|_| format!("int32_data entry {v} is not a byte")))
        .collect()
}
