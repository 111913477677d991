//! The hand-written kernel sources, one `.cu` file per op group. Every source is compiled
//! with `common.cuh` in front of it; CI compiles all of them with NVRTC for sm_90.
use std::hash::{Hash, Hasher};

pub const COMMON: &str = include_str!("../kernels/common.cuh");

/// Hand-written sources by group name.
pub const SOURCES: &[(&str, &str)] = &[
    ("attention", include_str!("../kernels/attention.cu")),
    ("audio", include_str!("../kernels/audio.cu")),
    ("elementwise", include_str!("../kernels/elementwise.cu")),
    ("linalg", include_str!("../kernels/linalg.cu")),
    ("norm", include_str!("../kernels/norm.cu")),
    ("profile", include_str!("../kernels/profile.cu")),
    ("quant", include_str!("../kernels/quant.cu")),
    ("reduce", include_str!("../kernels/reduce.cu")),
    ("shape_ops", include_str!("../kernels/shape_ops.cu")),
    ("vision", include_str!("../kernels/vision.cu")),
];

/// Where a kernel's source comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Src {
    /// A hand-written group source (a name in `SOURCES`).
    Static(&'static str),
    /// Generated code (region kernels); `common.cuh` is prepended like for the others.
    Generated(String),
}

impl Src {
    /// The body (without `common.cuh`).
    pub fn body(&self) -> Option<&str> {
        match self {
            Src::Static(name) => SOURCES.iter().find(|(n, _)| n == name).map(|(_, s)| *s),
            Src::Generated(s) => Some(s),
        }
    }

    /// The full text handed to NVRTC.
    pub fn full(&self) -> Option<String> {
        self.body().map(|b| format!("{COMMON}\n{b}"))
    }

    /// A short name for logs and the program name.
    pub fn name(&self) -> String {
        match self {
            Src::Static(n) => (*n).to_string(),
            Src::Generated(s) => format!("gen_{:016x}", hash(s)),
        }
    }
}

/// FNV-1a 64 over the text (stable across runs and builds, unlike `DefaultHasher`).
pub fn hash(text: &str) -> u64 {
    let mut h = Fnv(0xcbf29ce484222325);
    text.hash(&mut h);
    h.0
}

struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= *b as u64;
            self.0 = self.0.wrapping_mul(0x100000001b3);
        }
    }
}
