//! Shape rules and builders: Reduce, Softmax, ArgMax, CumSum, TopK and the softmax cross-entropy family.
use super::{arity, require_float};
use crate::{AxisArg, DType, Dim, DimsFmt, Graph, IrError, NodeId, Op, OpKind, ReduceOp, Shape};

/// Normalised, duplicate-free reduction axes; an empty list means every axis.
pub fn reduce_axes(axes: &[i64], rank: usize) -> Result<Vec<usize>, String> {
    if axes.is_empty() {
        return Ok((0..rank).collect());
    }
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = crate::normalize_axis(a, rank)?;
        if out.contains(&n) {
            return Err(format!("axis {a} is listed twice in {axes:?}"));
        }
        out.push(n);
    }
    out.sort_unstable();
    Ok(out)
}

/// Drop (or keep as 1) the listed axes.
fn reduced_dims(dims: &[Dim], axes: &[usize], keep_dim: bool) -> Vec<Dim> {
    dims.iter()
        .enumerate()
        .filter_map(|(i, d)| {
            if !axes.contains(&i) {
                Some(d.clone())
            } else if keep_dim {
                Some(Dim::Static(1))
            } else {
                None
            }
        })
        .collect()
}

/// Two dims that must be equal: static sizes must match; a symbol is checked once bound.
fn same_dim(a: &Dim, b: &Dim) -> bool {
    match (a, b) {
        (Dim::Static(x), Dim::Static(y)) => x == y,
        _ => true,
    }
}

fn require_rank(what: &str, s: &Shape, rank: usize) -> Result<(), String> {
    if s.rank() != rank {
        return Err(format!("{what} must have rank {rank}, got {s}"));
    }
    Ok(())
}

fn require_same_rows(what: &str, logits: &Shape, other: &Shape) -> Result<(), String> {
    if !same_dim(&logits.dims[0], &other.dims[0]) {
        return Err(format!(
            "{what} {} does not match the {} rows of logits {}",
            DimsFmt(&other.dims),
            logits.dims[0],
            DimsFmt(&logits.dims)
        ));
    }
    Ok(())
}

pub(crate) fn reduce(axes: &[i64], keep_dim: bool, inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::Reduce, inputs, 1, 1)?;
    let x = inputs[0];
    let axes = reduce_axes(axes, x.rank())?;
    Ok(Shape::with_dims(
        reduced_dims(&x.dims, &axes, keep_dim),
        x.dtype,
    ))
}

pub(crate) fn softmax(axis: i64, inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::Softmax, inputs, 1, 1)?;
    require_float(OpKind::Softmax, inputs, &[0])?;
    inputs[0].axis(axis)?;
    Ok(inputs[0].clone())
}

pub(crate) fn argmax(axis: i64, keep_dim: bool, inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::ArgMax, inputs, 1, 1)?;
    let x = inputs[0];
    let a = x.axis(axis)?;
    Ok(Shape::with_dims(
        reduced_dims(&x.dims, &[a], keep_dim),
        DType::I64,
    ))
}

/// Same shape; Bool has no sum.
pub(crate) fn cumsum(axis: i64, inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::CumSum, inputs, 1, 1)?;
    let x = inputs[0];
    x.axis(axis)?;
    if x.dtype == DType::Bool {
        return Err(format!("{} needs numbers, got {x}", OpKind::CumSum));
    }
    Ok(x.clone())
}

/// `k` entries of `axis`, as I64 indices.
pub(crate) fn top_k(k: usize, axis: i64, inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::TopK, inputs, 1, 1)?;
    let x = inputs[0];
    let a = x.axis(axis)?;
    if x.dtype == DType::Bool {
        return Err(format!("{} needs numbers, got {x}", OpKind::TopK));
    }
    if let Dim::Static(n) = x.dims[a] {
        if k > n {
            return Err(format!("{} k = {k} exceeds axis {a} of {x}", OpKind::TopK));
        }
    }
    let mut dims = x.dims.clone();
    dims[a] = Dim::Static(k);
    Ok(Shape::with_dims(dims, DType::I64))
}

/// logits `[N, C]`, dense targets `[N, C]` → `[N]`.
pub(crate) fn softmax_cross_entropy(inputs: &[&Shape]) -> Result<Shape, String> {
    let kind = OpKind::SoftmaxCrossEntropy;
    arity(kind, inputs, 2, 2)?;
    require_float(kind, inputs, &[0, 1])?;
    let (l, t) = (inputs[0], inputs[1]);
    require_rank("logits", l, 2)?;
    require_rank("targets", t, 2)?;
    if !same_dim(&l.dims[0], &t.dims[0]) || !same_dim(&l.dims[1], &t.dims[1]) {
        return Err(format!("targets {t} do not match logits {l}"));
    }
    Ok(Shape::with_dims(vec![l.dims[0].clone()], l.dtype))
}

/// logits `[N, C]`, labels `[N]` → `[N]`.
pub(crate) fn softmax_cross_entropy_with_logits(inputs: &[&Shape]) -> Result<Shape, String> {
    let kind = OpKind::SoftmaxCrossEntropyWithLogits;
    arity(kind, inputs, 2, 2)?;
    require_float(kind, inputs, &[0])?;
    let (l, y) = (inputs[0], inputs[1]);
    require_rank("logits", l, 2)?;
    require_rank("labels", y, 1)?;
    require_same_rows("labels", l, y)?;
    Ok(Shape::with_dims(vec![l.dims[0].clone()], l.dtype))
}

/// logits, labels (`[N]` or dense `[N, C]`), d_loss `[N]` → dlogits `[N, C]`.
pub(crate) fn softmax_cross_entropy_backward(inputs: &[&Shape]) -> Result<Shape, String> {
    let kind = OpKind::SoftmaxCrossEntropyBackward;
    arity(kind, inputs, 3, 3)?;
    require_float(kind, inputs, &[0, 2])?;
    let (l, y, d) = (inputs[0], inputs[1], inputs[2]);
    require_rank("logits", l, 2)?;
    require_rank("d_loss", d, 1)?;
    match y.rank() {
        1 => require_same_rows("labels", l, y)?,
        2 => {
            if !y.dtype.is_float() {
                return Err(format!("dense targets must be a float type, got {y}"));
            }
            if !same_dim(&l.dims[0], &y.dims[0]) || !same_dim(&l.dims[1], &y.dims[1]) {
                return Err(format!("targets {y} do not match logits {l}"));
            }
        }
        _ => {
            return Err(format!(
                "labels must be [N] integers or dense [N, C] targets, got {y}"
            ))
        }
    }
    require_same_rows("d_loss", l, d)?;
    Ok(l.clone())
}

impl Graph {
    /// Reduce over `axes` (negative count from the end; empty = every axis).
    pub fn reduce<A: AxisArg>(
        &mut self,
        x: NodeId,
        op: ReduceOp,
        axes: &[A],
        keep_dim: bool,
    ) -> Result<NodeId, IrError> {
        let axes = axes.iter().map(|a| a.to_axis()).collect();
        self.add_node(Op::Reduce { op, axes, keep_dim }, &[x])
    }
    /// Reduce over every axis (an untyped `&[]` cannot name its element type).
    pub fn reduce_all(
        &mut self,
        x: NodeId,
        op: ReduceOp,
        keep_dim: bool,
    ) -> Result<NodeId, IrError> {
        self.reduce::<i64>(x, op, &[], keep_dim)
    }
    pub fn sum<A: AxisArg>(
        &mut self,
        x: NodeId,
        axes: &[A],
        keep_dim: bool,
    ) -> Result<NodeId, IrError> {
        self.reduce(x, ReduceOp::Sum, axes, keep_dim)
    }
    pub fn mean<A: AxisArg>(
        &mut self,
        x: NodeId,
        axes: &[A],
        keep_dim: bool,
    ) -> Result<NodeId, IrError> {
        self.reduce(x, ReduceOp::Mean, axes, keep_dim)
    }
    pub fn reduce_max<A: AxisArg>(
        &mut self,
        x: NodeId,
        axes: &[A],
        keep_dim: bool,
    ) -> Result<NodeId, IrError> {
        self.reduce(x, ReduceOp::Max, axes, keep_dim)
    }
    pub fn reduce_min<A: AxisArg>(
        &mut self,
        x: NodeId,
        axes: &[A],
        keep_dim: bool,
    ) -> Result<NodeId, IrError> {
        self.reduce(x, ReduceOp::Min, axes, keep_dim)
    }
    pub fn reduce_prod<A: AxisArg>(
        &mut self,
        x: NodeId,
        axes: &[A],
        keep_dim: bool,
    ) -> Result<NodeId, IrError> {
        self.reduce(x, ReduceOp::Prod, axes, keep_dim)
    }
    pub fn softmax(&mut self, x: NodeId, axis: impl AxisArg) -> Result<NodeId, IrError> {
        self.add_node(
            Op::Softmax {
                axis: axis.to_axis(),
            },
            &[x],
        )
    }
    /// Index of the max along `axis` (first on ties), as I64.
    pub fn argmax(
        &mut self,
        x: NodeId,
        axis: impl AxisArg,
        keep_dim: bool,
    ) -> Result<NodeId, IrError> {
        self.add_node(
            Op::ArgMax {
                axis: axis.to_axis(),
                keep_dim,
            },
            &[x],
        )
    }
    /// Running sum along `axis` (ONNX CumSum).
    pub fn cumsum(
        &mut self,
        x: NodeId,
        axis: impl AxisArg,
        exclusive: bool,
        reverse: bool,
    ) -> Result<NodeId, IrError> {
        let axis = axis.to_axis();
        let op = Op::CumSum {
            axis,
            exclusive,
            reverse,
        };
        self.add_node(op, &[x])
    }
    /// ONNX TopK: `(values, indices)` of the `k` largest (or smallest) entries along
    /// `axis`. One `TopK` node gives the I64 indices; the values are a `GatherElements` of
    /// x by them (see `Op::TopK`).
    pub fn top_k(
        &mut self,
        x: NodeId,
        k: usize,
        axis: impl AxisArg,
        largest: bool,
        sorted: bool,
    ) -> Result<(NodeId, NodeId), IrError> {
        let axis = axis.to_axis();
        let op = Op::TopK {
            k,
            axis,
            largest,
            sorted,
        };
        let idx = self.add_node(op, &[x])?;
        let values = self.gather_elements(x, idx, axis)?;
        Ok((values, idx))
    }
    /// logits `[N,C]`, dense targets `[N,C]` → per-row loss `[N]`.
    pub fn softmax_cross_entropy(
        &mut self,
        logits: NodeId,
        targets: NodeId,
    ) -> Result<NodeId, IrError> {
        self.add_node(Op::SoftmaxCrossEntropy, &[logits, targets])
    }
    /// logits `[N,C]`, class labels `[N]` → per-row loss `[N]`.
    pub fn softmax_cross_entropy_with_logits(
        &mut self,
        logits: NodeId,
        labels: NodeId,
    ) -> Result<NodeId, IrError> {
        self.add_node(Op::SoftmaxCrossEntropyWithLogits, &[logits, labels])
    }
    /// logits, labels (`[N]` classes or dense `[N,C]`), d_loss `[N]` → dlogits `[N,C]`.
    pub fn softmax_cross_entropy_backward(
        &mut self,
        logits: NodeId,
        labels: NodeId,
        d_loss: NodeId,
    ) -> Result<NodeId, IrError> {
        self.add_node(Op::SoftmaxCrossEntropyBackward, &[logits, labels, d_loss])
    }
}
