//! CUDA lowering of the linalg ops (kernels in `kernels/linalg.cu`; DequantMatMul in
//! `linalg_quant.rs`, kernels in `kernels/quant.cu`): MatMul and FusedMatMulBiasAct become one strided-batch cuBLASLt call each (NumPy broadcasting of the
//! batch dims through stride-0 batches, or by folding the batch into m); bias and Relu /
//! tanh-GELU ride on cuBLASLt's epilogue, every other activation and f64 on a small kernel.
use super::{DevTensor, Dims8, LowerError, Lowered, NodeCtx};
use crate::gemm::GemmDesc;
use crate::kernels::linalg as kl;
use rlx_ir::{Activation, DType, QuantScheme};

#[path = "linalg_quant.rs"]
mod quant;
pub(crate) use quant::Fusion;

/// cuBLASLt's heuristic assumes well-aligned pointers (it is not told the real ones), and its
/// vectorised / TMA kernels need 16 bytes; operands below that are staged through scratch.
pub(crate) const GEMM_ALIGN: u64 = 16;

/// A pointer to `t`'s bytes that cuBLASLt may read: `t` itself, or an aligned scratch copy
/// refreshed every run.
pub(crate) fn gemm_input(ctx: &mut NodeCtx, t: &DevTensor) -> Result<u64, LowerError> {
    if t.ptr.is_multiple_of(GEMM_ALIGN) {
        return Ok(t.ptr);
    }
    let s = ctx.scratch(t.bytes())?;
    ctx.copy(s, t.ptr, t.bytes())?;
    Ok(s)
}

/// Where cuBLASLt should write an output that lives at `ptr` (`bytes` long): `ptr` itself,
/// or an aligned scratch that `gemm_output_done` copies back.
pub(crate) fn gemm_output(ctx: &mut NodeCtx, ptr: u64, bytes: usize) -> Result<u64, LowerError> {
    if ptr.is_multiple_of(GEMM_ALIGN) {
        Ok(ptr)
    } else {
        ctx.scratch(bytes)
    }
}

pub(crate) fn gemm_output_done(ctx: &mut NodeCtx, ptr: u64, staged: u64, bytes: usize) -> Lowered {
    if staged != ptr {
        ctx.copy(ptr, staged, bytes)?;
    }
    Ok(())
}

/// Index of an activation in `kernels/linalg.cu`'s `act_apply`.
pub(crate) fn act_id(a: Activation) -> i32 {
    use Activation::*;
    match a {
        Gelu => 0,
        GeluApprox => 1,
        Silu => 2,
        Relu => 3,
        Sigmoid => 4,
        Tanh => 5,
        Exp => 6,
        Log => 7,
        Sqrt => 8,
        Rsqrt => 9,
        Neg => 10,
        Abs => 11,
        Sin => 12,
        Cos => 13,
        Erf => 14,
        Softplus => 15,
        Recip => 16,
        Square => 17,
    }
}

/// `c[.., j] = act(c[.., j] + bias[j])` in place over `total` elements in rows of `n`.
pub(crate) fn bias_act(
    ctx: &mut NodeCtx,
    c: u64,
    bias: Option<u64>,
    act: Option<Activation>,
    total: usize,
    n: usize,
    dtype: DType,
) -> Lowered {
    if bias.is_none() && act.is_none() {
        return Ok(());
    }
    let rows = total / n.max(1);
    // Quads of columns when the row and both pointers allow four-element accesses.
    let quad = dtype != DType::F64
        && n.is_multiple_of(4)
        && [Some(c), bias]
            .iter()
            .flatten()
            .all(|p| p.is_multiple_of(4 * dtype.size_bytes() as u64));
    let lanes = if quad { n / 4 } else { n };
    let sfx = crate::kernels::Sfx::float64(dtype)?;
    let (bias, act) = (bias.unwrap_or(0), act.map_or(-1, act_id));
    let kernel = kl::mm_bias_act(quad, sfx, c, bias, rows as i64, n as i64, act);
    // Columns across threads (a block spans at most 256), rows across blockIdx.y: enough
    // blocks to fill the GPU, each thread then walking its column down a share of the rows.
    let threads = lanes.next_multiple_of(32).min(256);
    let col_blocks = lanes.div_ceil(threads);
    let row_blocks = (2048 / col_blocks).clamp(1, rows.clamp(1, 65535));
    ctx.run(
        kernel,
        [col_blocks as u32, row_blocks as u32, 1],
        [threads as u32, 1, 1],
        0,
    )
}

pub(crate) fn matmul(ctx: &mut NodeCtx) -> Lowered {
    gemm_node(ctx, false, None)
}

pub(crate) fn fused_matmul_bias_act(ctx: &mut NodeCtx, activation: Option<Activation>) -> Lowered {
    gemm_node(ctx, true, activation)
}

pub(crate) fn dequantize(ctx: &mut NodeCtx, scheme: QuantScheme) -> Lowered {
    quant::dequantize(ctx, scheme)
}

pub(crate) fn dequant_matmul(ctx: &mut NodeCtx, scheme: QuantScheme) -> Lowered {
    quant::dequant_matmul(ctx, scheme)
}

pub(crate) fn fused_dequant_matmul(ctx: &mut NodeCtx, scheme: QuantScheme, f: Fusion) -> Lowered {
    quant::fused_dequant_matmul(ctx, scheme, f)
}

/// NumPy broadcast of two batch-dim lists.
fn broadcast(a: &[usize], b: &[usize]) -> Result<Vec<usize>, LowerError> {
    rlx_ir::broadcast_static(a, b).map_err(|e| LowerError::Unsupported(format!("batch {e}")))
}

/// Element strides of each output batch dim for an operand with batch dims `own` (right-
/// aligned against `out`, broadcast dims 0) whose matrices hold `mat` elements.
fn batch_strides(own: &[usize], out: &[usize], mat: usize) -> Vec<usize> {
    let lead = out.len() - own.len();
    let mut s = vec![0usize; out.len()];
    let mut acc = mat;
    for i in (0..own.len()).rev() {
        if own[i] != 1 {
            s[lead + i] = acc;
        }
        acc *= own[i];
    }
    s
}

/// The one stride that walks every batch item in row-major order, if the strides over the
/// non-unit batch dims allow it (`s[d] == s[d+1] * size[d+1]`; all-zero qualifies).
fn flat_stride(sizes: &[usize], strides: &[usize]) -> Option<usize> {
    let live: Vec<(usize, usize)> = sizes
        .iter()
        .zip(strides)
        .filter(|(&n, _)| n != 1)
        .map(|(&n, &s)| (n, s))
        .collect();
    for w in live.windows(2) {
        if w[0].1 != w[1].1 * w[1].0 {
            return None;
        }
    }
    Some(live.last().map_or(0, |l| l.1))
}

/// How one batched product is issued: operands already in place (or gathered), strides in
/// elements, batch possibly folded into m.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BatchPlan {
    pub m: usize,
    pub batch: usize,
    pub stride_a: usize,
    pub stride_b: usize,
    /// Operands whose batch strides no single stride expresses: gathered to contiguous first.
    pub gather_a: bool,
    pub gather_b: bool,
}

/// Plan `[ob.., m, k] · [ob.., k, n]` for operands with batch dims `ab` / `bb`.
pub(crate) fn plan_batch(
    ab: &[usize],
    bb: &[usize],
    ob: &[usize],
    (m, k, n): (usize, usize, usize),
) -> BatchPlan {
    let nb: usize = ob.iter().product();
    let (sa, sb) = (batch_strides(ab, ob, m * k), batch_strides(bb, ob, k * n));
    let (fa, fb) = (flat_stride(ob, &sa), flat_stride(ob, &sb));
    let mut p = BatchPlan {
        m,
        batch: nb,
        stride_a: fa.unwrap_or(m * k),
        stride_b: fb.unwrap_or(k * n),
        gather_a: fa.is_none(),
        gather_b: fb.is_none(),
    };
    // A broadcast B over a contiguous A stack is one tall product: [nb·m, k] · [k, n].
    if nb > 1 && p.stride_b == 0 && p.stride_a == m * k {
        p = BatchPlan {
            m: nb * m,
            batch: 1,
            stride_a: nb * m * k,
            stride_b: 0,
            ..p
        };
    }
    p
}

/// Materialise the strided view `[ob.., rows, cols]` of `src` (batch strides `bs`) into
/// contiguous scratch.
fn gather(
    ctx: &mut NodeCtx,
    src: u64,
    dtype: DType,
    ob: &[usize],
    bs: &[usize],
    (rows, cols): (usize, usize),
) -> Result<u64, LowerError> {
    let mut dims: Vec<usize> = Vec::new();
    let mut strides: Vec<usize> = Vec::new();
    for (&d, &s) in ob.iter().zip(bs) {
        if d != 1 {
            dims.push(d);
            strides.push(s);
        }
    }
    dims.extend([rows, cols]);
    strides.extend([cols, 1]);
    let view = Dims8::new(&dims, &strides)?;
    let total: usize = dims.iter().product();
    let unit = match dtype.size_bytes() {
        2 => crate::kernels::Unit::B2,
        4 => crate::kernels::Unit::B4,
        8 => crate::kernels::Unit::B8,
        s => crate::unsupported!("no gather for {s}-byte elements"),
    };
    let dst = ctx.scratch(total * dtype.size_bytes())?;
    ctx.run_1d(kl::mm_gather(unit, src, dst, view, total as i64), total)?;
    Ok(dst)
}

fn gemm_node(ctx: &mut NodeCtx, fused: bool, act: Option<Activation>) -> Lowered {
    let (a, b, out) = (
        ctx.input(0)?.clone(),
        ctx.input(1)?.clone(),
        ctx.out.clone(),
    );
    let dt = out.dtype;
    if !matches!(dt, DType::F32 | DType::F16 | DType::BF16 | DType::F64) {
        crate::unsupported!("no {dt} matmul (float types only)");
    }
    if a.dtype != dt || b.dtype != dt {
        crate::unsupported!("mixed dtypes {} @ {} -> {dt}", a.dtype, b.dtype);
    }
    let bias = if fused {
        let t = ctx.input(2)?.clone();
        if t.dtype != dt {
            crate::unsupported!("bias dtype {} differs from {dt}", t.dtype);
        }
        Some(t)
    } else {
        None
    };
    if a.rank() == 0 || b.rank() == 0 {
        crate::unsupported!("matmul operands must have rank >= 1");
    }
    let ash = if a.rank() == 1 {
        vec![1, a.dims[0]]
    } else {
        a.dims.clone()
    };
    let bsh = if b.rank() == 1 {
        vec![b.dims[0], 1]
    } else {
        b.dims.clone()
    };
    let (ar, br) = (ash.len(), bsh.len());
    let (m, k, n) = (ash[ar - 2], ash[ar - 1], bsh[br - 1]);
    if bsh[br - 2] != k {
        crate::unsupported!("inner dims differ: {:?} @ {:?}", a.dims, b.dims);
    }
    let (ab, bb) = (&ash[..ar - 2], &bsh[..br - 2]);
    let ob = broadcast(ab, bb)?;
    let nb: usize = ob.iter().product();
    if nb * m * n != out.numel() {
        crate::unsupported!("output {:?} does not hold {nb}×{m}×{n}", out.dims);
    }
    if let Some(t) = &bias {
        if t.numel() != n {
            crate::unsupported!("bias {:?} is not [{n}]", t.dims);
        }
    }
    if out.numel() == 0 {
        return Ok(());
    }
    let bias_ptr = bias.as_ref().map(|t| t.ptr);
    if k == 0 {
        // An empty sum: zeros, then the epilogue.
        ctx.zero(out.ptr, out.bytes())?;
        return bias_act(ctx, out.ptr, bias_ptr, act, out.numel(), n, dt);
    }
    let plan = plan_batch(ab, bb, &ob, (m, k, n));
    let pa = if plan.gather_a {
        let bs = batch_strides(ab, &ob, m * k);
        gather(ctx, a.ptr, dt, &ob, &bs, (m, k))?
    } else {
        gemm_input(ctx, &a)?
    };
    let pb = if plan.gather_b {
        let bs = batch_strides(bb, &ob, k * n);
        gather(ctx, b.ptr, dt, &ob, &bs, (k, n))?
    } else {
        gemm_input(ctx, &b)?
    };
    let pc = gemm_output(ctx, out.ptr, out.bytes())?;
    let mut g = GemmDesc::simple(plan.m, n, k, pa, pb, pc, dt);
    g.batch = plan.batch;
    g.stride_a = plan.stride_a;
    g.stride_b = plan.stride_b;
    g.stride_c = plan.m * n;
    g.label = format!("{}#{}", ctx.node.op.kind(), ctx.node.id.0);
    // Bias and Relu / tanh-GELU in cuBLASLt's epilogue when it takes them; anything else
    // (other activations, f64, an unaligned bias, no algorithm) runs as a kernel after.
    let epilogue_ok = dt != DType::F64
        && matches!(
            act,
            None | Some(Activation::Relu) | Some(Activation::GeluApprox)
        )
        && bias_ptr.is_some_and(|p| p.is_multiple_of(GEMM_ALIGN));
    let mut fused_in_gemm = false;
    if epilogue_ok {
        let mut ge = g.clone();
        ge.bias = bias_ptr;
        ge.act = act;
        fused_in_gemm = ctx.gemm(ge).is_ok();
    }
    if !fused_in_gemm {
        ctx.gemm(g)?;
    }
    gemm_output_done(ctx, out.ptr, pc, out.bytes())?;
    if fused && !fused_in_gemm {
        bias_act(ctx, out.ptr, bias_ptr, act, out.numel(), n, dt)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replays a plan on the host with a naive product and compares with a direct NumPy-style
    /// batched matmul.
    fn check(ash: &[usize], bsh: &[usize]) {
        let (ar, br) = (ash.len(), bsh.len());
        let (m, k, n) = (ash[ar - 2], ash[ar - 1], bsh[br - 1]);
        let (ab, bb) = (&ash[..ar - 2], &bsh[..br - 2]);
        let ob = broadcast(ab, bb).unwrap();
        let nb: usize = ob.iter().product();
        let av: Vec<f64> = (0..ash.iter().product::<usize>())
            .map(|i| ((i * 7919) % 13) as f64 - 6.0)
            .collect();
        let bv: Vec<f64> = (0..bsh.iter().product::<usize>())
            .map(|i| ((i * 104729) % 11) as f64 - 5.0)
            .collect();
        // Reference: per output item, the broadcast source items.
        let sa = batch_strides(ab, &ob, m * k);
        let sb = batch_strides(bb, &ob, k * n);
        let mut want = vec![0.0; nb * m * n];
        for i in 0..nb {
            let (mut oa, mut obb, mut rem) = (0, 0, i);
            for d in (0..ob.len()).rev() {
                let idx = rem % ob[d];
                rem /= ob[d];
                oa += idx * sa[d];
                obb += idx * sb[d];
            }
            for r in 0..m {
                for c in 0..n {
                    want[i * m * n + r * n + c] = (0..k)
                        .map(|p| av[oa + r * k + p] * bv[obb + p * n + c])
                        .sum();
                }
            }
        }
        let p = plan_batch(ab, bb, &ob, (m, k, n));
        let gathered = |v: &[f64], s: &[usize], mat: usize| -> Vec<f64> {
            let mut o = Vec::new();
            for i in 0..nb {
                let (mut off, mut rem) = (0, i);
                for d in (0..ob.len()).rev() {
                    off += (rem % ob[d]) * s[d];
                    rem /= ob[d];
                }
                o.extend_from_slice(&v[off..off + mat]);
            }
            o
        };
        let a2 = if p.gather_a {
            gathered(&av, &sa, m * k)
        } else {
            av.clone()
        };
        let b2 = if p.gather_b {
            gathered(&bv, &sb, k * n)
        } else {
            bv.clone()
        };
        let mut got = vec![0.0; nb * m * n];
        for bi in 0..p.batch {
            for r in 0..p.m {
                for c in 0..n {
                    got[bi * p.m * n + r * n + c] = (0..k)
                        .map(|q| a2[bi * p.stride_a + r * k + q] * b2[bi * p.stride_b + q * n + c])
                        .sum();
                }
            }
        }
        assert_eq!(got, want, "{ash:?} @ {bsh:?}: {p:?}");
    }

    #[test]
    fn batch_plans_match_numpy() {
        check(&[3, 4], &[4, 5]);
        check(&[2, 3, 3, 4], &[4, 5]);
        check(&[2, 3, 4], &[2, 4, 5]);
        check(&[1, 3, 4], &[2, 4, 5]);
        check(&[3, 4], &[2, 2, 4, 5]);
        check(&[2, 1, 3, 4], &[1, 3, 4, 5]);
        check(&[1, 2, 3, 4], &[2, 1, 4, 5]);
        check(&[2, 2, 3, 4], &[2, 1, 4, 5]);
        check(&[2, 1, 3, 4], &[2, 4, 4, 5]);
        check(&[1, 1, 3, 4], &[1, 1, 4, 5]);
        let p = plan_batch(&[2, 3], &[], &[2, 3], (5, 4, 6));
        assert_eq!((p.m, p.batch), (30, 1), "broadcast weight folds into m");
        let p = plan_batch(&[2, 1], &[1, 3], &[2, 3], (5, 4, 6));
        assert!(p.gather_a && p.gather_b);
        assert_eq!(act_id(Activation::Gelu), 0);
        assert_eq!(act_id(Activation::Square), 17);
    }
}
