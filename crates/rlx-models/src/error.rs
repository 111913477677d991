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
    /// A global batch that does not split into equal shards over the data-parallel ranks
    /// (unequal shards would weight their samples unequally in the averaged gradient).
    #[error(
        "a batch of {batch} does not split evenly over {ranks} ranks: use a batch size \
         that is a multiple of {ranks}"
    )]
    BatchNotDivisible { batch: usize, ranks: usize },
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
    /// A GGUF whose `general.architecture` no decoder builder handles.
    #[error("architecture {arch:?} is not supported (supported: {})", supported.join(", "))]
    UnsupportedArch {
        arch: String,
        supported: &'static [&'static str],
    },
    /// A tensor the architecture needs that the GGUF does not hold.
    #[error("tensor {name} is missing from the model file (the {arch} builder needs it)")]
    MissingTensor { name: String, arch: String },
    /// A tensor whose shape disagrees with the metadata (row-major, outermost first).
    #[error("tensor {name} has shape {got:?}, the metadata implies {expected:?}")]
    TensorShape {
        name: String,
        expected: Vec<usize>,
        got: Vec<usize>,
    },
    /// A tensor stored in a ggml type rlx cannot run.
    #[error(
        "tensor {name} is stored as {ty}, which rlx cannot run (plain F32/F16/BF16 or \
         Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)"
    )]
    UnsupportedTensorType { name: String, ty: String },
    /// A metadata value that makes no model (zero heads, a head size that does not divide).
    #[error("metadata {key}: {reason}")]
    BadMetadata { key: String, reason: String },
    /// A model size that does not split evenly over the tensor-parallel ranks (heads are
    /// split whole, so `n_head`, `n_head_kv` and `n_ff` must each divide by the rank count).
    #[error(
        "tensor parallelism over {ranks} ranks: {what} = {n} does not divide by {ranks} \
         (use a rank count that divides it)"
    )]
    ShardIndivisible {
        what: String,
        n: usize,
        ranks: usize,
    },
    /// A packed tensor whose per-rank column slice would cut through its quantization
    /// blocks (a row-parallel layer splits its input columns).
    #[error(
        "tensor {name} is {scheme} (blocks of {block} values): a rank's {cols} of its {total} \
         columns are not whole blocks, so it cannot be split over {ranks} ranks"
    )]
    ShardBlocks {
        name: String,
        scheme: String,
        block: usize,
        cols: usize,
        total: usize,
        ranks: usize,
    },
    /// A prompt (or a generation) that does not fit the context.
    #[error(
        "{tokens} tokens at position {pos} do not fit the context of {ctx}: shorten the \
         prompt, start over (reset), or load with a larger --ctx"
    )]
    PromptTooLong {
        tokens: usize,
        pos: usize,
        ctx: usize,
    },
    /// A Hugging Face folder's file that is missing or malformed, or a value in it that no
    /// model here can use (`key` names the field; empty when the whole file is at fault).
    #[error("{}{}: {reason}", .path.display(), if .key.is_empty() { String::new() } else { format!(": {}", .key) })]
    HfConfig {
        path: std::path::PathBuf,
        key: String,
        reason: String,
    },
    /// A `tokenizer.json` the `tokenizers` crate cannot load or that fails on a text.
    #[error("tokenizer {path}: {reason}")]
    HfTokenizer {
        path: std::path::PathBuf,
        reason: String,
    },
    #[error(transparent)]
    Safetensors(#[from] rlx_io::SafetensorsError),
    #[error(transparent)]
    Tokenizer(#[from] crate::tokenizer::TokenizerError),
    #[error(transparent)]
    Sample(#[from] crate::sample::SampleError),
    #[error(transparent)]
    Gguf(#[from] rlx_io::gguf::GgufError),
    #[error(transparent)]
    Ir(#[from] rlx_ir::IrError),
    #[error(transparent)]
    Autodiff(#[from] rlx_autodiff::AdError),
    #[error(transparent)]
    Runtime(#[from] rlx_runtime::Error),
    #[error(transparent)]
    Dataset(#[from] rlx_io::DatasetError),
}
