//! CPU thunks of the Reduce group: Reduce, Softmax, ArgMax, CumSum, TopK and the softmax
//! cross-entropy family.
//! Float reductions accumulate in f64 so the reference stays accurate on long axes.
use super::arity;
use crate::error::op_err;
use crate::util::outer_inner;
use crate::{CpuError, Elem, Float, OutView, TensorView};
use rlx_ir::{ops::reduce::reduce_axes, ComputeClass, ReduceOp};

/// Output offset for every input element walked in row-major order: reduced axes add 0.
fn for_each_out_offset(shape: &[usize], axes: &[usize], mut f: impl FnMut(usize, usize)) {
    let r = shape.len();
    let mut ostride = vec![0usize; r];
    let mut acc = 1;
    for d in (0..r).rev() {
        if !axes.contains(&d) {
            ostride[d] = acc;
            acc *= shape[d];
        }
    }
    let n: usize = shape.iter().product();
    let mut idx = vec![0usize; r];
    let mut cur = 0usize;
    for k in 0..n {
        f(k, cur);
        for d in (0..r).rev() {
            idx[d] += 1;
            cur += ostride[d];
            if idx[d] < shape[d] {
                break;
            }
            cur -= ostride[d] * idx[d];
            idx[d] = 0;
        }
    }
}

fn reduce_float<T: Float>(
    op: ReduceOp,
    x: &TensorView,
    axes: &[usize],
    out: &mut OutView,
) -> Result<(), CpuError> {
    let xs = x.get::<T>()?;
    let count: usize = axes.iter().map(|&a| x.shape[a]).product();
    let o = out.get_mut::<T>()?;
    if count == 0 && matches!(op, ReduceOp::Max | ReduceOp::Min) {
        return Err(op_err(format!(
            "{op:?} over an empty axis of {:?} has no identity",
            x.shape
        )));
    }
    let init = match op {
        ReduceOp::Sum | ReduceOp::Mean => 0.0,
        ReduceOp::Prod => 1.0,
        ReduceOp::Max => f64::NEG_INFINITY,
        ReduceOp::Min => f64::INFINITY,
    };
    let mut acc = vec![init; o.len()];
    // NaN wins in max/min, as in PyTorch.
    let step: fn(f64, f64) -> f64 = match op {
        ReduceOp::Sum | ReduceOp::Mean => |a, v| a + v,
        ReduceOp::Prod => |a, v| a * v,
        ReduceOp::Max => |a, v| if v > a || v.is_nan() { v } else { a },
        ReduceOp::Min => |a, v| if v < a || v.is_nan() { v } else { a },
    };
    for_each_out_offset(x.shape, axes, |k, j| {
        if !acc[j].is_nan() {
            acc[j] = step(acc[j], xs[k].to_f64());
        }
    });
    let scale = if op == ReduceOp::Mean {
        1.0 / count as f64
    } else {
        1.0
    };
    o.iter_mut()
        .zip(acc)
        .for_each(|(o, a)| *o = T::from_f64(a * scale));
    Ok(())
}

fn reduce_int(
    op: ReduceOp,
    x: &TensorView,
    axes: &[usize],
    out: &mut OutView,
) -> Result<(), CpuError> {
    let xs = x.get::<i64>()?;
    let count: usize = axes.iter().map(|&a| x.shape[a]).product();
    if count == 0 && matches!(op, ReduceOp::Max | ReduceOp::Min | ReduceOp::Mean) {
        return Err(op_err(format!(
            "integer {op:?} over an empty axis of {:?} is undefined",
            x.shape
        )));
    }
    let o = out.get_mut::<i64>()?;
    let init = match op {
        ReduceOp::Sum | ReduceOp::Mean => 0,
        ReduceOp::Prod => 1,
        ReduceOp::Max => i64::MIN,
        ReduceOp::Min => i64::MAX,
    };
    o.fill(init);
    let step: fn(i64, i64) -> i64 = match op {
        ReduceOp::Sum | ReduceOp::Mean => i64::wrapping_add,
        ReduceOp::Prod => i64::wrapping_mul,
        ReduceOp::Max => i64::max,
        ReduceOp::Min => i64::min,
    };
    for_each_out_offset(x.shape, axes, |k, j| o[j] = step(o[j], xs[k]));
    if op == ReduceOp::Mean {
        // Integer mean truncates toward zero, like integer division.
        o.iter_mut().for_each(|v| *v /= count as i64);
    }
    Ok(())
}

/// Numerically stable softmax of `len` values at `base`, `base+stride`, …
fn softmax_line<T: Float>(x: &[T], o: &mut [T], base: usize, len: usize, stride: usize) {
    let m = (0..len)
        .map(|i| x[base + i * stride])
        .fold(
            T::neg_infinity(),
            |m, v| if v > m || v.is_nan() { v } else { m },
        );
    // All -inf: shifting by 0 keeps exp finite and yields NaN = 0/0, as PyTorch does.
    let shift = if m.is_finite() { m } else { T::zero() };
    let mut sum = 0.0f64;
    for i in 0..len {
        let e = (x[base + i * stride] - shift).exp();
        o[base + i * stride] = e;
        sum += e.to_f64();
    }
    let inv = T::from_f64(1.0 / sum);
    for i in 0..len {
        o[base + i * stride] *= inv;
    }
}

fn softmax_t<T: Float>(x: &TensorView, axis: usize, out: &mut OutView) -> Result<(), CpuError> {
    let xs = x.get::<T>()?;
    let o = out.get_mut::<T>()?;
    let (outer, len, inner) = outer_inner(x.shape, axis);
    for a in 0..outer {
        for b in 0..inner {
            softmax_line(xs, o, a * len * inner + b, len, inner);
        }
    }
    Ok(())
}

fn argmax_t<T: Elem + PartialOrd>(
    x: &TensorView,
    axis: usize,
    out: &mut OutView,
    is_nan: fn(T) -> bool,
) -> Result<(), CpuError> {
    let xs = x.get::<T>()?;
    let (outer, len, inner) = outer_inner(x.shape, axis);
    if len == 0 {
        return Err(op_err(format!(
            "ArgMax over an empty axis of {:?}",
            x.shape
        )));
    }
    let o = out.get_mut::<i64>()?;
    for a in 0..outer {
        for b in 0..inner {
            let base = a * len * inner + b;
            let mut best = 0usize;
            let mut bv = xs[base];
            // A NaN is the max (first NaN wins), as in PyTorch.
            for i in 1..len {
                if is_nan(bv) {
                    break;
                }
                let v = xs[base + i * inner];
                if v > bv || is_nan(v) {
                    best = i;
                    bv = v;
                }
            }
            o[a * inner + b] = best as i64;
        }
    }
    Ok(())
}

/// Row n's max and log Σ exp(x − max).
fn row_lse<T: Float>(row: &[T]) -> (f64, f64) {
    let m = row
        .iter()
        .fold(f64::NEG_INFINITY, |m, &v| m.max(v.to_f64()));
    let shift = if m.is_finite() { m } else { 0.0 };
    let s: f64 = row.iter().map(|&v| (v.to_f64() - shift).exp()).sum();
    (shift, s.ln())
}

/// Class labels of `[N]` as indices, checked against `c` classes.
fn labels(y: &TensorView, c: usize) -> Result<Vec<usize>, CpuError> {
    y.to_f64_vec()
        .iter()
        .enumerate()
        .map(|(n, &v)| {
            if v.fract() != 0.0 || v < 0.0 || v >= c as f64 {
                Err(op_err(format!(
                    "label {v} at row {n} is not a class index in 0..{c}"
                )))
            } else {
                Ok(v as usize)
            }
        })
        .collect()
}

/// The float logits `[N, C]` and the other inputs of a cross-entropy op.
fn logits<'s, 'a>(
    ins: &'s [TensorView<'a>],
    n_ins: usize,
) -> Result<(&'s TensorView<'a>, usize, usize), CpuError> {
    let ins = arity(ins, n_ins, n_ins)?;
    let x = &ins[0];
    if x.rank() != 2 {
        return Err(op_err(format!("logits must be [N, C], got {:?}", x.shape)));
    }
    Ok((x, x.shape[0], x.shape[1]))
}

fn sce_t<T: Float>(ins: &[TensorView], out: &mut [T]) -> Result<(), CpuError> {
    let (x, n, c) = logits(ins, 2)?;
    let x = x.get::<T>()?;
    let t = ins[1].to_f64_vec();
    for r in 0..n {
        let row = &x[r * c..(r + 1) * c];
        let (m, lse) = row_lse(row);
        let loss: f64 = (0..c)
            .map(|j| -t[r * c + j] * (row[j].to_f64() - m - lse))
            .sum();
        out[r] = T::from_f64(loss);
    }
    Ok(())
}

fn sce_logits_t<T: Float>(ins: &[TensorView], out: &mut [T]) -> Result<(), CpuError> {
    let (x, n, c) = logits(ins, 2)?;
    let x = x.get::<T>()?;
    let y = labels(&ins[1], c)?;
    for r in 0..n {
        let row = &x[r * c..(r + 1) * c];
        let (m, lse) = row_lse(row);
        out[r] = T::from_f64(m + lse - row[y[r]].to_f64());
    }
    Ok(())
}

fn sce_backward_t<T: Float>(ins: &[TensorView], out: &mut [T]) -> Result<(), CpuError> {
    let (x, n, c) = logits(ins, 3)?;
    let x = x.get::<T>()?;
    let dense = ins[1].rank() == 2;
    let t = if dense { ins[1].to_f64_vec() } else { vec![] };
    let y = if dense { vec![] } else { labels(&ins[1], c)? };
    let dl = ins[2].to_f64_vec();
    for r in 0..n {
        let row = &x[r * c..(r + 1) * c];
        let (m, lse) = row_lse(row);
        for j in 0..c {
            let target = if dense {
                t[r * c + j]
            } else {
                (y[r] == j) as u8 as f64
            };
            let p = (row[j].to_f64() - m - lse).exp();
            out[r * c + j] = T::from_f64((p - target) * dl[r]);
        }
    }
    Ok(())
}

/// The single input of a reduction and its compute class.
fn only<'s, 'a>(ins: &'s [TensorView<'a>]) -> Result<&'s TensorView<'a>, CpuError> {
    Ok(&arity(ins, 1, 1)?[0])
}

pub fn reduce(
    op: ReduceOp,
    axes: &[i64],
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let x = only(ins)?;
    let axes = reduce_axes(axes, x.rank()).map_err(op_err)?;
    match x.dtype.compute_class() {
        ComputeClass::F32 => reduce_float::<f32>(op, x, &axes, &mut out),
        ComputeClass::F64 => reduce_float::<f64>(op, x, &axes, &mut out),
        ComputeClass::I64 => reduce_int(op, x, &axes, &mut out),
    }
}

pub fn softmax(axis: i64, ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let x = only(ins)?;
    let a = rlx_ir::normalize_axis(axis, x.rank()).map_err(op_err)?;
    float_class!(x.dtype.compute_class(), T => softmax_t::<T>(x, a, &mut out))
}

/// Index of the max (first on ties, first NaN), as I64.
pub fn argmax(axis: i64, ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let x = only(ins)?;
    let a = rlx_ir::normalize_axis(axis, x.rank()).map_err(op_err)?;
    match x.dtype.compute_class() {
        ComputeClass::F32 => argmax_t::<f32>(x, a, &mut out, f32::is_nan),
        ComputeClass::F64 => argmax_t::<f64>(x, a, &mut out, f64::is_nan),
        ComputeClass::I64 => argmax_t::<i64>(x, a, &mut out, |_| false),
    }
}

/// Running sums of every line along the axis; `add` accumulates (f64 for floats, wrapping
/// i64 for integers) and `to` stores.
fn cumsum_t<T: Elem, A: Copy + Default>(
    x: &TensorView,
    axis: usize,
    (exclusive, reverse): (bool, bool),
    add: fn(A, T) -> A,
    to: fn(A) -> T,
    out: &mut OutView,
) -> Result<(), CpuError> {
    let xs = x.get::<T>()?;
    let o = out.get_mut::<T>()?;
    let (outer, len, inner) = outer_inner(x.shape, axis);
    for a in 0..outer {
        for b in 0..inner {
            let at = |i: usize| a * len * inner + i * inner + b;
            let mut acc = A::default();
            for s in 0..len {
                let i = if reverse { len - 1 - s } else { s };
                if exclusive {
                    o[at(i)] = to(acc);
                    acc = add(acc, xs[at(i)]);
                } else {
                    acc = add(acc, xs[at(i)]);
                    o[at(i)] = to(acc);
                }
            }
        }
    }
    Ok(())
}

pub fn cumsum(
    axis: i64,
    exclusive: bool,
    reverse: bool,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let x = only(ins)?;
    let a = rlx_ir::normalize_axis(axis, x.rank()).map_err(op_err)?;
    let flags = (exclusive, reverse);
    match x.dtype.compute_class() {
        ComputeClass::F32 => {
            cumsum_t::<f32, f64>(x, a, flags, |s, v| s + v as f64, |s| s as f32, &mut out)
        }
        ComputeClass::F64 => cumsum_t::<f64, f64>(x, a, flags, |s, v| s + v, |s| s, &mut out),
        ComputeClass::I64 => cumsum_t::<i64, i64>(x, a, flags, i64::wrapping_add, |s| s, &mut out),
    }
}

/// Indices of the best `k` of every line: sorted by value (largest or smallest first),
/// ties by the lower index; NaN ranks above every number.
fn top_k_t<T: Elem + PartialOrd>(
    x: &TensorView,
    k: usize,
    axis: usize,
    largest: bool,
    is_nan: fn(T) -> bool,
    out: &mut OutView,
) -> Result<(), CpuError> {
    let xs = x.get::<T>()?;
    let o = out.get_mut::<i64>()?;
    let (outer, len, inner) = outer_inner(x.shape, axis);
    let rank = |a: T, b: T| match (is_nan(a), is_nan(b)) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Greater,
        (false, true) => std::cmp::Ordering::Less,
        _ => a.partial_cmp(&b).unwrap_or(std::cmp::Ordering::Equal),
    };
    let mut line: Vec<usize> = Vec::with_capacity(len);
    for a in 0..outer {
        for b in 0..inner {
            let at = |i: usize| xs[a * len * inner + i * inner + b];
            line.clear();
            line.extend(0..len);
            // A stable sort keeps equal values in index order.
            line.sort_by(|&i, &j| {
                let ord = rank(at(i), at(j));
                if largest {
                    ord.reverse()
                } else {
                    ord
                }
            });
            for (j, &i) in line.iter().take(k).enumerate() {
                o[a * k * inner + j * inner + b] = i as i64;
            }
        }
    }
    Ok(())
}

pub fn top_k(
    k: usize,
    axis: i64,
    largest: bool,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let x = only(ins)?;
    let a = rlx_ir::normalize_axis(axis, x.rank()).map_err(op_err)?;
    if k > x.shape[a] {
        return Err(op_err(format!(
            "k = {k} exceeds axis {a} of size {}",
            x.shape[a]
        )));
    }
    match x.dtype.compute_class() {
        ComputeClass::F32 => top_k_t::<f32>(x, k, a, largest, f32::is_nan, &mut out),
        ComputeClass::F64 => top_k_t::<f64>(x, k, a, largest, f64::is_nan, &mut out),
        ComputeClass::I64 => top_k_t::<i64>(x, k, a, largest, |_| false, &mut out),
    }
}

/// logits `[N, C]`, dense targets `[N, C]` → `[N]`.
pub fn softmax_cross_entropy(ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    float_class!(out.class(), T => sce_t::<T>(ins, out.get_mut()?))
}

/// logits `[N, C]`, integer labels `[N]` → `[N]`.
pub fn softmax_cross_entropy_with_logits(
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    float_class!(out.class(), T => sce_logits_t::<T>(ins, out.get_mut()?))
}

/// logits, labels (integer `[N]` or dense `[N, C]`), d_loss `[N]` → dlogits `[N, C]`.
pub fn softmax_cross_entropy_backward(
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    float_class!(out.class(), T => sce_backward_t::<T>(ins, out.get_mut()?))
}
