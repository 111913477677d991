//! Errors of the wgpu backend. A node's failure names the node; an adapter that cannot be
//! had says why, so `Session` can answer `DeviceUnavailable`.
use thiserror::Error;

#[derive(Debug, Error)]
pub enum WgpuError {
    /// No adapter (or not the one asked for): the reason, for `Error::DeviceUnavailable`.
    #[error("no wgpu adapter: {0}")]
    Unavailable(String),
    /// The device refused an operation (validation, out of memory, a lost device).
    #[error("wgpu {call}: {msg}")]
    Device { call: &'static str, msg: String },
    /// A generated or hand-written shader failed naga's validation: a bug, never a fallback.
    #[error("shader {label} does not validate: {msg}")]
    Shader { label: String, msg: String },
    #[error("node {node}: {msg}")]
    Node { node: String, msg: String },
    /// Lowering a node failed inside the GPU path (not an unsupported op).
    #[error("lowering {node} ({kind}): {source}")]
    Lowering {
        node: String,
        kind: rlx_ir::OpKind,
        source: Box<WgpuError>,
    },
    /// Verify mode: the first node whose GPU value is too far from the CPU's.
    #[error(
        "RLX_VERIFY: node {node} ({kind}) diverges from the CPU reference: rel err {err:.3e} > {tol:.1e}"
    )]
    Diverged {
        node: String,
        kind: &'static str,
        err: f64,
        tol: f64,
    },
    #[error(transparent)]
    Ir(#[from] rlx_ir::IrError),
    #[error(transparent)]
    Cpu(#[from] rlx_cpu::CpuError),
    #[error(transparent)]
    Opt(#[from] rlx_opt::OptError),
    #[error(transparent)]
    Bind(#[from] rlx_ir::BindError),
}

impl WgpuError {
    pub(crate) fn device(call: &'static str, msg: impl std::fmt::Display) -> WgpuError {
        WgpuError::Device {
            call,
            msg: msg.to_string(),
        }
    }
}
