//! rlx-runtime: `Session::new(device).compile(graph)` → a `CompiledGraph` to run.
mod error;
mod session;

pub use error::Error;
pub use session::{cpu_pipeline, CompileOptions, CompiledGraph, Device, Session};
