//! Family functions of `kernels/quant.cu`: each owns one kernel's name and argument order.
use super::{Kernel, Lib, Sfx};
use crate::lower::KArgs;
use rlx_ir::QuantScheme;

fn scheme_name(s: QuantScheme) -> &'static str {
    match s {
        QuantScheme::Q8_0 => "q8_0",
        QuantScheme::Q4_0 => "q4_0",
        QuantScheme::Q4_1 => "q4_1",
        QuantScheme::Q5_0 => "q5_0",
        QuantScheme::Q5_1 => "q5_1",
        QuantScheme::Q4_K => "q4_k",
        QuantScheme::Q5_K => "q5_k",
        QuantScheme::Q6_K => "q6_k",
    }
}

/// `dq_gemv_<scheme>_<sfx>(x, w, y, M, N, K)`.
pub fn dq_gemv(
    scheme: QuantScheme,
    sfx: Sfx,
    (x, w, y): (u64, u64, u64),
    m: i32,
    n: i64,
    k: i64,
) -> Kernel {
    let args = KArgs::new().ptr(x).ptr(w).ptr(y).i32(m).i64(n).i64(k);
    let name = format!("dq_gemv_{}_{}", scheme_name(scheme), sfx.name());
    Kernel::new(Lib::Quant, name, args)
}

/// `dq_dequant_<scheme>_<sfx>(w, out, rows, K)`.
pub fn dq_dequant(scheme: QuantScheme, sfx: Sfx, w: u64, out: u64, rows: i64, k: i64) -> Kernel {
    let args = KArgs::new().ptr(w).ptr(out).i64(rows).i64(k);
    let name = format!("dq_dequant_{}_{}", scheme_name(scheme), sfx.name());
    Kernel::new(Lib::Quant, name, args)
}
