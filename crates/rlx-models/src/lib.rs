//! rlx-models: model builders and training on top of the runtime.
//!
//! - [`cnn::CnnConfig`]: the MNIST-style CNN (conv-relu-pool ×2, linear) for 8×8 or 28×28
//!   single-channel images.
//! - [`encoder::EncoderConfig`]: a BERT-style encoder (all-MiniLM-L6-v2's architecture).
//! - [`hf`]: Hugging Face folders (`config.json`, safetensors): the `BertModel` family and
//!   sentence-transformers' pooling head.
//! - [`embed::Embedder`]: sentence embeddings from a sentence-transformers folder, equal to
//!   `SentenceTransformer.encode`.
//! - [`llm`]: llama / qwen2 / gemma3 decoders from GGUF (config, graph, weights).
//! - [`hf`]: Hugging Face folders (config.json + safetensors): Llama / Qwen2 decoders.
//! - [`generate_tp::ShardedDecoder`]: a decoder split over a mesh's ranks by tensor
//!   parallelism (`LoadOptions::devices`, `rlx generate --devices cpu,cpu`).
//! - [`train::Trainer`]: one compiled graph per training step (forward, backward and the
//!   optimizer update, with weights and optimizer state updated in place by the runtime),
//!   seeded Kaiming-uniform init, evaluation through a forward-only graph that shares the
//!   trained values, and `fit` with a per-epoch progress bar.
//! - [`train_dp`]: the same trainer data-parallel over a mesh's ranks
//!   ([`Trainer::data_parallel`]): a shard of each batch per rank, gradients all-reduced in
//!   DDP-style buckets inside the step graph.
//! - [`sample::Sampler`]: llama.cpp's sampler chain (repeat penalty, top-k, top-p, min-p,
//!   temperature) over one step's logits, seeded; [`sample::StopMatcher`] cuts streamed text
//!   at stop strings.
//! - [`tokenizer::Tokenizer`]: BPE and SentencePiece tokenizers and chat templates from GGUF
//!   metadata, token-exact with llama.cpp.
//! - [`var_builder::VarBuilder`]: path-prefixed param declaration (`vb.pp("fc").param("weight", …)`),
//!   so each param's name is written once.
pub mod cnn;
pub mod embed;
pub mod encoder;
mod error;
pub mod generate;
pub mod generate_tp;
pub mod hf;
pub mod llm;
pub mod sample;
pub mod tokenizer;
pub mod train;
pub mod train_dp;
pub mod var_builder;

pub use cnn::CnnConfig;
pub use embed::{EmbedOptions, Embedder};
pub use encoder::EncoderConfig;
pub use error::ModelError;
pub use generate::{GenerateOptions, GenerateStats, Generation, Llm, LoadOptions, StopReason};
pub use rlx_autodiff::Optimizer;
pub use tokenizer::{Tokenizer, TokenizerError};
pub use train::{EpochReport, FitConfig, GraphBuilder, LrSchedule, ParamSpec, Trainer};
pub use var_builder::VarBuilder;
