//! Views the executor hands to thunks: borrowed slices of the arena or of leaf storage.
use crate::error::op_err;
use crate::CpuError;
use rlx_ir::{ComputeClass, DType, SharedBytes};
use std::ops::{Deref, DerefMut};

/// Owned values of one tensor in its compute class. `U8` holds U8 *leaves* (params,
/// constants, inputs) as their bytes, so a packed quantised weight takes its file size and
/// not 8× that; U8 values computed in the arena stay i64 like every other integer.
#[derive(Clone, Debug, PartialEq)]
pub enum Storage {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I64(Vec<i64>),
    U8(LeafBytes),
}

/// The bytes of a U8 leaf: owned, or a range of a mapped model file shared without a copy
/// (a quantised model's weights are read straight from the page cache, as llama.cpp's are).
#[derive(Clone, Debug, PartialEq)]
pub enum LeafBytes {
    Owned(Vec<u8>),
    Shared(SharedBytes),
}

impl From<Vec<u8>> for LeafBytes {
    fn from(v: Vec<u8>) -> LeafBytes {
        LeafBytes::Owned(v)
    }
}

impl Deref for LeafBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            LeafBytes::Owned(v) => v,
            LeafBytes::Shared(s) => s,
        }
    }
}

impl DerefMut for LeafBytes {
    /// Writing shared bytes first takes a private copy (the file's mapping is read-only).
    fn deref_mut(&mut self) -> &mut [u8] {
        if let LeafBytes::Shared(s) = self {
            *self = LeafBytes::Owned(s.to_vec());
        }
        match self {
            LeafBytes::Owned(v) => v,
            LeafBytes::Shared(_) => unreachable!("made owned just above"),
        }
    }
}

impl Storage {
    pub fn len(&self) -> usize {
        match self {
            Storage::F32(v) => v.len(),
            Storage::F64(v) => v.len(),
            Storage::I64(v) => v.len(),
            Storage::U8(v) => v.len(),
        }
    }
    /// Bytes this storage holds (what a leaf costs in memory).
    pub fn bytes(&self) -> usize {
        match self {
            Storage::F32(v) => v.len() * 4,
            Storage::F64(v) => v.len() * 8,
            Storage::I64(v) => v.len() * 8,
            Storage::U8(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn as_buf(&self) -> Buf<'_> {
        match self {
            Storage::F32(v) => Buf::F32(v),
            Storage::F64(v) => Buf::F64(v),
            Storage::I64(v) => Buf::I64(v),
            Storage::U8(v) => Buf::U8(v),
        }
    }
}

/// Values a thunk reads. `U8` only ever views leaf bytes (see [`Storage::U8`]); thunks that
/// do not read bytes natively get such inputs widened to `I64` by the executor.
#[derive(Clone, Copy, Debug)]
pub enum Buf<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
    I64(&'a [i64]),
    U8(&'a [u8]),
}

impl Buf<'_> {
    pub fn len(&self) -> usize {
        match self {
            Buf::F32(s) => s.len(),
            Buf::F64(s) => s.len(),
            Buf::I64(s) => s.len(),
            Buf::U8(s) => s.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Debug)]
pub enum BufMut<'a> {
    F32(&'a mut [f32]),
    F64(&'a mut [f64]),
    I64(&'a mut [i64]),
}

/// Element types the CPU computes in.
pub trait Elem: Copy + Send + Sync + Default + std::fmt::Debug + 'static {
    const CLASS: ComputeClass;
    fn slice<'a>(b: &Buf<'a>) -> Option<&'a [Self]>;
    fn slice_mut<'a, 'b>(b: &'b mut BufMut<'a>) -> Option<&'b mut [Self]>;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
}

macro_rules! elem {
    ($t:ty, $v:ident, $c:ident) => {
        impl Elem for $t {
            const CLASS: ComputeClass = ComputeClass::$c;
            fn slice<'a>(b: &Buf<'a>) -> Option<&'a [Self]> {
                match b {
                    Buf::$v(s) => Some(s),
                    _ => None,
                }
            }
            fn slice_mut<'a, 'b>(b: &'b mut BufMut<'a>) -> Option<&'b mut [Self]> {
                match b {
                    BufMut::$v(s) => Some(s),
                    _ => None,
                }
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
        }
    };
}
elem!(f32, F32, F32);
elem!(f64, F64, F64);
elem!(i64, I64, I64);

/// Float compute types (f32, f64): everything num-traits offers plus conversions.
pub trait Float:
    Elem
    + num_traits::Float
    + num_traits::FloatConst
    + std::iter::Sum
    + std::ops::AddAssign
    + std::ops::MulAssign
    + std::ops::SubAssign
    + std::ops::DivAssign
{
    /// Exact GELU over a slice in place: f32 through the vectorised rational erf, f64
    /// through the scalar f64 path of `scalar::activation`.
    fn gelu_in_place(v: &mut [Self]) {
        v.iter_mut()
            .for_each(|x| *x = crate::ops::scalar::activation(rlx_ir::Activation::Gelu, *x));
    }
    /// Softmax of one row in place; -inf entries are masked (weight 0) and a row of only
    /// -inf becomes zeros. f64 uses `exp` itself (its tolerance is 1e-12).
    fn softmax_in_place(row: &mut [Self]) {
        let max = row.iter().fold(Self::neg_infinity(), |m, &v| m.max(v));
        if max == Self::neg_infinity() {
            row.fill(Self::zero());
            return;
        }
        let mut sum = Self::zero();
        for v in row.iter_mut() {
            *v = if *v == Self::neg_infinity() {
                Self::zero()
            } else {
                (*v - max).exp()
            };
            sum += *v;
        }
        let inv = Self::one() / sum;
        row.iter_mut().for_each(|v| *v *= inv);
    }
}
impl Float for f32 {
    fn gelu_in_place(v: &mut [f32]) {
        crate::ops::scalar::gelu_f32_in_place(v)
    }
    fn softmax_in_place(row: &mut [f32]) {
        crate::ops::scalar::softmax_f32_in_place(row)
    }
}
impl Float for f64 {}

/// An input of a thunk.
#[derive(Clone, Copy, Debug)]
pub struct TensorView<'a> {
    pub shape: &'a [usize],
    pub dtype: DType,
    pub data: Buf<'a>,
}

impl<'a> TensorView<'a> {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
    /// The values as `T`, or an error if this tensor is held in another compute class.
    pub fn get<T: Elem>(&self) -> Result<&'a [T], CpuError> {
        T::slice(&self.data).ok_or_else(|| {
            op_err(format!(
                "input of dtype {} is not held as {:?}",
                self.dtype,
                T::CLASS
            ))
        })
    }
    /// Values converted to f64 whatever the class (for indices, labels, masks).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self.data {
            Buf::F32(s) => s.iter().map(|&v| v as f64).collect(),
            Buf::F64(s) => s.to_vec(),
            Buf::I64(s) => s.iter().map(|&v| v as f64).collect(),
            Buf::U8(s) => s.iter().map(|&v| v as f64).collect(),
        }
    }
    /// Values as integers whatever the class (floats truncate).
    pub fn to_i64_vec(&self) -> Vec<i64> {
        match self.data {
            Buf::F32(s) => s.iter().map(|&v| v as i64).collect(),
            Buf::F64(s) => s.iter().map(|&v| v as i64).collect(),
            Buf::I64(s) => s.to_vec(),
            Buf::U8(s) => s.iter().map(|&v| v as i64).collect(),
        }
    }
}

/// The output of a thunk. `shape`/`dtype` are the node's (concrete) declared ones.
#[derive(Debug)]
pub struct OutView<'a> {
    pub shape: &'a [usize],
    pub dtype: DType,
    pub data: BufMut<'a>,
}

impl<'a> OutView<'a> {
    /// A shorter-lived view of the same output, for a thunk that hands it to another
    /// thunk and then keeps working on it.
    pub fn reborrow(&mut self) -> OutView<'_> {
        let data = match &mut self.data {
            BufMut::F32(s) => BufMut::F32(s),
            BufMut::F64(s) => BufMut::F64(s),
            BufMut::I64(s) => BufMut::I64(s),
        };
        OutView {
            shape: self.shape,
            dtype: self.dtype,
            data,
        }
    }
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn class(&self) -> ComputeClass {
        self.dtype.compute_class()
    }
    pub fn get_mut<T: Elem>(&mut self) -> Result<&mut [T], CpuError> {
        let dt = self.dtype;
        T::slice_mut(&mut self.data).ok_or_else(|| {
            op_err(format!(
                "output of dtype {dt} is not held as {:?}",
                T::CLASS
            ))
        })
    }
}

#[cfg(test)]
mod leaf_bytes_tests {
    use super::LeafBytes;
    use rlx_ir::{ByteOwner, SharedBytes};
    use std::sync::Arc;

    #[test]
    fn writing_shared_bytes_takes_a_private_copy() {
        let owner: ByteOwner = Arc::new(vec![1u8, 2, 3, 4, 5]);
        let mut b = LeafBytes::Shared(SharedBytes::new(owner.clone(), 1..4).unwrap());
        assert_eq!(&*b, &[2, 3, 4]);
        b[0] = 9;
        assert_eq!(&*b, &[9, 3, 4]);
        assert!(matches!(b, LeafBytes::Owned(_)));
        assert_eq!((*owner).as_ref(), &[1, 2, 3, 4, 5]);
    }
}
