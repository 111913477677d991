//! The f64 oracles of the norm group: two-pass row statistics in plain loops, independent
//! of rlx's kernels.

/// Normalise each `len`-long row of `h` (LayerNorm, or RmsNorm when `rms`), scale by
/// `gamma` and shift by `beta`.
pub fn norm_ref(
    h: &[f64],
    len: usize,
    gamma: &[f64],
    beta: Option<&[f64]>,
    eps: f64,
    rms: bool,
) -> Vec<f64> {
    let mut out = Vec::with_capacity(h.len());
    for row in h.chunks(len) {
        let n = len as f64;
        let mean = if rms {
            0.0
        } else {
            row.iter().sum::<f64>() / n
        };
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        for (j, v) in row.iter().enumerate() {
            let y = (v - mean) / (var + eps).sqrt() * gamma[j];
            out.push(y + beta.map_or(0.0, |b| b[j]));
        }
    }
    out
}

/// x + residual (+ bias broadcast over the last dim of length `c`).
pub fn residual_sum(x: &[f64], r: &[f64], bias: Option<&[f64]>, c: usize) -> Vec<f64> {
    (0..x.len())
        .map(|i| x[i] + r[i] + bias.map_or(0.0, |b| b[i % c]))
        .collect()
}
