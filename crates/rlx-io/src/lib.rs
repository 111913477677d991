//! rlx-io: getting data into rlx. `datasets` reads IDX files (MNIST / Fashion-MNIST, plain
//! or gzip) and carries an embedded default, scikit-learn's 8×8 handwritten digits, so
//! training demos need no download. `gguf` reads llama.cpp's GGUF model files (v2/v3):
//! metadata, the tensor table and memory-mapped tensor data, every offset checked.
//! `safetensors` maps Hugging Face weights (one file or an index of shards). `npy` reads and
//! writes NumPy arrays.
pub mod datasets;
pub mod gguf;
pub mod npy;
pub mod safetensors;

pub use datasets::{Batch, Batches, Dataset, DatasetError};
pub use gguf::{Gguf, GgufError};
pub use npy::{npy_bytes, parse_npy, read_npy, write_npy, NpyError};
pub use safetensors::{SafeTensors, SafetensorsError, TensorRef};

/// Where fetched model files live: `$RLX_CACHE`, else `~/.cache/rlx` (outside any checkout;
/// `scripts/fetch_models.sh` fills it). `None` when neither can be named.
pub fn model_cache() -> Option<std::path::PathBuf> {
    use rlx_ir::env::{text, Switch};
    text(Switch::ModelCache)
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cache/rlx")))
}
