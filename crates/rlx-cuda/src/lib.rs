//! rlx-cuda: the CUDA backend. A graph is lowered once into launches of NVRTC-compiled
//! kernels and cuBLASLt calls over one memory-planned device arena, captured into a CUDA
//! graph and replayed per run. Nodes the GPU path cannot lower run on the CPU thunks with
//! explicit copies at their boundary; nothing falls back silently.
pub mod device;
mod error;
pub mod gemm;
#[cfg(test)]
mod hostemu;
pub mod kernels;
pub mod lower;
pub mod nccl;
pub mod nvrtc;
mod plan;
pub mod planar;
pub mod precision;
mod tune;

pub use device::{check_available, gpu_or_skip, Gpu};
pub use error::CudaError;
pub use nccl::{NcclComm, NcclId};
pub use precision::Precision;
mod exec;
mod verify;
pub use exec::{CudaExecutable, CudaOptions, ProfileRow};
pub use verify::verify_tolerance;
