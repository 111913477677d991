//! Shape rules and builders: Fft, LogMel, LogMelBackward.
use super::{arity, require_float, same_dtype};
use crate::{Dim, DimsFmt, FftNorm, Graph, IrError, NodeId, Op, OpKind, Shape};

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

/// `[.., n, 2]` (re, im) → the same shape.
pub(crate) fn fft(inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::Fft, inputs, 1, 1)?;
    require_float(OpKind::Fft, inputs, &[0])?;
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

pub(crate) fn log_mel(inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::LogMel, inputs, 2, 2)?;
    require_float(OpKind::LogMel, inputs, &[0, 1])?;
    same_dtype(OpKind::LogMel, inputs)?;
    log_mel_out(inputs[0], inputs[1])
}

/// spectrum, filterbank, dy → d spectrum.
pub(crate) fn log_mel_backward(inputs: &[&Shape]) -> Result<Shape, String> {
    let kind = OpKind::LogMelBackward;
    arity(kind, inputs, 3, 3)?;
    require_float(kind, inputs, &[0, 1, 2])?;
    same_dtype(kind, inputs)?;
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
