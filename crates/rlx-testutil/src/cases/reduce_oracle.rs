//! The f64 oracles of the reduce group: plain loops over row-major indices (Reduce in float
//! and integer arithmetic, Softmax, ArgMax, the softmax cross-entropy family), independent
//! of rlx's kernels.
pub use super::unravel;
use rlx_ir::{DType, ReduceOp};

/// Axes as non-negative indices; none means every axis.
pub fn norm_axes(axes: &[i64], rank: usize) -> Vec<usize> {
    if axes.is_empty() {
        return (0..rank).collect();
    }
    axes.iter()
        .map(|&a| if a < 0 { a + rank as i64 } else { a } as usize)
        .collect()
}

/// The shape of `shape` reduced over `axes`.
pub fn reduced_shape(shape: &[usize], axes: &[usize], keep: bool) -> Vec<usize> {
    let mut out_shape = vec![];
    for (d, &n) in shape.iter().enumerate() {
        if !axes.contains(&d) {
            out_shape.push(n);
        } else if keep {
            out_shape.push(1);
        }
    }
    out_shape
}

/// Output shape and, for each input element, the flat output position it reduces into.
pub fn groups(shape: &[usize], axes: &[usize], keep: bool) -> (Vec<usize>, Vec<usize>) {
    let out_shape = reduced_shape(shape, axes, keep);
    let numel: usize = shape.iter().product();
    let dest = (0..numel)
        .map(|k| {
            let idx = unravel(k, shape);
            (0..shape.len())
                .filter(|d| !axes.contains(d))
                .fold(0, |flat, d| flat * shape[d] + idx[d])
        })
        .collect();
    (out_shape, dest)
}

/// Reduce `x` of `shape` over `axes`: in f64 for floats; for integers in i64 with wrapping
/// products and a truncating mean, then wrapped into i32 where the dtype is I32.
pub fn reduce_ref(
    op: ReduceOp,
    x: &[f64],
    shape: &[usize],
    axes: &[i64],
    keep: bool,
    dt: DType,
) -> Vec<f64> {
    let (out_shape, dest) = groups(shape, &norm_axes(axes, shape.len()), keep);
    let m: usize = out_shape.iter().product();
    let mut vals: Vec<Vec<f64>> = vec![vec![]; m];
    for (k, &j) in dest.iter().enumerate() {
        vals[j].push(x[k]);
    }
    if dt.is_int() {
        return vals.iter().map(|v| int_reduce(op, v, dt)).collect();
    }
    vals.iter()
        .map(|v| match op {
            ReduceOp::Sum => v.iter().sum(),
            ReduceOp::Mean => v.iter().sum::<f64>() / v.len() as f64,
            ReduceOp::Max => v.iter().cloned().fold(f64::MIN, f64::max),
            ReduceOp::Min => v.iter().cloned().fold(f64::MAX, f64::min),
            ReduceOp::Prod => v.iter().product(),
        })
        .collect()
}

fn int_reduce(op: ReduceOp, v: &[f64], dt: DType) -> f64 {
    let v: Vec<i64> = v.iter().map(|&x| x as i64).collect();
    let r = match op {
        ReduceOp::Sum => v.iter().fold(0i64, |a, &b| a.wrapping_add(b)),
        ReduceOp::Mean => v.iter().fold(0i64, |a, &b| a.wrapping_add(b)) / v.len() as i64,
        ReduceOp::Prod => v.iter().fold(1i64, |a, &b| a.wrapping_mul(b)),
        ReduceOp::Max => v.iter().cloned().fold(i64::MIN, i64::max),
        ReduceOp::Min => v.iter().cloned().fold(i64::MAX, i64::min),
    };
    if dt == DType::I32 {
        r as i32 as f64
    } else {
        r as f64
    }
}

/// Outer, length and inner extents of `axis` in `shape`.
fn split(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    let outer = shape[..axis].iter().product();
    let inner = shape[axis + 1..].iter().product();
    (outer, shape[axis], inner)
}

/// Softmax along `axis` (max-shifted, two passes).
pub fn softmax_ref(x: &[f64], shape: &[usize], axis: i64) -> Vec<f64> {
    let (outer, len, inner) = split(shape, norm_axes(&[axis], shape.len())[0]);
    let mut out = vec![0.0; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| o * len * inner + j * inner + i;
            let m = (0..len).map(|j| x[at(j)]).fold(f64::MIN, f64::max);
            let s: f64 = (0..len).map(|j| (x[at(j)] - m).exp()).sum();
            for j in 0..len {
                out[at(j)] = (x[at(j)] - m).exp() / s;
            }
        }
    }
    out
}

/// Index of the first maximum along `axis` (ties: the first wins).
pub fn argmax_ref(x: &[f64], shape: &[usize], axis: i64) -> Vec<f64> {
    let (outer, len, inner) = split(shape, norm_axes(&[axis], shape.len())[0]);
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| x[o * len * inner + j * inner + i];
            let best = (1..len).fold(0, |b, j| if at(j) > at(b) { j } else { b });
            out.push(best as f64);
        }
    }
    out
}

/// Per-row log-softmax of `[n, c]` logits.
pub fn log_softmax_rows(x: &[f64], n: usize, c: usize) -> Vec<f64> {
    let mut out = vec![0.0; n * c];
    for r in 0..n {
        let row = &x[r * c..(r + 1) * c];
        let m = row.iter().cloned().fold(f64::MIN, f64::max);
        let lse = m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
        for j in 0..c {
            out[r * c + j] = row[j] - lse;
        }
    }
    out
}

/// −Σ t·log softmax(x) per row, for dense targets `[n, c]` or class labels `[n]` (`dense`
/// says which: with one class both hold `n` values).
pub fn cross_entropy_ref(x: &[f64], targets: &[f64], dense: bool, n: usize, c: usize) -> Vec<f64> {
    let ls = log_softmax_rows(x, n, c);
    (0..n)
        .map(|r| {
            if !dense {
                -ls[r * c + targets[r] as usize]
            } else {
                -(0..c)
                    .map(|j| targets[r * c + j] * ls[r * c + j])
                    .sum::<f64>()
            }
        })
        .collect()
}

/// d loss / d logits = (softmax(x) − t)·d_loss per row, for dense targets or labels.
pub fn cross_entropy_backward_ref(
    x: &[f64],
    targets: &[f64],
    dense: bool,
    d: &[f64],
    n: usize,
    c: usize,
) -> Vec<f64> {
    let ls = log_softmax_rows(x, n, c);
    let mut out = vec![0.0; n * c];
    for r in 0..n {
        for j in 0..c {
            let t = if !dense {
                if targets[r] as usize == j {
                    1.0
                } else {
                    0.0
                }
            } else {
                targets[r * c + j]
            };
            out[r * c + j] = (ls[r * c + j].exp() - t) * d[r];
        }
    }
    out
}
