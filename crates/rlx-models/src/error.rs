//! Errors of model building and training.
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ModelError {
    /// A model or training setting that cannot work (sizes, batch, epochs).
    #[error("bad configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Ir(#[from] rlx_ir::IrError),
    #[error(transparent)]
    Autodiff(#[from] rlx_autodiff::AdError),
    #[error(transparent)]
    Runtime(#[from] rlx_runtime::Error),
    #[error(transparent)]
    Dataset(#[from] rlx_io::DatasetError),
}
