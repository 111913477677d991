//! QuantizeLinear into the low-precision float types (float8 ×4, float4): `x / scale`
//! rounded onto the format's grid by `FloatRound`, with the `saturate` attribute (float4
//! always saturates: it has no inf or NaN). As ONNX's reference, the zero point (which must
//! be 0 for float8) is added only for float4. The integer 4-bit and 2-bit types share the
//! int8 path of `quant.rs` (round half to even, add the zero point, clip to the range);
//! DequantizeLinear needs nothing of its own, since carriers hold exact values.
use super::cast_lowp::round_to;
use super::elementwise::cast_to;
use super::quant::along;
use super::{one, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::ImportCtx;
use rlx_ir::{BinaryOp as B, MiniFloat, NodeId, Op};

pub(super) fn quantize_float(
    c: &mut ImportCtx,
    n: &NodeProto,
    (x, s, zp): (NodeId, NodeId, Option<NodeId>),
    m: MiniFloat,
) -> Translated {
    if matches!(m, MiniFloat::E8M0 { .. }) {
        return Err(c.unsupported("quantizing to FLOAT8E8M0"));
    }
    let dt = c.dtype(x)?;
    let s = cast_to(c, s, dt)?;
    let s = along(c, n, s, x)?;
    let mut q = c.add(Op::Binary(B::Div), &[x, s])?;
    if let (Some(z), MiniFloat::E2M1) = (zp, m) {
        let z = cast_to(c, z, dt)?;
        let z = along(c, n, z, x)?;
        q = c.add(Op::Binary(B::Add), &[q, z])?;
    }
    let saturate = Attrs(n).i_or("saturate", 1) != 0;
    one(round_to(c, q, m, saturate)?)
}
