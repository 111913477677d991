//! CUDA lowering of `Op::Attention` (kernels in `kernels/attention.cu`).
//!
//! Three paths, all one pass over K/V with an online or chunked softmax (no `Sq × Sk`
//! buffer): `attn_mma_*` (f16/bf16, head_dim == v_head_dim in {32, 64, 128}) runs both
//! products on tensor cores; `attn_fwd_*` is the SIMT kernel for everything else (f32, odd
//! head sizes), and f32 with head_dim == v_head_dim in {32, 64, 128} also times `attn_x3_*`
//! and `attn_x3s_*` (tensor cores, three TF32 products a product: as accurate as f32) and
//! keeps the fastest; when there are few query rows (decode) `attn_split_*` spreads each row's
//! keys over blocks and the last block of a row to finish merges the chunks (one launch;
//! `attn_combine_*` is the kernel of the older two-launch merge, kept for comparison). The layouts differ only in
//! element strides, which are computed here, so one kernel serves Packed, Bshd and Bhsd.
//! Over a KV cache (`AttentionSpec::past`) the kernels read `past` from device memory and
//! walk only the `past + Sq` written keys, so one captured launch serves every step.
use super::super::{DevTensor, KernelLaunch, LowerError, Lowered, NodeCtx};
use crate::kernels::attention::{self as k, AttnArgs, AttnIo, FlashVariant};
use crate::kernels::{Kernel, Sfx};
use rlx_ir::{AttentionLayout, AttentionSpec, DType, MaskKind};

#[path = "transformer_cached.rs"]
mod cached;

/// Element strides (batch, head, seq) of a q/k/v/out tensor; the head dim is contiguous.
fn strides(layout: AttentionLayout, heads: usize, seq: usize, size: usize) -> [i64; 3] {
    let (b, h, s) = match layout {
        AttentionLayout::Packed | AttentionLayout::Bshd => (seq * heads * size, size, heads * size),
        AttentionLayout::Bhsd => (heads * seq * size, seq * size, size),
    };
    [b as i64, h as i64, s as i64]
}

/// Threads of every attention block (the kernels assume 128).
const THREADS: u32 = 128;
/// Query rows up to which the split-over-keys (decode) path is used.
const SPLIT_MAX_SQ: usize = 8;
/// Blocks the split path aims for: its blocks are short and memory-bound, so it wants many
/// loads in flight.
const SPLIT_TARGET_BLOCKS: usize = 1024;
/// Shared memory a block may get without opting in.
const SMEM_DEFAULT: usize = 48 * 1024;
/// Opt-in limit of sm_80+/sm_90 (227 KiB).
const SMEM_MAX: usize = 227 * 1024;

fn fits_i32(n: usize) -> Result<i32, LowerError> {
    i32::try_from(n)
        .map_err(|_| LowerError::Unsupported(format!("size {n} does not fit the kernels' i32")))
}

pub(super) fn lower(ctx: &mut NodeCtx, spec: &AttentionSpec) -> Lowered {
    let (q, k, v) = (
        ctx.input(0)?.clone(),
        ctx.input(1)?.clone(),
        ctx.input(2)?.clone(),
    );
    let past = if spec.past {
        Some(ctx.input(ctx.node.inputs.len() - 1)?.clone())
    } else {
        None
    };
    lower_over(ctx, spec, [q, k, v], past, None)
}

/// Attention over q, k, v (k/v a KV cache when `past` is given) into the node's output.
/// `fused`: the new rows and tables of a `CachedAttention`, which the decode kernel then
/// rotates and writes into the caches itself (see `cached`).
fn lower_over(
    ctx: &mut NodeCtx,
    spec: &AttentionSpec,
    [q, k, v]: [DevTensor; 3],
    past: Option<DevTensor>,
    fused: Option<&cached::Fused>,
) -> Lowered {
    let out = ctx.out.clone();
    let sfx = Sfx::float(q.dtype)?;
    if k.dtype != q.dtype || v.dtype != q.dtype || out.dtype != q.dtype {
        crate::unsupported!("q, k, v and the output must share a dtype");
    }
    let (h, d, dv) = (spec.num_heads, spec.head_dim, spec.v_dim());
    let rank = if spec.layout == AttentionLayout::Packed {
        3
    } else {
        4
    };
    if q.rank() != rank || k.rank() != rank || v.rank() != rank || out.rank() != rank {
        crate::unsupported!("q/k/v/out ranks do not match the {:?} layout", spec.layout);
    }
    let (b, sq, sk, hkv) = match spec.layout {
        AttentionLayout::Packed => (q.dims[0], q.dims[1], k.dims[1], k.dims[2] / d),
        AttentionLayout::Bshd => (q.dims[0], q.dims[1], k.dims[1], k.dims[2]),
        AttentionLayout::Bhsd => (q.dims[0], q.dims[2], k.dims[2], k.dims[1]),
    };
    if hkv == 0 || !h.is_multiple_of(hkv) {
        crate::unsupported!("{h} query heads are not a multiple of {hkv} KV heads");
    }
    if dv > 256 {
        crate::unsupported!("v_head_dim {dv} is above the kernels' 256");
    }
    if out.numel() == 0 {
        return Ok(());
    }

    let mask = match spec.mask_kind {
        MaskKind::None => 0,
        MaskKind::Causal => 1,
        MaskKind::SlidingWindow(_) => 2,
        MaskKind::Custom => 3,
    };
    // A window wider than every position is plain causal; clamp so it fits an i32.
    let window = match spec.mask_kind {
        MaskKind::SlidingWindow(w) => w.min(sk + sq + 1),
        _ => 0,
    };
    let keep = if spec.mask_kind == MaskKind::Custom {
        if spec.past && b != 1 {
            // The kernels index the keep-mask with the valid key count as its row stride.
            crate::unsupported!("a Custom mask over a KV cache needs batch 1, got {b}");
        }
        keep_mask(ctx, b * sk)?
    } else {
        0
    };
    let past = match past {
        Some(p) => {
            if p.dtype != DType::I64 || p.numel() != 1 {
                crate::unsupported!("past must be one i64, got {} {:?}", p.dtype, p.dims);
            }
            p.ptr
        }
        None => 0,
    };

    let aligned = |t: &DevTensor, size: usize| {
        size.is_multiple_of(4) && t.ptr.is_multiple_of(4 * t.dtype.size_bytes() as u64)
    };
    let mut a = AttnArgs {
        q: strides(spec.layout, h, sq, d),
        k: strides(spec.layout, hkv, sk, d),
        v: strides(spec.layout, hkv, sk, dv),
        o: strides(spec.layout, h, sq, dv),
        heads: fits_i32(h)?,
        group: fits_i32(h / hkv)?,
        sq: fits_i32(sq)?,
        sk: fits_i32(sk)?,
        d: fits_i32(d)?,
        dv: fits_i32(dv)?,
        mask,
        window: fits_i32(window)?,
        // The default scale rounded once to f32, as the CPU reference does.
        scale: spec.score_scale.unwrap_or((1.0 / (d as f64).sqrt()) as f32),
        cap: spec.attn_logit_softcap.unwrap_or(0.0),
        vec: aligned(&q, d) as i32 | (aligned(&k, d) as i32) << 1 | (aligned(&v, dv) as i32) << 2,
        past,
        ..AttnArgs::default()
    };
    fits_i32(b * h * sq.max(1))?;
    if b * sk > i32::MAX as usize {
        crate::unsupported!("batch × keys {} is above the kernels' i32 range", b * sk);
    }

    let tensor_cores = matches!(q.dtype, DType::F16 | DType::BF16)
        && d == dv
        && matches!(d, 32 | 64 | 128)
        && [&q, &k, &v, &out].iter().all(|t| t.ptr.is_multiple_of(16));
    let io = Io {
        sfx,
        ptrs: AttnIo {
            q: q.ptr,
            k: k.ptr,
            v: v.ptr,
            keep,
            out: out.ptr,
        },
    };
    if let Some(f) = fused {
        cached::lower_split_fused(ctx, &io, &mut a, b * h * sq, f)
    } else if sq <= SPLIT_MAX_SQ {
        lower_split(ctx, &io, &mut a, b * h * sq)
    } else if tensor_cores {
        lower_mma(ctx, &io, &a, b * h)
    } else {
        let x3 = q.dtype == DType::F32
            && d == dv
            && matches!(d, 32 | 64 | 128)
            && a.vec & 7 == 7
            && [&q, &k, &v, &out].iter().all(|t| t.ptr.is_multiple_of(16))
            && rlx_ir::env::flag(rlx_ir::env::Switch::AttnX3);
        let mut cands = if x3 {
            x3_candidates(ctx, &io, &a, b * h)?
        } else {
            Vec::new()
        };
        cands.extend(flash_candidates(ctx, &io, &a, b * h)?);
        if cands.is_empty() {
            crate::unsupported!(
                "head_dim {d} / {sq} queries fit no query tile ({} B of shared memory at 16 rows)",
                flash_smem(1, 8, d, dv)
            );
        }
        let key = format!(
            "attn_fwd{} {} bh={bh} keep={} {a:?}",
            if x3 { "+x3" } else { "" },
            sfx.name(),
            io.ptrs.keep != 0,
            bh = b * h
        );
        ctx.launch_fastest(&key, cands)
    }
}

pub(super) use cached::lower as lower_cached;

/// The keep-mask as u8 (nonzero = attend): u8/bool masks are used in place, others are
/// converted once per run into scratch.
fn keep_mask(ctx: &mut NodeCtx, n: usize) -> Result<u64, LowerError> {
    let m = ctx.input(3)?.clone();
    if m.numel() != n {
        crate::unsupported!("keep-mask has {} elements, want {n}", m.numel());
    }
    let sfx = match m.dtype {
        DType::U8 | DType::Bool => return Ok(m.ptr),
        DType::F32 => Sfx::F32,
        DType::F16 => Sfx::F16,
        DType::BF16 => Sfx::BF16,
        DType::F64 => Sfx::F64,
        DType::I32 => Sfx::I32,
        DType::I64 => Sfx::I64,
    };
    let keep = ctx.scratch(n)?;
    let kernel = k::attn_keep(sfx, m.ptr, keep, n as i64);
    ctx.run_1d(kernel, n)?;
    Ok(keep)
}

/// Shared memory of the flash kernel (floats): Q tile, K tile, V tile, P tile, key mask.
fn flash_smem(rows: usize, kj: usize, d: usize, dv: usize) -> usize {
    let (bq, bk) = (16 * rows, 8 * kj);
    let d4 = d.div_ceil(4) * 4;
    let ds = if (d4 / 4) % 2 == 1 { d4 } else { d4 + 4 };
    let dv4 = dv.div_ceil(4) * 4;
    4 * (bq * ds + bk * ds + bk * dv4 + bq * (bk + 8) + bk)
}

/// The SIMT forward's instances that fit this shape (any dtype and head size).
fn flash_candidates(
    ctx: &mut NodeCtx,
    io: &Io,
    a: &AttnArgs,
    bh: usize,
) -> Result<Vec<KernelLaunch>, LowerError> {
    let sfx = io.sfx;
    let (sq, d, dv) = (a.sq as usize, a.d as usize, a.dv as usize);
    // Output chunks of 4 columns per lane (8 lanes share a row), rounded to an instance.
    let cv = match dv.div_ceil(4).div_ceil(8) {
        1 => 1,
        2 => 2,
        3 | 4 => 4,
        _ => 8,
    };
    // Big heads: half-width key tiles and at most 32 query rows keep registers in check.
    let (kj, max_rows) = if cv == 8 { (4, 2) } else { (8, 4) };
    let dq = match (d, cv) {
        (32, 1) | (64, 2) | (128, 4) => d,
        _ => 0,
    };
    // Query tiles of 16, 32 or 64 rows trade K/V reuse against blocks in flight and
    // registers (168 a thread at 64 rows, which allows 3 blocks an SM): which wins depends
    // on the shape, so every tile that fits is timed once and the fastest kept.
    let mut cands = Vec::new();
    for rows in [4usize, 2, 1] {
        let smem = flash_smem(rows, kj, d, dv);
        let tiles = sq.div_ceil(16 * rows);
        if rows > max_rows || smem > SMEM_MAX || tiles > 65535 {
            continue;
        }
        let variant = FlashVariant { rows, cv, dq, kj };
        let kernel = k::attn_fwd(variant, sfx, io.ptrs, *a);
        let grid = [fits_i32(bh)? as u32, tiles as u32, 1];
        cands.push(candidate(ctx, kernel, grid, THREADS, smem)?);
    }
    Ok(cands)
}

/// The f32 tensor-core forward's instances (`attn_x3_*`: d == dv in {32, 64, 128}, rows
/// 16-byte aligned): 1, 2 or 4 warps of 16 query rows, key tiles of 32 or 64; then 2 or 4
/// warps sharing 16 query rows and splitting the keys (`attn_x3s_*`).
fn x3_candidates(
    ctx: &mut NodeCtx,
    io: &Io,
    a: &AttnArgs,
    bh: usize,
) -> Result<Vec<KernelLaunch>, LowerError> {
    let (sq, d) = (a.sq as usize, a.d as usize);
    let mut cands = Vec::new();
    let shapes = [4usize, 2, 1]
        .into_iter()
        .flat_map(|w| [(w, 64usize, false), (w, 32, false)])
        .chain([(4, 64, true), (4, 32, true), (2, 64, true), (2, 32, true)]);
    for (warps, bk, split) in shapes {
        let rows = if split { 16 } else { 16 * warps };
        // Q tile and two K/V tile pairs in f32 (rows padded by 4), two key-mask tiles.
        let smem = (rows + 4 * bk) * (d + 4) * 4 + 2 * bk * 4;
        let tiles = sq.div_ceil(rows);
        if smem > SMEM_MAX || tiles > 65535 {
            continue;
        }
        let kernel = k::attn_x3(d, warps, bk, split, io.ptrs, *a);
        let grid = [fits_i32(bh)? as u32, tiles as u32, 1];
        cands.push(candidate(ctx, kernel, grid, 32 * warps as u32, smem)?);
    }
    Ok(cands)
}

/// What every attention kernel reads and writes, and the storage suffix of its name.
struct Io {
    sfx: Sfx,
    ptrs: AttnIo,
}

/// One forward-kernel variant, allowed its shared memory.
fn candidate(
    ctx: &mut NodeCtx,
    kernel: Kernel,
    grid: [u32; 3],
    threads: u32,
    smem: usize,
) -> Result<KernelLaunch, LowerError> {
    allow_smem(ctx, &kernel, smem)?;
    Ok(KernelLaunch::new(
        kernel,
        grid,
        [threads, 1, 1],
        smem as u32,
    ))
}

/// The tensor-core forward (f16/bf16, head_dim == v_head_dim in {32, 64, 128}): 16 query
/// rows a warp, up to 4 warps a block.
fn lower_mma(ctx: &mut NodeCtx, io: &Io, a: &AttnArgs, bh: usize) -> Lowered {
    let sfx = io.sfx;
    let (sq, d) = (a.sq as usize, a.d as usize);
    // 4, 2 or 1 warps of 16 query rows a block: timed once per shape, fastest kept.
    let mut cands = Vec::new();
    for warps in [4usize, 2, 1] {
        // Q tile and two K/V tile pairs (rows padded by 8 elements) in the 2-byte storage
        // type, two key-mask tiles.
        let smem = (16 * warps + 4 * 64) * (d + 8) * 2 + 2 * 64 * 4;
        let tiles = sq.div_ceil(16 * warps);
        if smem > SMEM_MAX || tiles > 65535 {
            continue;
        }
        let kernel = k::attn_mma(d, warps, sfx, io.ptrs, *a);
        let grid = [fits_i32(bh)? as u32, tiles as u32, 1];
        cands.push(candidate(ctx, kernel, grid, 32 * warps as u32, smem)?);
    }
    if cands.is_empty() {
        crate::unsupported!("{sq} queries need more query tiles than the grid allows");
    }
    let key = format!(
        "attn_mma {} bh={bh} keep={} {a:?}",
        sfx.name(),
        io.ptrs.keep != 0
    );
    ctx.launch_fastest(&key, cands)
}

fn lower_split(ctx: &mut NodeCtx, io: &Io, a: &mut AttnArgs, rows: usize) -> Lowered {
    let p = plan_split(ctx, a, rows)?;
    let kernel = k::attn_split(io.sfx, io.ptrs, p.part, p.ticket, *a);
    allow_smem(ctx, &kernel, p.smem)?;
    ctx.run_pdl(kernel, p.grid, [THREADS, 1, 1], p.smem as u32)
}

/// The split kernel's chunks (set in `a`), grid, shared memory and merge scratch.
struct SplitPlan {
    part: u64,
    ticket: u64,
    smem: usize,
    grid: [u32; 3],
    /// Floats of shared memory the chunk bodies use (the lane-group body's partials at the
    /// start).
    body: usize,
}

fn plan_split(ctx: &mut NodeCtx, a: &mut AttnArgs, rows: usize) -> Result<SplitPlan, LowerError> {
    let (sk, d, dv) = (a.sk as usize, a.d as usize, a.dv as usize);
    // Enough chunks to fill the GPU, each at least 256 keys (the kernel's run-time split,
    // ATT_SPLIT_KEYS, relies on it) and at most 4096 (its scores sit in shared memory).
    let want = SPLIT_TARGET_BLOCKS.div_ceil(rows).max(1);
    let chunk = sk.div_ceil(want).clamp(256, 4096).div_ceil(32) * 32;
    let nsplit = sk.div_ceil(chunk).max(1);
    if nsplit > 65535 {
        crate::unsupported!("{sk} keys need {nsplit} chunks (grid limit 65535)");
    }
    a.chunk = chunk as i32;
    a.nsplit = nsplit as i32;
    let mut smem = 4 * (d.div_ceil(4) * 4 + chunk + 32 + 4 * THREADS as usize);
    // The lane-group chunk body (kernels/attention.cu, attn_split_chunk_grp): D/8 lanes a
    // key (a power of two, so the groups tile a warp), its group partials in shared memory.
    if d == dv && d.is_multiple_of(8) && (d / 8).is_power_of_two() && d <= 256 && a.vec & 7 == 7 {
        a.vec |= 8;
        let groups = THREADS as usize / (d / 8);
        smem = smem.max(4 * groups * (dv + 2));
    }
    // Partials and the per-row tickets: plan-lifetime scratch of their own, zeroed at
    // allocation; the kernel puts every ticket back to zero, so each replay of a captured
    // graph starts from zero with no memset node.
    let (part, ticket) = if nsplit > 1 {
        (
            ctx.scratch(rows * nsplit * (dv + 2) * 4)?,
            ctx.scratch(rows * 4)?,
        )
    } else {
        (0, 0)
    };
    Ok(SplitPlan {
        part,
        ticket,
        smem,
        grid: [fits_i32(rows)? as u32, nsplit as u32, 1],
        body: smem / 4,
    })
}

/// Above 48 KiB a kernel must opt in to its dynamic shared memory (once per function; the
/// attribute sticks to the loaded module).
fn allow_smem(ctx: &mut NodeCtx, kernel: &Kernel, bytes: usize) -> Lowered {
    if bytes <= SMEM_DEFAULT {
        return Ok(());
    }
    let f = ctx.env.function(&kernel.src, &kernel.name)?;
    // SAFETY: f is a function of a module loaded in the context `function` just bound.
    unsafe {
        cudarc::driver::result::function::set_function_attribute(
            f.0,
            cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            bytes as i32,
        )
    }
    // The callers keep `bytes` within SMEM_MAX, so a refusal is a driver failure.
    .map_err(|e| LowerError::Internal(crate::CudaError::driver("cuFuncSetAttribute (max dynamic shared memory)", format!("{}: {bytes} B: {e:?}", kernel.name))))
}
