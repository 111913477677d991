//! The vocabulary as llama.cpp's loader reads it from GGUF metadata: token texts, scores,
//! attributes from `token_type`, the special ids with llama.cpp's defaults and range checks,
//! and its by-text fix-ups (end-of-turn and FIM tokens forced to CONTROL, the
//! end-of-generation set), so that special-token parsing and `is_eog` agree with it.
use super::TokenizerError;
use rlx_io::gguf::{Array, Metadata, Value};
use std::collections::{BTreeSet, HashMap};

/// Token attributes (llama.cpp's `llama_token_attr` bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenAttr(pub u32);

impl TokenAttr {
    pub const UNDEFINED: TokenAttr = TokenAttr(0);
    pub const UNKNOWN: TokenAttr = TokenAttr(1 << 0);
    pub const UNUSED: TokenAttr = TokenAttr(1 << 1);
    pub const NORMAL: TokenAttr = TokenAttr(1 << 2);
    pub const CONTROL: TokenAttr = TokenAttr(1 << 3);
    pub const USER_DEFINED: TokenAttr = TokenAttr(1 << 4);
    pub const BYTE: TokenAttr = TokenAttr(1 << 5);

    /// Whether any bit of `other` is set.
    pub fn any(self, other: TokenAttr) -> bool {
        self.0 & other.0 != 0
    }

    fn or(self, other: TokenAttr) -> TokenAttr {
        TokenAttr(self.0 | other.0)
    }

    /// GGUF `tokenizer.ggml.token_type` values (1 normal … 6 byte).
    fn from_type(t: i32) -> TokenAttr {
        match t {
            1 => TokenAttr::NORMAL,
            2 => TokenAttr::UNKNOWN,
            3 => TokenAttr::CONTROL,
            4 => TokenAttr::USER_DEFINED,
            5 => TokenAttr::UNUSED,
            6 => TokenAttr::BYTE,
            _ => TokenAttr::UNDEFINED,
        }
    }
}

/// Special token ids; `None` where the vocabulary has none.
#[derive(Debug, Clone, Default)]
pub(crate) struct Specials {
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub eom: Option<u32>,
    pub unk: Option<u32>,
    pub pad: Option<u32>,
    pub fim: [Option<u32>; 6],
}

pub(crate) struct Vocab {
    pub tokens: Vec<String>,
    pub scores: Vec<f32>,
    pub attrs: Vec<TokenAttr>,
    pub token_to_id: HashMap<String, u32>,
    pub specials: Specials,
    pub eog: BTreeSet<u32>,
}

const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];

const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// FIM token texts: prefix, suffix, middle, pad, repo, file separator (llama.cpp's lists).
const FIM_TEXTS: [&[&str]; 6] = [
    &[
        "<|fim_prefix|>",
        "<fim-prefix>",
        "<fim_prefix>",
        "<｜fim▁begin｜>",
        "<PRE>",
        "▁<PRE>",
        "<|code_prefix|>",
        "<|prefix|>",
    ],
    &[
        "<|fim_suffix|>",
        "<fim-suffix>",
        "<fim_suffix>",
        "<｜fim▁hole｜>",
        "<SUF>",
        "▁<SUF>",
        "<|code_suffix|>",
        "<|suffix|>",
    ],
    &[
        "<|fim_middle|>",
        "<fim-middle>",
        "<fim_middle>",
        "<｜fim▁end｜>",
        "<MID>",
        "▁<MID>",
        "<|code_middle|>",
        "<|middle|>",
    ],
    &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"],
    &[
        "<|fim_repo|>",
        "<|repo_name|>",
        "<fim-repo>",
        "<REPO>",
        "<reponame>",
    ],
    &["<|file_sep|>"],
];

const FIM_KEYS: [&str; 6] = [
    "tokenizer.ggml.fim_pre_token_id",
    "tokenizer.ggml.fim_suf_token_id",
    "tokenizer.ggml.fim_mid_token_id",
    "tokenizer.ggml.fim_pad_token_id",
    "tokenizer.ggml.fim_rep_token_id",
    "tokenizer.ggml.fim_sep_token_id",
];

/// Optional numeric array as f32 (`scores` is f32 in most files, i32 in some).
fn scores(md: &Metadata, n: usize) -> Result<Vec<f32>, TokenizerError> {
    const KEY: &str = "tokenizer.ggml.scores";
    let v: Vec<f32> = match md.get(KEY) {
        None => return Ok(vec![0.0; n]),
        Some(Value::Array(Array::F32(x))) => x.clone(),
        Some(Value::Array(Array::I32(x))) => x.iter().map(|&i| i as f32).collect(),
        Some(_) => {
            return Err(TokenizerError::Inconsistent {
                key: KEY,
                detail: "expected array[f32] or array[i32]".into(),
            })
        }
    };
    if v.len() < n {
        return Err(TokenizerError::Inconsistent {
            key: KEY,
            detail: format!("{} scores for {n} tokens", v.len()),
        });
    }
    Ok(v)
}

fn attrs(md: &Metadata, n: usize) -> Result<Vec<TokenAttr>, TokenizerError> {
    const KEY: &str = "tokenizer.ggml.token_type";
    if md.get(KEY).is_none() {
        return Ok(vec![TokenAttr::NORMAL; n]);
    }
    let t = md.get_i32_array(KEY)?;
    if t.len() < n {
        return Err(TokenizerError::Inconsistent {
            key: KEY,
            detail: format!("{} token types for {n} tokens", t.len()),
        });
    }
    Ok(t[..n].iter().map(|&x| TokenAttr::from_type(x)).collect())
}

/// An optional id key: absent keeps `default`; out of range keeps `default` too (llama.cpp
/// warns and does the same); a default out of range is no token.
fn special_id(
    md: &Metadata,
    key: &str,
    default: Option<u32>,
    n: usize,
) -> Result<Option<u32>, TokenizerError> {
    let default = default.filter(|&d| (d as usize) < n);
    if md.get(key).is_none() {
        return Ok(default);
    }
    let id = md.get_usize(key)?;
    Ok(if id < n { Some(id as u32) } else { default })
}

impl Vocab {
    /// `defaults` are the family's (bos, eos, unk) before the metadata overrides them.
    pub(crate) fn load(
        md: &Metadata,
        defaults: (Option<u32>, Option<u32>, Option<u32>),
    ) -> Result<Vocab, TokenizerError> {
        let raw = md.get_str_array("tokenizer.ggml.tokens")?;
        let n = raw.len();
        if n == 0 || n > u32::MAX as usize {
            return Err(TokenizerError::Inconsistent {
                key: "tokenizer.ggml.tokens",
                detail: format!("{n} tokens"),
            });
        }
        let scores = scores(md, n)?;
        let mut attrs = attrs(md, n)?;
        let mut tokens = Vec::with_capacity(n);
        let mut token_to_id = HashMap::with_capacity(n);
        for (i, t) in raw.into_iter().enumerate() {
            // llama.cpp reads each text through a C string, so a token ends at its first
            // NUL (an SPM vocabulary's raw "\0" piece is empty to it, and the NUL character
            // then takes the byte-fallback token <0x00>).
            let t = t.split('\0').next().unwrap_or_default();
            let t = if t.is_empty() {
                format!("[EMPTY_{i}]")
            } else {
                t.to_string()
            };
            if let Some(prev) = token_to_id.insert(t.clone(), i as u32) {
                return Err(TokenizerError::Inconsistent {
                    key: "tokenizer.ggml.tokens",
                    detail: format!("duplicate token {t:?} at ids {prev} and {i}"),
                });
            }
            tokens.push(t);
        }
        let mut s = Specials {
            bos: special_id(md, "tokenizer.ggml.bos_token_id", defaults.0, n)?,
            eos: special_id(md, "tokenizer.ggml.eos_token_id", defaults.1, n)?,
            eot: special_id(md, "tokenizer.ggml.eot_token_id", None, n)?,
            eom: special_id(md, "tokenizer.ggml.eom_token_id", None, n)?,
            unk: special_id(md, "tokenizer.ggml.unknown_token_id", defaults.2, n)?,
            pad: special_id(md, "tokenizer.ggml.padding_token_id", None, n)?,
            fim: [None; 6],
        };
        for (k, key) in FIM_KEYS.iter().enumerate() {
            s.fim[k] = special_id(md, key, None, n)?;
        }

        // By-text detection where the ids are not in the metadata, in id order (llama.cpp
        // walks a hash map, so where two texts qualify its pick is arbitrary; ours is the
        // lowest id). Each found token becomes CONTROL.
        let find = |texts: &[&str], attrs: &mut Vec<TokenAttr>| -> Option<u32> {
            let id = (0..n).find(|&i| texts.contains(&tokens[i].as_str()))?;
            attrs[id] = attrs[id].or(TokenAttr::CONTROL);
            Some(id as u32)
        };
        if s.eot.is_none() {
            s.eot = find(EOT_TEXTS, &mut attrs);
        }
        if s.eom.is_none() {
            s.eom = find(&["<|eom_id|>"], &mut attrs);
        }
        for k in 0..6 {
            if s.fim[k].is_none() {
                s.fim[k] = find(FIM_TEXTS[k], &mut attrs);
            }
        }
        // Control tokens named "unused" are unused.
        for i in 0..n {
            if attrs[i].any(TokenAttr::CONTROL) && tokens[i].contains("unused") {
                attrs[i] = attrs[i].or(TokenAttr::UNUSED);
            }
        }
        let mut eog: BTreeSet<u32> = s.fim[3..].iter().flatten().copied().collect();
        for i in 0..n {
            if EOG_TEXTS.contains(&tokens[i].as_str()) {
                eog.insert(i as u32);
                attrs[i] = attrs[i].or(TokenAttr::CONTROL);
            }
        }
        // gpt-oss's channel markers are always rendered.
        for t in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
            if let Some(&id) = token_to_id.get(t) {
                attrs[id as usize] = TokenAttr::USER_DEFINED;
            }
        }
        eog.extend([s.eos, s.eot, s.eom].into_iter().flatten());
        // o200k_harmony / solar-open: "<|end|>" ends a message there, not the generation.
        let has = |t: &str| eog.iter().any(|&id| tokens[id as usize] == t);
        let call = has("<|call|>") || has("<|calls|>");
        if call && has("<|end|>") && (has("<|return|>") || has("<|flush|>")) {
            if let Some(&end) = token_to_id.get("<|end|>") {
                eog.remove(&end);
                attrs[end as usize] = TokenAttr::USER_DEFINED;
            }
        }
        Ok(Vocab {
            tokens,
            scores,
            attrs,
            token_to_id,
            specials: s,
            eog,
        })
    }
}
