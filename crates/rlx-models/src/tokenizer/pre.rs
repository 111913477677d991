//! The BPE pre-tokenizers that `tokenizer.ggml.pre` names: each is a list of regexes applied
//! one after another (each splits every piece the previous one left, keeping the text between
//! matches as pieces too), plus the vocabulary flags llama.cpp sets with it.
//!
//! The regexes are the ones llama.cpp's `llm_tokenizer_bpe` uses for each
//! `LLAMA_VOCAB_PRE_TYPE_*` (its "adapted" forms: `(?i:'s|…)` spelled out as `'[sS]|…`, which
//! means the same); the name → type table follows llama.cpp's loader.

/// GPT-2's split: contractions, optionally space-led letter/number/other runs, whitespace
/// not followed by a non-space.
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";

/// Llama 3's split: case-insensitive contractions, letters led by one non-letter, numbers in
/// groups of up to three digits, punctuation runs with trailing newlines, newline runs.
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Qwen2's split: Llama 3's with single digits.
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

const GPT4O: &str = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

const TEKKEN: &str = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

const SEED_CODER: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+";

const BAILING: &str = r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+";

/// What a pre-tokenizer name means for encoding and decoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreTokenizer {
    /// The name as the GGUF spells it (`"default"` when the key is absent, as llama.cpp does).
    pub name: String,
    /// Regexes applied in order.
    pub regexes: Vec<&'static str>,
    /// A word that is itself a vocabulary token is taken whole, without merging (Llama 3).
    pub ignore_merges: bool,
    /// Decoding removes spaces before `?!.,` and in contractions (HF's
    /// `clean_up_tokenization_spaces`).
    pub clean_spaces: bool,
    /// The BOS default before `tokenizer.ggml.add_bos_token` overrides it.
    pub add_bos: bool,
}

impl PreTokenizer {
    /// The table entry for `name`, or `None` for a name we do not know.
    pub fn by_name(name: &str) -> Option<PreTokenizer> {
        let mut ignore_merges = false;
        let mut clean_spaces = true;
        let mut add_bos = false;
        let regexes: Vec<&'static str> = match name {
            "default" => vec![r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", "[0-9][0-9][0-9]"],
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral"
            | "midm-2.0" | "lfm2" => {
                ignore_merges = true;
                add_bos = true;
                vec![LLAMA3]
            }
            "dbrx" | "smaug-bpe" => vec![LLAMA3],
            "falcon" => vec![r"[\p{P}\$\+<=>\^~\|`]+", GPT2, "[0-9][0-9][0-9]"],
            "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" => {
                vec![r"\p{N}", GPT2]
            }
            "command-r" | "smollm" => {
                clean_spaces = false;
                vec![r"\p{N}", GPT2]
            }
            "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es"
            | "jina-v2-de" | "a.x-4.0" | "mellum" | "modern-bert" | "mpt" | "olmo" | "jais"
            | "exaone4" => vec![GPT2],
            "trillion" | "granite-docling" => {
                clean_spaces = false;
                vec![GPT2]
            }
            "stablelm2" | "megrez" => vec![QWEN2],
            "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "hunyuan" | "solar-open" => {
                clean_spaces = false;
                vec![QWEN2]
            }
            "grok-2" => {
                clean_spaces = false;
                vec![QWEN2]
            }
            "poro-chat" => {
                clean_spaces = false;
                vec![r" ?[^(\s|.,!?…。，、।۔،)]+"]
            }
            "bloom" | "gpt3-finnish" => vec![r" ?[^(\s|.,!?…。，、।۔،)]+"],
            "glm4" | "chatglm-bpe" => vec![LLAMA3],
            "tekken" => {
                clean_spaces = false;
                ignore_merges = true;
                add_bos = true;
                vec![TEKKEN]
            }
            "gpt-4o" | "llama4" | "kanana2" | "talkie" | "minimax-m2" => {
                clean_spaces = false;
                vec![GPT4O]
            }
            "seed-coder" => {
                clean_spaces = false;
                vec![SEED_CODER]
            }
            "bailingmoe" | "bailingmoe2" | "llada-moe" => {
                clean_spaces = false;
                vec![BAILING]
            }
            _ => return None,
        };
        Some(PreTokenizer {
            name: name.to_string(),
            regexes,
            ignore_merges,
            clean_spaces,
            add_bos,
        })
    }
}
