//! QuantizeLinear / DequantizeLinear (per-tensor or per-axis scale and zero point) composed
//! from Cast, elementwise math and the exact half-to-even Round of `rounding.rs`. Blocked
//! quantization is unsupported; the float8 / float4 types go through `quant_lowp.rs`.
use super::rounding::round;
use super::{one, Registry, Translated};
use crate::attrs::Attrs;
use crate::lowp::Lowp;
use crate::proto::{tensor_proto::DataType as P, NodeProto};
use crate::tensor::onnx_dtype_name;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{BinaryOp as B, DType, NodeId, Op};

pub(super) fn register(r: &mut Registry) {
    r.insert("QuantizeLinear", quantize);
    r.insert("DequantizeLinear", dequantize);
    r.insert("DynamicQuantizeLinear", dynamic_quantize);
    r.insert("QLinearMatMul", qlinear_matmul);
    r.insert("MatMulInteger", matmul_integer);
    r.insert("ConvInteger", conv_integer);
    r.insert("QLinearConv", qlinear_conv);
}

/// A per-output-channel `[M]` vector reshaped to `[M, 1, 1, …]` (a weight's zero point) or
/// `[1, M, 1, …]` (an output's scale) for rank `r`.
fn channel(c: &mut ImportCtx, v: NodeId, r: usize, at: usize) -> Result<NodeId, OnnxError> {
    let d = c.static_dims(v)?;
    if d.len() != 1 || d[0] == 1 {
        return Ok(v);
    }
    if at >= r {
        return Err(c.err(format!(
            "a per-channel vector of {} for an operand of rank {r}",
            d[0]
        )));
    }
    let mut shape = vec![1i64; r];
    shape[at] = d[0] as i64;
    c.add(Op::Reshape { shape }, &[v])
}

/// The conv of the centred operands (x − x_zp, w − w_zp) in f32, exact for 8-bit data.
fn centred_conv(
    c: &mut ImportCtx,
    n: &NodeProto,
    (x, xz): (NodeId, Option<NodeId>),
    (w, wz): (NodeId, Option<NodeId>),
) -> Result<NodeId, OnnxError> {
    let x = centred(c, x, xz, false)?;
    let r = c.rank(w)?;
    let wf = super::elementwise::cast_to(c, w, DType::F32)?;
    let w = match wz {
        Some(z) => {
            let z = super::elementwise::cast_to(c, z, DType::F32)?;
            let z = channel(c, z, r, 0)?;
            c.add(Op::Binary(B::Sub), &[wf, z])?
        }
        None => wf,
    };
    super::nn::conv_of(c, n, x, w, None)
}

fn conv_integer(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (x, w) = (c.input(n, 0)?, c.input(n, 1)?);
    let (xz, wz) = (c.opt_input(n, 2)?, c.opt_input(n, 3)?);
    let y = centred_conv(c, n, (x, xz), (w, wz))?;
    one(c.add(Op::Cast { to: DType::I32 }, &[y])?)
}

/// Quantized conv: (conv of the centred operands + int32 bias) · x_scale·w_scale / y_scale,
/// rounded half to even, shifted by y_zero_point and saturated.
fn qlinear_conv(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (x, x_s, x_z) = (c.input(n, 0)?, c.input(n, 1)?, c.input(n, 2)?);
    let (w, w_s, w_z) = (c.input(n, 3)?, c.input(n, 4)?, c.input(n, 5)?);
    let (y_s, y_z) = (c.input(n, 6)?, c.input(n, 7)?);
    let code = c
        .onnx_type(n, 7)
        .ok_or_else(|| c.unsupported("a computed zero point"))?;
    let (lo, hi, out) = range_of(c, code)?;
    let mut acc = centred_conv(c, n, (x, Some(x_z)), (w, Some(w_z)))?;
    let r = c.rank(acc)?;
    if let Some(b) = c.opt_input(n, 8)? {
        let b = super::elementwise::cast_to(c, b, DType::F32)?;
        let b = channel(c, b, r, 1)?;
        acc = c.add(Op::Binary(B::Add), &[acc, b])?;
    }
    let f = |c: &mut ImportCtx, v| super::elementwise::cast_to(c, v, DType::F32);
    let (x_s, w_s, y_s) = (f(c, x_s)?, f(c, w_s)?, f(c, y_s)?);
    let w_s = channel(c, w_s, r, 1)?;
    let xw = c.add(Op::Binary(B::Mul), &[x_s, w_s])?;
    let mult = c.add(Op::Binary(B::Div), &[xw, y_s])?;
    let y = c.add(Op::Binary(B::Mul), &[acc, mult])?;
    let y = round(c, y)?;
    let z = f(c, y_z)?;
    let y = c.add(Op::Binary(B::Add), &[y, z])?;
    let (l, h) = (c.scalar(lo, DType::F32)?, c.scalar(hi, DType::F32)?);
    let y = c.add(Op::Binary(B::Max), &[y, l])?;
    let y = c.add(Op::Binary(B::Min), &[y, h])?;
    one(c.add(Op::Cast { to: out }, &[y])?)
}

/// `v − zero_point` in f32 (exact for 8-bit data); a per-row zero point / scale of the left
/// operand (`[M]`) is reshaped to `[M, 1]`.
fn centred(
    c: &mut ImportCtx,
    v: NodeId,
    zp: Option<NodeId>,
    rows: bool,
) -> Result<NodeId, OnnxError> {
    let f = super::elementwise::cast_to(c, v, DType::F32)?;
    let Some(z) = zp else {
        return Ok(f);
    };
    let z = super::elementwise::cast_to(c, z, DType::F32)?;
    let z = per_row(c, z, rows)?;
    c.add(Op::Binary(B::Sub), &[f, z])
}

fn per_row(c: &mut ImportCtx, v: NodeId, rows: bool) -> Result<NodeId, OnnxError> {
    let d = c.static_dims(v)?;
    if rows && d.len() == 1 && d[0] > 1 {
        return c.add(
            Op::Reshape {
                shape: vec![d[0] as i64, 1],
            },
            &[v],
        );
    }
    Ok(v)
}

/// (a − a_zp) @ (b − b_zp) in exact integers (f32 holds the 8-bit products' sums), as I32.
fn matmul_integer(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (a, b) = (c.input(n, 0)?, c.input(n, 1)?);
    let (az, bz) = (c.opt_input(n, 2)?, c.opt_input(n, 3)?);
    let a = centred(c, a, az, true)?;
    let b = centred(c, b, bz, false)?;
    let y = c.add(Op::MatMul, &[a, b])?;
    one(c.add(Op::Cast { to: DType::I32 }, &[y])?)
}

/// Quantized matmul: the integer product of the centred operands, rescaled by
/// a_scale·b_scale / y_scale, rounded half to even, shifted by y_zero_point and saturated.
fn qlinear_matmul(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (a, a_s, a_z) = (c.input(n, 0)?, c.input(n, 1)?, c.input(n, 2)?);
    let (b, b_s, b_z) = (c.input(n, 3)?, c.input(n, 4)?, c.input(n, 5)?);
    let (y_s, y_z) = (c.input(n, 6)?, c.input(n, 7)?);
    let code = c
        .onnx_type(n, 7)
        .ok_or_else(|| c.unsupported("a computed zero point"))?;
    let (lo, hi, out) = range_of(c, code)?;
    let a = centred(c, a, Some(a_z), true)?;
    let b = centred(c, b, Some(b_z), false)?;
    let acc = c.add(Op::MatMul, &[a, b])?;
    let f = |c: &mut ImportCtx, v| super::elementwise::cast_to(c, v, DType::F32);
    let (a_s, b_s, y_s) = (f(c, a_s)?, f(c, b_s)?, f(c, y_s)?);
    let a_s = per_row(c, a_s, true)?;
    let ab = c.add(Op::Binary(B::Mul), &[a_s, b_s])?;
    let mult = c.add(Op::Binary(B::Div), &[ab, y_s])?;
    let y = c.add(Op::Binary(B::Mul), &[acc, mult])?;
    let y = round(c, y)?;
    let z = f(c, y_z)?;
    let y = c.add(Op::Binary(B::Add), &[y, z])?;
    let (l, h) = (c.scalar(lo, DType::F32)?, c.scalar(hi, DType::F32)?);
    let y = c.add(Op::Binary(B::Max), &[y, l])?;
    let y = c.add(Op::Binary(B::Min), &[y, h])?;
    one(c.add(Op::Cast { to: out }, &[y])?)
}

/// uint8 quantization with scale and zero point from the data's range (widened to hold 0):
/// scale = (max − min) / 255 (1 when max = min = 0), zero point = saturate(round(−min / scale)).
fn dynamic_quantize(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let dt = c.dtype(x)?;
    let all: Vec<i64> = (0..c.rank(x)? as i64).collect();
    let red = |c: &mut ImportCtx, op| {
        c.add(
            Op::Reduce {
                op,
                axes: all.clone(),
                keep_dim: false,
            },
            &[x],
        )
    };
    let zero = c.scalar(0.0, dt)?;
    let mx = red(c, rlx_ir::ReduceOp::Max)?;
    let mx = c.add(Op::Binary(B::Max), &[mx, zero])?;
    let mn = red(c, rlx_ir::ReduceOp::Min)?;
    let mn = c.add(Op::Binary(B::Min), &[mn, zero])?;
    let span = c.add(Op::Binary(B::Sub), &[mx, mn])?;
    let q255 = c.scalar(255.0, dt)?;
    let scale = c.add(Op::Binary(B::Div), &[span, q255])?;
    // An all-zero x has no range: scale 1 (as ONNX Runtime and the reference evaluator
    // take it) rather than 0, whose quotients would be NaN.
    let flat = c.add(Op::Compare(rlx_ir::CompareOp::Eq), &[span, zero])?;
    let one_s = c.scalar(1.0, dt)?;
    let scale = c.add(Op::Where, &[flat, one_s, scale])?;
    let neg = c.add(Op::Binary(B::Sub), &[zero, mn])?;
    let zf = c.add(Op::Binary(B::Div), &[neg, scale])?;
    let zf = round(c, zf)?;
    let zf = c.add(Op::Binary(B::Max), &[zf, zero])?;
    let zf = c.add(Op::Binary(B::Min), &[zf, q255])?;
    let q = c.add(Op::Binary(B::Div), &[x, scale])?;
    let q = round(c, q)?;
    let q = c.add(Op::Binary(B::Add), &[q, zf])?;
    let q = c.add(Op::Binary(B::Max), &[q, zero])?;
    let q = c.add(Op::Binary(B::Min), &[q, q255])?;
    let y = c.add(Op::Cast { to: DType::U8 }, &[q])?;
    let zp = c.add(Op::Cast { to: DType::U8 }, &[zf])?;
    Ok(Some(vec![y, scale, zp]))
}

/// A per-axis `[C]` scale / zero point reshaped to broadcast along `axis` of x; scalars as is.
pub(super) fn along(
    c: &mut ImportCtx,
    n: &NodeProto,
    v: NodeId,
    x: NodeId,
) -> Result<NodeId, OnnxError> {
    if Attrs(n).i_or("block_size", 0) != 0 {
        return Err(c.unsupported("blocked quantization"));
    }
    let vd = c.static_dims(v)?;
    if vd.iter().product::<usize>() == 1 && vd.len() <= 1 {
        return Ok(v);
    }
    let r = c.rank(x)?;
    let a = c
        .shape(x)?
        .axis(Attrs(n).i_or("axis", 1))
        .map_err(|e| c.err(e))?;
    let mut shape = vec![1i64; r];
    shape[a] = -1;
    c.add(Op::Reshape { shape }, &[v])
}

/// Saturation range of an ONNX integer type rlx can hold.
fn range_of(c: &ImportCtx, code: i32) -> Result<(f64, f64, DType), OnnxError> {
    Ok(match P::try_from(code) {
        Ok(P::Uint8) => (0.0, 255.0, DType::U8),
        Ok(P::Int8) => (-128.0, 127.0, DType::I32),
        Ok(P::Uint16) => (0.0, 65535.0, DType::I32),
        Ok(P::Int16) => (-32768.0, 32767.0, DType::I32),
        Ok(P::Int32) => (i32::MIN as f64, i32::MAX as f64, DType::I32),
        _ if Lowp::of(code).and_then(Lowp::int_range).is_some() => {
            let (lo, hi) = Lowp::of(code).and_then(Lowp::int_range).unwrap_or_default();
            (lo as f64, hi as f64, DType::I32)
        }
        _ => return Err(c.unsupported(format!("quantizing to {}", onnx_dtype_name(code)))),
    })
}

fn quantize(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (x, s) = (c.input(n, 0)?, c.input(n, 1)?);
    let zp = c.opt_input(n, 2)?;
    let code = match (zp, Attrs(n).i("output_dtype")) {
        (_, Some(t)) if t != 0 => t as i32,
        (Some(_), _) => c
            .onnx_type(n, 2)
            .ok_or_else(|| c.unsupported("a computed zero point"))?,
        (None, _) => P::Uint8 as i32,
    };
    if let Some(Lowp::Float(m)) = Lowp::of(code) {
        return super::quant_lowp::quantize_float(c, n, (x, s, zp), m);
    }
    let (lo, hi, out) = range_of(c, code)?;
    let dt = c.dtype(x)?;
    let s = super::elementwise::cast_to(c, s, dt)?;
    let s = along(c, n, s, x)?;
    let q = c.add(Op::Binary(B::Div), &[x, s])?;
    let mut q = round(c, q)?;
    if let Some(z) = zp {
        let z = super::elementwise::cast_to(c, z, dt)?;
        let z = along(c, n, z, x)?;
        q = c.add(Op::Binary(B::Add), &[q, z])?;
    }
    let (l, h) = (c.scalar(lo, dt)?, c.scalar(hi, dt)?);
    let q = c.add(Op::Binary(B::Max), &[q, l])?;
    let q = c.add(Op::Binary(B::Min), &[q, h])?;
    one(c.add(Op::Cast { to: out }, &[q])?)
}

fn dequantize(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (x, s) = (c.input(n, 0)?, c.input(n, 1)?);
    if let Some(code) = c.onnx_type(n, 0) {
        if !matches!(Lowp::of(code), Some(Lowp::Float(_))) {
            range_of(c, code)?;
        }
    }
    let dt = c.dtype(s)?;
    let mut y = super::elementwise::cast_to(c, x, dt)?;
    if let Some(z) = c.opt_input(n, 2)? {
        let z = super::elementwise::cast_to(c, z, dt)?;
        let z = along(c, n, z, x)?;
        y = c.add(Op::Binary(B::Sub), &[y, z])?;
    }
    let s = along(c, n, s, x)?;
    one(c.add(Op::Binary(B::Mul), &[y, s])?)
}
