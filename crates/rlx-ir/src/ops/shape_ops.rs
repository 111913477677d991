//! Shape rules and builders of the shape group: Reshape, Expand, Transpose, Narrow, Concat,
//! Gather, Tile, Pad, Slice; also the per-step rules a TransformRegion composes
//! ([`transform_step_dims`], used by `region.rs`).
//!
//! A size that depends on a symbol the rule cannot resolve becomes a new symbol named after
//! its expression (`B*3/2`, `S+4`): never bound by a caller, but stable, so two nodes that
//! compute the same expression agree. The executor re-runs these rules on concrete shapes.
use super::{add, arity, mul};
use crate::{
    broadcast_dims, AxisArg, Dim, DimsFmt, Graph, IrError, NodeId, Op, OpKind, Shape, TransformStep,
};
use std::collections::HashMap;

/// A size known only as an expression of symbols.
fn expr(s: String) -> Dim {
    Dim::Dynamic(s)
}

/// Symbols (sorted) and the static product of a dim list; `what` names the list in the
/// message when the product overflows.
fn factors(what: &str, dims: &[Dim]) -> Result<(Vec<String>, usize), String> {
    let mut syms = vec![];
    let mut prod = 1usize;
    for d in dims {
        match d {
            Dim::Static(n) => prod = mul(what, prod, *n)?,
            Dim::Dynamic(s) => syms.push(s.clone()),
        }
    }
    syms.sort();
    Ok((syms, prod))
}

/// Remove `sub` from `all` as multisets; None when `sub` is not contained.
fn remove_all(all: &[String], sub: &[String]) -> Option<Vec<String>> {
    let mut rest = all.to_vec();
    for s in sub {
        let i = rest.iter().position(|r| r == s)?;
        rest.remove(i);
    }
    Some(rest)
}

/// ONNX Reshape: one -1 is inferred, 0 copies the input dim at that position. A 1-element
/// input may also expand to any target size (it broadcasts).
pub fn reshape_dims(input: &[Dim], target: &[i64]) -> Result<Vec<Dim>, String> {
    let mut out: Vec<Option<Dim>> = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, &t) in target.iter().enumerate() {
        match t {
            -1 => {
                if infer_at.replace(i).is_some() {
                    return Err(format!("reshape target {target:?} has more than one -1"));
                }
                out.push(None);
            }
            0 => {
                let d = input.get(i).ok_or_else(|| {
                    format!(
                        "reshape target {target:?} copies dim {i} (0) but the input {} has rank {}",
                        DimsFmt(input),
                        input.len()
                    )
                })?;
                out.push(Some(d.clone()));
            }
            t if t < 0 => return Err(format!("reshape target {target:?} has invalid size {t}")),
            t => out.push(Some(Dim::Static(t as usize))),
        }
    }
    let known: Vec<Dim> = out.iter().flatten().cloned().collect();
    let (in_syms, in_prod) = factors("reshape input size", input)?;
    let (t_syms, t_prod) = factors("reshape target size", &known)?;
    let mismatch = || {
        format!(
            "cannot reshape {} ({} elements) into {target:?}",
            DimsFmt(input),
            if in_syms.is_empty() {
                in_prod.to_string()
            } else {
                "a symbolic number of".into()
            }
        )
    };
    let rest = remove_all(&in_syms, &t_syms);
    if let Some(i) = infer_at {
        let inferred = match &rest {
            Some(rest) if t_prod != 0 && in_prod % t_prod == 0 => {
                let k = in_prod / t_prod;
                match (rest.len(), k) {
                    (0, k) => Dim::Static(k),
                    (_, 1) => expr(rest.join("*")),
                    _ => expr(format!("{}*{k}", rest.join("*"))),
                }
            }
            Some(rest) if rest.is_empty() || t_prod == 0 => return Err(mismatch()),
            Some(rest) => expr(format!("{}*{in_prod}/{t_prod}", rest.join("*"))),
            None => expr(format!("({})/({})", dims_expr(input), dims_expr(&known))),
        };
        out[i] = Some(inferred);
        return Ok(out.into_iter().flatten().collect());
    }
    // No -1: check the element counts wherever they are decidable.
    if let Some(rest) = rest {
        if rest.is_empty() && in_prod != t_prod && !(in_syms.is_empty() && in_prod == 1) {
            return Err(mismatch());
        }
    }
    Ok(known)
}

fn dims_expr(dims: &[Dim]) -> String {
    if dims.is_empty() {
        return "1".into();
    }
    dims.iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("*")
}

/// `a + n` as a dim; `what` names the sum in the message when it overflows.
fn dim_add(what: &str, d: &Dim, n: usize) -> Result<Dim, String> {
    Ok(match d {
        Dim::Static(m) => Dim::Static(add(what, *m, n)?),
        Dim::Dynamic(s) if n == 0 => Dim::Dynamic(s.clone()),
        Dim::Dynamic(s) => expr(format!("{s}+{n}")),
    })
}

pub fn expand_dims(input: &[Dim], target: &[Dim]) -> Result<Vec<Dim>, String> {
    broadcast_dims(input, target).map_err(|e| format!("cannot expand: {e}"))
}

pub fn transpose_dims(input: &[Dim], perm: &[usize]) -> Result<Vec<Dim>, String> {
    let r = input.len();
    let mut seen = vec![false; r];
    let valid = perm.len() == r
        && perm
            .iter()
            .all(|&p| p < r && !std::mem::replace(&mut seen[p], true));
    if !valid {
        return Err(format!(
            "perm {perm:?} is not a permutation of the {r} axes of {}",
            DimsFmt(input)
        ));
    }
    Ok(perm.iter().map(|&p| input[p].clone()).collect())
}

pub fn narrow_dims(input: &[Dim], axis: i64, start: usize, len: usize) -> Result<Vec<Dim>, String> {
    let a = crate::normalize_axis(axis, input.len())?;
    if let Dim::Static(n) = input[a] {
        if start.checked_add(len).is_none_or(|end| end > n) {
            return Err(format!(
                "narrow [{start}, {start}+{len}) is out of range for dim {a} of size {n}"
            ));
        }
    }
    let mut out = input.to_vec();
    out[a] = Dim::Static(len);
    Ok(out)
}

/// One ONNX Slice axis on a concrete size: (first index, count). Computed in `i128`, where
/// every size and index is exact (no clamp or sum can wrap).
pub fn slice_range(n: usize, start: i64, end: i64, step: i64) -> (usize, usize) {
    if n == 0 || step == 0 {
        return (0, 0);
    }
    let n = n as i128;
    let (start, end, step) = (start as i128, end as i128, step as i128);
    let norm = |v: i128| if v < 0 { v + n } else { v };
    let (s, e) = (norm(start), norm(end));
    // Both results lie in 0..=n, so they fit the usize n came from.
    let (first, len) = if step > 0 {
        let (s, e) = (s.clamp(0, n), e.clamp(0, n));
        let len = if e > s { (e - s - 1) / step + 1 } else { 0 };
        (s, len)
    } else {
        let (s, e) = (s.clamp(0, n - 1), e.clamp(-1, n - 1));
        let len = if s > e { (s - e - 1) / -step + 1 } else { 0 };
        if len == 0 {
            (0, 0)
        } else {
            (s, len)
        }
    };
    (first as usize, len as usize)
}

/// Checked per-axis slice parameters: (axis, start, end, step), axes normalised.
pub fn slice_params(
    rank: usize,
    axes: &[i64],
    starts: &[i64],
    ends: &[i64],
    steps: &[i64],
) -> Result<Vec<(usize, i64, i64, i64)>, String> {
    if starts.len() != ends.len()
        || (!axes.is_empty() && axes.len() != starts.len())
        || (!steps.is_empty() && steps.len() != starts.len())
    {
        return Err(format!(
            "slice lists differ in length: axes {axes:?}, starts {starts:?}, ends {ends:?}, steps {steps:?}"
        ));
    }
    let mut out: Vec<(usize, i64, i64, i64)> = Vec::with_capacity(starts.len());
    for i in 0..starts.len() {
        let a = match axes.get(i) {
            Some(&a) => crate::normalize_axis(a, rank)?,
            None => crate::normalize_axis(i as i64, rank)?,
        };
        if out.iter().any(|p| p.0 == a) {
            return Err(format!("slice lists axis {a} twice"));
        }
        let step = steps.get(i).copied().unwrap_or(1);
        if step == 0 {
            return Err("slice step must not be 0".into());
        }
        out.push((a, starts[i], ends[i], step));
    }
    Ok(out)
}

fn slice_dims(
    input: &[Dim],
    axes: &[i64],
    starts: &[i64],
    ends: &[i64],
    steps: &[i64],
) -> Result<Vec<Dim>, String> {
    let mut out = input.to_vec();
    for (a, s, e, st) in slice_params(input.len(), axes, starts, ends, steps)? {
        out[a] = match &input[a] {
            Dim::Static(n) => Dim::Static(slice_range(*n, s, e, st).1),
            Dim::Dynamic(sym) if s == 0 && st == 1 && e >= i64::MAX / 2 => {
                Dim::Dynamic(sym.clone())
            }
            Dim::Dynamic(sym) => expr(format!("{sym}[{s}:{e}:{st}]")),
        };
    }
    Ok(out)
}

/// The op with bound symbols substituted into its own parameters (Expand targets), or None
/// when it holds none: executors call this before re-running the shape rule on bound inputs.
pub fn bind_op(op: &Op, bindings: &HashMap<String, usize>) -> Option<Op> {
    let bind = |dims: &[Dim]| -> Option<Vec<Dim>> {
        let hit = dims
            .iter()
            .any(|d| matches!(d, Dim::Dynamic(s) if bindings.contains_key(s)));
        hit.then(|| {
            Shape::with_dims(dims.to_vec(), crate::DType::F32)
                .bind(bindings)
                .dims
        })
    };
    match op {
        Op::Expand { shape } => bind(shape).map(|shape| Op::Expand { shape }),
        Op::TransformRegion { steps } => {
            let mut any = false;
            let steps = steps
                .iter()
                .map(|s| match s {
                    TransformStep::Expand(d) => match bind(d) {
                        Some(d) => {
                            any = true;
                            TransformStep::Expand(d)
                        }
                        None => s.clone(),
                    },
                    s => s.clone(),
                })
                .collect();
            any.then_some(Op::TransformRegion { steps })
        }
        _ => None,
    }
}

/// The shape after one TransformRegion step.
pub fn transform_step_dims(input: &[Dim], step: &TransformStep) -> Result<Vec<Dim>, String> {
    match step {
        TransformStep::Reshape(t) => reshape_dims(input, t),
        TransformStep::Transpose(p) => transpose_dims(input, p),
        TransformStep::Narrow { axis, start, len } => narrow_dims(input, *axis, *start, *len),
        TransformStep::Expand(t) => expand_dims(input, t),
    }
}

/// The one input of a single-input shape op, checked.
fn one<'a>(kind: OpKind, inputs: &[&'a Shape]) -> Result<&'a Shape, String> {
    arity(kind, inputs, 1, 1)?;
    Ok(inputs[0])
}

pub(crate) fn reshape(target: &[i64], inputs: &[&Shape]) -> Result<Shape, String> {
    let x = one(OpKind::Reshape, inputs)?;
    Ok(Shape::with_dims(reshape_dims(&x.dims, target)?, x.dtype))
}

pub(crate) fn expand(target: &[Dim], inputs: &[&Shape]) -> Result<Shape, String> {
    let x = one(OpKind::Expand, inputs)?;
    Ok(Shape::with_dims(expand_dims(&x.dims, target)?, x.dtype))
}

pub(crate) fn transpose(perm: &[usize], inputs: &[&Shape]) -> Result<Shape, String> {
    let x = one(OpKind::Transpose, inputs)?;
    Ok(Shape::with_dims(transpose_dims(&x.dims, perm)?, x.dtype))
}

pub(crate) fn narrow(
    axis: i64,
    start: usize,
    len: usize,
    inputs: &[&Shape],
) -> Result<Shape, String> {
    let x = one(OpKind::Narrow, inputs)?;
    Ok(Shape::with_dims(
        narrow_dims(&x.dims, axis, start, len)?,
        x.dtype,
    ))
}

pub(crate) fn slice(
    axes: &[i64],
    starts: &[i64],
    ends: &[i64],
    steps: &[i64],
    inputs: &[&Shape],
) -> Result<Shape, String> {
    let x = one(OpKind::Slice, inputs)?;
    Ok(Shape::with_dims(
        slice_dims(&x.dims, axes, starts, ends, steps)?,
        x.dtype,
    ))
}

/// Each dim grows by its `before + after`.
pub(crate) fn pad(pads: &[[usize; 2]], inputs: &[&Shape]) -> Result<Shape, String> {
    let x = one(OpKind::Pad, inputs)?;
    if pads.len() != x.rank() {
        return Err(format!(
            "pad lists {} [before, after] pairs for rank {}",
            pads.len(),
            x.rank()
        ));
    }
    let dims = x
        .dims
        .iter()
        .zip(pads)
        .enumerate()
        .map(|(i, (d, p))| {
            let what = format!("padded dim {i}");
            dim_add(&what, d, add(&what, p[0], p[1])?)
        })
        .collect::<Result<_, _>>()?;
    Ok(Shape::with_dims(dims, x.dtype))
}

/// data, indices → indices' dims spliced into data's at `axis`.
pub(crate) fn gather(axis: i64, inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::Gather, inputs, 2, 2)?;
    let (data, idx) = (inputs[0], inputs[1]);
    if idx.dtype == crate::DType::Bool {
        return Err(format!("gather indices must be numbers, got {idx}"));
    }
    let a = data.axis(axis)?;
    let mut dims = data.dims[..a].to_vec();
    dims.extend(idx.dims.iter().cloned());
    dims.extend(data.dims[a + 1..].iter().cloned());
    Ok(Shape::with_dims(dims, data.dtype))
}

/// Each dim multiplied by its repeat count.
pub(crate) fn tile(repeats: &[usize], inputs: &[&Shape]) -> Result<Shape, String> {
    let x = one(OpKind::Tile, inputs)?;
    if repeats.len() != x.rank() {
        return Err(format!(
            "tile lists {} repeats for rank {}",
            repeats.len(),
            x.rank()
        ));
    }
    let dims = x
        .dims
        .iter()
        .zip(repeats)
        .enumerate()
        .map(|(i, (d, &r))| match d {
            Dim::Static(n) => Ok(Dim::Static(mul(&format!("tiled dim {i}"), *n, r)?)),
            _ if r == 1 => Ok(d.clone()),
            _ => Ok(expr(format!("{d}*{r}"))),
        })
        .collect::<Result<_, String>>()?;
    Ok(Shape::with_dims(dims, x.dtype))
}

/// Inputs of one dtype and rank, equal except along `axis`, where their sizes add up.
pub(crate) fn concat(axis: i64, inputs: &[&Shape]) -> Result<Shape, String> {
    if inputs.is_empty() {
        return Err("Concat takes at least 1 input, got 0".into());
    }
    let first = inputs[0];
    let a = first.axis(axis)?;
    let mut dims = first.dims.clone();
    let mut total = Dim::Static(0);
    for (i, s) in inputs.iter().enumerate() {
        if s.dtype != first.dtype {
            return Err(format!(
                "input {i} is {}, input 0 is {}",
                s.dtype, first.dtype
            ));
        }
        if s.rank() != first.rank() {
            return Err(format!(
                "input {i} {s} has a different rank than input 0 {first}"
            ));
        }
        for (k, (d, d0)) in s.dims.iter().zip(&first.dims).enumerate() {
            if k == a {
                continue;
            }
            match (d, d0) {
                (Dim::Static(x), Dim::Static(y)) if x != y => {
                    return Err(format!(
                        "{} input {i} {s} differs from input 0 {first} in dim {k}",
                        OpKind::Concat
                    ))
                }
                (Dim::Static(_), Dim::Dynamic(_)) => dims[k] = d.clone(),
                _ => {}
            }
        }
        total = match (&total, &s.dims[a]) {
            (Dim::Static(x), Dim::Static(y)) => Dim::Static(add("concatenated size", *x, *y)?),
            (Dim::Static(0), d) => d.clone(),
            (t, d) => expr(format!("{t}+{d}")),
        };
    }
    dims[a] = total;
    Ok(Shape::with_dims(dims, first.dtype))
}

impl Graph {
    /// Reshape with ONNX rules (`-1` inferred, `0` copies); `&[2, 3]`, `&[-1, 4]` or a
    /// `usize` list all work.
    pub fn reshape<A: AxisArg>(&mut self, x: NodeId, dims: &[A]) -> Result<NodeId, IrError> {
        let shape = dims.iter().map(|d| d.to_axis()).collect();
        self.add_node(Op::Reshape { shape }, &[x])
    }
    /// Broadcast to `dims` (NumPy rules).
    pub fn expand(&mut self, x: NodeId, dims: Vec<Dim>) -> Result<NodeId, IrError> {
        self.add_node(Op::Expand { shape: dims }, &[x])
    }
    pub fn expand_to(&mut self, x: NodeId, dims: &[usize]) -> Result<NodeId, IrError> {
        self.expand(x, dims.iter().map(|&d| Dim::Static(d)).collect())
    }
    pub fn transpose(&mut self, x: NodeId, perm: &[usize]) -> Result<NodeId, IrError> {
        self.add_node(
            Op::Transpose {
                perm: perm.to_vec(),
            },
            &[x],
        )
    }
    /// `len` entries of `axis` from `start`.
    pub fn narrow(
        &mut self,
        x: NodeId,
        axis: impl AxisArg,
        start: usize,
        len: usize,
    ) -> Result<NodeId, IrError> {
        let axis = axis.to_axis();
        self.add_node(Op::Narrow { axis, start, len }, &[x])
    }
    pub fn concat(&mut self, xs: &[NodeId], axis: impl AxisArg) -> Result<NodeId, IrError> {
        let axis = axis.to_axis();
        self.add_node(Op::Concat { axis }, xs)
    }
    /// Pick entries of `data` along `axis` (indices may be float or integer; negative
    /// indices count from the end).
    pub fn gather(
        &mut self,
        data: NodeId,
        indices: NodeId,
        axis: impl AxisArg,
    ) -> Result<NodeId, IrError> {
        let axis = axis.to_axis();
        self.add_node(Op::Gather { axis }, &[data, indices])
    }
    /// x repeated `repeats[i]` times along each axis i (ONNX Tile).
    pub fn tile(&mut self, x: NodeId, repeats: &[usize]) -> Result<NodeId, IrError> {
        let repeats = repeats.to_vec();
        self.add_node(Op::Tile { repeats }, &[x])
    }
    /// Constant padding: `pads[i] = [before, after]` for every axis.
    pub fn pad(
        &mut self,
        x: NodeId,
        pads: impl Into<Vec<[usize; 2]>>,
        value: f64,
    ) -> Result<NodeId, IrError> {
        let pads = pads.into();
        self.add_node(Op::Pad { pads, value }, &[x])
    }
    /// ONNX Slice (`axes` empty = the first `starts.len()` axes; `steps` empty = all 1).
    pub fn slice(
        &mut self,
        x: NodeId,
        axes: &[i64],
        starts: &[i64],
        ends: &[i64],
        steps: &[i64],
    ) -> Result<NodeId, IrError> {
        let op = Op::Slice {
            axes: axes.to_vec(),
            starts: starts.to_vec(),
            ends: ends.to_vec(),
            steps: steps.to_vec(),
        };
        self.add_node(op, &[x])
    }
}
