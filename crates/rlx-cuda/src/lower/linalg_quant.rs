//! CUDA lowering of DequantMatMul, FusedDequantMatMul and Dequantize, linalg ops (kernels in
//! `kernels/quant.cu`). Decode-size products (M ≤ 8 rows) read the packed blocks directly in
//! a GEMV that also takes the fused op's RMS norm or SwiGLU of x and its residual add: the
//! staged GEMV (x's rows prepared once per block in shared memory, a few lanes per output
//! column) wherever its shared memory fits, else the warp-per-column one. Larger M run on
//! tensor cores at the f32 product's accuracy: x (the fused op's norm or SwiGLU of it, first
//! into a scratch) split into f16 parts, the weight decoded chunk by chunk into a bounded
//! scratch and split the same way (half weights need no split), one cuBLASLt f16 GEMM per
//! chunk, and the parts summed back with the residual (`split_gemm`, `half_gemm`). Under a
//! half precision policy (`RLX_PRECISION=f16|bf16`) a quantized weight is decoded once to that
//! dtype and multiplied as a half weight is, x rounded to it (`half_product`).
use super::super::{DevTensor, KernelLaunch, Lowered, NodeCtx};
use super::gemm_input;
use crate::gemm::GemmDesc;
use crate::kernels::norm::{self as norm_k, NormPtrs, NormRows};
use crate::kernels::quant::{GemvExtras, Wq};
use crate::kernels::{quant, Sfx};
use crate::lower::norm::vec_rows;
use rlx_ir::{DType, QuantScheme};

/// Rows up to which the GEMV kernel is used (its accumulator count, `GEMV_MAX_M`).
const GEMV_MAX_M: usize = 8;

/// Bound on the dequantised weight scratch of one node; larger weights go in column chunks.
const DEQUANT_SCRATCH: usize = 32 << 20;

/// Dequantize: packed rows (a gathered slice of a quantized embedding) decoded to floats.
pub(super) fn dequantize(ctx: &mut NodeCtx, scheme: QuantScheme) -> Lowered {
    let (x, out) = (ctx.input(0)?.clone(), ctx.out.clone());
    let sfx = Sfx::float(out.dtype)?;
    let rb = x.dims.last().copied().unwrap_or(0);
    if x.dtype != DType::U8 || rb == 0 || !rb.is_multiple_of(scheme.block_bytes()) {
        crate::unsupported!(
            "packed rows must be u8 [.., whole {scheme:?} blocks], got {:?}",
            x.dims
        );
    }
    let rows = x.numel() / rb;
    let k = rb / scheme.block_bytes() * scheme.block_len();
    if out.numel() != rows * k {
        crate::unsupported!("output {:?} does not hold {rows}×{k}", out.dims);
    }
    if out.numel() == 0 {
        return Ok(());
    }
    let kernel = quant::dq_dequant(scheme, sfx, x.ptr, out.ptr, rows as i64, k as i64);
    ctx.run_1d(kernel, rows * k)
}

/// Shared memory the staged GEMV may take (the default per-block limit).
const GEMV_ST_SMEM: usize = 48 << 10;

/// What a FusedDequantMatMul adds around its product (all absent for a DequantMatMul).
#[derive(Clone, Copy, Default)]
pub(crate) struct Fusion {
    pub norm_eps: Option<f32>,
    pub residual: bool,
    /// `Some(gate_first)`: x's rows are `[gate | up]` (or `[up | gate]`) and the product
    /// takes `silu(gate)·up`.
    pub glu: Option<bool>,
}

pub(super) fn dequant_matmul(ctx: &mut NodeCtx, scheme: QuantScheme) -> Lowered {
    dequant_matmul_with(ctx, scheme, Fusion::default())
}

/// FusedDequantMatMul: x, w, [gamma], [residual].
pub(super) fn fused_dequant_matmul(ctx: &mut NodeCtx, scheme: QuantScheme, f: Fusion) -> Lowered {
    dequant_matmul_with(ctx, scheme, f)
}

fn dequant_matmul_with(ctx: &mut NodeCtx, scheme: QuantScheme, f: Fusion) -> Lowered {
    let Fusion {
        norm_eps,
        residual,
        glu,
    } = f;
    let (x, w, out) = (
        ctx.input(0)?.clone(),
        ctx.input(1)?.clone(),
        ctx.out.clone(),
    );
    let dt = x.dtype;
    let sfx = Sfx::float(dt)?;
    if out.dtype != dt {
        crate::unsupported!("output dtype {} differs from x's {dt}", out.dtype);
    }
    if w.dtype != DType::U8 || w.rank() != 2 {
        crate::unsupported!(
            "packed weight must be u8 [N, bytes], got {} {:?}",
            w.dtype,
            w.dims
        );
    }
    if x.rank() == 0 {
        crate::unsupported!("x must have rank >= 1");
    }
    let xk = x.dims[x.rank() - 1];
    if glu.is_some() && (norm_eps.is_some() || !xk.is_multiple_of(2)) {
        crate::unsupported!("a SwiGLU input needs an even row ({xk}) and no norm");
    }
    let k = if glu.is_some() { xk / 2 } else { xk };
    let n = w.dims[0];
    let bl = scheme.block_len();
    let rb = k / bl * scheme.block_bytes();
    if !k.is_multiple_of(bl) || w.dims[1] != rb {
        crate::unsupported!("weight {:?} does not pack [{n}, {k}] as {scheme:?}", w.dims);
    }
    let m = x.numel().checked_div(xk).unwrap_or(0);
    if out.numel() != m * n {
        crate::unsupported!("output {:?} does not hold {m}×{n}", out.dims);
    }
    let want = 2 + usize::from(norm_eps.is_some()) + usize::from(residual);
    if ctx.ins.len() != want {
        crate::unsupported!("{} inputs, expected {want}", ctx.ins.len());
    }
    let mut extras = GemvExtras::default();
    if let Some(eps) = norm_eps {
        let g = ctx.input(2)?;
        if g.dtype != dt || g.numel() != k {
            crate::unsupported!("gamma must be {dt} [{k}], got {} {:?}", g.dtype, g.dims);
        }
        extras.gamma = g.ptr;
        extras.eps = eps;
    }
    if residual {
        let r = ctx.input(want - 1)?;
        if r.dtype != dt || r.numel() != out.numel() {
            crate::unsupported!("residual must be {dt} {:?}, got {:?}", out.dims, r.dims);
        }
        extras.residual = r.ptr;
    }
    if out.numel() == 0 {
        return Ok(());
    }
    if k == 0 {
        // An empty product: the residual, or zeros.
        return match extras.residual {
            0 => ctx.zero(out.ptr, out.bytes()),
            r if r == out.ptr => Ok(()),
            r => ctx.copy(out.ptr, r, out.bytes()),
        };
    }
    let glu_mode = match glu {
        None => 0,
        Some(true) => 1,
        Some(false) => 2,
    };
    // A weight the executable holds in the planar row layout (crate::planar) is read by the
    // planar kernels, which exist for f32 activations only (the layout is chosen so).
    let planar = ctx.env.planar.get(&w.ptr) == Some(&scheme);
    if planar && sfx != Sfx::F32 {
        return Err(crate::lower::LowerError::internal(
            ctx.node,
            "a planar weight with non-f32 activations",
        ));
    }
    let wq = Wq { scheme, planar };
    if m <= GEMV_MAX_M {
        return gemv(ctx, wq, sfx, (&x, &w, &out), extras, (m, n, k), glu_mode);
    }
    // A half weight multiplies on tensor cores: under strict f32 with x split into half
    // parts (the f32 product's accuracy), under a reduced-precision policy with x rounded
    // to the weight's dtype.
    if scheme.is_half() {
        let strict = ctx.precision == crate::precision::Precision::F32;
        return half_gemm(
            ctx,
            scheme,
            (&x, &w, &out),
            extras,
            (m, n, k),
            glu_mode,
            strict,
        );
    }
    // Under a half policy the product is a half GEMM as for a half weight: the weight decoded
    // once to the policy's dtype (while that scratch stays bounded), x rounded to it.
    let policy_half = match ctx.precision {
        crate::precision::Precision::F16 => Some(DType::F16),
        crate::precision::Precision::Bf16 => Some(DType::BF16),
        _ => None,
    };
    if let Some(wdt) = policy_half.filter(|_| n * k * 2 <= HALF_DEQUANT_SCRATCH) {
        let wsfx = Sfx::float(wdt)?;
        let wbuf = ctx.scratch(n * k * 2)?;
        let (ni, ki) = (n as i64, k as i64);
        ctx.run_1d(quant::dq_dequant(wq, wsfx, w.ptr, wbuf, ni, ki), n * k)?;
        let h = prepared(ctx, &x, extras, glu_mode, (m, k))?.ptr;
        return half_product(
            ctx,
            (h, sfx),
            (wbuf, wdt),
            (&out, extras.residual),
            (m, n, k),
        );
    }
    split_gemm(ctx, wq, (&x, &w, &out), extras, (m, n, k), glu_mode)
}

/// Bound on the half copy of a quantized weight that a half-policy prefill decodes; larger
/// weights keep the strict chunked path.
const HALF_DEQUANT_SCRATCH: usize = 256 << 20;

/// A quantized weight past the GEMV's rows (prefill), on tensor cores at the f32 product's
/// accuracy: x (its norm or SwiGLU) split once into two f16 parts per value, and per chunk
/// of weight rows the blocks decoded and split the same way in one pass (`dq_split_w`:
/// row-wise power-of-two scales, 22 significant bits), one f16 GEMM of all four part products with f32
/// accumulation (each product of two halves exact in f32), and `dq_split2_out` summing
/// them smallest first, unscaled, into the output's columns with the residual. Chunks of
/// whole 128-row groups bound the scratch.
fn split_gemm(
    ctx: &mut NodeCtx,
    wq: Wq,
    (x, w, out): (&DevTensor, &DevTensor, &DevTensor),
    extras: GemvExtras,
    (m, n, k): (usize, usize, usize),
    glu: i32,
) -> Lowered {
    let sfx = Sfx::float(x.dtype)?;
    let scheme = wq.scheme;
    let rb = k / scheme.block_len() * scheme.block_bytes();
    // Per chunk row: two f16 parts and 2·(2m) f32 products.
    let per_row = 2 * k * 2 + 4 * m * 4;
    let mut chunk = (DEQUANT_SCRATCH / per_row).max(1);
    if chunk < n {
        chunk = (chunk / 128 * 128).max(128);
    }
    let chunk = chunk.min(n);
    let (mi, ki) = (m as i64, k as i64);
    let (hx, inv_x) = split_input(ctx, x, extras, glu, (m, k), (Sfx::F16, 2))?;
    let hw = ctx.scratch(2 * chunk * k * 2)?;
    let inv_w = ctx.scratch(chunk * 4)?;
    let y = ctx.scratch(2 * m * 2 * chunk * 4)?;
    let label = format!("{}#{}", ctx.node.op.kind(), ctx.node.id.0);
    let mut n0 = 0;
    while n0 < n {
        let rows = chunk.min(n - n0);
        let wp = w.ptr + (n0 * rb) as u64;
        let ri = rows as i64;
        let ws = quant::dq_split_w(wq, (wp, hw, inv_w), ri, ki);
        ctx.run(ws, [rows as u32, 1, 1], [256, 1, 1], 0)?;
        // y[2m, 2·rows] = [x_hi; x_lo] · [w_hi; w_lo]ᵀ
        parts_gemm(ctx, (hx, 2 * m), (hw, 2 * rows, DType::F16), k, y, &label)?;
        let ptrs = (y, inv_x, inv_w, out.ptr, extras.residual);
        let kernel = quant::dq_split2_out(sfx, ptrs, (mi, ri, n as i64, n0 as i64));
        ctx.run_1d(kernel, m * quads(rows))?;
        n0 += rows;
    }
    Ok(())
}

/// The decode GEMV (m ≤ 8 rows): launch shapes of the staged kernel (lanes per column ×
/// warps per block) and, as a fallback and a candidate, the warp-per-column one, timed once
/// per shape and the fastest kept.
fn gemv(
    ctx: &mut NodeCtx,
    wq: Wq,
    sfx: Sfx,
    (x, w, out): (&DevTensor, &DevTensor, &DevTensor),
    extras: GemvExtras,
    (m, n, k): (usize, usize, usize),
    glu: i32,
) -> Lowered {
    let ptrs = (x.ptr, w.ptr, out.ptr);
    let (mi, ni, ki) = (m as i32, n as i64, k as i64);
    let scheme = wq.scheme;
    let mut cands = Vec::new();
    // A weight no kernel of the plan writes is read before waiting on the previous kernel.
    let pdl = ctx.fixed.get(1).copied().unwrap_or(false);
    // Shared memory: 36 staged floats per 32-value unit per row, and 32 floats for the block
    // reductions (kernels/quant.cu, dq_gemv_st).
    let smem = (m * (k / 32) * 36 + 32) * 4;
    // Block starts are 4-byte aligned in the schemes whose kernel reads u32 words.
    let aligned = w.ptr.is_multiple_of(16);
    if smem <= GEMV_ST_SMEM && aligned {
        let sms = ctx.env.gpu.sms as usize;
        let mut shapes = vec![(4usize, 8usize), (8, 8), (16, 8), (32, 8), (16, 4), (32, 4)];
        // Long rows (few of them, as in a down product): a block of 2–8 warps per row.
        if k / 32 >= 64 {
            shapes.extend([(64, 2), (128, 4), (256, 8)]);
        }
        for (lpr, warps) in shapes {
            let cols = (32 * warps / lpr).max(1);
            let full = n.div_ceil(cols);
            if full > i32::MAX as usize {
                crate::unsupported!("N = {n} is too large for one launch");
            }
            // The kernel strides over rows, so besides one block per `cols` rows, grids of a
            // few blocks a multiprocessor (h staged once per block, no partial last wave).
            let grids = [full, 2 * sms, 4 * sms];
            for (i, &blocks) in grids.iter().enumerate() {
                if i > 0 && 2 * blocks > full {
                    continue;
                }
                for &depth in quant::gemv_depths(scheme, sfx, m) {
                    let shape = (lpr as i32, depth);
                    let kernel = quant::dq_gemv_st(wq, sfx, ptrs, extras, (mi, ni, ki), glu, shape);
                    let l = KernelLaunch::new(
                        kernel,
                        [blocks as u32, 1, 1],
                        [32 * warps as u32, 1, 1],
                        smem as u32,
                    );
                    cands.push(if pdl { l.with_pdl() } else { l });
                }
            }
        }
    }
    let ts = rlx_ir::env::flag(rlx_ir::env::Switch::GemvTs);
    if ts && m == 1 && sfx == Sfx::F32 && !wq.planar && aligned {
        cands.extend(tile_staged(scheme, ptrs, extras, (n, k), glu, pdl));
    }
    if glu == 0 {
        // One warp per output column, 2 or 4 warps a block.
        for warps in [2usize, 4] {
            let blocks = n.div_ceil(warps);
            if blocks > i32::MAX as usize {
                crate::unsupported!("N = {n} is too large for one launch");
            }
            let kernel = quant::dq_gemv(wq, sfx, ptrs, extras, mi, ni, ki);
            cands.push(KernelLaunch::new(
                kernel,
                [blocks as u32, 1, 1],
                [32 * warps as u32, 1, 1],
                0,
            ));
        }
    }
    if cands.is_empty() {
        crate::unsupported!(
            "a SwiGLU GEMV of {m} × {k} needs {smem} B of shared memory (at most {GEMV_ST_SMEM})"
        );
    }
    let fused = [
        (extras.gamma != 0, " +norm"),
        (glu != 0, " +swiglu"),
        (extras.residual != 0, " +residual"),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .map(|(_, s)| *s)
    .collect::<String>();
    let layout = if wq.planar { " planar" } else { "" };
    let key = format!(
        "dq_gemv {scheme:?}{layout} {} m={m} n={n} k={k}{fused}",
        sfx.name()
    );
    // A decode step reads far more weight bytes than the L2 holds: time the shapes cold.
    ctx.launch_fastest_cold(&key, cands)
}

/// The tile-staged GEMV's launches for one f32 row (`dq_gemv_ts`): tiles of 4, 8, 16 or
/// 24 KB of whole rows a block, 4–32 lanes a row.
fn tile_staged(
    scheme: QuantScheme,
    ptrs: (u64, u64, u64),
    extras: GemvExtras,
    (n, k): (usize, usize),
    glu: i32,
    pdl: bool,
) -> Vec<KernelLaunch> {
    const THREADS: usize = 256;
    let rb = k / scheme.block_len() * scheme.block_bytes();
    let h_bytes = (k / 32) * 36 * 4 + 32 * 4;
    let mut out = Vec::new();
    for ch in quant::GEMV_TS_CHUNKS {
        let bytes = ch as usize * THREADS * 16;
        // A tile's bytes plus up to 15 of alignment slack at either end fit the words.
        let tile = bytes.saturating_sub(30) / rb.max(1);
        let smem = h_bytes + bytes;
        if tile == 0 || smem > GEMV_ST_SMEM {
            continue;
        }
        let blocks = n.div_ceil(tile);
        if blocks > i32::MAX as usize {
            continue;
        }
        for lpr in [4, 8, 16, 32] {
            let kernel = quant::dq_gemv_ts(
                scheme,
                ptrs,
                extras,
                (n as i64, k as i64),
                glu,
                (lpr, tile as i32, ch),
                (n * rb) as i64,
            );
            let l = KernelLaunch::new(
                kernel,
                [blocks as u32, 1, 1],
                [THREADS as u32, 1, 1],
                smem as u32,
            );
            out.push(if pdl { l.with_pdl() } else { l });
        }
    }
    out
}

/// `y[ra, rb] = a[ra, k] · b[rb, k]ᵀ` in f32 from half `a` / `b` (the split paths' one GEMM
/// of all their part products).
fn parts_gemm(
    ctx: &mut NodeCtx,
    (a, ra): (u64, usize),
    (b, rb, dt): (u64, usize, DType),
    k: usize,
    y: u64,
    label: &str,
) -> Lowered {
    let mut g = GemmDesc::simple(ra, rb, k, a, b, y, dt);
    g.c_dtype = Some(DType::F32);
    g.trans_b = true;
    g.ldb = k;
    g.label = label.to_string();
    ctx.gemm(g)
}

/// A half-precision weight past the GEMV's rows (prefill): no dequantisation, the packed
/// rows are the `[N, K]` matrix itself, and h (x, its norm or its SwiGLU, in x's dtype)
/// meets it in a half GEMM on tensor cores. `strict`: h as a sum of half parts
/// (`dq_split_in`: 2 f16 / 3 bf16 values each, 22 / 24 significant bits) multiplied at once
/// with f32 accumulation and summed back (`dq_split_out`), as accurate as an f32 product;
/// else h rounded to the weight's dtype and the product too (about 3e-4 relative).
fn half_gemm(
    ctx: &mut NodeCtx,
    scheme: QuantScheme,
    (x, w, out): (&DevTensor, &DevTensor, &DevTensor),
    extras: GemvExtras,
    (m, n, k): (usize, usize, usize),
    glu: i32,
    strict: bool,
) -> Lowered {
    let sfx = Sfx::float(x.dtype)?;
    let wdt = if scheme == QuantScheme::F16 {
        DType::F16
    } else {
        DType::BF16
    };
    let wsfx = Sfx::float(wdt)?;
    if strict {
        let parts = if wdt == DType::F16 { 2 } else { 3 };
        let (hw, inv) = split_input(ctx, x, extras, glu, (m, k), (wsfx, parts))?;
        let (mi, pi) = (m as i64, parts as i32);
        let wt = DevTensor {
            ptr: w.ptr,
            dims: vec![n, k],
            dtype: wdt,
        };
        let pw = gemm_input(ctx, &wt)?;
        let y = ctx.scratch(parts * m * n * 4)?;
        let label = format!("{}#{}", ctx.node.op.kind(), ctx.node.id.0);
        parts_gemm(ctx, (hw, parts * m), (pw, n, wdt), k, y, &label)?;
        let ptrs = (y, inv, out.ptr, extras.residual);
        let kernel = quant::dq_split_out(sfx, ptrs, mi, n as i64, pi);
        return ctx.run_1d(kernel, m * quads(n));
    }
    let h = prepared(ctx, x, extras, glu, (m, k))?.ptr;
    half_product(
        ctx,
        (h, sfx),
        (w.ptr, wdt),
        (out, extras.residual),
        (m, n, k),
    )
}

/// `out = h · Wᵀ (+ res)` with the half `[n, k]` weight at `w`: h (`[m, k]` of dtype `sfx`)
/// rounded to the weight's dtype, one half GEMM, the product cast back with the residual
/// (about 3e-4 relative).
fn half_product(
    ctx: &mut NodeCtx,
    (h, sfx): (u64, Sfx),
    (w, wdt): (u64, DType),
    (out, res): (&DevTensor, u64),
    (m, n, k): (usize, usize, usize),
) -> Lowered {
    let wsfx = Sfx::float(wdt)?;
    let hw = ctx.scratch(m * k * 2)?;
    ctx.run_1d(quant::dq_cast_in(sfx, wsfx, h, hw, (m * k) as i64), m * k)?;
    let wt = DevTensor {
        ptr: w,
        dims: vec![n, k],
        dtype: wdt,
    };
    let pw = gemm_input(ctx, &wt)?;
    let yw = ctx.scratch(m * n * 2)?;
    let mut g = GemmDesc::simple(m, n, k, hw, pw, yw, wdt);
    g.trans_b = true;
    g.ldb = k;
    g.label = format!("{}#{}", ctx.node.op.kind(), ctx.node.id.0);
    ctx.gemm(g)?;
    let kernel = quant::dq_cast_out(wsfx, sfx, yw, out.ptr, res, (m * n) as i64);
    ctx.run_1d(kernel, m * n)
}

/// Threads a split sum needs for a row of `n` columns: a quad of columns each where n is a
/// multiple of 4 (`dq_split_out` / `dq_split2_out` then load 16 bytes at a time).
fn quads(n: usize) -> usize {
    if n.is_multiple_of(4) {
        n / 4
    } else {
        n
    }
}

/// The strict product's input as `parts` half values of `wsfx` per element (`[parts · m, k]`)
/// and the rows' scale inverses: an RMS norm and its split in one launch (`norm_split_*`)
/// where the row fits the warp-per-row norm, else [`split_source`] then `dq_split_in`.
fn split_input(
    ctx: &mut NodeCtx,
    x: &DevTensor,
    extras: GemvExtras,
    glu: i32,
    (m, k): (usize, usize),
    (wsfx, parts): (Sfx, usize),
) -> Result<(u64, u64), crate::lower::LowerError> {
    let sfx = Sfx::float(x.dtype)?;
    let hw = ctx.scratch(parts * m * k * 2)?;
    let inv = ctx.scratch(m * 4)?;
    let (mi, ki, pi) = (m as i64, k as i64, parts as i32);
    let es = x.dtype.size_bytes();
    if glu == 0 && extras.gamma != 0 {
        let ptrs = [x.ptr, extras.gamma];
        if let Some((NormRows::Vec4(v), grid, block)) = vec_rows(es, m, k, &ptrs) {
            let p = (x.ptr, extras.gamma, hw, inv);
            let kernel = norm_k::norm_split(v, sfx, wsfx, p, mi, ki, extras.eps, pi);
            ctx.run(kernel, grid, block, 0)?;
            return Ok((hw, inv));
        }
    }
    let (h, glu) = split_source(ctx, x, extras, glu, (m, k))?;
    let split = quant::dq_split_in(sfx, wsfx, (h, hw, inv), mi, ki, pi, glu);
    ctx.run(split, [m as u32, 1, 1], [256, 1, 1], 0)?;
    Ok((hw, inv))
}

/// What a strict split reads: x with its SwiGLU left to the split kernel (the returned glu),
/// or the [`prepared`] input (its norm, or x itself) with glu 0.
fn split_source(
    ctx: &mut NodeCtx,
    x: &DevTensor,
    extras: GemvExtras,
    glu: i32,
    (m, k): (usize, usize),
) -> Result<(u64, i32), crate::lower::LowerError> {
    if glu != 0 && extras.gamma == 0 {
        return Ok((x.ptr, glu));
    }
    Ok((prepared(ctx, x, extras, glu, (m, k))?.ptr, 0))
}

/// The product's input for the GEMM paths (m > GEMV rows): x itself, or its SwiGLU (glu 1 / 2)
/// or RMS norm (`extras.gamma`) in a scratch `[m, k]` of x's dtype.
fn prepared(
    ctx: &mut NodeCtx,
    x: &DevTensor,
    extras: GemvExtras,
    glu: i32,
    (m, k): (usize, usize),
) -> Result<DevTensor, crate::lower::LowerError> {
    if glu == 0 && extras.gamma == 0 {
        return Ok(x.clone());
    }
    let sfx = Sfx::float(x.dtype)?;
    let es = x.dtype.size_bytes();
    let h = ctx.scratch(m * k * es)?;
    if glu != 0 {
        let kernel = quant::dq_swiglu(sfx, x.ptr, h, m as i64, k as i64, glu);
        ctx.run_1d(kernel, m * k)?;
    } else {
        let p = NormPtrs {
            x: x.ptr,
            r: 0,
            b: 0,
            g: extras.gamma,
            be: 0,
            y: h,
        };
        super::super::norm::launch_norm(ctx, sfx, es, p, (m, k), extras.eps, true)?;
    }
    Ok(DevTensor {
        ptr: h,
        dims: vec![m, k],
        dtype: x.dtype,
    })
}
