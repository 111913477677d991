//! The hand-written kernel sources, one `.cu` file per op group. Every source is compiled
//! with `common.cuh` in front of it; CI compiles all of them with NVRTC for sm_90.
pub mod attention;
pub mod audio;
mod family;
pub mod linalg;
pub mod norm;
pub mod profile;
pub mod quant;
pub mod reduce;
pub mod shape_ops;
pub mod shard;
#[cfg(test)]
mod signature_test;
pub mod vision;

pub use family::{Kernel, Sfx, Unit};
use std::hash::{Hash, Hasher};

pub const COMMON: &str = include_str!("../../kernels/common.cuh");

/// A hand-written kernel library: one `kernels/<name>.cu` file. A typed address, so a
/// launch cannot name a library that does not exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lib {
    Attention,
    Audio,
    Elementwise,
    Linalg,
    Norm,
    Profile,
    Quant,
    Reduce,
    ShapeOps,
    Vision,
}

impl Lib {
    /// Every library (CI compiles each of them for sm_90).
    pub const ALL: [Lib; 10] = [
        Lib::Attention,
        Lib::Audio,
        Lib::Elementwise,
        Lib::Linalg,
        Lib::Norm,
        Lib::Profile,
        Lib::Quant,
        Lib::Reduce,
        Lib::ShapeOps,
        Lib::Vision,
    ];

    /// The file stem, also the module's name in logs and the disk cache.
    pub fn name(self) -> &'static str {
        match self {
            Lib::Attention => "attention",
            Lib::Audio => "audio",
            Lib::Elementwise => "elementwise",
            Lib::Linalg => "linalg",
            Lib::Norm => "norm",
            Lib::Profile => "profile",
            Lib::Quant => "quant",
            Lib::Reduce => "reduce",
            Lib::ShapeOps => "shape_ops",
            Lib::Vision => "vision",
        }
    }

    /// The source text (without `common.cuh`).
    pub fn source(self) -> &'static str {
        match self {
            Lib::Attention => concat!(
                include_str!("../../kernels/attention.cu"),
                include_str!("../../kernels/attention_x3.cu"),
                include_str!("../../kernels/attention_decode.cu")
            ),
            Lib::Audio => include_str!("../../kernels/audio.cu"),
            Lib::Elementwise => include_str!("../../kernels/elementwise.cu"),
            Lib::Linalg => include_str!("../../kernels/linalg.cu"),
            Lib::Norm => include_str!("../../kernels/norm.cu"),
            Lib::Profile => include_str!("../../kernels/profile.cu"),
            Lib::Quant => concat!(
                include_str!("../../kernels/quant.cu"),
                include_str!("../../kernels/quant_gemv.cu")
            ),
            Lib::Reduce => include_str!("../../kernels/reduce.cu"),
            Lib::ShapeOps => include_str!("../../kernels/shape_ops.cu"),
            Lib::Vision => include_str!("../../kernels/vision.cu"),
        }
    }
}

/// Where a kernel's source comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Src {
    /// A hand-written library.
    Lib(Lib),
    /// One shard of a hand-written library (`shard.rs`): the kernels behind one gate tag.
    Shard(Lib, &'static str),
    /// Generated code (region kernels); `common.cuh` is prepended like for the others.
    Generated(String),
}

impl Src {
    /// The body (without `common.cuh`).
    pub fn body(&self) -> &str {
        match self {
            Src::Lib(l) | Src::Shard(l, _) => l.source(),
            Src::Generated(s) => s,
        }
    }

    /// The full text handed to NVRTC.
    pub fn full(&self) -> String {
        match self {
            Src::Shard(l, tag) => shard::shard_text(*l, tag),
            _ => format!("{COMMON}\n{}", self.body()),
        }
    }

    /// A short name for logs and the program name.
    pub fn name(&self) -> String {
        match self {
            Src::Lib(l) => l.name().to_string(),
            Src::Shard(l, tag) => format!("{}.{tag}", l.name()),
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
