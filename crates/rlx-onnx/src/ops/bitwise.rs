//! Integer and logical binary ops: Mod, And / Or / Xor / Not, the Bitwise family and
//! BitShift. Each is one IR `Binary` op (on Bool the bitwise ops are the logical ones).
use super::{one, Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::ImportCtx;
use rlx_ir::{BinaryOp as B, DType, Op};

pub(super) fn register(r: &mut Registry) {
    r.insert("Mod", modulo);
    r.insert("And", |c, n| logical(c, n, B::BitAnd));
    r.insert("Or", |c, n| logical(c, n, B::BitOr));
    r.insert("Xor", |c, n| logical(c, n, B::BitXor));
    r.insert("BitwiseAnd", |c, n| bitwise(c, n, B::BitAnd));
    r.insert("BitwiseOr", |c, n| bitwise(c, n, B::BitOr));
    r.insert("BitwiseXor", |c, n| bitwise(c, n, B::BitXor));
    r.insert("BitwiseNot", bitwise_not);
    r.insert("BitShift", bit_shift);
}

fn modulo(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (a, b) = (c.input(n, 0)?, c.input(n, 1)?);
    let fmod = Attrs(n).i_or("fmod", 0) != 0;
    if !fmod && c.dtype(a)?.is_float() {
        return Err(c.err("fmod = 0 needs integer inputs (ONNX requires fmod = 1 for floats)"));
    }
    one(c.add(Op::Binary(B::Mod { fmod }), &[a, b])?)
}

/// And / Or / Xor take Bool only.
fn logical(c: &mut ImportCtx, n: &NodeProto, op: B) -> Translated {
    let (a, b) = (c.input(n, 0)?, c.input(n, 1)?);
    for x in [a, b] {
        if c.dtype(x)? != DType::Bool {
            return Err(c.err(format!("needs Bool inputs, got {}", c.dtype(x)?)));
        }
    }
    one(c.add(Op::Binary(op), &[a, b])?)
}

fn bitwise(c: &mut ImportCtx, n: &NodeProto, op: B) -> Translated {
    let (a, b) = (c.input(n, 0)?, c.input(n, 1)?);
    one(c.add(Op::Binary(op), &[a, b])?)
}

/// The all-ones value of an unsigned ONNX type rlx holds widened (UINT16 in I32, UINT32 in
/// I64): results must be cut back to its width. None when the held type is exact.
fn widened_unsigned(c: &ImportCtx, n: &NodeProto, i: usize) -> Option<f64> {
    use crate::proto::tensor_proto::DataType as P;
    match P::try_from(c.onnx_type(n, i)?).ok()? {
        P::Uint16 => Some(65535.0),
        P::Uint32 => Some(4_294_967_295.0),
        _ => None,
    }
}

fn bitwise_not(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let dt = c.dtype(x)?;
    let all = match dt {
        DType::U8 => 255.0,
        DType::Bool => return Err(c.err("BitwiseNot needs integer inputs, got Bool")),
        _ => widened_unsigned(c, n, 0).unwrap_or(-1.0),
    };
    let ones = c.scalar(all, dt)?;
    one(c.add(Op::Binary(B::BitXor), &[x, ones])?)
}

fn bit_shift(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (a, b) = (c.input(n, 0)?, c.input(n, 1)?);
    let op = match Attrs(n).s("direction").as_deref() {
        Some("LEFT") => B::ShiftLeft,
        Some("RIGHT") => B::ShiftRight,
        Some(o) => return Err(c.err(format!("direction \"{o}\" (LEFT or RIGHT)"))),
        None => return Err(c.err("needs attribute `direction`")),
    };
    let y = c.add(Op::Binary(op), &[a, b])?;
    match widened_unsigned(c, n, 0) {
        // A left shift of a widened unsigned value keeps bits above its width; drop them.
        Some(mask) if op == B::ShiftLeft => {
            let m = c.scalar(mask, c.dtype(y)?)?;
            one(c.add(Op::Binary(B::BitAnd), &[y, m])?)
        }
        _ => one(y),
    }
}
