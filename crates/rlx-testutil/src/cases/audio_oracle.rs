//! The audio table's f64 oracles and draws: the O(n²) DFT in NumPy's conventions,
//! Whisper's log-mel straight from its definition and its VJP by the chain rule, and power
//! spectra spanning many decades (so the (max − 8) clamp is exercised).
use crate::Rng;
use rlx_ir::FftNorm;
use std::f64::consts::PI;

pub const NORMS: [FftNorm; 3] = [FftNorm::Backward, FftNorm::Ortho, FftNorm::Forward];

/// The DFT sum over axis -2 of `[.., n, 2]`, NumPy's sign and scaling conventions.
pub fn dft_ref(x: &[f64], n: usize, inverse: bool, norm: FftNorm) -> Vec<f64> {
    let sign = if inverse { 1.0 } else { -1.0 };
    let nf = n as f64;
    let scale = match (norm, inverse) {
        (FftNorm::Backward, false) | (FftNorm::Forward, true) => 1.0,
        (FftNorm::Backward, true) | (FftNorm::Forward, false) => 1.0 / nf,
        (FftNorm::Ortho, _) => 1.0 / nf.sqrt(),
    };
    let mut y = vec![0.0; x.len()];
    for (xi, yi) in x.chunks(2 * n).zip(y.chunks_mut(2 * n)) {
        for k in 0..n {
            let (mut re, mut im) = (0.0, 0.0);
            for j in 0..n {
                let a = sign * 2.0 * PI * ((j * k) % n) as f64 / nf;
                let (c, s) = (a.cos(), a.sin());
                re += xi[2 * j] * c - xi[2 * j + 1] * s;
                im += xi[2 * j] * s + xi[2 * j + 1] * c;
            }
            yi[2 * k] = re * scale;
            yi[2 * k + 1] = im * scale;
        }
    }
    y
}

/// (items, frames, n_freq, n_mels) of a spectrum of dims `shape` and `nm` mel bins.
pub type MelDims = (usize, usize, usize, usize);

pub fn dims_of(shape: &[usize], nm: usize) -> MelDims {
    let r = shape.len();
    (
        shape[..r - 2].iter().product(),
        shape[r - 2],
        shape[r - 1],
        nm,
    )
}

/// The log-mel output's dims: the spectrum's with n_freq replaced by n_mels.
pub fn out_shape(shape: &[usize], nm: usize) -> Vec<usize> {
    let mut s = shape.to_vec();
    *s.last_mut().unwrap() = nm;
    s
}

/// Whisper's log-mel straight from its definition; returns the output and, per element,
/// whether it is live (unclamped and above the floor) plus m = spec·fb.
pub fn log_mel_ref(
    spec: &[f64],
    fb: &[f64],
    (items, f, nf, nm): MelDims,
) -> (Vec<f64>, Vec<bool>, Vec<f64>) {
    let mut out = vec![0.0; items * f * nm];
    let mut live = vec![false; out.len()];
    let mut ms = vec![0.0; out.len()];
    for it in 0..items {
        let base = it * f * nm;
        let mut l = vec![0.0; f * nm];
        for t in 0..f {
            for j in 0..nm {
                let mut m = 0.0;
                for k in 0..nf {
                    m += spec[(it * f + t) * nf + k] * fb[k * nm + j];
                }
                ms[base + t * nm + j] = m;
                l[t * nm + j] = m.max(1e-10).log10();
            }
        }
        let mx = l.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        for (i, &v) in l.iter().enumerate() {
            out[base + i] = (v.max(mx - 8.0) + 4.0) / 4.0;
            live[base + i] = v >= mx - 8.0 && ms[base + i] >= 1e-10;
        }
    }
    (out, live, ms)
}

/// dspec by the chain rule with the documented subgradient choices.
pub fn log_mel_grad_ref(spec: &[f64], fb: &[f64], dy: &[f64], dims: MelDims) -> Vec<f64> {
    let (items, f, nf, nm) = dims;
    let (_, live, ms) = log_mel_ref(spec, fb, dims);
    let mut ds = vec![0.0; spec.len()];
    for it in 0..items {
        for t in 0..f {
            for j in 0..nm {
                let i = (it * f + t) * nm + j;
                if !live[i] {
                    continue;
                }
                let g = dy[i] / (4.0 * ms[i] * std::f64::consts::LN_10);
                for k in 0..nf {
                    ds[(it * f + t) * nf + k] += g * fb[k * nm + j];
                }
            }
        }
    }
    ds
}

/// A power spectrum of `n` values whose frames (of `nf`) span `decades` orders of
/// magnitude, so the (max − 8) clamp is active on some frames when `decades` > 8: every
/// third frame sits at the top, the next at the bottom, the rest at random scales between.
pub fn power_spec(rng: &mut Rng, n: usize, nf: usize, decades: f64) -> Vec<f64> {
    let mut v = Vec::with_capacity(n);
    for t in 0..n / nf {
        let exponent = match t % 3 {
            0 => 0.0,
            1 => decades,
            _ => rng.range(0.0, decades),
        };
        let frame_scale = 10f64.powf(-exponent);
        for _ in 0..nf {
            v.push(frame_scale * rng.range(0.05, 2.0));
        }
    }
    v
}

/// A nonnegative filterbank with random weights.
pub fn filterbank(rng: &mut Rng, nf: usize, nm: usize) -> Vec<f64> {
    (0..nf * nm).map(|_| rng.range(0.0, 1.0)).collect()
}
