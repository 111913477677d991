//! The passes, one file each.
mod autocast;
mod const_fold;
mod cse;
mod dce;
mod expand;
mod fuse_dequant_matmul;
mod fuse_elementwise;
mod fuse_matmul_bias_act;
mod fuse_residual_norm;
mod fuse_rope_cache_write;
mod fuse_swiglu;
mod fuse_swiglu_dequant_matmul;
mod fusion;
mod simplify;

pub use autocast::Autocast;
pub use const_fold::{ConstEvaluator, ConstFold, DEFAULT_FOLD_LIMIT};
pub use cse::Cse;
pub use dce::Dce;
pub use expand::Expand;
pub use fuse_dequant_matmul::FuseDequantMatMul;
pub use fuse_elementwise::FuseElementwise;
pub use fuse_matmul_bias_act::FuseMatMulBiasAct;
pub use fuse_residual_norm::FuseResidualNorm;
pub use fuse_rope_cache_write::FuseRopeCacheWrite;
pub use fuse_swiglu::FuseSwiGLU;
pub use fuse_swiglu_dequant_matmul::FuseSwiGLUDequantMatMul;
pub use simplify::Simplify;
