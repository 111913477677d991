//! FusedDequantMatMul on the CPU: the RmsNorm or FusedSwiGLU, DequantMatMul and Add thunks it
//! stands for,
//! run in that order through a scratch row block, so its values are the unfused graph's bit
//! for bit (the CPU gains nothing from one loop here; the op exists for the GPU's decode step,
//! and the CPU runs it for fallbacks and verify mode).
use super::{arity, attention, linalg, norm};
use crate::error::op_err;
use crate::quant::QuantAct;
use crate::{Buf, BufMut, CpuError, OutView, TensorView};
use rlx_ir::{ComputeClass, QuantScheme};

pub fn fused_dequant_matmul(
    scheme: QuantScheme,
    norm_eps: Option<f32>,
    residual: bool,
    glu: Option<bool>,
    quant_act: QuantAct,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let want = 2 + usize::from(norm_eps.is_some()) + usize::from(residual);
    let ins = arity(ins, want, want)?;
    let (x, w) = (ins[0], ins[1]);
    // The product's input: x, rms_norm(x)·gamma, or silu(gate)·up of x's halves.
    let mut hshape = x.shape.to_vec();
    if glu.is_some() {
        match hshape.last_mut() {
            Some(k) if k.is_multiple_of(2) => *k /= 2,
            _ => {
                return Err(op_err(format!(
                    "a SwiGLU input {:?} needs an even row",
                    x.shape
                )))
            }
        }
    }
    let prepare = |h: BufMut| -> Result<(), CpuError> {
        let hv = OutView {
            shape: &hshape,
            dtype: x.dtype,
            data: h,
        };
        match (norm_eps, glu) {
            (Some(eps), _) => norm::rms_norm(-1, eps, &[x, ins[2]], hv),
            (None, Some(gate_first)) => attention::fused_swiglu(gate_first, &[x], hv),
            (None, None) => Err(op_err("nothing to prepare")),
        }
    };
    let n: usize = hshape.iter().product();
    match (norm_eps.is_some() || glu.is_some(), x.data) {
        (false, _) => linalg::dequant_matmul_with(scheme, quant_act, &[x, w], out.reborrow())?,
        (true, Buf::F32(_)) => {
            let mut h = vec![0f32; n];
            prepare(BufMut::F32(&mut h))?;
            let hv = TensorView {
                shape: &hshape,
                dtype: x.dtype,
                data: Buf::F32(&h),
            };
            linalg::dequant_matmul_with(scheme, quant_act, &[hv, w], out.reborrow())?;
        }
        (true, Buf::F64(_)) => {
            let mut h = vec![0f64; n];
            prepare(BufMut::F64(&mut h))?;
            let hv = TensorView {
                shape: &hshape,
                dtype: x.dtype,
                data: Buf::F64(&h),
            };
            linalg::dequant_matmul_with(scheme, quant_act, &[hv, w], out.reborrow())?;
        }
        _ => return Err(op_err("x must hold float values")),
    }
    if residual {
        let r = ins[want - 1];
        match (out.class(), r.data) {
            (ComputeClass::F32, Buf::F32(rv)) => add_into(out.get_mut::<f32>()?, rv),
            (ComputeClass::F64, Buf::F64(rv)) => add_into(out.get_mut::<f64>()?, rv),
            _ => return Err(op_err("the residual must be held as the output is")),
        }?;
    }
    Ok(())
}

/// The unfused graph's `Add(y, residual)`, elementwise over equal shapes.
fn add_into<T: Copy + std::ops::Add<Output = T>>(y: &mut [T], r: &[T]) -> Result<(), CpuError> {
    if y.len() != r.len() {
        return Err(op_err(format!(
            "residual holds {} values, the output {}",
            r.len(),
            y.len()
        )));
    }
    y.iter_mut().zip(r).for_each(|(a, &b)| *a = *a + b);
    Ok(())
}
