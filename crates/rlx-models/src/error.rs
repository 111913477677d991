//! Errors of model building and training.
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ModelError {
    /// A model or training setting that cannot work (sizes, batch, epochs).
    #[error("bad configuration: {0}")]
    Config(String),
    /// A learning rate that is not a positive finite number (a negative one trains uphill).
    #[error("learning rate {lr} must be a positive finite number (e.g. 1e-3)")]
    BadLearningRate { lr: f64 },
    /// A dataset with no samples where samples are needed.
    #[error("the {set} set is empty: training and evaluation need at least one sample")]
    EmptyDataset { set: &'static str },
    /// A label the model has no class for (accuracy on it would silently be 0).
    #[error(
        "{set} sample {index} has label {label}, but the model has {classes} classes \
         (labels 0..{classes}): check the label file or the model's class count"
    )]
    LabelOutOfRange {
        set: &'static str,
        index: usize,
        label: usize,
        classes: usize,
    },
    /// Images of another size than the model takes.
    #[error("the {set} set holds {got_rows}x{got_cols} images, the model takes {rows}x{cols}")]
    ImageSize {
        set: &'static str,
        got_rows: usize,
        got_cols: usize,
        rows: usize,
        cols: usize,
    },
    #[error(transparent)]
    Ir(#[from] rlx_ir::IrError),
    #[error(transparent)]
    Autodiff(#[from] rlx_autodiff::AdError),
    #[error(transparent)]
    Runtime(#[from] rlx_runtime::Error),
    #[error(transparent)]
    Dataset(#[from] rlx_io::DatasetError),
}
