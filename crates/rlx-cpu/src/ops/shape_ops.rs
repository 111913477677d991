//! CPU thunks: Reshape, Expand, Transpose, Narrow, Concat, Gather, Pad, Slice and
//! TransformRegion. Every dtype class runs the same generic code: data movement only.
//! The views (transpose, narrow, slice, expand) are one strided copy each.
use crate::error::op_err;
use crate::util::{broadcast_strides, outer_inner};
use crate::{CpuError, Elem, OutView, TensorView};
use rlx_ir::ops::shape_ops::{slice_params, slice_range, transform_step_dims};
use rlx_ir::{strides, ComputeClass, Dim, Node, Op, TransformStep};

/// Copy a strided view: output index `idx` (row-major over `shape`, written to `dst` at
/// `dbase + Σ idx·dst_st`) reads `src[sbase + Σ idx·src_st]`. Walks the output with an
/// odometer and an inner loop over the last axis.
#[allow(clippy::too_many_arguments)]
fn copy_strided<T: Copy>(
    src: &[T],
    sbase: isize,
    src_st: &[isize],
    dst: &mut [T],
    dbase: usize,
    dst_st: &[usize],
    shape: &[usize],
) {
    let r = shape.len();
    if shape.contains(&0) {
        return;
    }
    if r == 0 {
        dst[dbase] = src[sbase as usize];
        return;
    }
    let (last, sl, dl) = (shape[r - 1], src_st[r - 1], dst_st[r - 1]);
    let rows: usize = shape[..r - 1].iter().product();
    let mut idx = vec![0usize; r - 1];
    let (mut s, mut d) = (sbase, dbase);
    for _ in 0..rows {
        if sl == 1 && dl == 1 {
            let s0 = s as usize;
            dst[d..d + last].copy_from_slice(&src[s0..s0 + last]);
        } else {
            let (mut si, mut di) = (s, d);
            for _ in 0..last {
                dst[di] = src[si as usize];
                si += sl;
                di += dl;
            }
        }
        for k in (0..r - 1).rev() {
            idx[k] += 1;
            s += src_st[k];
            d += dst_st[k];
            if idx[k] < shape[k] {
                break;
            }
            s -= src_st[k] * idx[k] as isize;
            d -= dst_st[k] * idx[k];
            idx[k] = 0;
        }
    }
}

fn istrides(dims: &[usize]) -> Vec<isize> {
    strides(dims).into_iter().map(|s| s as isize).collect()
}

/// Read `src` (of `in_shape`) through a view into a fresh row-major `dst` of `shape`.
fn view_into<T: Copy>(src: &[T], base: isize, st: &[isize], dst: &mut [T], shape: &[usize]) {
    copy_strided(src, base, st, dst, 0, &strides(shape), shape);
}

fn reshape_into<T: Copy>(src: &[T], dst: &mut [T]) -> Result<(), CpuError> {
    if src.len() == dst.len() {
        dst.copy_from_slice(src);
    } else if src.len() == 1 {
        dst.fill(src[0]);
    } else {
        return Err(op_err(format!(
            "cannot reshape {} elements into {}",
            src.len(),
            dst.len()
        )));
    }
    Ok(())
}

fn expand_into<T: Copy>(src: &[T], in_shape: &[usize], dst: &mut [T], out_shape: &[usize]) {
    let st: Vec<isize> = broadcast_strides(in_shape, out_shape)
        .into_iter()
        .map(|s| s as isize)
        .collect();
    view_into(src, 0, &st, dst, out_shape);
}

fn transpose_into<T: Copy>(
    src: &[T],
    in_shape: &[usize],
    perm: &[usize],
    dst: &mut [T],
    out_shape: &[usize],
) {
    let ist = istrides(in_shape);
    let st: Vec<isize> = perm.iter().map(|&p| ist[p]).collect();
    view_into(src, 0, &st, dst, out_shape);
}

fn narrow_into<T: Copy>(
    src: &[T],
    in_shape: &[usize],
    axis: usize,
    start: usize,
    dst: &mut [T],
    out_shape: &[usize],
) {
    let st = istrides(in_shape);
    view_into(src, start as isize * st[axis], &st, dst, out_shape);
}

fn axis_of(axis: i64, rank: usize) -> Result<usize, CpuError> {
    rlx_ir::normalize_axis(axis, rank).map_err(op_err)
}

fn static_dims(dims: &[usize]) -> Vec<Dim> {
    dims.iter().map(|&d| Dim::Static(d)).collect()
}

/// One TransformRegion step from `src` (of `shape`) into `dst`; returns the new shape.
fn transform_step<T: Elem>(
    step: &TransformStep,
    src: &[T],
    shape: &[usize],
    dst: &mut Vec<T>,
) -> Result<Vec<usize>, CpuError> {
    let dims = transform_step_dims(&static_dims(shape), step).map_err(op_err)?;
    let out_shape: Vec<usize> = dims
        .iter()
        .map(|d| d.as_static())
        .collect::<Option<_>>()
        .ok_or_else(|| op_err(format!("step {step:?} left a symbolic dim")))?;
    let n: usize = out_shape.iter().product();
    dst.clear();
    dst.resize(n, T::default());
    match step {
        TransformStep::Reshape(_) => reshape_into(src, dst)?,
        TransformStep::Transpose(p) => transpose_into(src, shape, p, dst, &out_shape),
        TransformStep::Narrow { axis, start, .. } => {
            let a = axis_of(*axis, shape.len())?;
            narrow_into(src, shape, a, *start, dst, &out_shape)
        }
        TransformStep::Expand(_) => expand_into(src, shape, dst, &out_shape),
    }
    Ok(out_shape)
}

fn transform_region<T: Elem>(
    steps: &[TransformStep],
    x: &TensorView,
    out: &mut [T],
) -> Result<(), CpuError> {
    let mut cur: Vec<T> = x.get::<T>()?.to_vec();
    let mut shape = x.shape.to_vec();
    let mut next = Vec::new();
    for step in steps {
        shape = transform_step(step, &cur, &shape, &mut next)?;
        std::mem::swap(&mut cur, &mut next);
    }
    if cur.len() != out.len() {
        return Err(op_err(format!(
            "steps give shape {shape:?}, the node declares {} elements",
            out.len()
        )));
    }
    out.copy_from_slice(&cur);
    Ok(())
}

fn concat<T: Elem>(ins: &[TensorView], axis: i64, out: &mut OutView) -> Result<(), CpuError> {
    let a = axis_of(axis, out.shape.len())?;
    let (_, _, inner) = outer_inner(out.shape, a);
    let (outer, total, _) = outer_inner(out.shape, a);
    let o = out.get_mut::<T>()?;
    let mut off = 0usize;
    for x in ins {
        let xs = x.get::<T>()?;
        let w = x.shape[a] * inner;
        for r in 0..outer {
            let d = r * total * inner + off;
            o[d..d + w].copy_from_slice(&xs[r * w..(r + 1) * w]);
        }
        off += w;
    }
    Ok(())
}

fn gather<T: Elem>(
    data: &TensorView,
    idx: &TensorView,
    axis: i64,
    out: &mut OutView,
) -> Result<(), CpuError> {
    let a = axis_of(axis, data.rank())?;
    let (outer, n, inner) = outer_inner(data.shape, a);
    let xs = data.get::<T>()?;
    let picks = idx
        .to_f64_vec()
        .iter()
        .map(|&v| {
            let i = if v < 0.0 { v + n as f64 } else { v };
            if v.fract() != 0.0 {
                Err(op_err(format!("index {v} is not a whole number")))
            } else if i < 0.0 || i >= n as f64 {
                Err(op_err(format!(
                    "index {v} is out of range for axis {a} of size {n}"
                )))
            } else {
                Ok(i as usize)
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    let o = out.get_mut::<T>()?;
    let k = picks.len();
    for r in 0..outer {
        for (j, &p) in picks.iter().enumerate() {
            let s = (r * n + p) * inner;
            let d = (r * k + j) * inner;
            o[d..d + inner].copy_from_slice(&xs[s..s + inner]);
        }
    }
    Ok(())
}

fn pad<T: Elem>(
    x: &TensorView,
    pads: &[[usize; 2]],
    value: f64,
    out: &mut OutView,
) -> Result<(), CpuError> {
    let ost = strides(out.shape);
    let base: usize = pads.iter().zip(&ost).map(|(p, s)| p[0] * s).sum();
    let xs = x.get::<T>()?;
    let o = out.get_mut::<T>()?;
    o.fill(T::from_f64(value));
    copy_strided(xs, 0, &istrides(x.shape), o, base, &ost, x.shape);
    Ok(())
}

fn slice<T: Elem>(x: &TensorView, op: &Op, out: &mut OutView) -> Result<(), CpuError> {
    let Op::Slice {
        axes,
        starts,
        ends,
        steps,
    } = op
    else {
        return Err(op_err("not a Slice"));
    };
    let mut st = istrides(x.shape);
    let mut base = 0isize;
    for (a, s, e, step) in slice_params(x.rank(), axes, starts, ends, steps).map_err(op_err)? {
        let (first, len) = slice_range(x.shape[a], s, e, step);
        base += first as isize * st[a];
        // With one element the step is never taken (and a huge step must not overflow).
        st[a] = if len > 1 { st[a] * step as isize } else { 0 };
    }
    let shape = out.shape.to_vec();
    view_into(x.get::<T>()?, base, &st, out.get_mut::<T>()?, &shape);
    Ok(())
}

fn run<T: Elem>(node: &Node, ins: &[TensorView], out: &mut OutView) -> Result<(), CpuError> {
    let shape = out.shape.to_vec();
    let x = &ins[0];
    match &node.op {
        Op::Reshape { .. } => reshape_into(x.get::<T>()?, out.get_mut::<T>()?),
        Op::Expand { .. } => {
            expand_into(x.get::<T>()?, x.shape, out.get_mut::<T>()?, &shape);
            Ok(())
        }
        Op::Transpose { perm } => {
            transpose_into(x.get::<T>()?, x.shape, perm, out.get_mut::<T>()?, &shape);
            Ok(())
        }
        Op::Narrow { axis, start, .. } => {
            let a = axis_of(*axis, x.rank())?;
            narrow_into(
                x.get::<T>()?,
                x.shape,
                a,
                *start,
                out.get_mut::<T>()?,
                &shape,
            );
            Ok(())
        }
        Op::Concat { axis } => concat::<T>(ins, *axis, out),
        Op::Gather { axis } => gather::<T>(x, &ins[1], *axis, out),
        Op::Pad { pads, value } => pad::<T>(x, pads, *value, out),
        op @ Op::Slice { .. } => slice::<T>(x, op, out),
        Op::TransformRegion { steps } => transform_region(steps, x, out.get_mut::<T>()?),
        op => Err(op_err(format!("{} is not a shape op", op.kind()))),
    }
}

pub(crate) fn eval(node: &Node, ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    if ins.is_empty() {
        return Err(op_err(format!("{} has no input", node.op.kind())));
    }
    match out.class() {
        ComputeClass::F32 => run::<f32>(node, ins, &mut out),
        ComputeClass::F64 => run::<f64>(node, ins, &mut out),
        ComputeClass::I64 => run::<i64>(node, ins, &mut out),
    }
}
