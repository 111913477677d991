//! TransformRegion: the steps are composed at lowering into one strided view of the input and
//! materialised by one copy. A Reshape that no view can express (merging axes that are not
//! contiguous in memory) materialises the view so far into scratch and continues from there.
use super::super::shape::move_ops::{copy_view_raw, View};
use super::super::{LowerError, Lowered, NodeCtx};
use crate::unsupported;
use rlx_ir::ops::shape_ops::transform_step_dims;
use rlx_ir::{Dim, TransformStep};

pub(super) fn lower(ctx: &mut NodeCtx, steps: &[TransformStep]) -> Lowered {
    let x = ctx.input(0)?.clone();
    if ctx.out.dtype.size_bytes() != x.dtype.size_bytes() {
        unsupported!(
            "output {} differs from input {} in width",
            ctx.out.dtype,
            x.dtype
        );
    }
    let out = ctx.out.clone();
    let es = x.dtype.size_bytes();
    let mut base = x.ptr;
    let mut v = View::contiguous(&x.dims);
    for (i, step) in steps.iter().enumerate() {
        let cur: Vec<Dim> = v.dims.iter().map(|&d| Dim::Static(d)).collect();
        let next = transform_step_dims(&cur, step)
            .map_err(|e| LowerError::Unsupported(format!("step {i}: {e}")))?;
        let next: Vec<usize> = match next.iter().map(Dim::as_static).collect::<Option<_>>() {
            Some(d) => d,
            // A symbolic Expand target: only the last step's is known (the output dims).
            None if i + 1 == steps.len() && next.len() == out.rank() => out.dims.clone(),
            None => unsupported!("step {i} ({step:?}) has a symbolic size"),
        };
        v = match step {
            TransformStep::Transpose(p) => v.permute(p),
            TransformStep::Narrow { axis, start, .. } => {
                let a = ctx.axis(*axis, v.dims.len())?;
                v.narrow(a, *start, next[a])
            }
            TransformStep::Expand(_) => v.expand(&next)?,
            TransformStep::Reshape(_) => {
                let n: usize = next.iter().product();
                if v.numel() == 1 && n != 1 {
                    View {
                        strides: vec![0; next.len()],
                        dims: next,
                        offset: v.offset,
                    }
                } else if v.numel() != n {
                    unsupported!("step {i}: cannot reshape {:?} into {next:?}", v.dims);
                } else if let Some(strides) = reshape_strides(&v.dims, &v.strides, &next) {
                    View {
                        dims: next,
                        strides,
                        offset: v.offset,
                    }
                } else {
                    let tmp = ctx.scratch(n * es)?;
                    copy_view_raw(ctx, base, &v, tmp, es)?;
                    base = tmp;
                    View::contiguous(&next)
                }
            }
        };
    }
    if v.dims != out.dims {
        unsupported!("steps give {:?}, the output is {:?}", v.dims, out.dims);
    }
    copy_view_raw(ctx, base, &v, out.ptr, es)
}

/// Strides that read `old` (dims, strides) reshaped row-major to `new` without a copy, or
/// None when the reshape merges axes that are not contiguous (PyTorch's `computeStride`).
pub(crate) fn reshape_strides(old_d: &[usize], old_s: &[i64], new_d: &[usize]) -> Option<Vec<i64>> {
    let numel: usize = old_d.iter().product();
    if numel == 0 || old_d.is_empty() {
        return Some(vec![0; new_d.len()]);
    }
    let mut new_s = vec![0i64; new_d.len()];
    let mut view_d = new_d.len() as isize - 1;
    let mut chunk = old_s[old_d.len() - 1];
    let (mut tensor_n, mut view_n) = (1usize, 1usize);
    for td in (0..old_d.len()).rev() {
        tensor_n *= old_d[td];
        let breaks = td == 0 || (old_d[td - 1] != 1 && old_s[td - 1] != tensor_n as i64 * chunk);
        if breaks {
            while view_d >= 0 && (view_n < tensor_n || new_d[view_d as usize] == 1) {
                new_s[view_d as usize] = view_n as i64 * chunk;
                view_n *= new_d[view_d as usize];
                view_d -= 1;
            }
            if view_n != tensor_n {
                return None;
            }
            if td > 0 {
                chunk = old_s[td - 1];
                tensor_n = 1;
                view_n = 1;
            }
        }
    }
    (view_d == -1).then_some(new_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reading through the computed strides gives the row-major reshape of the view.
    fn check(d: &[usize], s: &[i64], new: &[usize]) -> bool {
        let Some(ns) = reshape_strides(d, s, new) else {
            return false;
        };
        let off = |dims: &[usize], st: &[i64], mut lin: usize| -> i64 {
            let mut o = 0;
            for k in (0..dims.len()).rev() {
                o += (lin % dims[k]) as i64 * st[k];
                lin /= dims[k];
            }
            o
        };
        let n: usize = d.iter().product();
        assert!(
            (0..n).all(|i| off(d, s, i) == off(new, &ns, i)),
            "{d:?} {s:?} -> {new:?}"
        );
        true
    }

    #[test]
    fn reshape_views() {
        assert!(check(&[2, 3], &[3, 1], &[6]));
        assert!(check(&[2, 3, 4], &[12, 4, 1], &[6, 1, 4]));
        assert!(check(&[4, 3], &[1, 4], &[2, 2, 3]));
        assert!(!check(&[3, 2], &[1, 3], &[6]));
        assert!(check(&[2, 1, 3], &[3, 99, 1], &[1, 6, 1]));
        // A narrowed axis splits but does not merge with its neighbour.
        assert!(check(&[2, 4, 5], &[50, 5, 1], &[2, 2, 2, 5]));
        assert!(!check(&[2, 4, 5], &[50, 5, 1], &[8, 5]));
        assert!(check(&[3, 4], &[0, 1], &[3, 2, 2]));
        assert!(!check(&[3, 4], &[0, 1], &[12]));
    }
}
