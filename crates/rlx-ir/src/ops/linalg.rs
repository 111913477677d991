//! Shape rules and builders: MatMul, FusedMatMulBiasAct, DequantMatMul, FusedDequantMatMul.
use super::{arity, mul, require_float};
use crate::{
    broadcast_dims, Activation, DType, Dim, DimsFmt, Graph, IrError, NodeId, Op, OpKind,
    QuantScheme, Shape,
};

/// Two dims that may still name the same size: equal, or one of them is symbolic (the CPU
/// re-runs the rule once the symbols are bound, so a real mismatch is still caught).
pub(crate) fn dims_agree(a: &Dim, b: &Dim) -> bool {
    match (a, b) {
        (Dim::Static(x), Dim::Static(y)) => x == y,
        _ => true,
    }
}

/// NumPy matmul shape: batch dims broadcast; a rank-1 `a` is `[1, K]` and a rank-1 `b` is
/// `[K, 1]`, the added dim being removed from the result.
fn matmul_shape(a: &Shape, b: &Shape) -> Result<Shape, String> {
    if a.dtype != b.dtype {
        return Err(format!("dtypes differ: {} vs {}", a.dtype, b.dtype));
    }
    if a.rank() == 0 || b.rank() == 0 {
        return Err("matmul operands must have rank >= 1".into());
    }
    let (ar, br) = (a.rank(), b.rank());
    let ka = &a.dims[ar - 1];
    let kb = if br == 1 { &b.dims[0] } else { &b.dims[br - 2] };
    if !dims_agree(ka, kb) {
        return Err(format!(
            "inner dims differ: {} @ {} ({ka} vs {kb})",
            DimsFmt(&a.dims),
            DimsFmt(&b.dims)
        ));
    }
    let a_batch = &a.dims[..ar.saturating_sub(2)];
    let b_batch = &b.dims[..br.saturating_sub(2)];
    let mut dims = broadcast_dims(a_batch, b_batch)?;
    if ar >= 2 {
        dims.push(a.dims[ar - 2].clone());
    }
    if br >= 2 {
        dims.push(b.dims[br - 1].clone());
    }
    Ok(Shape::with_dims(dims, a.dtype))
}

pub(crate) fn matmul(inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::MatMul, inputs, 2, 2)?;
    require_float(OpKind::MatMul, inputs, &[0, 1])?;
    matmul_shape(inputs[0], inputs[1])
}

pub(crate) fn fused_matmul_bias_act(inputs: &[&Shape]) -> Result<Shape, String> {
    let kind = OpKind::FusedMatMulBiasAct;
    arity(kind, inputs, 3, 3)?;
    require_float(kind, inputs, &[0, 1, 2])?;
    let (w, bias) = (inputs[1], inputs[2]);
    if w.rank() < 2 {
        return Err(format!(
            "weight must have rank >= 2, got {}",
            DimsFmt(&w.dims)
        ));
    }
    let out = matmul_shape(inputs[0], w)?;
    if bias.dtype != out.dtype {
        return Err(format!(
            "bias dtype {} differs from {}",
            bias.dtype, out.dtype
        ));
    }
    let n = &out.dims[out.rank() - 1];
    if bias.rank() != 1 || !dims_agree(&bias.dims[0], n) {
        return Err(format!(
            "bias must be [{n}] (the output's last dim), got {}",
            DimsFmt(&bias.dims)
        ));
    }
    Ok(out)
}

pub(crate) fn dequant_matmul(scheme: QuantScheme, inputs: &[&Shape]) -> Result<Shape, String> {
    let kind = OpKind::DequantMatMul;
    arity(kind, inputs, 2, 2)?;
    require_float(kind, inputs, &[0])?;
    let (x, w) = (inputs[0], inputs[1]);
    if w.dtype != DType::U8 {
        return Err(format!("packed weight must be u8, got {}", w.dtype));
    }
    if x.rank() == 0 {
        return Err("x must have rank >= 1".into());
    }
    if w.rank() != 2 {
        return Err(format!(
            "packed weight must be [N, K/{} * {}], got {}",
            scheme.block_len(),
            scheme.block_bytes(),
            DimsFmt(&w.dims)
        ));
    }
    let k = &x.dims[x.rank() - 1];
    if let Dim::Static(k) = k {
        let bl = scheme.block_len();
        if !k.is_multiple_of(bl) {
            return Err(format!(
                "K = {k} is not a multiple of {scheme:?}'s block size {bl}"
            ));
        }
        let row = mul("packed row bytes", k / bl, scheme.block_bytes())?;
        let want = Dim::Static(row);
        if !dims_agree(&w.dims[1], &want) {
            return Err(format!(
                "packed weight rows must hold {want} bytes for K = {k} ({scheme:?}), got {}",
                w.dims[1]
            ));
        }
    }
    let mut dims = x.dims[..x.rank() - 1].to_vec();
    dims.push(w.dims[0].clone());
    Ok(Shape::with_dims(dims, x.dtype))
}

/// x, w, [gamma], [residual]: DequantMatMul's rule on (x, w); gamma `[K]` and the residual
/// (the output's shape) in x's dtype.
pub(crate) fn fused_dequant_matmul(
    scheme: QuantScheme,
    norm_eps: Option<f32>,
    residual: bool,
    glu: Option<bool>,
    inputs: &[&Shape],
) -> Result<Shape, String> {
    let kind = OpKind::FusedDequantMatMul;
    let want = 2 + usize::from(norm_eps.is_some()) + usize::from(residual);
    arity(kind, inputs, want, want)?;
    // With a SwiGLU input the product sees x's rows halved.
    let halved;
    let x = match glu {
        None => inputs[0],
        Some(_) => {
            if norm_eps.is_some() {
                return Err("a SwiGLU input takes no norm".into());
            }
            let x = inputs[0];
            let mut dims = x.dims.clone();
            match dims.last_mut() {
                Some(Dim::Static(k)) if k.is_multiple_of(2) => *k /= 2,
                _ => {
                    return Err(format!(
                        "a SwiGLU input needs a static even last dim, got {x}"
                    ))
                }
            }
            halved = Shape::with_dims(dims, x.dtype);
            &halved
        }
    };
    let out = dequant_matmul(scheme, &[x, inputs[1]])?;
    let mut next = 2;
    if let Some(eps) = norm_eps {
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(format!("norm eps must be finite and >= 0, got {eps}"));
        }
        let g = inputs[next];
        let k = &x.dims[x.rank() - 1];
        if g.dtype != x.dtype || g.rank() != 1 || !dims_agree(&g.dims[0], k) {
            return Err(format!(
                "gamma must be {} [{k}], got {} {}",
                x.dtype,
                g.dtype,
                DimsFmt(&g.dims)
            ));
        }
        next += 1;
    }
    if residual {
        let r = inputs[next];
        let same =
            r.rank() == out.rank() && r.dims.iter().zip(&out.dims).all(|(a, b)| dims_agree(a, b));
        if r.dtype != out.dtype || !same {
            return Err(format!(
                "residual must be {} {}, got {} {}",
                out.dtype,
                DimsFmt(&out.dims),
                r.dtype,
                DimsFmt(&r.dims)
            ));
        }
    }
    Ok(out)
}

pub(crate) fn dequantize(scheme: QuantScheme, inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::Dequantize, inputs, 1, 1)?;
    let x = inputs[0];
    if x.dtype != DType::U8 || x.rank() == 0 {
        return Err(format!("packed rows must be u8 [.., bytes], got {x}"));
    }
    let mut dims = x.dims.clone();
    let last = dims.len() - 1;
    if let Dim::Static(b) = dims[last] {
        let bb = scheme.block_bytes();
        if !b.is_multiple_of(bb) {
            return Err(format!(
                "a packed row of {b} bytes is not whole {scheme:?} blocks of {bb} bytes"
            ));
        }
        dims[last] = Dim::Static(mul("dequantized row", b / bb, scheme.block_len())?);
    } else {
        return Err(format!("the packed row length of {x} must be static"));
    }
    Ok(Shape::with_dims(dims, DType::F32))
}

impl Graph {
    /// Decode packed rows of `scheme` to f32 (`Op::Dequantize`).
    pub fn dequantize(&mut self, packed: NodeId, scheme: QuantScheme) -> Result<NodeId, IrError> {
        self.add_node(Op::Dequantize { scheme }, &[packed])
    }

    /// NumPy `matmul`: batched, batch dims broadcast, rank-1 operands promoted.
    pub fn matmul(&mut self, a: NodeId, b: NodeId) -> Result<NodeId, IrError> {
        self.add_node(Op::MatMul, &[a, b])
    }

    /// `activation(a @ w + bias)`, bias `[N]`.
    pub fn matmul_bias_act(
        &mut self,
        a: NodeId,
        w: NodeId,
        bias: NodeId,
        activation: Option<Activation>,
    ) -> Result<NodeId, IrError> {
        self.add_node(Op::FusedMatMulBiasAct { activation }, &[a, w, bias])
    }

    /// `x @ Wᵀ` with W `[N, K]` stored as packed blocks of `scheme`.
    pub fn dequant_matmul(
        &mut self,
        x: NodeId,
        packed_w: NodeId,
        scheme: QuantScheme,
    ) -> Result<NodeId, IrError> {
        self.add_node(Op::DequantMatMul { scheme }, &[x, packed_w])
    }

    /// `rms_norm(x)·gamma @ Wᵀ + residual` in one node; `norm` is (gamma `[K]`, eps).
    pub fn fused_dequant_matmul(
        &mut self,
        x: NodeId,
        packed_w: NodeId,
        scheme: QuantScheme,
        norm: Option<(NodeId, f32)>,
        residual: Option<NodeId>,
    ) -> Result<NodeId, IrError> {
        let mut ins = vec![x, packed_w];
        ins.extend(norm.map(|(g, _)| g));
        ins.extend(residual);
        let op = Op::FusedDequantMatMul {
            scheme,
            norm_eps: norm.map(|(_, e)| e),
            residual: residual.is_some(),
            glu: None,
        };
        self.add_node(op, &ins)
    }
}
