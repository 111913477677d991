//! CUDA lowering of `Op::CachedAttention` (q, k, v, k_cache, v_cache, pos[, cos, sin]).
//!
//! A decode step (few query rows, the lane-group split body's head sizes, f32 tables laid
//! out one row per query) is one launch of `attn_split_cw_*`: every block stages q rotated
//! and this call's keys rotated (rounded to the cache dtype, as the unfused Rope's output
//! is) and values in shared memory, takes keys at or past `*pos` from there and older ones
//! from the caches, and one block per KV head writes the staged rows into the caches. No
//! block reads a row another block writes, so nothing waits. Anything else (prefill, other
//! head sizes) runs the ops it stands for: the k and v cache writes, q's rotation into
//! scratch, then the attention kernels over the caches.
use super::super::rope_impl::{qkv_rope_cache_rows, rope_cache_write_rows, rope_rows};
use super::{allow_smem, fits_i32, lower_over, plan_split, strides, Io, SPLIT_MAX_SQ, THREADS};
use crate::kernels::attention::{self as k, AttnArgs, AttnCw};
use crate::lower::shape::move_ops::row_copy;
use crate::lower::{DevTensor, Lowered, NodeCtx};
use rlx_ir::{AttentionLayout, AttentionSpec, CachedRope, DType, RopeStyle};

/// This call's rows and tables as the fused kernel reads them.
pub(super) struct Fused {
    cw: AttnCw,
}

pub(in super::super) fn lower(
    ctx: &mut NodeCtx,
    spec: &AttentionSpec,
    rope: &Option<CachedRope>,
) -> Lowered {
    let n = if rope.is_some() { 8 } else { 6 };
    let t: Vec<DevTensor> = (0..n)
        .map(|i| ctx.input(i).cloned())
        .collect::<Result<_, _>>()?;
    let (q, kn, vn, kc, vc, pos) = (&t[0], &t[1], &t[2], &t[3], &t[4], &t[5]);
    let dt = q.dtype;
    if [kn, vn, kc, vc].iter().any(|x| x.dtype != dt) {
        crate::unsupported!("q, k, v and the caches must share a dtype");
    }
    if pos.dtype != DType::I64 || pos.numel() != 1 {
        crate::unsupported!("pos must be one i64, got {} {:?}", pos.dtype, pos.dims);
    }
    if spec.layout == AttentionLayout::Bhsd || kc.rank() < 2 {
        crate::unsupported!("the caches are written along axis 1 ({:?})", spec.layout);
    }
    let tables = rope.map(|r| (r, &t[6], &t[7]));
    if let Some(f) = fused(spec, [q, kn, vn, kc, vc], tables) {
        let spec = spec.clone().with_past();
        return lower_over(
            ctx,
            &spec,
            [q.clone(), kc.clone(), vc.clone()],
            Some(pos.clone()),
            Some(&f),
        );
    }
    let qkv = ctx.env.qkv.get(&ctx.node.id.0).cloned();
    if let (Some((src, cols)), Some((r, cos, sin))) = (&qkv, tables) {
        let ins = [q, kn, vn, kc, vc, pos, cos, sin];
        if let Some(rotated) = qkv_rope_cache_rows(ctx, (src, *cols), ins, spec.head_dim, r)? {
            let spec = spec.clone().with_past();
            let kv = [rotated, kc.clone(), vc.clone()];
            return lower_over(ctx, &spec, kv, Some(pos.clone()), None);
        }
    }
    if let Some((src, cols)) = &qkv {
        // The narrows were not run: copy q, k and v out of the product here.
        for (t, &(start, len)) in [q, kn, vn].into_iter().zip(cols) {
            narrow_rows(ctx, src, start, t)?;
            debug_assert_eq!(t.dims.last(), Some(&len));
        }
    }
    // The ops it stands for, in the order of the unfused graph.
    match tables {
        Some((r, cos, sin)) => {
            let ins = [kc, kn, pos, cos, sin];
            rope_cache_write_rows(ctx, ins, 1, spec.head_dim, r.n_rot, r.style)?;
        }
        None => super::super::cache_write_rows(ctx, kc, kn, pos, 1)?,
    }
    super::super::cache_write_rows(ctx, vc, vn, pos, 1)?;
    let q = match tables {
        Some((r, cos, sin)) => {
            let bytes = q.numel() * q.dtype.size_bytes();
            let rotated = DevTensor {
                ptr: ctx.scratch(bytes.max(1))?,
                ..q.clone()
            };
            rope_rows(
                ctx,
                [q, cos, sin, &rotated],
                spec.head_dim,
                r.n_rot,
                r.style,
            )?;
            rotated
        }
        None => q.clone(),
    };
    let spec = spec.clone().with_past();
    lower_over(
        ctx,
        &spec,
        [q, kc.clone(), vc.clone()],
        Some(pos.clone()),
        None,
    )
}

/// The fused kernel's arguments when it applies: few query rows, D = Dv = 8·2^i ≤ 256 (the
/// lane-group body), 16-byte aligned caches, f32 tables holding one row per query.
fn fused(
    spec: &AttentionSpec,
    [q, kn, vn, kc, vc]: [&DevTensor; 5],
    tables: Option<(CachedRope, &DevTensor, &DevTensor)>,
) -> Option<Fused> {
    let (d, dv) = (spec.head_dim, spec.v_dim());
    let (b, sq) = (q.dims[0], q.dims[1]);
    let hkv = match spec.layout {
        AttentionLayout::Packed => kn.dims.get(2)? / d.max(1),
        _ => *kn.dims.get(2)?,
    };
    let shape_ok = d == dv
        && d.is_multiple_of(8)
        && (d / 8).is_power_of_two()
        && d <= 256
        && (1..=SPLIT_MAX_SQ).contains(&sq)
        && kc.ptr.is_multiple_of(16)
        && vc.ptr.is_multiple_of(16)
        && (kc.dims[2..].iter().product::<usize>() * kc.dtype.size_bytes()).is_multiple_of(16);
    if !shape_ok {
        return None;
    }
    let mut cw = AttnCw {
        kn: kn.ptr,
        vn: vn.ptr,
        kn_st: strides(spec.layout, hkv, sq, d),
        vn_st: strides(spec.layout, hkv, sq, dv),
        ..AttnCw::default()
    };
    if let Some((r, cos, sin)) = tables {
        let per_query = cos.dtype == DType::F32
            && sin.dtype == DType::F32
            && cos.dims == sin.dims
            && cos.numel() == sq * (r.n_rot / 2)
            && cos.dims.last() == Some(&(r.n_rot / 2))
            && cos.dims.first() == Some(&sq)
            && b >= 1;
        if !per_query {
            return None;
        }
        cw.cos = cos.ptr;
        cw.sin = sin.ptr;
        cw.n_rot = r.n_rot as i32;
        cw.style = match r.style {
            RopeStyle::Half => 0,
            RopeStyle::Interleaved => 1,
        };
    }
    Some(Fused { cw })
}

/// The fused decode launch (`Fused`): the split kernel's plan, with the staged rows after
/// its chunk body's shared memory.
pub(super) fn lower_split_fused(
    ctx: &mut NodeCtx,
    io: &Io,
    a: &mut AttnArgs,
    rows: usize,
    f: &Fused,
) -> Lowered {
    // q is staged (rotated) in shared memory, so its own alignment does not matter.
    a.vec |= 1;
    let p = plan_split(ctx, a, rows)?;
    if a.vec & 8 == 0 {
        return Err(crate::lower::LowerError::internal(
            ctx.node,
            "the fused decode attention needs the lane-group body",
        ));
    }
    let (d, dv, sq) = (a.d as usize, a.dv as usize, a.sq as usize);
    let stage = p.body.div_ceil(4) * 4;
    let smem = 4 * (stage + d.div_ceil(4) * 4 + sq * (d + dv));
    let mut cw = AttnCw {
        stage: fits_i32(stage)?,
        ..f.cw
    };
    if let Some(list) = ctx.env.l2_prefetch.get(&ctx.node.id.0) {
        for (i, &(start, bytes)) in list.iter().take(cw.pf.len()).enumerate() {
            cw.pf[i] = start;
            cw.pf_bytes[i] = bytes;
            cw.pf_n = i as i32 + 1;
        }
    }
    let kernel = k::attn_split_cw(io.sfx, io.ptrs, p.part, p.ticket, *a, cw);
    allow_smem(ctx, &kernel, smem)?;
    ctx.run_pdl(kernel, p.grid, [THREADS, 1, 1], smem as u32)
}

/// Columns [start, start + t's last dim) of every row of the fused product `src` into `t`
/// (what the narrow would have copied).
fn narrow_rows(ctx: &mut NodeCtx, src: &DevTensor, start: usize, t: &DevTensor) -> Lowered {
    let (w, len) = (src.dims.last().copied(), t.dims.last().copied());
    let (Some(w), Some(len)) = (w, len) else {
        crate::unsupported!("a narrow of a scalar");
    };
    let es = src.dtype.size_bytes();
    let rows = src.numel() / w.max(1);
    let from = src.ptr + (start * es) as u64;
    row_copy(
        ctx,
        from,
        t.ptr,
        &[rows],
        &[w as i64],
        &[len as i64],
        len,
        es,
    )
}
