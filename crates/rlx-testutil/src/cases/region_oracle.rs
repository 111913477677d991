//! The region table's f64 oracle pieces: a step's settling into its dtype, the activations
//! its chains use, nearest-2x upsampling, and the off-grid draw. Plain loops, never rlx code.
use crate::case::Draw;
use rlx_ir::DType;

/// A value as a step of dtype `dt` holds it (half steps are computed in f32, then rounded).
pub fn r(dt: DType, v: f64) -> f64 {
    match dt {
        DType::F32 => v as f32 as f64,
        DType::F16 => half::f16::from_f32(v as f32).to_f64(),
        DType::BF16 => half::bf16::from_f32(v as f32).to_f64(),
        _ => v,
    }
}

pub fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// GELU's tanh approximation.
pub fn gelu_tanh(v: f64) -> f64 {
    0.5 * v * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v * v * v)).tanh())
}

/// Dims after nearest-2x upsampling of the last two axes.
pub fn doubled(d: &[usize]) -> Vec<usize> {
    let mut o = d.to_vec();
    let r = o.len();
    o[r - 2] *= 2;
    o[r - 1] *= 2;
    o
}

/// Nearest-2x upsampling of the last two axes (NCHW), plainly.
pub fn upsample(x: &[f64], d: &[usize]) -> Vec<f64> {
    let r = d.len();
    let (h, w) = (d[r - 2], d[r - 1]);
    let mut out = Vec::with_capacity(4 * x.len());
    for plane in x.chunks(h * w) {
        for hi in 0..2 * h {
            for wi in 0..2 * w {
                out.push(plane[(hi / 2) * w + wi / 2]);
            }
        }
    }
    out
}

/// `scale ·` values that keep every comparison against the integers -1, 0, 1 far from a
/// tie in any dtype (so rounding to f16/bf16 flips none of them).
pub fn off_grid(scale: f64) -> Draw {
    Draw::custom(move |rng, n, _| {
        (0..n)
            .map(|_| scale * (rng.below(4) as f64 - 2.0 + 0.5 + rng.range(-0.3, 0.3)))
            .collect()
    })
}
