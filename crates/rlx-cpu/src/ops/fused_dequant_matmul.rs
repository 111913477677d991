//! FusedDequantMatMul on the CPU: the RmsNorm, DequantMatMul and Add thunks it stands for,
//! run in that order through a scratch row block, so its values are the unfused graph's bit
//! for bit (the CPU gains nothing from one loop here; the op exists for the GPU's decode step,
//! and the CPU runs it for fallbacks and verify mode).
use super::{arity, linalg, norm};
use crate::error::op_err;
use crate::{Buf, BufMut, CpuError, OutView, TensorView};
use rlx_ir::{ComputeClass, QuantScheme};

pub fn fused_dequant_matmul(
    scheme: QuantScheme,
    norm_eps: Option<f32>,
    residual: bool,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let want = 2 + usize::from(norm_eps.is_some()) + usize::from(residual);
    let ins = arity(ins, want, want)?;
    let (x, w) = (ins[0], ins[1]);
    match norm_eps {
        None => linalg::dequant_matmul(scheme, &[x, w], out.reborrow())?,
        Some(eps) => {
            let gamma = ins[2];
            match x.data {
                Buf::F32(_) => {
                    let mut h = vec![0f32; x.numel()];
                    normed(eps, x, gamma, BufMut::F32(&mut h))?;
                    let hv = TensorView {
                        data: Buf::F32(&h),
                        ..x
                    };
                    linalg::dequant_matmul(scheme, &[hv, w], out.reborrow())?;
                }
                Buf::F64(_) => {
                    let mut h = vec![0f64; x.numel()];
                    normed(eps, x, gamma, BufMut::F64(&mut h))?;
                    let hv = TensorView {
                        data: Buf::F64(&h),
                        ..x
                    };
                    linalg::dequant_matmul(scheme, &[hv, w], out.reborrow())?;
                }
                _ => return Err(op_err("x must hold float values")),
            }
        }
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

/// `RmsNorm(x, gamma)` over the last dim into `h` (x's shape and dtype).
fn normed(eps: f32, x: TensorView, gamma: TensorView, h: BufMut) -> Result<(), CpuError> {
    let out = OutView {
        shape: x.shape,
        dtype: x.dtype,
        data: h,
    };
    norm::rms_norm(-1, eps, &[x, gamma], out)
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
