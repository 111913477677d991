//! rlx-runtime: `Session::new(device).compile(graph)` → a `CompiledGraph` to run.
mod backend;
mod error;
mod mesh;
pub mod rendezvous;
mod session;

pub use backend::Executable;
pub use error::Error;
pub use mesh::{Mesh, RankComm};
pub use rlx_cpu::QuantAct;
pub use rlx_cuda::{CudaError, Precision, ProfileRow};
pub use session::{cpu_pipeline, cuda_pipeline, CompileOptions, CompiledGraph, Device, Session};
