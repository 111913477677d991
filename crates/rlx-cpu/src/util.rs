//! Small shared helpers for thunks.

/// Strides that read an input of `in_shape` broadcast to `out_shape` (0 on broadcast axes).
/// `in_shape` must be broadcast-compatible with `out_shape` (rank ≤, dims equal or 1).
pub fn broadcast_strides(in_shape: &[usize], out_shape: &[usize]) -> Vec<usize> {
    let r = out_shape.len();
    let off = r - in_shape.len();
    let mut st = vec![0; r];
    let mut acc = 1;
    for i in (0..in_shape.len()).rev() {
        st[i + off] = if in_shape[i] == 1 { 0 } else { acc };
        acc *= in_shape[i];
    }
    st
}

/// Offsets into a broadcast input for every output element, in row-major output order.
pub fn broadcast_offsets(in_shape: &[usize], out_shape: &[usize]) -> Vec<usize> {
    let n: usize = out_shape.iter().product();
    if in_shape == out_shape {
        return (0..n).collect();
    }
    let st = broadcast_strides(in_shape, out_shape);
    let mut idx = vec![0usize; out_shape.len()];
    let mut out = Vec::with_capacity(n);
    let mut cur = 0usize;
    for _ in 0..n {
        out.push(cur);
        for d in (0..out_shape.len()).rev() {
            idx[d] += 1;
            cur += st[d];
            if idx[d] < out_shape[d] {
                break;
            }
            cur -= st[d] * idx[d];
            idx[d] = 0;
        }
    }
    out
}

/// Split a shape around `axis` into (outer, len, inner) element counts.
pub fn outer_inner(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    let outer = shape[..axis].iter().product();
    let inner = shape[axis + 1..].iter().product();
    (outer, shape[axis], inner)
}
