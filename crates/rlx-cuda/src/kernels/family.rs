//! The typed address of one kernel: `Kernel` (library, symbol, packed arguments) and the
//! storage-suffix enums its name is built from. Each family function in `kernels/<lib>.rs`
//! returns a `Kernel`, so the symbol and the argument order are spelled in one place.
use super::{Lib, Src};
use crate::lower::{KArgs, LowerError};
use rlx_ir::DType;

/// One launchable kernel: what `NodeCtx::run` consumes.
#[derive(Clone, Debug)]
pub struct Kernel {
    pub src: Src,
    pub name: String,
    pub args: KArgs,
}

impl Kernel {
    pub(crate) fn new(lib: Lib, name: String, args: KArgs) -> Kernel {
        Kernel {
            src: Src::Lib(lib),
            name,
            args,
        }
    }

    /// A kernel of generated source (a region kernel), named by its code generator.
    pub(crate) fn generated(source: String, name: String, args: KArgs) -> Kernel {
        Kernel {
            src: Src::Generated(source),
            name,
            args,
        }
    }
}

/// The element-type suffix of a kernel name (`_f32`, `_bf16`, `_i64`, …).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sfx {
    F32,
    F16,
    BF16,
    F64,
    I32,
    I64,
    U8,
}

impl Sfx {
    pub fn name(self) -> &'static str {
        match self {
            Sfx::F32 => "f32",
            Sfx::F16 => "f16",
            Sfx::BF16 => "bf16",
            Sfx::F64 => "f64",
            Sfx::I32 => "i32",
            Sfx::I64 => "i64",
            Sfx::U8 => "u8",
        }
    }

    /// A float storage type with an `RLX_FLOAT_TYPES` kernel; others are unsupported.
    pub fn float(dtype: DType) -> Result<Sfx, LowerError> {
        match dtype {
            DType::F32 => Ok(Sfx::F32),
            DType::F16 => Ok(Sfx::F16),
            DType::BF16 => Ok(Sfx::BF16),
            d => Err(LowerError::Unsupported(format!(
                "no {d} kernel (f32/f16/bf16 only)"
            ))),
        }
    }

    /// `float`, plus F64 (families with a separate double kernel).
    pub fn float64(dtype: DType) -> Result<Sfx, LowerError> {
        match dtype {
            DType::F64 => Ok(Sfx::F64),
            d => Sfx::float(d),
        }
    }
}

/// The element width suffix of the raw-bits move kernels (`RLX_UNITS16` in shape_ops.cu).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unit {
    B1,
    B2,
    B4,
    B8,
    B16,
}

impl Unit {
    pub fn name(self) -> &'static str {
        match self {
            Unit::B1 => "b1",
            Unit::B2 => "b2",
            Unit::B4 => "b4",
            Unit::B8 => "b8",
            Unit::B16 => "b16",
        }
    }

    /// The unit of `bytes` bytes (1, 2, 4, 8 or 16).
    pub fn of_bytes(bytes: usize) -> Result<Unit, LowerError> {
        Ok(match bytes {
            1 => Unit::B1,
            2 => Unit::B2,
            4 => Unit::B4,
            8 => Unit::B8,
            16 => Unit::B16,
            b => return Err(LowerError::Unsupported(format!("no {b}-byte copy kernel"))),
        })
    }
}
