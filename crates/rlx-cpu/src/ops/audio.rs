//! CPU thunks of the Audio group: Fft (via `rustfft`, NumPy's norm modes applied here), LogMel and its VJP.
use super::arity;
use super::conv::gemm_into;
use crate::error::op_err;
use crate::{CpuError, Float, OutView, TensorView};
use rayon::prelude::*;
use rlx_ir::FftNorm;
use rustfft::{num_complex::Complex, FftDirection, FftNum, FftPlanner};

/// Whisper's floor on the mel energy before the log.
const FLOOR: f64 = 1e-10;
/// Whisper's dynamic range: values more than 8 decades below the item's max are clamped.
const RANGE: f64 = 8.0;

/// Scale NumPy applies for this direction and norm mode.
fn fft_scale(n: usize, inverse: bool, norm: FftNorm) -> f64 {
    let n = n as f64;
    match (norm, inverse) {
        (FftNorm::Backward, false) | (FftNorm::Forward, true) => 1.0,
        (FftNorm::Backward, true) | (FftNorm::Forward, false) => 1.0 / n,
        (FftNorm::Ortho, _) => 1.0 / n.sqrt(),
    }
}

fn fft_t<T: Float + FftNum>(
    shape: &[usize],
    x: &[T],
    y: &mut [T],
    inverse: bool,
    norm: FftNorm,
) -> Result<(), CpuError> {
    let r = shape.len();
    if r < 2 || shape[r - 1] != 2 || shape[r - 2] == 0 {
        return Err(op_err(format!(
            "Fft input must be [.., n, 2], got {shape:?}"
        )));
    }
    let n = shape[r - 2];
    if x.len() != y.len() || !x.len().is_multiple_of(2 * n) {
        return Err(op_err("Fft input and output sizes disagree"));
    }
    if x.is_empty() {
        return Ok(());
    }
    let dir = if inverse {
        FftDirection::Inverse
    } else {
        FftDirection::Forward
    };
    let plan = FftPlanner::<T>::new().plan_fft(n, dir);
    let scale = <T as crate::Elem>::from_f64(fft_scale(n, inverse, norm));
    // Enough signals a task to amortise the scratch buffer, few enough to spread the work.
    let items = x.len() / (2 * n);
    let per = items.div_ceil(4 * rayon::current_num_threads()).max(1);
    y.par_chunks_mut(2 * n * per)
        .zip(x.par_chunks(2 * n * per))
        .for_each(|(yc, xc)| {
            let mut buf: Vec<Complex<T>> = xc
                .chunks_exact(2)
                .map(|p| Complex::new(p[0], p[1]))
                .collect();
            plan.process(&mut buf);
            for (o, c) in yc.chunks_exact_mut(2).zip(&buf) {
                o[0] = c.re * scale;
                o[1] = c.im * scale;
            }
        });
    Ok(())
}

/// Sizes of LogMel: (items, frames, n_freq, n_mels).
fn mel_dims(spec: &[usize], fb: &[usize]) -> Result<(usize, usize, usize, usize), CpuError> {
    let r = spec.len();
    if r < 2 || fb.len() != 2 || fb[0] != spec[r - 1] {
        return Err(op_err(format!(
            "LogMel needs spectrum [.., frames, n_freq] and filterbank [n_freq, n_mels], got {spec:?} and {fb:?}"
        )));
    }
    let items = spec[..r - 2].iter().product();
    Ok((items, spec[r - 2], spec[r - 1], fb[1]))
}

/// One item: `m = spec·fb` into `mel` (frames × n_mels), then the log-mel values in place;
/// returns the item's max of log10(max(m, floor)) (NaN if any value is NaN).
fn log_mel_item<T: Float>(
    (f, nf, nm): (usize, usize, usize),
    spec: &[T],
    fb: &[T],
    mel: &mut [T],
) -> T {
    gemm_into(
        (f, nm, nf),
        mel,
        nm,
        spec,
        (nf, 1),
        fb,
        (nm, 1),
        false,
        false,
    );
    let floor = T::from_f64(FLOOR);
    let mut mx = T::neg_infinity();
    for v in mel.iter_mut() {
        // `<` keeps a NaN as NaN (a plain max would hide it).
        *v = if *v < floor { floor } else { *v }.log10();
        if v.is_nan() || mx.is_nan() {
            mx = T::nan();
        } else if *v > mx {
            mx = *v;
        }
    }
    mx
}

fn log_mel_t<T: Float>(ins: &[TensorView], out: &mut [T]) -> Result<(), CpuError> {
    let (items, f, nf, nm) = mel_dims(ins[0].shape, ins[1].shape)?;
    let (spec, fb) = (ins[0].get::<T>()?, ins[1].get::<T>()?);
    if out.len() != items * f * nm || spec.len() != items * f * nf {
        return Err(op_err("LogMel: buffer sizes disagree with the shapes"));
    }
    if out.is_empty() {
        return Ok(());
    }
    let (four, range) = (T::from_f64(4.0), T::from_f64(RANGE));
    out.par_chunks_mut(f * nm).enumerate().for_each(|(i, o)| {
        let mx = log_mel_item((f, nf, nm), &spec[i * f * nf..(i + 1) * f * nf], fb, o);
        let lo = mx - range;
        for v in o.iter_mut() {
            let c = if mx.is_nan() || *v < lo { lo } else { *v };
            *v = (c + four) / four;
        }
    });
    Ok(())
}

/// dspec of LogMel. Choices (subgradients): the (max − 8) clamp passes no gradient where
/// it is active (l < max − 8; a tie counts as unclamped), the 1e-10 floor passes none where
/// m < 1e-10 (m = 1e-10 passes, as PyTorch's clamp does), and the item max is treated as a
/// constant: its own dependence on spec, which reaches the argmax row only through clamped
/// elements, is not propagated.
fn log_mel_backward_t<T: Float>(ins: &[TensorView], out: &mut [T]) -> Result<(), CpuError> {
    let (items, f, nf, nm) = mel_dims(ins[0].shape, ins[1].shape)?;
    let (spec, fb, dy) = (ins[0].get::<T>()?, ins[1].get::<T>()?, ins[2].get::<T>()?);
    if dy.len() != items * f * nm || out.len() != spec.len() {
        return Err(op_err(
            "LogMelBackward: dy does not match the LogMel output",
        ));
    }
    if out.is_empty() {
        return Ok(());
    }
    let floor = T::from_f64(FLOOR);
    let range = T::from_f64(RANGE);
    let k = T::from_f64(0.25 / std::f64::consts::LN_10);
    out.par_chunks_mut(f * nf).enumerate().for_each(|(i, o)| {
        let sp = &spec[i * f * nf..(i + 1) * f * nf];
        let mut m = vec![T::zero(); f * nm];
        gemm_into(
            (f, nm, nf),
            &mut m,
            nm,
            sp,
            (nf, 1),
            fb,
            (nm, 1),
            false,
            false,
        );
        let mut l = m.clone();
        let mx = {
            let mut mx = T::neg_infinity();
            for v in l.iter_mut() {
                *v = if *v < floor { floor } else { *v }.log10();
                mx = if v.is_nan() || mx.is_nan() {
                    T::nan()
                } else {
                    mx.max(*v)
                };
            }
            mx
        };
        // G = dy · dout/dm, reusing m's buffer.
        let dyi = &dy[i * f * nm..(i + 1) * f * nm];
        for ((g, &lv), &d) in m.iter_mut().zip(&l).zip(dyi) {
            let live = *g >= floor && lv >= mx - range;
            *g = if live { d * k / *g } else { T::zero() };
        }
        gemm_into((f, nf, nm), o, nf, &m, (nm, 1), fb, (1, nm), false, false);
    });
    Ok(())
}

/// Complex FFT over the second-to-last axis of `[.., n, 2]`.
pub fn fft(
    inverse: bool,
    norm: FftNorm,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let x = &arity(ins, 1, 1)?[0];
    float_class!(out.class(), T => fft_t(x.shape, x.get::<T>()?, out.get_mut()?, inverse, norm))
}

/// power spectrum `[.., frames, n_freq]`, filterbank `[n_freq, n_mels]` → Whisper log-mel.
pub fn log_mel(ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let ins = arity(ins, 2, 2)?;
    float_class!(out.class(), T => log_mel_t::<T>(ins, out.get_mut()?))
}

/// spec, filterbank, dy → dspec.
pub fn log_mel_backward(ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let ins = arity(ins, 3, 3)?;
    float_class!(out.class(), T => log_mel_backward_t::<T>(ins, out.get_mut()?))
}
