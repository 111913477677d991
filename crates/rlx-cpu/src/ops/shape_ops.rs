//! CPU thunks of the Shape group: Reshape, Expand, Transpose, Narrow, Concat, Gather, Tile,
//! Pad, Slice. Every dtype class runs the same generic code: data movement only. The views
//! (transpose, narrow, slice, expand) are one strided copy each; TransformRegion (in
//! `region.rs`) chains the same copies.
use super::arity;
use crate::error::op_err;
use crate::util::{broadcast_strides, outer_inner};
use crate::{CpuError, Elem, OutView, TensorView};
use rlx_ir::ops::shape_ops::{slice_params, slice_range};
use rlx_ir::strides;

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

pub(super) fn reshape_into<T: Copy>(src: &[T], dst: &mut [T]) -> Result<(), CpuError> {
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

pub(super) fn expand_into<T: Copy>(
    src: &[T],
    in_shape: &[usize],
    dst: &mut [T],
    out_shape: &[usize],
) {
    let st: Vec<isize> = broadcast_strides(in_shape, out_shape)
        .into_iter()
        .map(|s| s as isize)
        .collect();
    view_into(src, 0, &st, dst, out_shape);
}

pub(super) fn transpose_into<T: Copy>(
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

pub(super) fn narrow_into<T: Copy>(
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

pub(super) fn axis_of(axis: i64, rank: usize) -> Result<usize, CpuError> {
    rlx_ir::normalize_axis(axis, rank).map_err(op_err)
}

fn concat_t<T: Elem>(ins: &[TensorView], axis: i64, out: &mut OutView) -> Result<(), CpuError> {
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

/// Gather from values `xs` (held as `S`), each copied as `conv` makes it a `T`.
fn gather_t<S: Copy, T: Elem>(
    data: &TensorView,
    xs: &[S],
    conv: impl Fn(S) -> T,
    idx: &TensorView,
    axis: i64,
    out: &mut OutView,
) -> Result<(), CpuError> {
    let a = axis_of(axis, data.rank())?;
    let (outer, n, inner) = outer_inner(data.shape, a);
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
            for (o, &x) in o[d..d + inner].iter_mut().zip(&xs[s..s + inner]) {
                *o = conv(x);
            }
        }
    }
    Ok(())
}

fn pad_t<T: Elem>(
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

/// The parameters of one Slice.
struct SliceSpec<'p> {
    axes: &'p [i64],
    starts: &'p [i64],
    ends: &'p [i64],
    steps: &'p [i64],
}

fn slice_t<T: Elem>(x: &TensorView, p: &SliceSpec, out: &mut OutView) -> Result<(), CpuError> {
    let mut st = istrides(x.shape);
    let mut base = 0isize;
    let params = slice_params(x.rank(), p.axes, p.starts, p.ends, p.steps).map_err(op_err)?;
    for (a, s, e, step) in params {
        let (first, len) = slice_range(x.shape[a], s, e, step);
        base += first as isize * st[a];
        // With one element the step is never taken (and a huge step must not overflow).
        st[a] = if len > 1 { st[a] * step as isize } else { 0 };
    }
    let shape = out.shape.to_vec();
    view_into(x.get::<T>()?, base, &st, out.get_mut::<T>()?, &shape);
    Ok(())
}

/// The one input of a single-input shape op.
fn only<'s, 'a>(ins: &'s [TensorView<'a>]) -> Result<&'s TensorView<'a>, CpuError> {
    Ok(&arity(ins, 1, 1)?[0])
}

pub fn reshape(ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let x = only(ins)?;
    any_class!(out.class(), T => reshape_into(x.get::<T>()?, out.get_mut::<T>()?))
}

pub fn expand(ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let (x, shape) = (only(ins)?, out.shape);
    any_class!(out.class(), T => {
        expand_into(x.get::<T>()?, x.shape, out.get_mut::<T>()?, shape);
        Ok(())
    })
}

pub fn transpose(perm: &[usize], ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let (x, shape) = (only(ins)?, out.shape);
    any_class!(out.class(), T => {
        transpose_into(x.get::<T>()?, x.shape, perm, out.get_mut::<T>()?, shape);
        Ok(())
    })
}

pub fn narrow(
    axis: i64,
    start: usize,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let (x, shape) = (only(ins)?, out.shape);
    let a = axis_of(axis, x.rank())?;
    any_class!(out.class(), T => {
        narrow_into(x.get::<T>()?, x.shape, a, start, out.get_mut::<T>()?, shape);
        Ok(())
    })
}

pub fn concat(axis: i64, ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let ins = arity(ins, 1, usize::MAX)?;
    any_class!(out.class(), T => concat_t::<T>(ins, axis, &mut out))
}

/// data, indices (any class: float indices must be whole numbers). U8 leaf data is read
/// as its bytes, so picking rows of a packed table widens only the rows picked.
pub fn gather(axis: i64, ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let ins = arity(ins, 2, 2)?;
    let (data, idx) = (&ins[0], &ins[1]);
    if let crate::Buf::U8(xs) = data.data {
        let wide = |b: u8| b as i64;
        return gather_t::<u8, i64>(data, xs, wide, idx, axis, &mut out);
    }
    any_class!(out.class(), T => {
        let xs = data.get::<T>()?;
        gather_t::<T, T>(data, xs, |v| v, idx, axis, &mut out)
    })
}

/// Tile as one strided copy: the output viewed as `[r0, d0, r1, d1, ..]` reads the input
/// with stride 0 on every repeat axis.
pub fn tile(repeats: &[usize], ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let x = only(ins)?;
    if repeats.len() != x.rank() {
        return Err(op_err(format!(
            "{} repeats for rank {}",
            repeats.len(),
            x.rank()
        )));
    }
    let xst = istrides(x.shape);
    let (mut shape, mut src_st) = (vec![], vec![]);
    for ((&r, &d), &s) in repeats.iter().zip(x.shape).zip(&xst) {
        shape.extend([r, d]);
        src_st.extend([0, s]);
    }
    let dst_st = strides(&shape);
    any_class!(out.class(), T => {
        copy_strided(x.get::<T>()?, 0, &src_st, out.get_mut::<T>()?, 0, &dst_st, &shape);
        Ok(())
    })
}

pub fn pad(
    pads: &[[usize; 2]],
    value: f64,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let x = only(ins)?;
    // The fill is converted as `Cast` converts a float: integers saturate (see `Op::Pad`).
    let value = if out.dtype.is_float() {
        value
    } else {
        super::scalar::float_to_int(value, out.dtype) as f64
    };
    any_class!(out.class(), T => pad_t::<T>(x, pads, value, &mut out))
}

pub fn slice(
    axes: &[i64],
    starts: &[i64],
    ends: &[i64],
    steps: &[i64],
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let x = only(ins)?;
    let p = SliceSpec {
        axes,
        starts,
        ends,
        steps,
    };
    any_class!(out.class(), T => slice_t::<T>(x, &p, &mut out))
}
