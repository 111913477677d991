//! Errors of building a tokenizer from GGUF metadata, encoding, decoding and chat templates.
use thiserror::Error;

#[derive(Debug, Error)]
pub enum TokenizerError {
    /// A metadata key missing or of the wrong type (the GGUF error names the key).
    #[error("tokenizer metadata: {0}")]
    Gguf(#[from] rlx_io::gguf::GgufError),
    /// `tokenizer.ggml.model` names a tokenizer family we do not implement.
    #[error("unsupported tokenizer model '{model}' (tokenizer.ggml.model): supported are 'gpt2' (byte-level BPE) and 'llama' (SentencePiece)")]
    UnsupportedModel { model: String },
    /// `tokenizer.ggml.pre` names a pre-tokenizer (regex split) we have no table entry for.
    #[error("unsupported pre-tokenizer '{pre}' (tokenizer.ggml.pre) for a BPE vocabulary")]
    UnsupportedPre { pre: String },
    /// Metadata that contradicts itself: array lengths, ids out of range, duplicate tokens.
    #[error("inconsistent tokenizer metadata at '{key}': {detail}")]
    Inconsistent { key: &'static str, detail: String },
    /// The `tokenizers` crate refused the vocabulary, merges or a regex.
    #[error("building the {what}: {detail}")]
    Build { what: &'static str, detail: String },
    /// Encoding failed inside the BPE model (should not happen for a valid vocabulary).
    #[error("encoding {text:?}: {detail}")]
    Encode { text: String, detail: String },
    /// A token id at or past the vocabulary size.
    #[error(
        "token id {id} at position {pos} is out of range: the vocabulary has {n_vocab} tokens"
    )]
    TokenOutOfRange { id: u32, pos: usize, n_vocab: usize },
    /// `add_special` asks for a BOS/EOS the vocabulary does not define.
    #[error("{key} is set, but the vocabulary has no {which} token")]
    MissingSpecial {
        key: &'static str,
        which: &'static str,
    },
    /// A Hugging Face tokenizer file that is missing, malformed or of a kind a decoder
    /// cannot use.
    #[error("{path}: {detail}")]
    HfFile {
        path: std::path::PathBuf,
        detail: String,
    },
    /// The GGUF has no `tokenizer.chat_template`.
    #[error("the model has no chat template (tokenizer.chat_template)")]
    NoChatTemplate,
    /// The chat template failed to parse or render (including its own `raise_exception`).
    #[error("chat template: {0}")]
    Template(String),
}
