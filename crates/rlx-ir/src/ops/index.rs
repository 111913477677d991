//! Shape rules and builders of the index group (ONNX's gather / scatter family and the
//! index generators): GatherElements, GatherND, ScatterElements, ScatterND, OneHot, Range.
//! Index values are only known at run time, so these rules check ranks, dtypes and the
//! sizes they can (static ones); an index out of range is the executor's error.
use super::arity;
use crate::{AxisArg, DType, Dim, Graph, IrError, NodeId, Op, OpKind, ScatterReduction, Shape};

/// Indices must be integers (ONNX allows int32 / int64; every integer width works here).
fn require_int_indices(kind: OpKind, idx: &Shape) -> Result<(), String> {
    if !idx.dtype.is_int() {
        return Err(format!("{kind} indices must be integers, got {idx}"));
    }
    Ok(())
}

/// Statically known sizes where `a` must not exceed `b`.
fn static_gt(a: &Dim, b: &Dim) -> bool {
    matches!((a, b), (Dim::Static(x), Dim::Static(y)) if x > y)
}

/// Statically known sizes that differ.
fn static_ne(a: &Dim, b: &Dim) -> bool {
    matches!((a, b), (Dim::Static(x), Dim::Static(y)) if x != y)
}

/// The rank and per-axis checks GatherElements and ScatterElements share: indices of
/// data's rank, no larger than data off the axis (each index position must exist there).
fn elements_axis(kind: OpKind, data: &Shape, idx: &Shape, axis: i64) -> Result<usize, String> {
    require_int_indices(kind, idx)?;
    if idx.rank() != data.rank() {
        return Err(format!(
            "{kind} indices {idx} must have the rank of data {data}"
        ));
    }
    let a = data.axis(axis)?;
    for (k, (i, d)) in idx.dims.iter().zip(&data.dims).enumerate() {
        if k != a && static_gt(i, d) {
            return Err(format!(
                "{kind} indices {idx} exceed data {data} in dim {k} (off the axis {a})"
            ));
        }
    }
    Ok(a)
}

pub(crate) fn gather_elements(axis: i64, inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::GatherElements, inputs, 2, 2)?;
    let (data, idx) = (inputs[0], inputs[1]);
    elements_axis(OpKind::GatherElements, data, idx, axis)?;
    Ok(Shape::with_dims(idx.dims.clone(), data.dtype))
}

pub(crate) fn scatter_elements(axis: i64, inputs: &[&Shape]) -> Result<Shape, String> {
    let kind = OpKind::ScatterElements;
    arity(kind, inputs, 3, 3)?;
    let (data, idx, upd) = (inputs[0], inputs[1], inputs[2]);
    elements_axis(kind, data, idx, axis)?;
    updates_match(kind, data, upd, &idx.dims)?;
    Ok(data.clone())
}

/// Updates must have data's dtype and the dims `want`.
fn updates_match(kind: OpKind, data: &Shape, upd: &Shape, want: &[Dim]) -> Result<(), String> {
    if upd.dtype != data.dtype {
        return Err(format!(
            "{kind} updates {upd} must have data's dtype {}",
            data.dtype
        ));
    }
    let bad = upd.rank() != want.len() || upd.dims.iter().zip(want).any(|(u, w)| static_ne(u, w));
    if bad {
        return Err(format!(
            "{kind} updates {upd} must have dims {}",
            crate::DimsFmt(want)
        ));
    }
    Ok(())
}

/// The index depth `k` (indices' last dim), which must be static and fit `room`.
fn nd_depth(kind: OpKind, idx: &Shape, room: usize) -> Result<usize, String> {
    require_int_indices(kind, idx)?;
    let Some(last) = idx.dims.last() else {
        return Err(format!("{kind} indices must have rank ≥ 1, got {idx}"));
    };
    let Dim::Static(k) = *last else {
        return Err(format!(
            "{kind} indices {idx} need a static last dim (the index depth)"
        ));
    };
    if k == 0 || k > room {
        return Err(format!(
            "{kind} index depth {k} must be in 1..={room} (the data dims it can index)"
        ));
    }
    Ok(k)
}

pub(crate) fn gather_nd(batch_dims: usize, inputs: &[&Shape]) -> Result<Shape, String> {
    let kind = OpKind::GatherND;
    arity(kind, inputs, 2, 2)?;
    let (data, idx) = (inputs[0], inputs[1]);
    let (r, q) = (data.rank(), idx.rank());
    if batch_dims >= r.min(q) {
        return Err(format!(
            "{kind} batch_dims {batch_dims} must be below the ranks of data {data} and indices {idx}"
        ));
    }
    let k = nd_depth(kind, idx, r - batch_dims)?;
    for b in 0..batch_dims {
        if static_ne(&data.dims[b], &idx.dims[b]) {
            return Err(format!(
                "{kind} batch dim {b} differs: data {data}, indices {idx}"
            ));
        }
    }
    let mut dims = idx.dims[..q - 1].to_vec();
    dims.extend(data.dims[batch_dims + k..].iter().cloned());
    Ok(Shape::with_dims(dims, data.dtype))
}

pub(crate) fn scatter_nd(inputs: &[&Shape]) -> Result<Shape, String> {
    let kind = OpKind::ScatterND;
    arity(kind, inputs, 3, 3)?;
    let (data, idx, upd) = (inputs[0], inputs[1], inputs[2]);
    if data.rank() == 0 {
        return Err(format!("{kind} data must have rank ≥ 1, got {data}"));
    }
    let k = nd_depth(kind, idx, data.rank())?;
    let mut want = idx.dims[..idx.rank() - 1].to_vec();
    want.extend(data.dims[k..].iter().cloned());
    updates_match(kind, data, upd, &want)?;
    Ok(data.clone())
}

pub(crate) fn one_hot(axis: i64, depth: usize, inputs: &[&Shape]) -> Result<Shape, String> {
    let kind = OpKind::OneHot;
    arity(kind, inputs, 2, 2)?;
    let (idx, values) = (inputs[0], inputs[1]);
    if idx.dtype == DType::Bool {
        return Err(format!("{kind} indices must be numbers, got {idx}"));
    }
    if values.numel() != Some(2) {
        return Err(format!(
            "{kind} values must hold [off, on] (2 elements), got {values}"
        ));
    }
    // The new axis may sit anywhere in the output, whose rank is one more.
    let a = crate::normalize_axis(axis, idx.rank() + 1)?;
    let mut dims = idx.dims.clone();
    dims.insert(a, Dim::Static(depth));
    Ok(Shape::with_dims(dims, values.dtype))
}

pub(crate) fn range(len: usize, inputs: &[&Shape]) -> Result<Shape, String> {
    let kind = OpKind::Range;
    arity(kind, inputs, 3, 3)?;
    for (what, s) in ["start", "limit", "delta"].iter().zip(inputs) {
        if s.numel() != Some(1) {
            return Err(format!("{kind} {what} must hold one element, got {s}"));
        }
        if s.dtype != inputs[0].dtype || s.dtype == DType::Bool {
            return Err(format!(
                "{kind} {what} is {}: start, limit and delta need one numeric dtype (start is {})",
                s.dtype, inputs[0].dtype
            ));
        }
    }
    Ok(Shape::new(&[len], inputs[0].dtype))
}

/// `max(ceil((limit − start) / delta), 0)`: the length ONNX Range gives (0 when delta is 0
/// or not finite, where ONNX leaves it undefined).
pub fn range_len(start: f64, limit: f64, delta: f64) -> usize {
    let n = ((limit - start) / delta).ceil();
    if n.is_finite() && n > 0.0 {
        n as usize
    } else {
        0
    }
}

impl Graph {
    /// ONNX GatherElements: `out[i] = data[i with i[axis] = indices[i]]`.
    pub fn gather_elements(
        &mut self,
        data: NodeId,
        indices: NodeId,
        axis: impl AxisArg,
    ) -> Result<NodeId, IrError> {
        let axis = axis.to_axis();
        self.add_node(Op::GatherElements { axis }, &[data, indices])
    }
    /// ONNX GatherND with `batch_dims` shared leading dims.
    pub fn gather_nd(
        &mut self,
        data: NodeId,
        indices: NodeId,
        batch_dims: usize,
    ) -> Result<NodeId, IrError> {
        self.add_node(Op::GatherND { batch_dims }, &[data, indices])
    }
    /// ONNX ScatterElements: data with `updates` combined in at the indexed positions.
    pub fn scatter_elements(
        &mut self,
        data: NodeId,
        indices: NodeId,
        updates: NodeId,
        axis: impl AxisArg,
        reduction: ScatterReduction,
    ) -> Result<NodeId, IrError> {
        let axis = axis.to_axis();
        let op = Op::ScatterElements { axis, reduction };
        self.add_node(op, &[data, indices, updates])
    }
    /// ONNX ScatterND: data with update slices combined in at the indexed slices.
    pub fn scatter_nd(
        &mut self,
        data: NodeId,
        indices: NodeId,
        updates: NodeId,
        reduction: ScatterReduction,
    ) -> Result<NodeId, IrError> {
        self.add_node(Op::ScatterND { reduction }, &[data, indices, updates])
    }
    /// ONNX OneHot with a static depth; `values` is `[off, on]`.
    pub fn one_hot(
        &mut self,
        indices: NodeId,
        values: NodeId,
        depth: usize,
        axis: impl AxisArg,
    ) -> Result<NodeId, IrError> {
        let axis = axis.to_axis();
        self.add_node(Op::OneHot { axis, depth }, &[indices, values])
    }
    /// ONNX Range over one-element inputs; `len` is the length their values give (see
    /// [`range_len`]), fixed when the graph is built.
    pub fn range(
        &mut self,
        start: NodeId,
        limit: NodeId,
        delta: NodeId,
        len: usize,
    ) -> Result<NodeId, IrError> {
        self.add_node(Op::Range { len }, &[start, limit, delta])
    }
}
