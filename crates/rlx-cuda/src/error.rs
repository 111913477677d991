use thiserror::Error;

#[derive(Debug, Error)]
pub enum CudaError {
    /// No driver, no device, or the device cannot be used.
    #[error("CUDA device {device} is unavailable: {reason}")]
    Unavailable { device: usize, reason: String },
    #[error("CUDA driver call {call} failed: {msg}")]
    Driver { call: &'static str, msg: String },
    #[error("NVRTC could not compile kernel source {name}: {log}")]
    Compile { name: String, log: String },
    #[error("cuBLASLt failed for node {node}: {msg}")]
    Blas { node: String, msg: String },
    /// Lowering a node failed inside the GPU path (NVRTC, module load, symbol lookup,
    /// cuBLASLt, a driver call, a lowering bug): a hard error, never a CPU fallback.
    #[error("lowering node {node} ({kind}) failed: {source}")]
    Lowering {
        node: String,
        kind: rlx_ir::OpKind,
        source: Box<CudaError>,
    },
    #[error("node {node}: {msg}")]
    Node { node: String, msg: String },
    /// A NCCL call failed (or no NCCL library could be loaded).
    #[error("NCCL {call} failed: {msg}")]
    Nccl { call: &'static str, msg: String },
    #[error("memory plan: {0}")]
    Plan(#[from] rlx_opt::OptError),
    #[error(transparent)]
    Cpu(#[from] rlx_cpu::CpuError),
    #[error(transparent)]
    Ir(#[from] rlx_ir::IrError),
    /// An input or param that does not match the graph's declaration.
    #[error(transparent)]
    Bind(#[from] rlx_ir::BindError),
    /// Verify mode found a node whose GPU value differs from the CPU reference.
    #[error("verify: node {node} ({kind}) diverges from the CPU reference: rel-L2 {err:.3e} > {tol:.1e}")]
    Diverged {
        node: String,
        kind: &'static str,
        err: f64,
        tol: f64,
    },
}

impl CudaError {
    pub(crate) fn driver(call: &'static str, e: impl std::fmt::Debug) -> CudaError {
        CudaError::Driver {
            call,
            msg: format!("{e:?}"),
        }
    }
}
