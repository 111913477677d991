//! Hugging Face model folders: `config.json`, `model.safetensors` (or shards with
//! `model.safetensors.index.json`), `tokenizer.json` and the other JSON configs.
//!
//! - [`json`]: typed getters over a folder's JSON files, errors naming the file and key.
//! - [`bert`]: the `BertModel` family (BERT, MiniLM) over dynamic batch and sequence.
//! - [`pooling`]: sentence-transformers' pooling head (CLS / mean / max / mean-sqrt-len).
//! - [`decoder`]: `LlamaForCausalLM` / `Qwen2ForCausalLM` as [`crate::llm::LlmConfig`] plus
//!   a tensor store that serves the safetensors under their GGUF names, so one decoder
//!   graph, KV cache, decode step and sampler serve GGUF files and HF folders alike.
pub mod bert;
pub mod decoder;
pub mod json;
pub mod pooling;

pub use bert::{BertConfig, BertHead};
pub use decoder::{hf_decoder, HfStore, HF_DECODER_ARCHS};
pub use json::{read_json, JsonFile};
pub use pooling::Pooling;

use crate::ModelError;
use std::path::Path;

/// `config.json`'s first `architectures` entry (the class transformers would build).
pub fn architecture(dir: &Path) -> Result<String, ModelError> {
    let cfg = read_json(&dir.join("config.json"))?;
    let arch = cfg.get("architectures").and_then(|a| a.as_array());
    match arch.and_then(|a| a.first()).and_then(|a| a.as_str()) {
        Some(a) => Ok(a.to_string()),
        None => Err(cfg.bad("architectures", "a non-empty list of class names")),
    }
}

/// Whether `path` looks like a Hugging Face model folder (it has a `config.json`).
pub fn is_hf_folder(path: &Path) -> bool {
    path.is_dir() && path.join("config.json").is_file()
}
