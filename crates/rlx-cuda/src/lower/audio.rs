//! CUDA lowering of the audio ops (kernels in `kernels/audio.cu`). Fft is a direct DFT with
//! exact twiddles and double sums (any n, not only powers of two). LogMel keeps the mel
//! energies in an f32 scratch — half storage would overflow or flush them before the log —
//! takes each item's max in a block reduction, then applies Whisper's transform;
//! LogMelBackward reuses those steps and maps the masked gradient back through the filterbank.
use super::{Lowered, NodeCtx};
use crate::kernels::audio::{self as k, MelGemm};
use crate::kernels::Sfx;
use rlx_ir::FftNorm;

/// Threads per block of the DFT (one output bin each).
const DFT_THREADS: usize = 128;
/// Dynamic shared memory the DFT may use for its twiddle table.
const DFT_TABLE_BYTES: usize = 48 << 10;
/// Grid-dimension cap for the y / z axes (items beyond it are walked by a stride loop).
const GRID_YZ: usize = 65535;

pub(crate) fn log_mel(ctx: &mut NodeCtx) -> Lowered {
    mel(ctx, false)
}

pub(crate) fn log_mel_backward(ctx: &mut NodeCtx) -> Lowered {
    mel(ctx, true)
}

/// The scale NumPy applies for this direction and norm mode (as the CPU thunk).
fn fft_scale(n: usize, inverse: bool, norm: FftNorm) -> f64 {
    let n = n as f64;
    match (norm, inverse) {
        (FftNorm::Backward, false) | (FftNorm::Forward, true) => 1.0,
        (FftNorm::Backward, true) | (FftNorm::Forward, false) => 1.0 / n,
        (FftNorm::Ortho, _) => 1.0 / n.sqrt(),
    }
}

pub(crate) fn fft(ctx: &mut NodeCtx, inverse: bool, norm: FftNorm) -> Lowered {
    let (x, out) = (ctx.input(0)?.clone(), ctx.out.clone());
    let sfx = Sfx::float64(x.dtype)?;
    let r = x.rank();
    if r < 2 || x.dims[r - 1] != 2 || x.dims[r - 2] == 0 {
        crate::unsupported!("Fft input must be [.., n, 2], got {:?}", x.dims);
    }
    if out.dims != x.dims || out.dtype != x.dtype {
        crate::unsupported!(
            "Fft output {:?} {} differs from the input",
            out.dims,
            out.dtype
        );
    }
    let n = x.dims[r - 2];
    if n > i32::MAX as usize / 2 {
        crate::unsupported!("Fft length {n} is above the kernel's int range");
    }
    let items = x.numel() / (2 * n);
    if items == 0 {
        return Ok(());
    }
    let tw = if sfx == Sfx::F64 { 8 } else { 4 };
    let table = 2 * n * tw <= DFT_TABLE_BYTES;
    let smem = if table { 2 * n * tw } else { 0 };
    let grid = [n.div_ceil(DFT_THREADS) as u32, items.min(GRID_YZ) as u32, 1];
    let kernel = k::fft_dft(
        sfx,
        x.ptr,
        out.ptr,
        items as i64,
        n as i32,
        inverse as i32,
        fft_scale(n, inverse, norm),
        table as i32,
    );
    ctx.run(kernel, grid, [DFT_THREADS as u32, 1, 1], smem as u32)
}

/// `C[it] = A[it] · B` through `mel_gemm*` (see `kernels/audio.cu` for the stride meaning).
#[allow(clippy::too_many_arguments)]
fn mel_gemm(
    ctx: &mut NodeCtx,
    (sfx, transposed): (Sfx, bool),
    (a, b, c): (u64, u64, u64),
    items: usize,
    (rows, cols, inner): (usize, usize, usize),
    (sa, ars, acs): (usize, usize, usize),
    (brs, bcs): (usize, usize),
) -> Lowered {
    let grid = [
        cols.div_ceil(16) as u32,
        rows.div_ceil(16) as u32,
        items.min(GRID_YZ) as u32,
    ];
    if rows.div_ceil(16) > GRID_YZ {
        crate::unsupported!("{rows} frames are above the mel kernel's grid limit");
    }
    let g = MelGemm {
        items: items as i64,
        rows: rows as i64,
        cols: cols as i64,
        inner: inner as i64,
        sa: sa as i64,
        ars: ars as i64,
        acs: acs as i64,
        brs: brs as i64,
        bcs: bcs as i64,
    };
    ctx.run(
        k::mel_gemm(sfx, transposed, a, b, c, g),
        grid,
        [16, 16, 1],
        0,
    )
}

fn mel(ctx: &mut NodeCtx, backward: bool) -> Lowered {
    let (spec, fb, out) = (
        ctx.input(0)?.clone(),
        ctx.input(1)?.clone(),
        ctx.out.clone(),
    );
    let dt = spec.dtype;
    let sfx = Sfx::float(dt)?;
    if fb.dtype != dt || out.dtype != dt {
        crate::unsupported!("mixed dtypes {dt} / {} / {}", fb.dtype, out.dtype);
    }
    let r = spec.rank();
    if r < 2 || fb.rank() != 2 || fb.dims[0] != spec.dims[r - 1] {
        crate::unsupported!(
            "LogMel needs [.., frames, n_freq] and [n_freq, n_mels], got {:?} and {:?}",
            spec.dims,
            fb.dims
        );
    }
    let items: usize = spec.dims[..r - 2].iter().product();
    let (f, nf, nm) = (spec.dims[r - 2], spec.dims[r - 1], fb.dims[1]);
    let dy = if backward {
        let t = ctx.input(2)?.clone();
        if t.dtype != dt || t.numel() != items * f * nm {
            crate::unsupported!("dy {:?} does not match the LogMel output", t.dims);
        }
        if out.numel() != spec.numel() {
            crate::unsupported!("dspec {:?} differs from spec {:?}", out.dims, spec.dims);
        }
        Some(t)
    } else {
        if out.numel() != items * f * nm {
            crate::unsupported!("output {:?} does not hold {items}×{f}×{nm}", out.dims);
        }
        None
    };
    if out.numel() == 0 {
        return Ok(());
    }
    let per = f * nm;
    let total = items * per;
    if total == 0 {
        // No mel bins: the backward's gradient is all zeros.
        return ctx.zero(out.ptr, out.bytes());
    }
    let m = ctx.scratch(total * 4)?;
    let mx = ctx.scratch(items * 4)?;
    mel_gemm(
        ctx,
        (sfx, false),
        (spec.ptr, fb.ptr, m),
        items,
        (f, nm, nf),
        (f * nf, nf, 1),
        (nm, 1),
    )?;
    ctx.run(
        k::mel_max(m, mx, per as i64),
        [items as u32, 1, 1],
        [1024, 1, 1],
        0,
    )?;
    match dy {
        None => ctx.run_1d(
            k::mel_out(sfx, m, mx, out.ptr, total as i64, per as i64),
            total,
        ),
        Some(dy) => {
            ctx.run_1d(
                k::mel_grad(sfx, m, mx, dy.ptr, total as i64, per as i64),
                total,
            )?;
            // dspec = G · fbᵀ: B[q = mel, c = freq] = fb[c, q].
            mel_gemm(
                ctx,
                (sfx, true),
                (m, fb.ptr, out.ptr),
                items,
                (f, nf, nm),
                (f * nm, nm, 1),
                (1, nm),
            )
        }
    }
}
