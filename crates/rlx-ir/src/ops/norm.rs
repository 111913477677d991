//! Shape rules and builders: LayerNorm, RmsNorm, FusedResidualLN, FusedResidualRmsNorm.
use super::linalg::dims_agree;
use super::{arity, require_float};
use crate::{AxisArg, Dim, DimsFmt, Graph, IrError, NodeId, Op, OpKind, Shape};

/// `p` (gamma, beta or bias) must have x's dtype and exactly the dims `want`.
fn check_param(what: &str, p: &Shape, x: &Shape, want: &[Dim]) -> Result<(), String> {
    if p.dtype != x.dtype {
        return Err(format!(
            "{what} dtype {} differs from x's {}",
            p.dtype, x.dtype
        ));
    }
    let same = p.rank() == want.len() && p.dims.iter().zip(want).all(|(a, b)| dims_agree(a, b));
    if !same {
        return Err(format!(
            "{what} must have the normalised dims {}, got {}",
            DimsFmt(want),
            DimsFmt(&p.dims)
        ));
    }
    Ok(())
}

pub(crate) fn layer_norm(axis: i64, eps: f32, inputs: &[&Shape]) -> Result<Shape, String> {
    norm_over(OpKind::LayerNorm, axis, eps, inputs)
}

pub(crate) fn rms_norm(axis: i64, eps: f32, inputs: &[&Shape]) -> Result<Shape, String> {
    norm_over(OpKind::RmsNorm, axis, eps, inputs)
}

/// x, gamma, [beta]: gamma and beta have the dims `axis..rank` of x.
fn norm_over(kind: OpKind, axis: i64, eps: f32, inputs: &[&Shape]) -> Result<Shape, String> {
    arity(kind, inputs, 2, 3)?;
    require_float(kind, inputs, &[0, 1, 2])?;
    check_eps(eps)?;
    let x = inputs[0];
    let a = x.axis(axis)?;
    let normed = &x.dims[a..];
    check_param("gamma", inputs[1], x, normed)?;
    if let Some(beta) = inputs.get(2) {
        check_param("beta", beta, x, normed)?;
    }
    Ok(x.clone())
}

pub(crate) fn fused_residual_ln(
    has_bias: bool,
    eps: f32,
    inputs: &[&Shape],
) -> Result<Shape, String> {
    residual_norm(OpKind::FusedResidualLN, has_bias, eps, inputs)
}

pub(crate) fn fused_residual_rms_norm(
    has_bias: bool,
    eps: f32,
    inputs: &[&Shape],
) -> Result<Shape, String> {
    residual_norm(OpKind::FusedResidualRmsNorm, has_bias, eps, inputs)
}

/// x, residual, [bias], gamma, [beta], normalised over the last dim.
fn residual_norm(
    kind: OpKind,
    has_bias: bool,
    eps: f32,
    inputs: &[&Shape],
) -> Result<Shape, String> {
    let base = if has_bias { 4 } else { 3 };
    arity(kind, inputs, base, base + 1)?;
    require_float(kind, inputs, &[0, 1, 2, 3, 4])?;
    check_eps(eps)?;
    let (x, res) = (inputs[0], inputs[1]);
    if x.rank() == 0 {
        return Err("x must have rank >= 1".into());
    }
    let same = res.dtype == x.dtype
        && res.rank() == x.rank()
        && res.dims.iter().zip(&x.dims).all(|(a, b)| dims_agree(a, b));
    if !same {
        return Err(format!("residual {res} must match x {x}"));
    }
    let last = &x.dims[x.rank() - 1..];
    let mut i = 2;
    if has_bias {
        check_param("bias", inputs[i], x, last)?;
        i += 1;
    }
    check_param("gamma", inputs[i], x, last)?;
    if let Some(beta) = inputs.get(i + 1) {
        check_param("beta", beta, x, last)?;
    }
    Ok(x.clone())
}

fn check_eps(eps: f32) -> Result<(), String> {
    if eps.is_finite() && eps >= 0.0 {
        Ok(())
    } else {
        Err(format!("eps must be finite and >= 0, got {eps}"))
    }
}

impl Graph {
    /// Layer norm over dims `axis..rank`; gamma (and beta) have the shape of those dims.
    pub fn layer_norm(
        &mut self,
        x: NodeId,
        gamma: NodeId,
        beta: impl Into<Option<NodeId>>,
        axis: impl AxisArg,
        eps: f32,
    ) -> Result<NodeId, IrError> {
        let op = Op::LayerNorm {
            axis: axis.to_axis(),
            eps,
        };
        self.norm_node(op, x, gamma, beta.into())
    }

    /// RMS norm over dims `axis..rank`: x / sqrt(mean(x²) + eps) · gamma (+ beta).
    pub fn rms_norm(
        &mut self,
        x: NodeId,
        gamma: NodeId,
        beta: impl Into<Option<NodeId>>,
        axis: impl AxisArg,
        eps: f32,
    ) -> Result<NodeId, IrError> {
        let op = Op::RmsNorm {
            axis: axis.to_axis(),
            eps,
        };
        self.norm_node(op, x, gamma, beta.into())
    }

    fn norm_node(
        &mut self,
        op: Op,
        x: NodeId,
        gamma: NodeId,
        beta: Option<NodeId>,
    ) -> Result<NodeId, IrError> {
        let mut ins = vec![x, gamma];
        ins.extend(beta);
        self.add_node(op, &ins)
    }

    /// Layer norm of `x + residual (+ bias)` over the last dim.
    pub fn fused_residual_ln(
        &mut self,
        x: NodeId,
        residual: NodeId,
        bias: Option<NodeId>,
        gamma: NodeId,
        beta: Option<NodeId>,
        eps: f32,
    ) -> Result<NodeId, IrError> {
        let op = Op::FusedResidualLN {
            has_bias: bias.is_some(),
            eps,
        };
        self.residual_node(op, [x, residual], bias, gamma, beta)
    }

    /// RMS norm of `x + residual (+ bias)` over the last dim.
    pub fn fused_residual_rms_norm(
        &mut self,
        x: NodeId,
        residual: NodeId,
        bias: Option<NodeId>,
        gamma: NodeId,
        beta: Option<NodeId>,
        eps: f32,
    ) -> Result<NodeId, IrError> {
        let op = Op::FusedResidualRmsNorm {
            has_bias: bias.is_some(),
            eps,
        };
        self.residual_node(op, [x, residual], bias, gamma, beta)
    }

    fn residual_node(
        &mut self,
        op: Op,
        xr: [NodeId; 2],
        bias: Option<NodeId>,
        gamma: NodeId,
        beta: Option<NodeId>,
    ) -> Result<NodeId, IrError> {
        let mut ins = xr.to_vec();
        ins.extend(bias);
        ins.push(gamma);
        ins.extend(beta);
        self.add_node(op, &ins)
    }
}
