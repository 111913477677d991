//! Cast / CastLike into and out of the low-precision types (`lowp.rs`), on their carriers:
//! - into float8 / float4 / E8M0: `FloatRound` (the `saturate` and `round_mode` attributes);
//!   an integer source goes through F64 first, exactly for every carried integer.
//! - into INT4 / UINT4 / INT2 / UINT2: as ONNX's reference (NumPy / ml_dtypes `astype`) —
//!   a float truncates toward zero, then every source keeps its low bits (two's-complement
//!   wrap: `-9 → INT4 7`, `8.5 → INT4 −8`), like any narrowing integer cast (Cast's spec:
//!   "discard higher bits and reinterpret"). Composed from Cast and bitwise ops.
//! - out of a low-precision type: the carrier already holds the exact value, so it is an
//!   ordinary cast of the carrier, plus the widened integer targets (INT8, INT16 …) that
//!   every value of the source fits (INT4 → INT8), where no bits need discarding.
use super::elementwise::cast_to;
use crate::attrs::Attrs;
use crate::lowp::Lowp;
use crate::proto::{tensor_proto::DataType as P, NodeProto};
use crate::tensor::{onnx_dtype_name, rlx_dtype};
use crate::{ImportCtx, OnnxError};
use rlx_ir::{BinaryOp as B, DType, E8M0Round, MiniFloat, NodeId, Op};

/// `x` (input 0 of `n`) cast to ONNX type `code` when the target or the source is a
/// low-precision type; None when neither is (the ordinary Cast applies).
pub(super) fn cast(
    c: &mut ImportCtx,
    n: &NodeProto,
    x: NodeId,
    code: i32,
) -> Result<Option<NodeId>, OnnxError> {
    if let Some(l) = Lowp::of(code) {
        return into_lowp(c, n, x, l).map(Some);
    }
    let src = c.onnx_type(n, 0).and_then(Lowp::of);
    if let Some((lo, hi)) = src.and_then(|s| s.int_range()) {
        if let Some((tlo, thi)) = widened_range(code) {
            if tlo <= lo && hi <= thi {
                let to = rlx_dtype(code).ok_or_else(|| c.err("no carrier"))?;
                return cast_to(c, x, to).map(Some);
            }
            return Err(c.unsupported(format!(
                "cast from {} to {}",
                onnx_dtype_name(c.onnx_type(n, 0).unwrap_or(0)),
                onnx_dtype_name(code)
            )));
        }
    }
    Ok(None)
}

/// The range of an integer type rlx holds only widened.
fn widened_range(code: i32) -> Option<(i64, i64)> {
    Some(match P::try_from(code).ok()? {
        P::Int8 => (-128, 127),
        P::Int16 => (-32768, 32767),
        P::Uint16 => (0, 65535),
        P::Uint32 => (0, u32::MAX as i64),
        P::Uint64 => (0, i64::MAX),
        _ => return None,
    })
}

fn into_lowp(c: &mut ImportCtx, n: &NodeProto, x: NodeId, l: Lowp) -> Result<NodeId, OnnxError> {
    match l {
        Lowp::Float(m) => {
            let saturate = Attrs(n).i_or("saturate", 1) != 0;
            let m = match m {
                MiniFloat::E8M0 { .. } => MiniFloat::E8M0 {
                    round: e8m0_round(c, n)?,
                },
                m => m,
            };
            round_to(c, x, m, saturate)
        }
        Lowp::Int { bits, signed } => wrap_to(c, x, bits, signed),
    }
}

fn e8m0_round(c: &ImportCtx, n: &NodeProto) -> Result<E8M0Round, OnnxError> {
    Ok(match Attrs(n).s("round_mode").as_deref() {
        None | Some("up") => E8M0Round::Up,
        Some("down") => E8M0Round::Down,
        Some("nearest") => E8M0Round::Nearest,
        Some(o) => return Err(c.err(format!("round_mode \"{o}\" is not up, down or nearest"))),
    })
}

/// `x` rounded onto format `m`'s grid, as its F32 carrier.
pub(super) fn round_to(
    c: &mut ImportCtx,
    x: NodeId,
    m: MiniFloat,
    saturate: bool,
) -> Result<NodeId, OnnxError> {
    let x = if c.dtype(x)?.is_float() {
        x
    } else {
        cast_to(c, x, DType::F64)?
    };
    c.add(
        Op::FloatRound {
            format: m,
            saturate,
        },
        &[x],
    )
}

/// `x` into a `bits`-wide integer by keeping its low bits (floats truncate first), as I32.
fn wrap_to(c: &mut ImportCtx, x: NodeId, bits: u32, signed: bool) -> Result<NodeId, OnnxError> {
    // I64 keeps every carried integer and truncates floats with the widest range.
    let v = cast_to(c, x, DType::I64)?;
    let mask = c.scalar(((1i64 << bits) - 1) as f64, DType::I64)?;
    let mut v = c.add(Op::Binary(B::BitAnd), &[v, mask])?;
    if signed {
        // Sign-extend the low `bits`: (v ^ half) − half maps [half, 2·half) to [−half, 0).
        let half = c.scalar((1i64 << (bits - 1)) as f64, DType::I64)?;
        v = c.add(Op::Binary(B::BitXor), &[v, half])?;
        v = c.add(Op::Binary(B::Sub), &[v, half])?;
    }
    cast_to(c, v, DType::I32)
}
