//! Family functions of `kernels/quant.cu`: each owns one kernel's name and argument order.
use super::{Kernel, Lib, Sfx};
use crate::lower::KArgs;
use rlx_ir::QuantScheme;

#[cfg(test)]
#[path = "quant_gemv_hosttest.rs"]
mod gemv_hosttest;
#[cfg(test)]
#[path = "quant_hosttest.rs"]
mod hosttest;

pub(super) fn scheme_name(s: QuantScheme) -> &'static str {
    match s {
        QuantScheme::Q8_0 => "q8_0",
        QuantScheme::Q4_0 => "q4_0",
        QuantScheme::Q4_1 => "q4_1",
        QuantScheme::Q5_0 => "q5_0",
        QuantScheme::Q5_1 => "q5_1",
        QuantScheme::Q4_K => "q4_k",
        QuantScheme::Q5_K => "q5_k",
        QuantScheme::Q6_K => "q6_k",
        QuantScheme::F16 => "f16",
        QuantScheme::BF16 => "bf16",
    }
}

/// A packed weight as the kernels read it: its scheme, and whether its rows are in the
/// planar layout (`crate::planar`; kernels named `<scheme>p`, f32 activations only). A bare
/// `QuantScheme` is the GGUF layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wq {
    pub scheme: QuantScheme,
    pub planar: bool,
}

impl From<QuantScheme> for Wq {
    fn from(scheme: QuantScheme) -> Wq {
        Wq {
            scheme,
            planar: false,
        }
    }
}

/// The name piece of a weight's kernels: `q5_0`, or `q5_0p` in the planar layout.
fn wq_name(w: Wq) -> String {
    let p = if w.planar { "p" } else { "" };
    format!("{}{p}", scheme_name(w.scheme))
}

/// The `quant` shard (`kernels/shard.rs`) holding a weight's scheme-specific kernels.
pub fn shard_tag(scheme: QuantScheme, planar: bool) -> &'static str {
    let name = format!("dq_gemv_{}", wq_name(Wq { scheme, planar }));
    Lib::Quant.shard_of(&name).unwrap_or("base")
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
    scheme: impl Into<Wq>,
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
    let name = format!("dq_gemv_{}_{}", wq_name(scheme.into()), sfx.name());
    Kernel::new(Lib::Quant, name, args)
}

/// `dq_gemv_st_<scheme>_m{1|8}_<sfx>(x, w, y, gamma, res, M, N, K, eps, glu, lpr)`: the
/// staged GEMV (`m1` for M = 1, `m8` up to 8 rows); `glu` 0 = none, 1 = x's rows are
/// [gate | up], 2 = [up | gate]; `lpr` lanes per output column.
#[allow(clippy::too_many_arguments)]
pub fn dq_gemv_st(
    scheme: impl Into<Wq>,
    sfx: Sfx,
    (x, w, y): (u64, u64, u64),
    extras: GemvExtras,
    (m, n, k): (i32, i64, i64),
    glu: i32,
    (lpr, depth): (i32, u32),
) -> Kernel {
    let args = (KArgs::new().ptr(x).ptr(w).ptr(y))
        .ptr(extras.gamma)
        .ptr(extras.residual)
        .i32(m)
        .i64(n)
        .i64(k)
        .f32(extras.eps)
        .i32(glu)
        .i32(lpr);
    let tag = match (m, depth) {
        (1, 4) => "m1d4",
        (1, 8) => "m1d8",
        (1, _) => "m1",
        _ => "m8",
    };
    let name = format!("dq_gemv_st_{}_{tag}_{}", wq_name(scheme.into()), sfx.name());
    Kernel::new(Lib::Quant, name, args)
}

/// The tile-staged decode GEMV's tile sizes: CH 16-byte words a thread, 256 threads.
pub const GEMV_TS_CHUNKS: [u32; 4] = [1, 2, 4, 6];

/// `dq_gemv_ts_<scheme>_c<ch>_f32(x, w, y, gamma, res, N, K, eps, glu, lpr, tile, wbytes)`:
/// one f32 row; a block stages `tile` rows of the weight (whose size is `wbytes`) through
/// shared memory with 16-byte loads, `ch` a thread (kernels/quant_gemv.cu).
#[allow(clippy::too_many_arguments)]
pub fn dq_gemv_ts(
    scheme: QuantScheme,
    (x, w, y): (u64, u64, u64),
    extras: GemvExtras,
    (n, k): (i64, i64),
    glu: i32,
    (lpr, tile, ch): (i32, i32, u32),
    wbytes: i64,
) -> Kernel {
    let args = (KArgs::new().ptr(x).ptr(w).ptr(y))
        .ptr(extras.gamma)
        .ptr(extras.residual)
        .i64(n)
        .i64(k)
        .f32(extras.eps)
        .i32(glu)
        .i32(lpr)
        .i32(tile)
        .i64(wbytes);
    let name = format!("dq_gemv_ts_{}_c{ch}_f32", scheme_name(scheme));
    Kernel::new(Lib::Quant, name, args)
}

/// The register depths (units a lane holds, `R` in kernels/quant.cu) `dq_gemv_st` is built
/// with for `m` rows of `scheme` in `sfx`: 2 always; for one f32 row (decode) also 4, and 8
/// for the small units of the 32-value schemes.
pub fn gemv_depths(scheme: QuantScheme, sfx: Sfx, m: usize) -> &'static [u32] {
    use QuantScheme as Q;
    match scheme {
        _ if m != 1 || sfx != Sfx::F32 => &[2],
        Q::Q8_0 | Q::Q4_0 | Q::Q4_1 | Q::Q5_0 | Q::Q5_1 => &[2, 4, 8],
        _ => &[2, 4],
    }
}

/// `dq_dequant_<scheme>_<sfx>(w, out, rows, K)`.
pub fn dq_dequant(scheme: impl Into<Wq>, sfx: Sfx, w: u64, out: u64, rows: i64, k: i64) -> Kernel {
    let args = KArgs::new().ptr(w).ptr(out).i64(rows).i64(k);
    let name = format!("dq_dequant_{}_{}", wq_name(scheme.into()), sfx.name());
    Kernel::new(Lib::Quant, name, args)
}

/// `dq_split_w_<scheme>(w, h, inv, rows, K)`: `rows` packed weight rows decoded into two f16
/// parts each (`h` is `[2·rows, K]`), row r scaled by a power of two whose inverse goes to
/// `inv[r]` — `dq_dequant` to f32 then `dq_split_in` with two parts, in one launch. Not for
/// the half schemes (their products need no split).
pub fn dq_split_w(
    scheme: impl Into<Wq>,
    (w, h, inv): (u64, u64, u64),
    rows: i64,
    k: i64,
) -> Kernel {
    let args = KArgs::new().ptr(w).ptr(h).ptr(inv).i64(rows).i64(k);
    let name = format!("dq_split_w_{}", wq_name(scheme.into()));
    Kernel::new(Lib::Quant, name, args)
}

/// `dq_swiglu_<sfx>(x, h, M, K, glu)`: h[m, k] = silu(gate)·up of x's rows `[gate | up]`
/// (glu 1) or `[up | gate]` (glu 2), before a prefill GEMM.
pub fn dq_swiglu(sfx: Sfx, x: u64, h: u64, m: i64, k: i64, glu: i32) -> Kernel {
    let args = KArgs::new().ptr(x).ptr(h).i64(m).i64(k).i32(glu);
    Kernel::new(Lib::Quant, format!("dq_swiglu_{}", sfx.name()), args)
}

/// `dq_cast_in_<sfx>_<wsfx>(x, h, n)`: x cast to a half weight's dtype.
pub fn dq_cast_in(sfx: Sfx, wsfx: Sfx, x: u64, h: u64, n: i64) -> Kernel {
    let args = KArgs::new().ptr(x).ptr(h).i64(n);
    let name = format!("dq_cast_in_{}_{}", sfx.name(), wsfx.name());
    Kernel::new(Lib::Quant, name, args)
}

/// `dq_split_in_<sfx>_<wsfx>(x, h, inv, m, k, parts, glu)`: the `[m, k]` rows of x as
/// `parts` half values each (`h` is `[parts·m, k]`), row r scaled by a power of two whose
/// inverse goes to `inv[r]`; with glu 1 / 2, x is `[m, 2k]` and the rows split are its
/// SwiGLU (`dq_swiglu`'s values, computed in the same pass).
pub fn dq_split_in(
    sfx: Sfx,
    wsfx: Sfx,
    (x, h, inv): (u64, u64, u64),
    m: i64,
    k: i64,
    parts: i32,
    glu: i32,
) -> Kernel {
    let args = (KArgs::new().ptr(x).ptr(h).ptr(inv))
        .i64(m)
        .i64(k)
        .i32(parts)
        .i32(glu);
    let name = format!("dq_split_in_{}_{}", sfx.name(), wsfx.name());
    Kernel::new(Lib::Quant, name, args)
}

/// `dq_split_out_<sfx>(y, inv, out, res, m, n, parts)`: out = (the parts' f32 products
/// summed) · inv[row] + res (0 = none).
#[allow(clippy::too_many_arguments)]
pub fn dq_split_out(
    sfx: Sfx,
    (y, inv, out, res): (u64, u64, u64, u64),
    m: i64,
    n: i64,
    parts: i32,
) -> Kernel {
    let args = KArgs::new()
        .ptr(y)
        .ptr(inv)
        .ptr(out)
        .ptr(res)
        .i64(m)
        .i64(n)
        .i32(parts);
    Kernel::new(Lib::Quant, format!("dq_split_out_{}", sfx.name()), args)
}

/// `dq_split2_out_<sfx>(y, ix, iw, out, res, m, rows, ldo, n0)`: output columns n0.. of
/// the chunk's four part products `y` (`[2m, 2·rows]`), unscaled by the row scales of x
/// (`ix`) and of the weight rows (`iw`), plus res (0 = none); out and res have row stride
/// `ldo`.
pub fn dq_split2_out(
    sfx: Sfx,
    (y, ix, iw, out, res): (u64, u64, u64, u64, u64),
    (m, rows, ldo, n0): (i64, i64, i64, i64),
) -> Kernel {
    let args = KArgs::new().ptr(y).ptr(ix).ptr(iw).ptr(out).ptr(res);
    let args = args.i64(m).i64(rows).i64(ldo).i64(n0);
    Kernel::new(Lib::Quant, format!("dq_split2_out_{}", sfx.name()), args)
}

/// `dq_cast_out_<wsfx>_<sfx>(y, out, res, n)`: out = y (a half product) + res (0 = none).
pub fn dq_cast_out(wsfx: Sfx, sfx: Sfx, y: u64, out: u64, res: u64, n: i64) -> Kernel {
    let args = KArgs::new().ptr(y).ptr(out).ptr(res).i64(n);
    let name = format!("dq_cast_out_{}_{}", wsfx.name(), sfx.name());
    Kernel::new(Lib::Quant, name, args)
}
