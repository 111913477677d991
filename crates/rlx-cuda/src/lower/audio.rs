//! CUDA lowering of the audio ops (kernels in `kernels/audio.cu`). Fft is a direct DFT with
//! exact twiddles and double sums (any n, not only powers of two). LogMel keeps the mel
//! energies in an f32 scratch — half storage would overflow or flush them before the log —
//! takes each item's max in a block reduction, then applies Whisper's transform;
//! LogMelBackward reuses those steps and maps the masked gradient back through the filterbank.
use super::linalg::sfx64;
use super::{KArgs, Lowered, NodeCtx};
use crate::kernels::{Lib, Src};
use rlx_ir::FftNorm;

const SRC: Src = Src::Lib(Lib::Audio);

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
    let sfx = sfx64(x.dtype)?;
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
    let tw = if sfx == "f64" { 8 } else { 4 };
    let table = 2 * n * tw <= DFT_TABLE_BYTES;
    let smem = if table { 2 * n * tw } else { 0 };
    let grid = [n.div_ceil(DFT_THREADS) as u32, items.min(GRID_YZ) as u32, 1];
    let args = KArgs::new()
        .ptr(x.ptr)
        .ptr(out.ptr)
        .i64(items as i64)
        .i32(n as i32)
        .i32(inverse as i32)
        .f64(fft_scale(n, inverse, norm))
        .i32(table as i32);
    ctx.launch(
        SRC,
        &format!("fft_dft_{sfx}"),
        grid,
        [DFT_THREADS as u32, 1, 1],
        smem as u32,
        args,
    )
}

/// `C[it] = A[it] · B` through `mel_gemm*` (see `kernels/audio.cu` for the stride meaning).
#[allow(clippy::too_many_arguments)]
fn mel_gemm(
    ctx: &mut NodeCtx,
    func: &str,
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
    let args = KArgs::new()
        .ptr(a)
        .ptr(b)
        .ptr(c)
        .i64(items as i64)
        .i64(rows as i64)
        .i64(cols as i64)
        .i64(inner as i64)
        .i64(sa as i64)
        .i64(ars as i64)
        .i64(acs as i64)
        .i64(brs as i64)
        .i64(bcs as i64);
    ctx.launch(SRC, func, grid, [16, 16, 1], 0, args)
}

fn mel(ctx: &mut NodeCtx, backward: bool) -> Lowered {
    let (spec, fb, out) = (
        ctx.input(0)?.clone(),
        ctx.input(1)?.clone(),
        ctx.out.clone(),
    );
    let dt = spec.dtype;
    let sfx = NodeCtx::float_sfx(dt)?;
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
        &format!("mel_gemm_{sfx}"),
        (spec.ptr, fb.ptr, m),
        items,
        (f, nm, nf),
        (f * nf, nf, 1),
        (nm, 1),
    )?;
    ctx.launch(
        SRC,
        "mel_max",
        [items as u32, 1, 1],
        [1024, 1, 1],
        0,
        KArgs::new().ptr(m).ptr(mx).i64(per as i64),
    )?;
    match dy {
        None => ctx.launch_1d(
            SRC,
            &format!("mel_out_{sfx}"),
            total,
            KArgs::new()
                .ptr(m)
                .ptr(mx)
                .ptr(out.ptr)
                .i64(total as i64)
                .i64(per as i64),
        ),
        Some(dy) => {
            ctx.launch_1d(
                SRC,
                &format!("mel_grad_{sfx}"),
                total,
                KArgs::new()
                    .ptr(m)
                    .ptr(mx)
                    .ptr(dy.ptr)
                    .i64(total as i64)
                    .i64(per as i64),
            )?;
            // dspec = G · fbᵀ: B[q = mel, c = freq] = fb[c, q].
            mel_gemm(
                ctx,
                &format!("mel_gemm_t_{sfx}"),
                (m, fb.ptr, out.ptr),
                items,
                (f, nf, nm),
                (f * nm, nm, 1),
                (1, nm),
            )
        }
    }
}
