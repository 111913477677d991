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

/// The optional parts of a GEMV: an RMS norm of x (gamma pointer, eps) before the product
/// and a residual added after it (0 = absent).
#[derive(Clone, Copy, Debug, Default)]
pub struct GemvExtras {
    pub gamma: u64,
    pub eps: f32,
    pub residual: u64,
}

/// `dq_gemv_<scheme>_<sfx>(x, w, y, gamma, res, M, N, K, eps)`.
pub fn dq_gemv(
    scheme: QuantScheme,
    sfx: Sfx,
    (x, w, y): (u64, u64, u64),
    extras: GemvExtras,
    m: i32,
    n: i64,
    k: i64,
) -> Kernel {
    let args = (KArgs::new().ptr(x).ptr(w).ptr(y))
        .ptr(extras.gamma)
        .ptr(extras.residual)
        .i32(m)
        .i64(n)
        .i64(k)
        .f32(extras.eps);
    let name = format!("dq_gemv_{}_{}", scheme_name(scheme), sfx.name());
    Kernel::new(Lib::Quant, name, args)
}

/// `dq_dequant_<scheme>_<sfx>(w, out, rows, K)`.
pub fn dq_dequant(scheme: QuantScheme, sfx: Sfx, w: u64, out: u64, rows: i64, k: i64) -> Kernel {
    let args = KArgs::new().ptr(w).ptr(out).i64(rows).i64(k);
    let name = format!("dq_dequant_{}_{}", scheme_name(scheme), sfx.name());
    Kernel::new(Lib::Quant, name, args)
}
