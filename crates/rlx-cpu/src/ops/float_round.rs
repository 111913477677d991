//! FloatRound: each value rounded onto a low-precision float format's grid, written as its
//! f32 carrier. The per-value rule is `MiniFloat::round` (rlx-ir), taken from the input's
//! exact value (f16 / bf16 arrive widened to f32, F64 as f64), so the rounding is single.
use super::arity;
use crate::{CpuError, OutView, TensorView};
use rlx_ir::{ComputeClass, MiniFloat};

pub fn float_round(
    format: MiniFloat,
    saturate: bool,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let ins = arity(ins, 1, 1)?;
    let o = out.get_mut::<f32>()?;
    let x = &ins[0];
    match x.dtype.compute_class() {
        ComputeClass::F64 => {
            for (o, &v) in o.iter_mut().zip(x.get::<f64>()?) {
                *o = format.round(v, saturate);
            }
        }
        ComputeClass::F32 => {
            for (o, &v) in o.iter_mut().zip(x.get::<f32>()?) {
                *o = format.round(v as f64, saturate);
            }
        }
        ComputeClass::I64 => {
            return Err(crate::error::op_err("needs float values, got integers"));
        }
    }
    Ok(())
}
