//! Host tensors: concrete shape + dtype + little-endian bytes. Used for constants, run
//! inputs/outputs and typed params.
use crate::{DType, IrError};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostTensor {
    pub shape: Vec<usize>,
    pub dtype: DType,
    /// Little-endian element bytes, `numel * dtype.size_bytes()` long.
    pub data: Vec<u8>,
}

macro_rules! from_typed {
    ($fn:ident, $t:ty, $dt:expr) => {
        /// Tensor from typed values; panics only if `data.len()` disagrees with `shape`
        /// (a programming error, not user input: use `HostTensor::new` for checked bytes).
        pub fn $fn(shape: &[usize], data: &[$t]) -> HostTensor {
            assert_eq!(
                shape.iter().product::<usize>(),
                data.len(),
                "HostTensor::{}: shape {:?} needs {} values, got {}",
                stringify!($fn),
                shape,
                shape.iter().product::<usize>(),
                data.len()
            );
            let mut bytes = Vec::with_capacity(data.len() * std::mem::size_of::<$t>());
            for v in data {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
            HostTensor {
                shape: shape.to_vec(),
                dtype: $dt,
                data: bytes,
            }
        }
    };
}

impl HostTensor {
    /// Checked constructor from raw little-endian bytes.
    pub fn new(shape: &[usize], dtype: DType, data: Vec<u8>) -> Result<HostTensor, IrError> {
        let want = shape
            .iter()
            .try_fold(dtype.size_bytes(), |n, &d| n.checked_mul(d));
        if want != Some(data.len()) {
            return Err(IrError::Tensor(format!(
                "shape {shape:?} of {dtype} needs {} bytes, got {}",
                want.map_or("more than usize::MAX".into(), |w| w.to_string()),
                data.len()
            )));
        }
        Ok(HostTensor {
            shape: shape.to_vec(),
            dtype,
            data,
        })
    }

    from_typed!(from_f32, f32, DType::F32);
    from_typed!(from_f64, f64, DType::F64);
    from_typed!(from_f16, f16, DType::F16);
    from_typed!(from_bf16, bf16, DType::BF16);
    from_typed!(from_i32, i32, DType::I32);
    from_typed!(from_i64, i64, DType::I64);
    from_typed!(from_u8, u8, DType::U8);

    pub fn from_bool(shape: &[usize], data: &[bool]) -> HostTensor {
        let t = HostTensor::from_u8(shape, &data.iter().map(|&b| b as u8).collect::<Vec<_>>());
        HostTensor {
            dtype: DType::Bool,
            ..t
        }
    }

    /// Tensor of `dtype` from f64 values (rounded / truncated into the dtype).
    pub fn from_f64_as(shape: &[usize], data: &[f64], dtype: DType) -> HostTensor {
        match dtype {
            DType::F32 => {
                Self::from_f32(shape, &data.iter().map(|&v| v as f32).collect::<Vec<_>>())
            }
            DType::F64 => Self::from_f64(shape, data),
            DType::F16 => Self::from_f16(
                shape,
                &data.iter().map(|&v| f16::from_f64(v)).collect::<Vec<_>>(),
            ),
            DType::BF16 => Self::from_bf16(
                shape,
                &data.iter().map(|&v| bf16::from_f64(v)).collect::<Vec<_>>(),
            ),
            DType::I32 => {
                Self::from_i32(shape, &data.iter().map(|&v| v as i32).collect::<Vec<_>>())
            }
            DType::I64 => {
                Self::from_i64(shape, &data.iter().map(|&v| v as i64).collect::<Vec<_>>())
            }
            DType::U8 => Self::from_u8(shape, &data.iter().map(|&v| v as u8).collect::<Vec<_>>()),
            DType::Bool => {
                Self::from_bool(shape, &data.iter().map(|&v| v != 0.0).collect::<Vec<_>>())
            }
        }
    }

    /// Tensor of `dtype` from f32 values.
    pub fn from_f32_as(shape: &[usize], data: &[f32], dtype: DType) -> HostTensor {
        if dtype == DType::F32 {
            return Self::from_f32(shape, data);
        }
        Self::from_f64_as(
            shape,
            &data.iter().map(|&v| v as f64).collect::<Vec<_>>(),
            dtype,
        )
    }

    /// Element count. A tensor whose `data` fits its shape cannot overflow here;
    /// [`HostTensor::checked_numel`] is for shapes not yet checked against the data.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Element count, or None when it overflows `usize`.
    pub fn checked_numel(&self) -> Option<usize> {
        self.shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
    }

    fn chunks<const N: usize>(&self) -> impl Iterator<Item = [u8; N]> + '_ {
        self.data
            .chunks_exact(N)
            .map(|c| c.try_into().expect("chunk size"))
    }

    /// Values as f64, whatever the dtype.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self.dtype {
            DType::F32 => self
                .chunks::<4>()
                .map(|b| f32::from_le_bytes(b) as f64)
                .collect(),
            DType::F64 => self.chunks::<8>().map(f64::from_le_bytes).collect(),
            DType::F16 => self
                .chunks::<2>()
                .map(|b| f16::from_le_bytes(b).to_f64())
                .collect(),
            DType::BF16 => self
                .chunks::<2>()
                .map(|b| bf16::from_le_bytes(b).to_f64())
                .collect(),
            DType::I32 => self
                .chunks::<4>()
                .map(|b| i32::from_le_bytes(b) as f64)
                .collect(),
            DType::I64 => self
                .chunks::<8>()
                .map(|b| i64::from_le_bytes(b) as f64)
                .collect(),
            DType::U8 | DType::Bool => self.data.iter().map(|&b| b as f64).collect(),
        }
    }

    /// Values as f32, whatever the dtype.
    pub fn to_f32_vec(&self) -> Vec<f32> {
        let mut v = Vec::new();
        self.f32_into(&mut v);
        v
    }

    /// Values as f32 into `out` (cleared; its capacity reused, so a caller that keeps `out`
    /// between runs, as a decoder keeps its logits, allocates nothing after the first).
    pub fn f32_into(&self, out: &mut Vec<f32>) {
        HostTensor::decode_f32_into(self.dtype, &self.data, out)
    }

    /// `bytes` (little-endian values of `dtype`) as f32 into `out`, as [`HostTensor::f32_into`].
    pub fn decode_f32_into(dtype: DType, bytes: &[u8], out: &mut Vec<f32>) {
        fn fill<const N: usize>(bytes: &[u8], out: &mut Vec<f32>, f: impl Fn([u8; N]) -> f32) {
            out.clear();
            out.reserve(bytes.len() / N);
            out.extend((bytes.chunks_exact(N)).map(|c| f(c.try_into().expect("chunk size"))));
        }
        match dtype {
            DType::F32 => fill::<4>(bytes, out, f32::from_le_bytes),
            DType::F16 => fill::<2>(bytes, out, |b| f16::from_le_bytes(b).to_f32()),
            DType::BF16 => fill::<2>(bytes, out, |b| bf16::from_le_bytes(b).to_f32()),
            _ => {
                let t = HostTensor {
                    shape: vec![],
                    dtype,
                    data: bytes.to_vec(),
                };
                out.clear();
                out.extend(t.to_f64_vec().into_iter().map(|v| v as f32));
            }
        }
    }

    /// Values as i64 (floats truncate toward zero).
    pub fn to_i64_vec(&self) -> Vec<i64> {
        match self.dtype {
            DType::I32 => self
                .chunks::<4>()
                .map(|b| i32::from_le_bytes(b) as i64)
                .collect(),
            DType::I64 => self.chunks::<8>().map(i64::from_le_bytes).collect(),
            DType::U8 | DType::Bool => self.data.iter().map(|&b| b as i64).collect(),
            _ => self.to_f64_vec().into_iter().map(|v| v as i64).collect(),
        }
    }
}
