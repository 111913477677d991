//! Family functions of `kernels/linalg.cu`: each owns one kernel's name and argument order.
use super::{Kernel, Lib, Sfx, Unit};
use crate::lower::{Dims8, KArgs};

/// `mm_bias_act_<sfx>` or, `quad` (four columns a thread; no f64), `mm_bias_act4_<sfx>`:
/// both `(c, bias, rows, n, act)`.
pub fn mm_bias_act(quad: bool, sfx: Sfx, c: u64, bias: u64, rows: i64, n: i64, act: i32) -> Kernel {
    let args = KArgs::new().ptr(c).ptr(bias).i64(rows).i64(n).i32(act);
    let stem = if quad { "mm_bias_act4" } else { "mm_bias_act" };
    Kernel::new(Lib::Linalg, format!("{stem}_{}", sfx.name()), args)
}

/// `mm_gather_<unit>(src, dst, v, total)`; units B2, B4, B8.
pub fn mm_gather(unit: Unit, src: u64, dst: u64, v: Dims8, total: i64) -> Kernel {
    let args = KArgs::new().ptr(src).ptr(dst).dims(v).i64(total);
    Kernel::new(Lib::Linalg, format!("mm_gather_{}", unit.name()), args)
}
