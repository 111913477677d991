//! CUDA lowering of the elementwise ops. Every op here but StopGradient (a copy) runs a
//! kernel generated for it (`elementwise_codegen.rs`): a single Activation / Binary /
//! Compare / Where / Cast is a one-step chain through the generator that also serves the
//! fused regions (`region.rs`) and FusedSwiGLU (`transformer.rs`). The CPU evaluates them
//! with one engine too, so both agree step for step. The helpers the generated text calls are `kernels/elementwise.cu`.
#[path = "elementwise_codegen.rs"]
mod codegen;
#[cfg(test)]
#[path = "elementwise_hosttest.rs"]
mod hosttest;

use super::{DevTensor, Dims8, KArgs, LowerError, Lowered, NodeCtx};
use crate::unsupported;
use codegen::{Arg, Kernel, Spec, BATCH_TABLE};
use rlx_ir::{Activation, BinaryOp, ChainOperand, ChainStep, CompareOp, DType, RegionPrologue};

/// Source (helpers + kernel, without `common.cuh`) and kernel name of the kernel computing
/// `chain` over inputs of the given dtypes and dims, broadcast to the output's dims.
/// Arguments of the kernel: out, n, then per used input its pointer and its read's sizes.
pub fn region_source(
    chain: &[ChainStep],
    prologue: RegionPrologue,
    ins: &[(DType, &[usize])],
    out: (DType, &[usize]),
) -> Result<(String, String), LowerError> {
    let k = codegen::chain_kernel(&Spec {
        chain,
        prologue,
        ins,
        out_dtype: out.0,
        out_dims: out.1,
        batch: false,
    })?;
    Ok((k.src, k.name))
}

/// Like `region_source` for a `BatchElementwiseRegion`: `ins` are the node's inputs (the
/// `num_batch_inputs` samples, then the shared inputs), `out` its output.
pub fn batch_region_source(
    chain: &[ChainStep],
    num_batch_inputs: usize,
    prologue: RegionPrologue,
    ins: &[(DType, &[usize])],
    out: (DType, &[usize]),
) -> Result<(String, String), LowerError> {
    let chain_ins = batch_chain_inputs(num_batch_inputs, ins, out.1)?;
    let k = codegen::chain_kernel(&Spec {
        chain,
        prologue,
        ins: &chain_ins,
        out_dtype: out.0,
        out_dims: out.1,
        batch: true,
    })?;
    Ok((k.src, k.name))
}

/// Source and kernel name of `FusedSwiGLU` from `in_dtype` to `out_dtype`.
pub fn swiglu_source(
    in_dtype: DType,
    out_dtype: DType,
    gate_first: bool,
) -> Result<(String, String), LowerError> {
    codegen::swiglu(in_dtype, out_dtype, gate_first)
}

/// The chain's inputs of a batch region: sample 0 (standing for every sample), then the
/// shared inputs.
fn batch_chain_inputs<'a>(
    nb: usize,
    ins: &[(DType, &'a [usize])],
    out_dims: &[usize],
) -> Result<Vec<(DType, &'a [usize])>, LowerError> {
    if nb == 0 || ins.len() < nb || out_dims.first() != Some(&nb) {
        unsupported!(
            "{nb} batch samples do not fit {} inputs and output {out_dims:?}",
            ins.len()
        );
    }
    if ins[1..nb].iter().any(|s| *s != ins[0]) {
        unsupported!("batch samples differ in dtype or dims");
    }
    let mut v = vec![ins[0]];
    v.extend_from_slice(&ins[nb..]);
    Ok(v)
}

/// What lowering one node records.
#[derive(Clone, Debug)]
pub(crate) enum Planned {
    Copy {
        dst: u64,
        src: u64,
        bytes: usize,
    },
    Launch {
        src: String,
        name: String,
        n: usize,
        args: Vec<Val>,
    },
}

/// A resolved kernel argument.
#[derive(Clone, Debug)]
pub(crate) enum Val {
    Ptr(u64),
    I64(i64),
    Dims(Dims8),
    Table(Box<[u64; BATCH_TABLE]>),
}

/// Record what a planner produced.
pub(crate) fn record(ctx: &mut NodeCtx, planned: Vec<Planned>) -> Lowered {
    for p in planned {
        match p {
            Planned::Copy { dst, src, bytes } => ctx.copy(dst, src, bytes)?,
            Planned::Launch { src, name, n, args } => {
                let mut a = KArgs::new();
                for v in args {
                    a = match v {
                        Val::Ptr(p) => a.ptr(p),
                        Val::I64(v) => a.i64(v),
                        Val::Dims(d) => a.dims(d),
                        Val::Table(t) => a.pod(*t),
                    };
                }
                ctx.run_1d(crate::kernels::Kernel::generated(src, name, a), n)?;
            }
        }
    }
    Ok(())
}

/// A single chainable op is a one-step chain over the node's inputs.
fn one_step(ctx: &mut NodeCtx, step: ChainStep) -> Lowered {
    let p = plan_chain(&[step], RegionPrologue::None, None, &ctx.ins, &ctx.out)?;
    record(ctx, p)
}

pub(crate) fn activation(ctx: &mut NodeCtx, a: Activation) -> Lowered {
    one_step(ctx, ChainStep::Activation(a, ChainOperand::Input(0)))
}

pub(crate) fn binary(ctx: &mut NodeCtx, op: BinaryOp) -> Lowered {
    use ChainOperand::Input;
    one_step(ctx, ChainStep::Binary(op, Input(0), Input(1)))
}

pub(crate) fn compare(ctx: &mut NodeCtx, op: CompareOp) -> Lowered {
    use ChainOperand::Input;
    one_step(ctx, ChainStep::Compare(op, Input(0), Input(1)))
}

pub(crate) fn where_(ctx: &mut NodeCtx) -> Lowered {
    use ChainOperand::Input;
    one_step(ctx, ChainStep::Where(Input(0), Input(1), Input(2)))
}

pub(crate) fn cast(ctx: &mut NodeCtx, to: DType) -> Lowered {
    one_step(ctx, ChainStep::Cast(to, ChainOperand::Input(0)))
}

pub(crate) fn stop_gradient(ctx: &mut NodeCtx) -> Lowered {
    let p = plan_stop_gradient(&ctx.ins, &ctx.out)?;
    record(ctx, p)
}

/// The launches computing `chain` (with `prologue`) from `ins` into `out`; `batch` is a
/// batch region's sample count.
pub(crate) fn plan_chain(
    chain: &[ChainStep],
    prologue: RegionPrologue,
    batch: Option<usize>,
    ins: &[DevTensor],
    out: &DevTensor,
) -> Result<Vec<Planned>, LowerError> {
    let n = out.numel();
    let dts: Vec<(DType, &[usize])> = ins.iter().map(|t| (t.dtype, t.dims.as_slice())).collect();
    let Some(nb) = batch else {
        let k = codegen::chain_kernel(&Spec {
            chain,
            prologue,
            ins: &dts,
            out_dtype: out.dtype,
            out_dims: &out.dims,
            batch: false,
        })?;
        if n == 0 {
            return Ok(vec![]);
        }
        let ptrs: Vec<u64> = ins.iter().map(|t| t.ptr).collect();
        let args = resolve(&k, out.ptr, n, &ptrs, &[], 0)?;
        return Ok(vec![Planned::Launch {
            src: k.src,
            name: k.name,
            n,
            args,
        }]);
    };
    let chain_ins = batch_chain_inputs(nb, &dts, &out.dims)?;
    let k = codegen::chain_kernel(&Spec {
        chain,
        prologue,
        ins: &chain_ins,
        out_dtype: out.dtype,
        out_dims: &out.dims,
        batch: true,
    })?;
    if n == 0 {
        return Ok(vec![]);
    }
    let per = n / nb;
    // Chain input k >= 1 is node input nb + k - 1; chain input 0 comes from the table.
    let mut ptrs = vec![0u64];
    ptrs.extend(ins[nb..].iter().map(|t| t.ptr));
    // Up to BATCH_TABLE samples a launch. Shared inputs are broadcast over axis 0, so each
    // launch indexes them from its own first row.
    let mut steps = Vec::new();
    for first in (0..nb).step_by(BATCH_TABLE) {
        let count = BATCH_TABLE.min(nb - first);
        let samples: Vec<u64> = ins[first..first + count].iter().map(|t| t.ptr).collect();
        let args = resolve(&k, out.at(first * per), count * per, &ptrs, &samples, per)?;
        steps.push(Planned::Launch {
            src: k.src.clone(),
            name: k.name.clone(),
            n: count * per,
            args,
        });
    }
    Ok(steps)
}

/// The arguments of a generated kernel, in its parameter order.
fn resolve(
    k: &Kernel,
    out: u64,
    n: usize,
    ins: &[u64],
    samples: &[u64],
    per: usize,
) -> Result<Vec<Val>, LowerError> {
    k.args
        .iter()
        .map(|arg| {
            Ok(match arg {
                Arg::Out => Val::Ptr(out),
                Arg::N => Val::I64(n as i64),
                Arg::Samples => {
                    if samples.len() > BATCH_TABLE {
                        // plan_chain splits batches into tables: a bug, not a limit.
                        return Err(LowerError::Internal(crate::CudaError::Node {
                            node: k.name.clone(),
                            msg: format!("{} samples in one launch", samples.len()),
                        }));
                    }
                    let mut table = [0u64; BATCH_TABLE];
                    table[..samples.len()].copy_from_slice(samples);
                    Val::Table(Box::new(table))
                }
                Arg::Per => Val::I64(per as i64),
                Arg::In(i) => Val::Ptr(*ins.get(*i).ok_or_else(|| {
                    LowerError::Unsupported(format!("kernel reads missing input {i}"))
                })?),
                Arg::I64(v) => Val::I64(*v),
                Arg::Dims(d) => Val::Dims(*d),
            })
        })
        .collect()
}

/// Identity forward: a copy (the planner usually aliases it away before this).
pub(crate) fn plan_stop_gradient(
    ins: &[DevTensor],
    out: &DevTensor,
) -> Result<Vec<Planned>, LowerError> {
    let x = ins
        .first()
        .ok_or_else(|| LowerError::Unsupported("StopGradient takes 1 input".into()))?;
    if x.dtype != out.dtype || x.numel() != out.numel() {
        unsupported!(
            "StopGradient from {} {:?} to {} {:?}",
            x.dtype,
            x.dims,
            out.dtype,
            out.dims
        );
    }
    if x.ptr == out.ptr || out.bytes() == 0 {
        return Ok(vec![]);
    }
    Ok(vec![Planned::Copy {
        dst: out.ptr,
        src: x.ptr,
        bytes: out.bytes(),
    }])
}

/// `FusedSwiGLU` (a transformer op, lowered in `transformer.rs`) through this generator.
pub(crate) fn plan_swiglu(
    ins: &[DevTensor],
    out: &DevTensor,
    gate_first: bool,
) -> Result<Vec<Planned>, LowerError> {
    let x = ins
        .first()
        .ok_or_else(|| LowerError::Unsupported("FusedSwiGLU takes 1 input".into()))?;
    let two_n = *x
        .dims
        .last()
        .ok_or_else(|| LowerError::Unsupported("FusedSwiGLU needs x of rank >= 1".into()))?;
    if !two_n.is_multiple_of(2) || out.numel() * 2 != x.numel() {
        unsupported!(
            "FusedSwiGLU: x {:?} does not halve into {:?}",
            x.dims,
            out.dims
        );
    }
    let (src, name) = codegen::swiglu(x.dtype, out.dtype, gate_first)?;
    let n = out.numel();
    if n == 0 {
        return Ok(vec![]);
    }
    Ok(vec![Planned::Launch {
        src,
        name,
        n,
        args: vec![
            Val::Ptr(out.ptr),
            Val::Ptr(x.ptr),
            Val::I64((two_n / 2) as i64),
            Val::I64(n as i64),
        ],
    }])
}
