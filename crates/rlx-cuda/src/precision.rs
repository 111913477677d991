//! Per-compile precision policy.
use std::fmt;

/// How matmul-class ops compute. Loss, norm statistics and optimizer state stay f32 in
/// every policy; the half policies run matmuls, convolutions and attention in half with
/// f32 accumulation (like autocast).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// Strict f32: no TF32 anywhere.
    #[default]
    F32,
    /// f32 storage, TF32 tensor-core matmuls.
    Tf32,
    /// bf16 compute, f32 accumulation.
    Bf16,
    /// f16 compute, f32 accumulation.
    F16,
}

impl Precision {
    pub fn parse(s: &str) -> Option<Precision> {
        match s.to_ascii_lowercase().as_str() {
            "f32" | "fp32" => Some(Precision::F32),
            "tf32" => Some(Precision::Tf32),
            "bf16" => Some(Precision::Bf16),
            "f16" | "fp16" => Some(Precision::F16),
            _ => None,
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Precision::F32 => "f32",
            Precision::Tf32 => "tf32",
            Precision::Bf16 => "bf16",
            Precision::F16 => "f16",
        })
    }
}
