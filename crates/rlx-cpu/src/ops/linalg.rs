//! CPU thunks of the Linalg group: MatMul, FusedMatMulBiasAct, DequantMatMul. Every product
//! goes through the `gemm` crate on strided views of the operands (broadcast batch items are
//! read in place), except DequantMatMul at decode shapes (`quant::matvec`).
use super::arity;
use super::scalar::activation;
use crate::error::op_err;
use crate::quant::{self, QuantAct};
use crate::util::broadcast_offsets;
use crate::{Buf, CpuError, Float, OutView, TensorView};
use gemm::Parallelism;
use rayon::prelude::*;
use rlx_ir::{Activation, ComputeClass, QuantScheme};

/// Below this many multiply-adds a product is not worth spreading over threads.
const PAR_WORK: usize = 1 << 15;

/// A row-major operand of one product: element (r, c) at `off + r * rs + c * cs`.
#[derive(Clone, Copy)]
struct Operand<'a, T> {
    data: &'a [T],
    rs: usize,
    cs: usize,
}

/// `dst[m × n] = lhs[m × k] · rhs[k × n]`, starting at the given offsets.
fn gemm_one<T: Float>(
    (m, n, k): (usize, usize, usize),
    lhs: Operand<T>,
    lhs_off: usize,
    rhs: Operand<T>,
    rhs_off: usize,
    dst: &mut [T],
    par: Parallelism,
) -> Result<(), CpuError> {
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        dst.fill(T::zero());
        return Ok(());
    }
    // gemm reads through raw pointers: prove every index it may touch is inside the slices.
    let last =
        |o: Operand<T>, off: usize, r: usize, c: usize| off + (r - 1) * o.rs + (c - 1) * o.cs;
    if last(lhs, lhs_off, m, k) >= lhs.data.len()
        || last(rhs, rhs_off, k, n) >= rhs.data.len()
        || dst.len() < m * n
    {
        return Err(op_err("matmul operand is smaller than its shape says"));
    }
    // SAFETY: bounds proven above; dst is exclusively borrowed and does not alias the inputs.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            false,
            lhs.data.as_ptr().add(lhs_off),
            lhs.cs as isize,
            lhs.rs as isize,
            rhs.data.as_ptr().add(rhs_off),
            rhs.cs as isize,
            rhs.rs as isize,
            T::zero(),
            T::one(),
            false,
            false,
            false,
            par,
        );
    }
    Ok(())
}

/// Concrete NumPy broadcast of two batch-dim lists.
fn broadcast_batch(a: &[usize], b: &[usize]) -> Result<Vec<usize>, CpuError> {
    rlx_ir::broadcast_static(a, b).map_err(|e| op_err(format!("batch {e}")))
}

/// Batched `a @ b` with NumPy semantics into `out` (row-major, `batch × m × n`).
fn matmul_t<T: Float>(a: &TensorView, b: &TensorView, out: &mut [T]) -> Result<(), CpuError> {
    let (av, bv) = (a.get::<T>()?, b.get::<T>()?);
    if a.rank() == 0 || b.rank() == 0 {
        return Err(op_err("matmul operands must have rank >= 1"));
    }
    // Promote rank-1 operands; the output buffer's layout is the same with or without the
    // added unit dim, so nothing has to be removed afterwards.
    let ash: Vec<usize> = if a.rank() == 1 {
        vec![1, a.shape[0]]
    } else {
        a.shape.to_vec()
    };
    let bsh: Vec<usize> = if b.rank() == 1 {
        vec![b.shape[0], 1]
    } else {
        b.shape.to_vec()
    };
    let (ar, br) = (ash.len(), bsh.len());
    let (m, k, n) = (ash[ar - 2], ash[ar - 1], bsh[br - 1]);
    if bsh[br - 2] != k {
        return Err(op_err(format!(
            "inner dims differ: {:?} @ {:?}",
            a.shape, b.shape
        )));
    }
    let (ab, bb) = (&ash[..ar - 2], &bsh[..br - 2]);
    let ob = broadcast_batch(ab, bb)?;
    let nb: usize = ob.iter().product();
    if out.len() != nb * m * n {
        return Err(op_err(format!(
            "output holds {} values, matmul gives {}",
            out.len(),
            nb * m * n
        )));
    }
    let lhs = Operand {
        data: av,
        rs: k,
        cs: 1,
    };
    let rhs = Operand {
        data: bv,
        rs: n,
        cs: 1,
    };
    batched(
        nb,
        (m, n, k),
        lhs,
        &broadcast_offsets(ab, &ob),
        rhs,
        &broadcast_offsets(bb, &ob),
        out,
    )
}

/// One product per batch item; item i reads lhs item `lo[i]` and rhs item `ro[i]`.
fn batched<T: Float>(
    nb: usize,
    (m, n, k): (usize, usize, usize),
    lhs: Operand<T>,
    lo: &[usize],
    rhs: Operand<T>,
    ro: &[usize],
    out: &mut [T],
) -> Result<(), CpuError> {
    let per = m * n;
    if per == 0 {
        return Ok(());
    }
    let work = m * n * k;
    let one = |i: usize, o: &mut [T], par| {
        gemm_one((m, n, k), lhs, lo[i] * m * k, rhs, ro[i] * k * n, o, par)
    };
    // Many small items: one thread per item. Few large ones: let gemm split each product.
    if nb > 1
        && nb * work >= PAR_WORK
        && (work < PAR_WORK * 8 || nb >= rayon::current_num_threads())
    {
        out.par_chunks_mut(per)
            .enumerate()
            .try_for_each(|(i, o)| one(i, o, Parallelism::None))
    } else {
        let par = if work >= PAR_WORK {
            Parallelism::Rayon(0)
        } else {
            Parallelism::None
        };
        out.chunks_mut(per)
            .enumerate()
            .try_for_each(|(i, o)| one(i, o, par))
    }
}

/// `out[.., j] = act(out[.., j] + bias[j])`.
fn bias_act<T: Float>(out: &mut [T], bias: &[T], act: Option<Activation>) -> Result<(), CpuError> {
    let n = bias.len();
    if n == 0 || !out.len().is_multiple_of(n) {
        return Err(op_err(format!(
            "bias of {n} values does not tile an output of {}",
            out.len()
        )));
    }
    // One loop per activation, the activation a constant in it, so the row vectorises.
    match act {
        None => bias_rows(out, bias, |s| s, |_| {}),
        Some(Activation::Gelu) => bias_rows(out, bias, |s| s, T::gelu_in_place),
        Some(a) => bias_rows(out, bias, |s| activation(a, s), |_| {}),
    }
    Ok(())
}

/// Each row: `f(v + bias)` per value, then `rows` over the row.
#[inline(always)]
fn bias_rows<T: Float>(
    out: &mut [T],
    bias: &[T],
    f: impl Fn(T) -> T + Sync,
    rows: impl Fn(&mut [T]) + Sync,
) {
    let row = |o: &mut [T]| {
        for (v, &b) in o.iter_mut().zip(bias) {
            *v = f(*v + b);
        }
        rows(o);
    };
    if out.len() >= PAR_WORK {
        out.par_chunks_mut(bias.len()).for_each(row);
    } else {
        out.chunks_mut(bias.len()).for_each(row);
    }
}

/// Up to this many rows of x a dequant matmul walks the packed rows directly
/// (`quant::matvec`); above it the dequantised-tile GEMM is faster.
pub const MATVEC_MAX_M: usize = 8;

/// The packed weight's bytes: borrowed when it is a U8 leaf (stored as bytes), else copied
/// out of the i64 values a computed U8 tensor is held as (each checked to be a byte).
fn weight_bytes<'a>(w: &TensorView<'a>) -> Result<std::borrow::Cow<'a, [u8]>, CpuError> {
    match w.data {
        Buf::U8(s) => Ok(std::borrow::Cow::Borrowed(s)),
        Buf::I64(s) => (s.iter().enumerate())
            .map(|(i, &b)| {
                u8::try_from(b).map_err(|_| {
                    op_err(format!("packed weight byte {b} at offset {i} out of range"))
                })
            })
            .collect::<Result<Vec<u8>, _>>()
            .map(std::borrow::Cow::Owned),
        _ => Err(op_err(format!(
            "packed weight of dtype {} is not held as bytes",
            w.dtype
        ))),
    }
}

/// Checked sizes `(m, k, n, row bytes)` of a dequant matmul, or `None` when it is empty
/// (the output, if any, is then zeros).
fn dequant_dims(
    scheme: QuantScheme,
    x: &TensorView,
    w: &TensorView,
    out_len: usize,
) -> Result<Option<(usize, usize, usize, usize)>, CpuError> {
    if x.rank() == 0 || w.rank() != 2 {
        return Err(op_err(format!(
            "want x [.., K] and packed weight [N, bytes], got {:?} and {:?}",
            x.shape, w.shape
        )));
    }
    let k = x.shape[x.rank() - 1];
    let n = w.shape[0];
    let rb = quant::row_bytes(scheme, k)?;
    if w.shape[1] != rb || w.data.len() != n * rb {
        return Err(op_err(format!(
            "{scheme:?} weight for K = {k} needs rows of {rb} bytes, got {:?}",
            w.shape
        )));
    }
    let m = x.data.len().checked_div(k).unwrap_or(0);
    if x.data.len() != m * k || out_len != m * n {
        return Err(op_err(format!(
            "output holds {out_len} values, dequant matmul of x {:?} gives {}",
            x.shape,
            m * n
        )));
    }
    Ok((k > 0 && m > 0 && n > 0).then_some((m, k, n, rb)))
}

/// `x @ Wᵀ` for f32 x of at most [`MATVEC_MAX_M`] rows: each packed row walked once.
fn dequant_matvec(
    scheme: QuantScheme,
    x: &TensorView,
    w: &TensorView,
    out: &mut [f32],
) -> Result<(), CpuError> {
    let Some((_, k, n, _)) = dequant_dims(scheme, x, w, out.len())? else {
        out.fill(0.0);
        return Ok(());
    };
    quant::matvec(scheme, &weight_bytes(w)?, n, k, x.get::<f32>()?, out)
}

/// `x @ Wᵀ` with W `[N, K]` in packed blocks, through dequantised tiles and a GEMM (the
/// large-M path). The weight stays packed: each task dequantises a tile of weight rows into
/// a small buffer, multiplies it, and drops it, so no copy of the whole weight in f32 (or
/// T) ever exists.
fn dequant_matmul_t<T: Float>(
    scheme: QuantScheme,
    x: &TensorView,
    w: &TensorView,
    out: &mut [T],
) -> Result<(), CpuError> {
    let xv = x.get::<T>()?;
    let Some((m, k, n, rb)) = dequant_dims(scheme, x, w, out.len())? else {
        out.fill(T::zero());
        return Ok(());
    };
    let wv = weight_bytes(w)?;
    let lhs = Operand {
        data: xv,
        rs: k,
        cs: 1,
    };
    // Enough tiles to keep every thread busy, each at most 64 rows (64·K values of T).
    let threads = rayon::current_num_threads().max(1);
    let tile = n.div_ceil(threads).clamp(1, 64);
    let one = |n0: usize| -> Result<Vec<T>, CpuError> {
        let nt = tile.min(n - n0);
        let mut row = vec![0f32; k];
        let mut wt = vec![T::zero(); nt * k];
        for (r, dst) in wt.chunks_exact_mut(k).enumerate() {
            let src = &wv[(n0 + r) * rb..(n0 + r + 1) * rb];
            quant::dequantize_row(scheme, src, &mut row);
            for (o, &v) in dst.iter_mut().zip(&row) {
                *o = T::from_f64(v as f64);
            }
        }
        // The tile's Wᵀ viewed in place: element (kk, c) is tile row c, column kk.
        let rhs = Operand {
            data: &wt,
            rs: 1,
            cs: k,
        };
        let mut dst = vec![T::zero(); m * nt];
        gemm_one((m, nt, k), lhs, 0, rhs, 0, &mut dst, Parallelism::None)?;
        Ok(dst)
    };
    let starts: Vec<usize> = (0..n).step_by(tile).collect();
    let tiles: Vec<Vec<T>> = if m * n * k >= PAR_WORK {
        starts
            .par_iter()
            .map(|&n0| one(n0))
            .collect::<Result<_, _>>()?
    } else {
        starts.iter().map(|&n0| one(n0)).collect::<Result<_, _>>()?
    };
    for (&n0, t) in starts.iter().zip(&tiles) {
        let nt = t.len() / m;
        for i in 0..m {
            out[i * n + n0..i * n + n0 + nt].copy_from_slice(&t[i * nt..(i + 1) * nt]);
        }
    }
    Ok(())
}

/// Batched `a @ b` with NumPy broadcasting of the batch dims (rank-1 operands promoted).
pub fn matmul(ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let ins = arity(ins, 2, 2)?;
    float_class!(out.class(), T => matmul_t::<T>(&ins[0], &ins[1], out.get_mut()?))
}

/// a, w, bias: `act(a @ w + bias)`.
pub fn fused_matmul_bias_act(
    act: Option<Activation>,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let ins = arity(ins, 3, 3)?;
    float_class!(out.class(), T => {
        let o = out.get_mut::<T>()?;
        matmul_t::<T>(&ins[0], &ins[1], o)?;
        bias_act(o, ins[2].get::<T>()?, act)
    })
}

/// x `[.., K]`, packed weight `[N, bytes]` → `x @ Wᵀ`: f32 decode shapes (at most
/// [`MATVEC_MAX_M`] rows of x) walk the packed rows once, the rest (and f64, whose
/// precision the f32 lanes would lose) go through dequantised tiles and a GEMM.
pub fn dequant_matmul(
    scheme: QuantScheme,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let ins = arity(ins, 2, 2)?;
    let (x, w) = (&ins[0], &ins[1]);
    let k = x.shape.last().copied().unwrap_or(0);
    let m = out
        .numel()
        .checked_div(w.shape.first().copied().unwrap_or(0));
    if out.class() == ComputeClass::F32 && k > 0 && m.is_some_and(|m| m <= MATVEC_MAX_M) {
        return dequant_matvec(scheme, x, w, out.get_mut()?);
    }
    dequant_matmul_tiled(scheme, ins, out)
}

/// [`dequant_matmul`] with the numerics `quant_act` picks: under [`QuantAct::Q8`] an f32
/// product with a Q4_0 … Q6_K weight quantises x to 8 bits and takes integer block dots as
/// llama.cpp does (`quant::matmul_q8`), at any M; anything else is [`dequant_matmul`].
pub fn dequant_matmul_with(
    scheme: QuantScheme,
    quant_act: QuantAct,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let ins = arity(ins, 2, 2)?;
    let (x, w) = (&ins[0], &ins[1]);
    let q8 = quant_act == QuantAct::Q8 && quant::act_format(scheme).is_some();
    if !(q8 && out.class() == ComputeClass::F32 && matches!(x.data, Buf::F32(_))) {
        return dequant_matmul(scheme, ins, out);
    }
    let o = out.get_mut::<f32>()?;
    let Some((_, k, n, _)) = dequant_dims(scheme, x, w, o.len())? else {
        o.fill(0.0);
        return Ok(());
    };
    quant::matmul_q8(scheme, &weight_bytes(w)?, n, k, x.get::<f32>()?, o)
}

/// [`dequant_matmul`] always through dequantised tiles and a GEMM, whatever M is (public
/// for the bench that compares the two paths).
pub fn dequant_matmul_tiled(
    scheme: QuantScheme,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let ins = arity(ins, 2, 2)?;
    float_class!(out.class(), T => dequant_matmul_t::<T>(scheme, &ins[0], &ins[1], out.get_mut()?))
}

/// Packed U8 rows → f32 (the arena holds each byte as an i64, so bytes are narrowed first;
/// a value outside 0..=255 is a typed error, never a wrapped byte).
pub fn dequantize(
    scheme: QuantScheme,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let ins = arity(ins, 1, 1)?;
    let x = &ins[0];
    let cols_bytes = x.shape.last().copied().unwrap_or(0);
    let rows = x.numel().checked_div(cols_bytes).unwrap_or(0);
    let cols = cols_bytes / scheme.block_bytes() * scheme.block_len();
    let mut bytes = Vec::with_capacity(x.numel());
    for &b in x.get::<i64>()? {
        bytes.push(u8::try_from(b).map_err(|_| op_err(format!("packed byte {b} out of range")))?);
    }
    let mut vals = vec![0f32; rows * cols];
    quant::dequantize_into(scheme, &bytes, rows, cols, &mut vals)?;
    fn store<T: Float>(o: &mut [T], vals: &[f32]) -> Result<(), CpuError> {
        if o.len() != vals.len() {
            return Err(op_err(format!(
                "output holds {} values, want {}",
                o.len(),
                vals.len()
            )));
        }
        o.iter_mut()
            .zip(vals)
            .for_each(|(o, &v)| *o = T::from_f64(v as f64));
        Ok(())
    }
    float_class!(out.class(), T => store::<T>(out.get_mut()?, &vals))
}
