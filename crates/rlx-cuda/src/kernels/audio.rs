//! Family functions of `kernels/audio.cu`: each owns one kernel's name and argument order.
use super::{Kernel, Lib, Sfx};
use crate::lower::KArgs;

/// `fft_dft_<sfx>(x, y, items, n, inverse, scale, table)`; `sfx` is a float64 suffix.
#[allow(clippy::too_many_arguments)]
pub fn fft_dft(
    sfx: Sfx,
    x: u64,
    y: u64,
    items: i64,
    n: i32,
    inverse: i32,
    scale: f64,
    table: i32,
) -> Kernel {
    let args = KArgs::new()
        .ptr(x)
        .ptr(y)
        .i64(items)
        .i32(n)
        .i32(inverse)
        .f64(scale)
        .i32(table);
    Kernel::new(Lib::Audio, format!("fft_dft_{}", sfx.name()), args)
}

/// Strides of a `mel_gemm*` launch: `C[it, r, c] = Σ_q A[it·sa + r·ars + q·acs] ·
/// B[q·brs + c·bcs]`, r < rows, c < cols, q < inner.
#[derive(Clone, Copy, Debug)]
pub struct MelGemm {
    pub items: i64,
    pub rows: i64,
    pub cols: i64,
    pub inner: i64,
    pub sa: i64,
    pub ars: i64,
    pub acs: i64,
    pub brs: i64,
    pub bcs: i64,
}

/// `mel_gemm_<sfx>` (A, B of `sfx`, C f32) or, `transposed`, `mel_gemm_t_<sfx>` (A f32,
/// B and C of `sfx`); both take `(A, B, C, items, R, Cn, Q, sa, ars, acs, brs, bcs)`.
pub fn mel_gemm(sfx: Sfx, transposed: bool, a: u64, b: u64, c: u64, g: MelGemm) -> Kernel {
    let args = KArgs::new()
        .ptr(a)
        .ptr(b)
        .ptr(c)
        .i64(g.items)
        .i64(g.rows)
        .i64(g.cols)
        .i64(g.inner)
        .i64(g.sa)
        .i64(g.ars)
        .i64(g.acs)
        .i64(g.brs)
        .i64(g.bcs);
    let stem = if transposed { "mel_gemm_t" } else { "mel_gemm" };
    Kernel::new(Lib::Audio, format!("{stem}_{}", sfx.name()), args)
}

/// `mel_max(m, mx, per)` (f32 only).
pub fn mel_max(m: u64, mx: u64, per: i64) -> Kernel {
    let args = KArgs::new().ptr(m).ptr(mx).i64(per);
    Kernel::new(Lib::Audio, "mel_max".to_string(), args)
}

/// `mel_out_<sfx>(m, mx, out, total, per)`.
pub fn mel_out(sfx: Sfx, m: u64, mx: u64, out: u64, total: i64, per: i64) -> Kernel {
    let args = KArgs::new().ptr(m).ptr(mx).ptr(out).i64(total).i64(per);
    Kernel::new(Lib::Audio, format!("mel_out_{}", sfx.name()), args)
}

/// `mel_grad_<sfx>(m, mx, dy, total, per)`.
pub fn mel_grad(sfx: Sfx, m: u64, mx: u64, dy: u64, total: i64, per: i64) -> Kernel {
    let args = KArgs::new().ptr(m).ptr(mx).ptr(dy).i64(total).i64(per);
    Kernel::new(Lib::Audio, format!("mel_grad_{}", sfx.name()), args)
}
