//! CPU thunks of the Region group: ElementwiseRegion and BatchElementwiseRegion (run by the
//! chain engine in `chain.rs`, as the unfused elementwise ops are) and TransformRegion
//! (the shape thunks' strided copies applied step by step).
use super::chain::run_chain;
use super::shape_ops::{axis_of, expand_into, narrow_into, reshape_into, transpose_into};
use crate::error::op_err;
use crate::{BufMut, CpuError, Elem, OutView, TensorView};
use rlx_ir::ops::shape_ops::transform_step_dims;
use rlx_ir::{ChainStep, Dim, RegionPrologue, TransformStep};

pub fn elementwise_region(
    chain: &[ChainStep],
    prologue: RegionPrologue,
    ins: &[TensorView],
    out: OutView,
) -> Result<(), CpuError> {
    run_chain(chain, ins, prologue, out.shape, out.dtype, out.data)
}

/// Split an output buffer into consecutive pieces of `per` values.
fn pieces(buf: BufMut<'_>, per: usize) -> Vec<BufMut<'_>> {
    match buf {
        BufMut::F32(s) => s.chunks_mut(per).map(BufMut::F32).collect(),
        BufMut::F64(s) => s.chunks_mut(per).map(BufMut::F64).collect(),
        BufMut::I64(s) => s.chunks_mut(per).map(BufMut::I64).collect(),
    }
}

pub fn batch_elementwise_region(
    chain: &[ChainStep],
    num_batch_inputs: usize,
    prologue: RegionPrologue,
    ins: &[TensorView],
    out: OutView,
) -> Result<(), CpuError> {
    let nb = num_batch_inputs;
    if nb == 0 || ins.len() < nb || out.shape.first() != Some(&nb) {
        return Err(op_err(format!(
            "{nb} batch samples do not fit {} inputs and output {:?}",
            ins.len(),
            out.shape
        )));
    }
    let mut dims = out.shape.to_vec();
    dims[0] = 1;
    let per: usize = dims.iter().product();
    if per == 0 {
        return Ok(());
    }
    let mut sample_ins = Vec::with_capacity(1 + ins.len() - nb);
    sample_ins.push(ins[0]);
    sample_ins.extend_from_slice(&ins[nb..]);
    for (sample, piece) in ins[..nb].iter().zip(pieces(out.data, per)) {
        sample_ins[0] = *sample;
        run_chain(chain, &sample_ins, prologue, &dims, out.dtype, piece)?;
    }
    Ok(())
}

/// One TransformRegion step from `src` (of `shape`) into `dst`; returns the new shape.
fn transform_step<T: Elem>(
    step: &TransformStep,
    src: &[T],
    shape: &[usize],
    dst: &mut Vec<T>,
) -> Result<Vec<usize>, CpuError> {
    let dims: Vec<Dim> = shape.iter().map(|&d| Dim::Static(d)).collect();
    let dims = transform_step_dims(&dims, step).map_err(op_err)?;
    let out_shape: Vec<usize> = dims
        .iter()
        .map(|d| d.as_static())
        .collect::<Option<_>>()
        .ok_or_else(|| op_err(format!("step {step:?} left a symbolic dim")))?;
    let n: usize = out_shape.iter().product();
    dst.clear();
    dst.resize(n, T::default());
    match step {
        TransformStep::Reshape(_) => reshape_into(src, dst)?,
        TransformStep::Transpose(p) => transpose_into(src, shape, p, dst, &out_shape),
        TransformStep::Narrow { axis, start, .. } => {
            let a = axis_of(*axis, shape.len())?;
            narrow_into(src, shape, a, *start, dst, &out_shape)
        }
        TransformStep::Expand(_) => expand_into(src, shape, dst, &out_shape),
    }
    Ok(out_shape)
}

fn transform_t<T: Elem>(
    steps: &[TransformStep],
    x: &TensorView,
    out: &mut [T],
) -> Result<(), CpuError> {
    let mut cur: Vec<T> = x.get::<T>()?.to_vec();
    let mut shape = x.shape.to_vec();
    let mut next = Vec::new();
    for step in steps {
        shape = transform_step(step, &cur, &shape, &mut next)?;
        std::mem::swap(&mut cur, &mut next);
    }
    if cur.len() != out.len() {
        return Err(op_err(format!(
            "steps give shape {shape:?}, the node declares {} elements",
            out.len()
        )));
    }
    out.copy_from_slice(&cur);
    Ok(())
}

pub fn transform_region(
    steps: &[TransformStep],
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let x = &super::arity(ins, 1, 1)?[0];
    any_class!(out.class(), T => transform_t::<T>(steps, x, out.get_mut()?))
}
