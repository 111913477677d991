//! Rope: rotary position embedding of q/k heads, and RopeCacheWrite: the rotated key rows
//! written straight into a KV cache (kernels in `kernels/shape_ops.cu`, beside the row
//! copies and the cache write they share their launch shape with).
use super::super::shape::move_ops::{coalesce, dims8, istrides};
use super::super::{DevTensor, Dims8, LowerError, Lowered, NodeCtx};
use crate::kernels::{shape_ops, Sfx};
use crate::unsupported;
use rlx_ir::ops::attention::rope_view;
use rlx_ir::{Dim, RopeStyle};

#[cfg(test)]
#[path = "transformer_rope_hosttest.rs"]
mod hosttest;

/// What both Rope kernels take beyond their pointers: x's and the tables' storage, the
/// tables' row of each head row (`cv`), and the style code.
struct RopePlan {
    xs: Sfx,
    cs: Sfx,
    cv: Dims8,
    style: i32,
}

/// Check x / cos / sin (and that `out` is shaped like x) and plan the broadcast of the
/// tables onto x's head rows.
fn plan(
    x: &DevTensor,
    cos: &DevTensor,
    sin: &DevTensor,
    out: &DevTensor,
    (head_dim, n_rot, style): (usize, usize, RopeStyle),
) -> Result<RopePlan, LowerError> {
    let xs = Sfx::float(x.dtype)?;
    let cs = Sfx::float(cos.dtype)?;
    if sin.dtype != cos.dtype || sin.dims != cos.dims {
        unsupported!(
            "sin {} {:?} differs from cos {} {:?}",
            sin.dtype,
            sin.dims,
            cos.dtype,
            cos.dims
        );
    }
    if out.dtype != x.dtype || out.dims != x.dims {
        unsupported!("output {:?} differs from x {:?}", out.dims, x.dims);
    }
    if n_rot == 0 || n_rot % 2 == 1 || n_rot > head_dim || cos.rank() == 0 {
        unsupported!(
            "n_rot {n_rot} / head_dim {head_dim} / cos {:?} are invalid",
            cos.dims
        );
    }
    let half = n_rot / 2;
    let stat = |d: &[usize]| d.iter().map(|&v| Dim::Static(v)).collect::<Vec<_>>();
    let view = rope_view(&stat(&x.dims), &stat(&cos.dims), head_dim, n_rot)
        .map_err(LowerError::Unsupported)?;
    let lead: Vec<usize> = view[..view.len() - 1]
        .iter()
        .map(|d| d.as_static().unwrap_or(1))
        .collect();
    let (cos_lead, cos_last) = cos.dims.split_at(cos.rank() - 1);
    if cos_last[0] != half || cos_lead.len() > lead.len() {
        unsupported!(
            "cos {:?} does not fit x {:?} with n_rot {n_rot}",
            cos.dims,
            x.dims
        );
    }
    // Row strides of cos broadcast onto the view's lead dims (units of `half`).
    let off = lead.len() - cos_lead.len();
    let cst = istrides(cos_lead);
    let mut st = vec![0i64; lead.len()];
    for (k, &c) in cos_lead.iter().enumerate() {
        if c == lead[off + k] && c != 1 {
            st[off + k] = cst[k];
        } else if c != 1 {
            unsupported!("cos {:?} does not broadcast to {lead:?}", cos.dims);
        }
    }
    let (d, s) = coalesce(&lead, &[&st]);
    let cv = dims8(&d, &s[0])?;
    let style = match style {
        RopeStyle::Half => 0,
        RopeStyle::Interleaved => 1,
    };
    Ok(RopePlan { xs, cs, cv, style })
}

pub(super) fn rope(ctx: &mut NodeCtx, head_dim: usize, n_rot: usize, style: RopeStyle) -> Lowered {
    let (x, cos, sin, out) = (
        ctx.input(0)?.clone(),
        ctx.input(1)?.clone(),
        ctx.input(2)?.clone(),
        ctx.out.clone(),
    );
    rope_rows(ctx, [&x, &cos, &sin, &out], head_dim, n_rot, style)
}

/// The Rope kernel over explicit tensors: x, cos, sin → out.
pub(super) fn rope_rows(
    ctx: &mut NodeCtx,
    [x, cos, sin, out]: [&DevTensor; 4],
    head_dim: usize,
    n_rot: usize,
    style: RopeStyle,
) -> Lowered {
    let p = plan(x, cos, sin, out, (head_dim, n_rot, style))?;
    let n = x.numel();
    if n == 0 {
        return Ok(());
    }
    let ptrs = (x.ptr, cos.ptr, sin.ptr, out.ptr);
    let (rows, hd, nrot) = ((n / head_dim) as i64, head_dim as i64, n_rot as i64);
    let kernel = shape_ops::rope(p.xs, p.cs, ptrs, p.cv, rows, hd, nrot, p.style);
    ctx.run_1d_pdl(kernel, n)
}

/// RopeCacheWrite (cache, new, pos, cos, sin): the output is the cache leaf (aliased by the
/// memory plan, as for CacheWrite); one kernel rotates the new rows into it at `*pos`.
pub(super) fn rope_cache_write(
    ctx: &mut NodeCtx,
    axis: usize,
    head_dim: usize,
    n_rot: usize,
    style: RopeStyle,
) -> Lowered {
    let [cache, new, pos, cos, sin] = [0, 1, 2, 3, 4].map(|i| ctx.input(i).cloned());
    let (cache, new, pos, cos, sin) = (cache?, new?, pos?, cos?, sin?);
    if ctx.out.ptr != cache.ptr {
        return Err(LowerError::internal(
            ctx.node,
            "the memory plan did not alias the cache write to its cache",
        ));
    }
    let t = [&cache, &new, &pos, &cos, &sin];
    rope_cache_write_rows(ctx, t, axis, head_dim, n_rot, style)
}

/// The RopeCacheWrite kernel over explicit tensors: cache, new, pos, cos, sin.
pub(super) fn rope_cache_write_rows(
    ctx: &mut NodeCtx,
    [cache, new, pos, cos, sin]: [&DevTensor; 5],
    axis: usize,
    head_dim: usize,
    n_rot: usize,
    style: RopeStyle,
) -> Lowered {
    if pos.dtype != rlx_ir::DType::I64 || pos.numel() != 1 || new.dtype != cache.dtype {
        unsupported!("pos must be one i64 and new rows the cache's dtype");
    }
    let r = cache.rank();
    if axis >= r || new.rank() != r {
        unsupported!("axis {axis} of cache {:?} / new {:?}", cache.dims, new.dims);
    }
    // Rope's output is shaped like its x: check the tables against `new` itself.
    let p = plan(new, cos, sin, new, (head_dim, n_rot, style))?;
    let outer: usize = cache.dims[..axis].iter().product();
    let inner: usize = cache.dims[axis + 1..].iter().product();
    if new.numel() == 0 {
        return Ok(());
    }
    let dims = [outer, cache.dims[axis], new.dims[axis], inner].map(|v| v as i64);
    let ptrs = (cache.ptr, new.ptr, pos.ptr, cos.ptr, sin.ptr);
    let (hd, nrot) = (head_dim as i64, n_rot as i64);
    let kernel = shape_ops::rope_cache_write(p.xs, p.cs, ptrs, p.cv, dims, hd, nrot, p.style);
    ctx.run_1d_pdl(kernel, new.numel())
}

/// The prefill's q, k and v out of the fused product `src` (`exec::qkv_views`): q rotated
/// into scratch (returned), k rotated into its cache and v copied into its cache at `*pos`,
/// one launch, each value rounded as the Rope / RopeCacheWrite / CacheWrite kernels round
/// it. None when the shapes are not the plain prefill layout (`[b, s, W]` product, caches
/// `[b, cap, width]` of the same dtype): the caller then copies the narrows itself.
pub(super) fn qkv_rope_cache_rows(
    ctx: &mut NodeCtx,
    (src, cols): (&DevTensor, [(usize, usize); 3]),
    [q, kn, vn, kc, vc, pos, cos, sin]: [&DevTensor; 8],
    head_dim: usize,
    rope: rlx_ir::CachedRope,
) -> Result<Option<DevTensor>, LowerError> {
    let dt = src.dtype;
    let same = [q, kn, vn, kc, vc]
        .iter()
        .all(|t| t.dtype == dt && t.rank() == 3);
    if !same || src.rank() != 3 || pos.dtype != rlx_ir::DType::I64 || pos.numel() != 1 {
        return Ok(None);
    }
    let (b, s, w) = (src.dims[0], src.dims[1], src.dims[2]);
    let widths = [q, kn, vn].map(|t| t.dims[2]);
    let fits = [q, kn, vn].iter().all(|t| t.dims[..2] == [b, s])
        && (0..3).all(|i| cols[i].1 == widths[i] && cols[i].0 + cols[i].1 <= w)
        && kc.dims[0] == b
        && vc.dims[0] == b
        && kc.dims[1] == vc.dims[1]
        && kc.dims[2] == widths[1]
        && vc.dims[2] == widths[2]
        && head_dim > 0
        && widths[0].is_multiple_of(head_dim)
        && widths[1].is_multiple_of(head_dim);
    if !fits {
        return Ok(None);
    }
    let cfg = (head_dim, rope.n_rot, rope.style);
    let pq = plan(q, cos, sin, q, cfg)?;
    let pk = plan(kn, cos, sin, kn, cfg)?;
    let rotated = DevTensor {
        ptr: ctx.scratch((q.numel() * dt.size_bytes()).max(1))?,
        ..q.clone()
    };
    let a = shape_ops::QkvArgs {
        rows: (b * s) as i64,
        s: s as i64,
        cap: kc.dims[1] as i64,
        w: w as i64,
        oq: cols[0].0 as i64,
        nq: widths[0] as i64,
        ok: cols[1].0 as i64,
        nk: widths[1] as i64,
        ov: cols[2].0 as i64,
        nv: widths[2] as i64,
        hd: head_dim as i64,
        nrot: rope.n_rot as i64,
        style: pq.style,
        pad: 0,
    };
    let n = b * s * (widths[0] + widths[1] + widths[2]);
    if n > 0 {
        let ptrs = (src.ptr, rotated.ptr, kc.ptr, vc.ptr);
        let tabs = (pos.ptr, cos.ptr, sin.ptr);
        let kernel = shape_ops::qkv_rope_cache(pq.xs, pq.cs, ptrs, tabs, pq.cv, pk.cv, a);
        ctx.run_1d_pdl(kernel, n)?;
    }
    Ok(Some(rotated))
}
