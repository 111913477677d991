//! Small graph-building helpers shared by the VJP rules.
use crate::AdError;
use rlx_ir::{CompareOp, DType, Dim, Graph, Node, NodeId, Op, ReduceOp, Shape};

/// A 0-d constant of `dtype` (broadcasts against anything in binary ops).
pub fn scalar(g: &mut Graph, v: f64, dtype: DType) -> Result<NodeId, AdError> {
    Ok(g.scalar(v, dtype)?)
}

/// A 0-d constant of `x`'s dtype.
pub fn scalar_like(g: &mut Graph, v: f64, x: NodeId) -> Result<NodeId, AdError> {
    let dt = g.shape(x)?.dtype;
    scalar(g, v, dt)
}

pub fn compare(g: &mut Graph, op: CompareOp, a: NodeId, b: NodeId) -> Result<NodeId, AdError> {
    Ok(g.add_node(Op::Compare(op), &[a, b])?)
}

/// `cond ? a : b`, broadcasting.
pub fn select(g: &mut Graph, cond: NodeId, a: NodeId, b: NodeId) -> Result<NodeId, AdError> {
    Ok(g.add_node(Op::Where, &[cond, a, b])?)
}

/// `x * c` for a constant c.
pub fn scale(g: &mut Graph, x: NodeId, c: f64) -> Result<NodeId, AdError> {
    let s = scalar_like(g, c, x)?;
    Ok(g.mul(x, s)?)
}

pub fn neg(g: &mut Graph, x: NodeId) -> Result<NodeId, AdError> {
    Ok(g.activation(rlx_ir::Activation::Neg, x)?)
}

pub fn reduce(
    g: &mut Graph,
    op: ReduceOp,
    x: NodeId,
    axes: Vec<i64>,
    keep_dim: bool,
) -> Result<NodeId, AdError> {
    Ok(g.add_node(Op::Reduce { op, axes, keep_dim }, &[x])?)
}

pub fn reshape(g: &mut Graph, x: NodeId, shape: Vec<i64>) -> Result<NodeId, AdError> {
    Ok(g.add_node(Op::Reshape { shape }, &[x])?)
}

pub fn transpose(g: &mut Graph, x: NodeId, perm: Vec<usize>) -> Result<NodeId, AdError> {
    Ok(g.add_node(Op::Transpose { perm }, &[x])?)
}

pub fn expand(g: &mut Graph, x: NodeId, shape: Vec<Dim>) -> Result<NodeId, AdError> {
    Ok(g.add_node(Op::Expand { shape }, &[x])?)
}

/// A node's dims as concrete sizes, or `Unsupported` naming `node` (the op being
/// differentiated) when a dim is symbolic.
pub fn static_dims(g: &Graph, x: NodeId, node: &Node) -> Result<Vec<usize>, AdError> {
    g.shape(x)?
        .static_dims()
        .ok_or_else(|| AdError::Unsupported {
            node: node.id,
            op: node.op.kind().name(),
            msg: format!(
                "needs static dims, {x} is {}",
                g.shape(x).map(|s| s.to_string()).unwrap_or_default()
            ),
        })
}

/// Sum `grad` over the axes along which a tensor of `to_shape` was broadcast, giving a
/// gradient of exactly `to_shape`'s dims: leading axes that `to_shape` lacks are summed
/// away, and axes where `to_shape` has 1 and `grad` does not are summed keeping the dim.
/// Every broadcasting op's rule ends with this.
pub fn unbroadcast(g: &mut Graph, grad: NodeId, to_shape: &Shape) -> Result<NodeId, AdError> {
    let gdims = g.shape(grad)?.dims.clone();
    let (rg, rt) = (gdims.len(), to_shape.dims.len());
    if rt > rg {
        return Err(AdError::Ir(rlx_ir::IrError::Tensor(format!(
            "unbroadcast: gradient {} has lower rank than the target {}",
            g.shape(grad)?,
            to_shape
        ))));
    }
    let lead = rg - rt;
    let inner: Vec<i64> = (lead..rg)
        .filter(|&i| to_shape.dims[i - lead].is_one() && !gdims[i].is_one())
        .map(|i| i as i64)
        .collect();
    let mut out = grad;
    if !inner.is_empty() {
        out = reduce(g, ReduceOp::Sum, out, inner, true)?;
    }
    if lead > 0 {
        out = reduce(g, ReduceOp::Sum, out, (0..lead as i64).collect(), false)?;
    }
    Ok(out)
}

/// `Unsupported` for `node` with a message.
pub fn unsupported(node: &Node, msg: impl Into<String>) -> AdError {
    AdError::Unsupported {
        node: node.id,
        op: node.op.kind().name(),
        msg: msg.into(),
    }
}

/// A `[1, n]` constant 0, 1, …, n−1 of `dtype` (for one-hot comparisons).
pub fn iota_row(g: &mut Graph, n: usize, dtype: DType) -> Result<NodeId, AdError> {
    let v: Vec<f64> = (0..n).map(|i| i as f64).collect();
    Ok(g.constant(rlx_ir::HostTensor::from_f64_as(&[1, n], &v, dtype))?)
}

/// Zeros of `x`'s (static) shape and dtype: the true derivative of a piecewise-constant
/// input such as float indices or labels.
pub fn zeros_of(g: &mut Graph, x: NodeId, node: &Node) -> Result<NodeId, AdError> {
    let dims = static_dims(g, x, node)?;
    let dt = g.shape(x)?.dtype;
    let n = dims.iter().product();
    Ok(g.constant(rlx_ir::HostTensor::from_f64_as(&dims, &vec![0.0; n], dt))?)
}
