//! Shape rules and builders: Fft, LogMel, LogMelBackward.
use super::{arity, require_float};
use crate::{Dim, DimsFmt, FftNorm, Graph, IrError, NodeId, Op, Shape};

fn same_dtype(op: &Op, inputs: &[&Shape]) -> Result<(), String> {
    let d = inputs[0].dtype;
    if let Some(s) = inputs.iter().find(|s| s.dtype != d) {
        return Err(format!(
            "{} inputs differ in dtype: {d} vs {}",
            op.kind(),
            s.dtype
        ));
    }
    Ok(())
}

/// LogMel's output shape for spec `[.., frames, n_freq]` and filterbank `[n_freq, n_mels]`.
fn log_mel_out(spec: &Shape, fb: &Shape) -> Result<Shape, String> {
    if spec.rank() < 2 {
        return Err(format!(
            "spectrum must be [.., frames, n_freq], got {}",
            DimsFmt(&spec.dims)
        ));
    }
    if fb.rank() != 2 {
        return Err(format!(
            "filterbank must be [n_freq, n_mels], got {}",
            DimsFmt(&fb.dims)
        ));
    }
    let nf = &spec.dims[spec.rank() - 1];
    if let (Dim::Static(a), Dim::Static(b)) = (nf, &fb.dims[0]) {
        if a != b {
            return Err(format!(
                "spectrum has {a} frequency bins, filterbank {} expects {b}",
                DimsFmt(&fb.dims)
            ));
        }
    }
    let mut dims = spec.dims.clone();
    *dims.last_mut().expect("rank >= 2") = fb.dims[1].clone();
    Ok(Shape::with_dims(dims, spec.dtype))
}

pub(crate) fn infer(op: &Op, inputs: &[&Shape]) -> Result<Shape, String> {
    match op {
        Op::Fft { .. } => {
            arity(op, inputs, 1, 1)?;
            require_float(op, inputs, &[0])?;
            let x = inputs[0];
            let r = x.rank();
            if r < 2 || x.dims[r - 1] != Dim::Static(2) {
                return Err(format!(
                    "Fft input must be [.., n, 2] (re, im), got {}",
                    DimsFmt(&x.dims)
                ));
            }
            if x.dims[r - 2] == Dim::Static(0) {
                return Err("Fft needs at least one point (n = 0)".into());
            }
            Ok(x.clone())
        }
        Op::LogMel => {
            arity(op, inputs, 2, 2)?;
            require_float(op, inputs, &[0, 1])?;
            same_dtype(op, inputs)?;
            log_mel_out(inputs[0], inputs[1])
        }
        Op::LogMelBackward => {
            arity(op, inputs, 3, 3)?;
            require_float(op, inputs, &[0, 1, 2])?;
            same_dtype(op, inputs)?;
            let y = log_mel_out(inputs[0], inputs[1])?;
            let dy = inputs[2];
            let fits = dy.rank() == y.rank()
                && dy.dims.iter().zip(&y.dims).all(|(a, b)| match (a, b) {
                    (Dim::Static(p), Dim::Static(q)) => p == q,
                    _ => true,
                });
            if !fits {
                return Err(format!(
                    "dy {} does not match the LogMel output {}",
                    DimsFmt(&dy.dims),
                    DimsFmt(&y.dims)
                ));
            }
            Ok(inputs[0].clone())
        }
        _ => Err(format!("{} is not an audio op", op.kind())),
    }
}

impl Graph {
    /// Complex FFT over the second-to-last axis of `[.., n, 2]` (re, im), NumPy's `norm`.
    pub fn fft(&mut self, x: NodeId, inverse: bool, norm: FftNorm) -> Result<NodeId, IrError> {
        self.add_node(Op::Fft { inverse, norm }, &[x])
    }
    /// Whisper's log-mel of a power spectrum `[.., frames, n_freq]` with filterbank
    /// `[n_freq, n_mels]` → `[.., frames, n_mels]`.
    pub fn log_mel(&mut self, spec: NodeId, fb: NodeId) -> Result<NodeId, IrError> {
        self.add_node(Op::LogMel, &[spec, fb])
    }
    /// Gradient of `log_mel` w.r.t. the spectrum.
    pub fn log_mel_backward(
        &mut self,
        spec: NodeId,
        fb: NodeId,
        dy: NodeId,
    ) -> Result<NodeId, IrError> {
        self.add_node(Op::LogMelBackward, &[spec, fb, dy])
    }
}
