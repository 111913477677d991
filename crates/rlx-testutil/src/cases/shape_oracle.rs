//! f64 oracles of the shape group, written as index arithmetic over row-major arrays (the
//! spec's loops: NumPy broadcasting, ONNX Slice clamping), independent of rlx's movers.
pub use super::unravel;
use super::{numel, src_index};
use rlx_ir::DType;

pub fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (&i, &n)| acc * n + i)
}

/// A possibly negative axis of a rank-`rank` tensor.
pub fn axis_of(axis: i64, rank: usize) -> usize {
    if axis < 0 {
        (axis + rank as i64) as usize
    } else {
        axis as usize
    }
}

/// Dims of `shape` permuted by `perm`.
pub fn permuted(shape: &[usize], perm: &[usize]) -> Vec<usize> {
    perm.iter().map(|&p| shape[p]).collect()
}

pub fn transpose_ref(x: &[f64], shape: &[usize], perm: &[usize]) -> Vec<f64> {
    let os = permuted(shape, perm);
    (0..x.len())
        .map(|k| {
            let o = unravel(k, &os);
            let mut src = vec![0; shape.len()];
            for (d, &p) in perm.iter().enumerate() {
                src[p] = o[d];
            }
            x[ravel(&src, shape)]
        })
        .collect()
}

/// NumPy broadcast of `x` (dims `ins`) to `outs`.
pub fn expand_ref(x: &[f64], ins: &[usize], outs: &[usize]) -> Vec<f64> {
    (0..numel(outs))
        .map(|k| x[src_index(ins, outs, k)])
        .collect()
}

/// Dims after taking `len` entries of `axis`.
pub fn narrowed(shape: &[usize], axis: usize, len: usize) -> Vec<usize> {
    let mut os = shape.to_vec();
    os[axis] = len;
    os
}

pub fn narrow_ref(x: &[f64], shape: &[usize], axis: usize, start: usize, len: usize) -> Vec<f64> {
    let os = narrowed(shape, axis, len);
    (0..numel(&os))
        .map(|k| {
            let mut o = unravel(k, &os);
            o[axis] += start;
            x[ravel(&o, shape)]
        })
        .collect()
}

/// Dims of the concatenation of `shapes` on `axis`.
pub fn concatenated(shapes: &[Vec<usize>], axis: usize) -> Vec<usize> {
    let mut os = shapes[0].clone();
    os[axis] = shapes.iter().map(|s| s[axis]).sum();
    os
}

pub fn concat_ref(xs: &[Vec<f64>], shapes: &[Vec<usize>], axis: usize) -> Vec<f64> {
    let os = concatenated(shapes, axis);
    (0..numel(&os))
        .map(|k| {
            let mut o = unravel(k, &os);
            let mut which = 0;
            while o[axis] >= shapes[which][axis] {
                o[axis] -= shapes[which][axis];
                which += 1;
            }
            xs[which][ravel(&o, &shapes[which])]
        })
        .collect()
}

/// Dims of a gather: `shape[..axis] ++ idx_shape ++ shape[axis+1..]`.
pub fn gathered(shape: &[usize], idx_shape: &[usize], axis: usize) -> Vec<usize> {
    let mut os = shape[..axis].to_vec();
    os.extend(idx_shape);
    os.extend(&shape[axis + 1..]);
    os
}

/// Gather along `axis`; negative indices count from the end (float indices truncate).
pub fn gather_ref(
    x: &[f64],
    shape: &[usize],
    idx: &[f64],
    idx_shape: &[usize],
    axis: usize,
) -> Vec<f64> {
    let os = gathered(shape, idx_shape, axis);
    let n = shape[axis] as i64;
    let r = idx_shape.len();
    (0..numel(&os))
        .map(|k| {
            let o = unravel(k, &os);
            let mut v = idx[ravel(&o[axis..axis + r], idx_shape)] as i64;
            if v < 0 {
                v += n;
            }
            let mut src = o[..axis].to_vec();
            src.push(v as usize);
            src.extend(&o[axis + r..]);
            x[ravel(&src, shape)]
        })
        .collect()
}

pub fn padded(shape: &[usize], pads: &[[usize; 2]]) -> Vec<usize> {
    (0..shape.len())
        .map(|d| shape[d] + pads[d][0] + pads[d][1])
        .collect()
}

/// Constant padding with `fill` (already in the output dtype).
/// A Pad fill as stored in `dt`: floats as they are; integers truncated toward zero and
/// clamped to the type's range (NaN to 0); Bool `v != 0`.
pub fn fill_in(v: f64, dt: DType) -> f64 {
    let clamp = |lo: f64, hi: f64| {
        if v.is_nan() {
            0.0
        } else {
            v.trunc().clamp(lo, hi)
        }
    };
    match dt {
        DType::U8 => clamp(0.0, 255.0),
        DType::I32 => clamp(i32::MIN as f64, i32::MAX as f64),
        DType::I64 => clamp(-9.223_372_036_854_776e18, 9.223_372_036_854_776e18),
        DType::Bool => (v != 0.0) as u8 as f64,
        _ => v,
    }
}

pub fn pad_ref(x: &[f64], shape: &[usize], pads: &[[usize; 2]], fill: f64) -> Vec<f64> {
    let os = padded(shape, pads);
    let r = shape.len();
    (0..numel(&os))
        .map(|k| {
            let o = unravel(k, &os);
            let inside = (0..r).all(|d| o[d] >= pads[d][0] && o[d] < pads[d][0] + shape[d]);
            if inside {
                let src: Vec<usize> = (0..r).map(|d| o[d] - pads[d][0]).collect();
                x[ravel(&src, shape)]
            } else {
                fill
            }
        })
        .collect()
}

/// The ONNX Slice indices of one axis, written out as the spec's loop.
pub fn slice_indices(n: i64, start: i64, end: i64, step: i64) -> Vec<usize> {
    let fix = |v: i64| if v < 0 { v.saturating_add(n) } else { v };
    let (mut s, mut e) = (fix(start), fix(end));
    if step > 0 {
        s = s.max(0).min(n);
        e = e.max(0).min(n);
    } else {
        s = s.max(0).min(n - 1);
        e = e.max(-1).min(n - 1);
    }
    let mut out = vec![];
    let mut i = s;
    while (step > 0 && i < e) || (step < 0 && i > e) {
        out.push(i as usize);
        i += step;
    }
    out
}

/// The source index of every axis of a slice (axes default to 0.., steps to 1).
pub fn slice_picks(
    shape: &[usize],
    axes: &[i64],
    starts: &[i64],
    ends: &[i64],
    steps: &[i64],
) -> Vec<Vec<usize>> {
    let mut picks: Vec<Vec<usize>> = shape.iter().map(|&n| (0..n).collect()).collect();
    for k in 0..starts.len() {
        let a = axis_of(axes.get(k).copied().unwrap_or(k as i64), shape.len());
        let step = steps.get(k).copied().unwrap_or(1);
        picks[a] = slice_indices(shape[a] as i64, starts[k], ends[k], step);
    }
    picks
}

pub fn slice_ref(x: &[f64], shape: &[usize], picks: &[Vec<usize>]) -> Vec<f64> {
    let os: Vec<usize> = picks.iter().map(|p| p.len()).collect();
    (0..numel(&os))
        .map(|k| {
            let o = unravel(k, &os);
            let src: Vec<usize> = (0..shape.len()).map(|d| picks[d][o[d]]).collect();
            x[ravel(&src, shape)]
        })
        .collect()
}
