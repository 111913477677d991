//! Decoder LLMs from GGUF files: llama (SmolLM2, Llama 3), qwen2 and gemma3.
//!
//! - [`LlmConfig::from_gguf`]: hyperparameters and per-architecture switches from the
//!   `<arch>.*` metadata.
//! - [`build`]: one graph over a dynamic sequence dim, and the list of its params.
//! - [`load`]: the params' values from the file (packed weights stay packed).
//! - [`TensorParallel`], [`ShardedStore`]: one rank's share of a tensor-parallel model
//!   (`BuildOptions::tensor_parallel`, weights sliced as they are read).
mod config;
mod graph;
mod shard;
mod weights;

pub use config::{Arch, LlmConfig, WeightFormat, MAX_DIM, SUPPORTED_ARCHS};
pub use graph::{build, BuildOptions, LAST, POS, POSITIONS, SEQ, TOKENS};
pub use shard::{shard_config, split_of, ShardedStore, Split, TensorParallel};
pub use weights::{
    load, load_each, load_each_shared, rope_table, ParamDecl, ParamSource, ParamValue,
    StoredTensor, TensorStore,
};
