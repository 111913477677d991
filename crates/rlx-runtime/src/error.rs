//! The runtime's error type: every variant names the tensor, node or device concerned.
use rlx_cpu::CpuError;
use rlx_ir::{BindError, IrError};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("unknown input \"{name}\": the graph's inputs are [{known}]")]
    UnknownInput { name: String, known: String },
    #[error("missing input \"{name}\" ({shape}): every graph input must be fed")]
    MissingInput { name: String, shape: String },
    #[error("input \"{name}\" given more than once")]
    DuplicateInput { name: String },
    #[error("{kind} \"{name}\": {got} values given, its shape {shape} needs {expected}")]
    WrongLength {
        kind: &'static str,
        name: String,
        shape: String,
        expected: usize,
        got: usize,
    },
    #[error("{kind} \"{name}\": shape {got:?} given, the graph declares {expected}")]
    WrongShape {
        kind: &'static str,
        name: String,
        expected: String,
        got: Vec<usize>,
    },
    #[error("{kind} \"{name}\": dtype {got} given, the graph declares {expected}")]
    WrongDtype {
        kind: &'static str,
        name: String,
        expected: rlx_ir::DType,
        got: rlx_ir::DType,
    },
    #[error("input \"{name}\" has dynamic dims {shape} that a flat slice cannot bind: use run_typed with a HostTensor")]
    Unbindable { name: String, shape: String },
    #[error("unknown param \"{name}\": the graph's params are [{known}]")]
    UnknownParam { name: String, known: String },
    #[error("param \"{name}\" was never set: call set_param(\"{name}\", ..) before run")]
    ParamNotSet { name: String },
    #[error("output {index} does not exist: the graph has {count} outputs")]
    NoSuchOutput { index: usize, count: usize },
    #[error("output {output} ({output_shape}) cannot update param \"{param}\" ({param_shape}): shapes and dtypes must match exactly")]
    UpdateShapeMismatch {
        output: usize,
        param: String,
        output_shape: String,
        param_shape: String,
    },
    #[error("param \"{param}\" is already updated by output {existing}")]
    DuplicateUpdate { param: String, existing: usize },
    #[error(
        "input \"{name}\": dim {symbol} = {got}, but input \"{bound_by}\" bound it to {bound}"
    )]
    InconsistentDim {
        name: String,
        symbol: String,
        got: usize,
        bound: usize,
        bound_by: String,
    },
    #[error("two {kind}s are named \"{name}\" (nodes {first} and {second}): names must be unique")]
    DuplicateName {
        kind: &'static str,
        name: String,
        first: rlx_ir::NodeId,
        second: rlx_ir::NodeId,
    },
    /// A device mesh that cannot be formed or used as asked.
    #[error("mesh: {0}")]
    Mesh(String),
    #[error("device {device} is not available: {reason}")]
    DeviceUnavailable { device: String, reason: String },
    #[error(transparent)]
    Ir(#[from] IrError),
    #[error(transparent)]
    Opt(#[from] rlx_opt::OptError),
    #[error(transparent)]
    Cpu(#[from] CpuError),
    #[error(transparent)]
    Cuda(#[from] rlx_cuda::CudaError),
    /// Boxed: the wgpu errors carry node names and shader logs, and `Error` stays small.
    #[error(transparent)]
    Wgpu(Box<rlx_wgpu::WgpuError>),
}

impl From<rlx_wgpu::WgpuError> for Error {
    /// A binding mistake the wgpu executor reports reads as the session's own.
    fn from(e: rlx_wgpu::WgpuError) -> Error {
        match e {
            rlx_wgpu::WgpuError::Bind(b) => b.into(),
            e => Error::Wgpu(Box::new(e)),
        }
    }
}

impl From<BindError> for Error {
    fn from(e: BindError) -> Error {
        match e {
            BindError::UnknownInput { name, known } => Error::UnknownInput { name, known },
            BindError::UnknownParam { name, known } => Error::UnknownParam { name, known },
            BindError::MissingInput { name, shape } => Error::MissingInput { name, shape },
            BindError::DuplicateInput { name } => Error::DuplicateInput { name },
            BindError::WrongLength {
                kind,
                name,
                shape,
                expected,
                got,
            } => Error::WrongLength {
                kind,
                name,
                shape,
                expected,
                got,
            },
            BindError::WrongShape {
                kind,
                name,
                expected,
                got,
            } => Error::WrongShape {
                kind,
                name,
                expected,
                got,
            },
            BindError::WrongDtype {
                kind,
                name,
                expected,
                got,
            } => Error::WrongDtype {
                kind,
                name,
                expected,
                got,
            },
            BindError::Unbindable { name, shape, .. } => Error::Unbindable { name, shape },
            BindError::InconsistentDim {
                name,
                symbol,
                got,
                bound,
                bound_by,
            } => Error::InconsistentDim {
                name,
                symbol,
                got,
                bound,
                bound_by,
            },
            BindError::DuplicateName {
                kind,
                name,
                first,
                second,
            } => Error::DuplicateName {
                kind,
                name,
                first,
                second,
            },
        }
    }
}
