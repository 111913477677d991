//! CPU thunks of the index group: GatherElements, GatherND, ScatterElements, ScatterND,
//! OneHot, Range. Plain loops over row-major offsets: this is the reference the GPU and
//! the importer's suite are held to, so it favours being obviously right. An index out of
//! range (after a negative one is counted from the end) is an error naming the index,
//! never a wild read or write.
use super::arity;
use crate::error::op_err;
use crate::{CpuError, Elem, Float, OutView, TensorView};
use rlx_ir::{strides, ComputeClass, ScatterReduction};

/// Index `v` on an axis of size `n` (negative counts from the end).
fn norm_index(v: i64, n: usize, axis: usize) -> Result<usize, CpuError> {
    let i = if v < 0 { v + n as i64 } else { v };
    if i < 0 || i >= n as i64 {
        return Err(op_err(format!(
            "index {v} is out of range for axis {axis} of size {n}"
        )));
    }
    Ok(i as usize)
}

/// The data offset each position of an indices tensor of `ishape` names along `axis` of
/// data `dshape` (GatherElements / ScatterElements), in row-major order of the indices.
fn element_offsets(
    dshape: &[usize],
    ishape: &[usize],
    idx: &[i64],
    axis: usize,
) -> Result<Vec<usize>, CpuError> {
    let dst = strides(dshape);
    let r = ishape.len();
    let mut pos = vec![0usize; r];
    let mut out = Vec::with_capacity(idx.len());
    for &v in idx {
        let mut off = 0;
        for d in 0..r {
            let i = if d == axis {
                norm_index(v, dshape[d], d)?
            } else {
                pos[d]
            };
            off += i * dst[d];
        }
        out.push(off);
        for d in (0..r).rev() {
            pos[d] += 1;
            if pos[d] < ishape[d] {
                break;
            }
            pos[d] = 0;
        }
    }
    Ok(out)
}

/// Offsets of the slices that index rows of depth `k` name in dims `dims` (the rows are
/// `idx` in chunks of `k`); each slice holds `prod(dims[k..])` elements.
fn slice_offsets(dims: &[usize], idx: &[i64], k: usize) -> Result<Vec<usize>, CpuError> {
    let st = strides(dims);
    idx.chunks(k)
        .map(|row| {
            row.iter().enumerate().try_fold(0, |off, (t, &v)| {
                Ok(off + norm_index(v, dims[t], t)? * st[t])
            })
        })
        .collect()
}

pub fn gather_elements(axis: i64, ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let ins = arity(ins, 2, 2)?;
    let (data, idx) = (&ins[0], &ins[1]);
    let a = rlx_ir::normalize_axis(axis, data.rank()).map_err(op_err)?;
    let offs = element_offsets(data.shape, idx.shape, &idx.to_i64_vec(), a)?;
    any_class!(out.class(), T => {
        let xs = data.get::<T>()?;
        let o = out.get_mut::<T>()?;
        o.iter_mut().zip(&offs).for_each(|(o, &s)| *o = xs[s]);
        Ok(())
    })
}

pub fn gather_nd(batch_dims: usize, ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let ins = arity(ins, 2, 2)?;
    let (data, idx) = (&ins[0], &ins[1]);
    let b = batch_dims;
    let k = *idx
        .shape
        .last()
        .ok_or_else(|| op_err("indices have rank 0"))?;
    let batches: usize = data.shape[..b].iter().product();
    let per_batch: usize = data.shape[b..].iter().product();
    let slice: usize = data.shape[b + k..].iter().product();
    let iv = idx.to_i64_vec();
    // The shape rule holds k ≥ 1; the index rows of one batch item are contiguous.
    let per_idx = iv.len() / batches.max(1);
    any_class!(out.class(), T => {
        let xs = data.get::<T>()?;
        let o = out.get_mut::<T>()?;
        for bi in 0..batches {
            let rows = &iv[bi * per_idx..(bi + 1) * per_idx];
            let offs = slice_offsets(&data.shape[b..], rows, k)?;
            for (j, off) in offs.iter().enumerate() {
                let src = bi * per_batch + off;
                let dst = (bi * offs.len() + j) * slice;
                o[dst..dst + slice].copy_from_slice(&xs[src..src + slice]);
            }
        }
        Ok(())
    })
}

/// `a` combined with update `u` for floats (NaN propagates through Max / Min, as NumPy's
/// maximum / minimum do).
fn combine_f<T: Float>(red: ScatterReduction) -> fn(T, T) -> T {
    match red {
        ScatterReduction::None => |_, u| u,
        ScatterReduction::Add => |a, u| a + u,
        ScatterReduction::Mul => |a, u| a * u,
        ScatterReduction::Max => |a: T, u: T| {
            if a.is_nan() || u.is_nan() {
                T::nan()
            } else {
                a.max(u)
            }
        },
        ScatterReduction::Min => |a: T, u: T| {
            if a.is_nan() || u.is_nan() {
                T::nan()
            } else {
                a.min(u)
            }
        },
    }
}

/// `a` combined with update `u` for integers (wrapping; the executor wraps to the dtype).
fn combine_i(red: ScatterReduction) -> fn(i64, i64) -> i64 {
    match red {
        ScatterReduction::None => |_, u| u,
        ScatterReduction::Add => i64::wrapping_add,
        ScatterReduction::Mul => i64::wrapping_mul,
        ScatterReduction::Max => i64::max,
        ScatterReduction::Min => i64::min,
    }
}

/// out = data, then each update slice `j` (`slice` elements) combined in at `offs[j]`.
fn scatter_t<T: Elem>(
    data: &TensorView,
    upd: &TensorView,
    offs: &[usize],
    slice: usize,
    comb: fn(T, T) -> T,
    out: &mut OutView,
) -> Result<(), CpuError> {
    let (xs, us) = (data.get::<T>()?, upd.get::<T>()?);
    let o = out.get_mut::<T>()?;
    o.copy_from_slice(xs);
    for (j, &off) in offs.iter().enumerate() {
        let u = &us[j * slice..(j + 1) * slice];
        for (o, &u) in o[off..off + slice].iter_mut().zip(u) {
            *o = comb(*o, u);
        }
    }
    Ok(())
}

/// Route a scatter to its class's combiner.
fn scatter(
    red: ScatterReduction,
    data: &TensorView,
    upd: &TensorView,
    offs: &[usize],
    slice: usize,
    out: &mut OutView,
) -> Result<(), CpuError> {
    match out.class() {
        ComputeClass::F32 => scatter_t::<f32>(data, upd, offs, slice, combine_f(red), out),
        ComputeClass::F64 => scatter_t::<f64>(data, upd, offs, slice, combine_f(red), out),
        ComputeClass::I64 => scatter_t::<i64>(data, upd, offs, slice, combine_i(red), out),
    }
}

pub fn scatter_elements(
    axis: i64,
    red: ScatterReduction,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let ins = arity(ins, 3, 3)?;
    let (data, idx, upd) = (&ins[0], &ins[1], &ins[2]);
    let a = rlx_ir::normalize_axis(axis, data.rank()).map_err(op_err)?;
    let offs = element_offsets(data.shape, idx.shape, &idx.to_i64_vec(), a)?;
    scatter(red, data, upd, &offs, 1, &mut out)
}

pub fn scatter_nd(
    red: ScatterReduction,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let ins = arity(ins, 3, 3)?;
    let (data, idx, upd) = (&ins[0], &ins[1], &ins[2]);
    let k = *idx
        .shape
        .last()
        .ok_or_else(|| op_err("indices have rank 0"))?;
    let rows: usize = idx.shape[..idx.rank() - 1].iter().product();
    let slice: usize = data.shape[k..].iter().product();
    let offs = slice_offsets(data.shape, &idx.to_i64_vec(), k)?;
    debug_assert_eq!(offs.len(), rows);
    scatter(red, data, upd, &offs, slice, &mut out)
}

pub fn one_hot(
    axis: i64,
    depth: usize,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let ins = arity(ins, 2, 2)?;
    let (idx, values) = (&ins[0], &ins[1]);
    let a = rlx_ir::normalize_axis(axis, idx.rank() + 1).map_err(op_err)?;
    let (outer, inner) = (
        idx.shape[..a].iter().product::<usize>(),
        idx.shape[a..].iter().product::<usize>(),
    );
    // Float indices truncate toward zero, as a cast to int64 does.
    let iv = idx.to_i64_vec();
    let hot = |v: i64| {
        let i = if v < 0 { v + depth as i64 } else { v };
        (0..depth as i64).contains(&i).then_some(i as usize)
    };
    any_class!(out.class(), T => {
        let vs = values.get::<T>()?;
        let (off, on) = (vs[0], vs[1]);
        let o = out.get_mut::<T>()?;
        o.fill(off);
        for r in 0..outer {
            for i in 0..inner {
                if let Some(d) = hot(iv[r * inner + i]) {
                    o[(r * depth + d) * inner + i] = on;
                }
            }
        }
        Ok(())
    })
}

pub fn range(len: usize, ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let ins = arity(ins, 3, 3)?;
    let v: Vec<f64> = ins.iter().map(|t| t.to_f64_vec()[0]).collect();
    let want = rlx_ir::ops::index::range_len(v[0], v[1], v[2]);
    if want != len {
        return Err(op_err(format!(
            "start {}, limit {}, delta {} give {want} values; the graph was built for {len}",
            v[0], v[1], v[2]
        )));
    }
    match out.class() {
        ComputeClass::I64 => {
            let iv: Vec<i64> = ins.iter().map(|t| t.to_i64_vec()[0]).collect();
            let o = out.get_mut::<i64>()?;
            for (i, o) in o.iter_mut().enumerate() {
                *o = iv[0].wrapping_add((i as i64).wrapping_mul(iv[2]));
            }
            Ok(())
        }
        _ => float_class!(out.class(), T => {
            let o = out.get_mut::<T>()?;
            for (i, o) in o.iter_mut().enumerate() {
                *o = T::from_f64(v[0] + i as f64 * v[2]);
            }
            Ok(())
        }),
    }
}
