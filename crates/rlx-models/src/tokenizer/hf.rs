//! Tokenizers of Hugging Face folders: `tokenizer.json` run by the `tokenizers` crate (its
//! normalizer, pre-tokenizer, model and post-processor, so ids are transformers' ids), with
//! `tokenizer_config.json` and `generation_config.json` for the special tokens, the chat
//! template and where generation ends. Decoding and streaming reuse the GGUF tokenizers'
//! piece tables: a byte-level vocabulary's tokens map back to bytes through GPT-2's byte
//! alphabet, a SentencePiece one's through `▁` and `<0xXX>` byte tokens.
//!
//! HF semantics differ from llama.cpp's in one place: added special tokens written in the
//! text are always parsed as those tokens (transformers has no `parse_special = false`).
use super::vocab::{Specials, TokenAttr, Vocab};
use super::{piece_for, Tokenizer, TokenizerError, TokenizerKind};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;

fn file_err(path: &Path, detail: impl std::fmt::Display) -> TokenizerError {
    TokenizerError::HfFile {
        path: path.to_path_buf(),
        detail: detail.to_string(),
    }
}

fn read(path: &Path) -> Result<Option<Value>, TokenizerError> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).map_err(|e| file_err(path, e))?;
    let v = serde_json::from_str(&text).map_err(|e| file_err(path, format!("not JSON: {e}")))?;
    Ok(Some(v))
}

/// A token given as `"text"` or `{"content": "text", …}` (tokenizer_config.json).
fn token_text(v: Option<&Value>) -> Option<&str> {
    match v? {
        Value::String(s) => Some(s),
        Value::Object(o) => o.get("content")?.as_str(),
        _ => None,
    }
}

/// Ids given as one integer or a list (`eos_token_id`).
fn ids(v: Option<&Value>) -> Vec<u32> {
    let one = |v: &Value| v.as_u64().and_then(|n| u32::try_from(n).ok());
    match v {
        Some(Value::Array(a)) => a.iter().filter_map(one).collect(),
        Some(v) => one(v).into_iter().collect(),
        None => Vec::new(),
    }
}

/// Byte-level BPE (GPT-2 alphabet) or SentencePiece-style (`▁`, byte fallback), from the
/// decoder the file declares.
fn kind_of(tj: &Value, path: &Path) -> Result<TokenizerKind, TokenizerError> {
    let dec = tj.get("decoder").filter(|d| !d.is_null());
    let ty = |d: &Value| {
        d.get("type")
            .and_then(|t| t.as_str())
            .unwrap_or("")
            .to_string()
    };
    let types: Vec<String> = match dec {
        None => Vec::new(),
        Some(d) if ty(d) == "Sequence" => (d.get("decoders").and_then(|x| x.as_array()))
            .map(|a| a.iter().map(ty).collect())
            .unwrap_or_default(),
        Some(d) => vec![ty(d)],
    };
    if types.iter().any(|t| t == "ByteLevel") {
        Ok(TokenizerKind::Bpe)
    } else if types
        .iter()
        .any(|t| t == "Metaspace" || t == "ByteFallback" || t == "Replace")
    {
        Ok(TokenizerKind::Spm)
    } else {
        Err(file_err(
            path,
            format!(
                "decoder {types:?}: a decoder LLM needs a byte-level (ByteLevel) or \
                 SentencePiece-style (Metaspace / ByteFallback) tokenizer"
            ),
        ))
    }
}

impl Tokenizer {
    /// The tokenizer of a Hugging Face folder (`tokenizer.json`, plus
    /// `tokenizer_config.json`, `config.json` and `generation_config.json` where present).
    pub fn from_hf_dir(dir: &Path) -> Result<Tokenizer, TokenizerError> {
        let path = dir.join("tokenizer.json");
        let tj = read(&path)?.ok_or_else(|| file_err(&path, "not found"))?;
        let mut hf = tokenizers::Tokenizer::from_file(&path).map_err(|e| file_err(&path, e))?;
        // A decoder prompt is never truncated or padded by the tokenizer.
        hf.with_truncation(None).map_err(|e| file_err(&path, e))?;
        hf.with_padding(None);
        let kind = kind_of(&tj, &path)?;
        let tc = read(&dir.join("tokenizer_config.json"))?.unwrap_or(Value::Null);
        let cfg = read(&dir.join("config.json"))?.unwrap_or(Value::Null);
        let gen = read(&dir.join("generation_config.json"))?.unwrap_or(Value::Null);

        // A model's embedding may have more rows than the tokenizer has tokens (padded to a
        // multiple of 8 or 64): those ids decode to nothing rather than fail.
        let model_vocab = (cfg.get("vocab_size").and_then(|v| v.as_u64()))
            .and_then(|v| usize::try_from(v).ok())
            .unwrap_or(0);
        let n = hf.get_vocab_size(true).max(model_vocab);
        if n == 0 || n > u32::MAX as usize {
            return Err(file_err(&path, format!("{n} tokens")));
        }
        let mut tokens = Vec::with_capacity(n);
        let mut token_to_id = HashMap::with_capacity(n);
        for i in 0..n {
            let t = hf
                .id_to_token(i as u32)
                .unwrap_or_else(|| format!("[EMPTY_{i}]"));
            token_to_id.entry(t.clone()).or_insert(i as u32);
            tokens.push(t);
        }
        let mut attrs: Vec<TokenAttr> = (0..n)
            .map(|i| match hf.id_to_token(i as u32) {
                Some(_) => TokenAttr::NORMAL,
                None => TokenAttr::UNUSED,
            })
            .collect();
        if kind == TokenizerKind::Spm {
            for (i, t) in tokens.iter().enumerate() {
                if t.len() == 6 && t.starts_with("<0x") && t.ends_with('>') {
                    attrs[i] = TokenAttr::BYTE;
                }
            }
        }
        for (id, added) in hf.get_added_tokens_decoder() {
            if let Some(a) = attrs.get_mut(id as usize) {
                *a = if added.special {
                    TokenAttr::CONTROL
                } else {
                    TokenAttr::USER_DEFINED
                };
            }
        }
        let by_text = |key: &str| token_text(tc.get(key)).and_then(|t| token_to_id.get(t).copied());
        let first = |v: Vec<u32>| v.first().copied();
        let specials = Specials {
            bos: by_text("bos_token").or_else(|| first(ids(cfg.get("bos_token_id")))),
            eos: by_text("eos_token").or_else(|| first(ids(cfg.get("eos_token_id")))),
            unk: by_text("unk_token"),
            pad: by_text("pad_token"),
            ..Specials::default()
        };
        // Generation ends where transformers' generate() ends it: generation_config's
        // eos_token_id (one or a list), else config.json's, plus the tokenizer's EOS.
        let mut eog: BTreeSet<u32> = ids(gen.get("eos_token_id")).into_iter().collect();
        if eog.is_empty() {
            eog.extend(ids(cfg.get("eos_token_id")));
        }
        eog.extend(specials.eos);
        eog.retain(|&i| (i as usize) < n);

        // What the post-processor adds around a text, found by encoding one.
        let enc = |add: bool| -> Result<Vec<u32>, TokenizerError> {
            Ok(hf
                .encode("a", add)
                .map_err(|e| file_err(&path, e))?
                .get_ids()
                .to_vec())
        };
        let (with, without) = (enc(true)?, enc(false)?);
        let add_bos = specials.bos.is_some()
            && with.first() == specials.bos.as_ref()
            && without.first() != specials.bos.as_ref();
        let add_eos = specials.eos.is_some()
            && with.last() == specials.eos.as_ref()
            && without.last() != specials.eos.as_ref();
        let chat_template = match tc.get("chat_template") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Array(a)) => {
                let named = |n: &str| {
                    a.iter()
                        .find(|t| t.get("name").and_then(|x| x.as_str()) == Some(n))
                };
                (named("default").or(a.first()))
                    .and_then(|t| t.get("template"))
                    .and_then(|t| t.as_str())
                    .map(str::to_string)
            }
            _ => None,
        };
        let clean_spaces = tc
            .get("clean_up_tokenization_spaces")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        let mut byte_tokens = Box::new([None; 256]);
        for b in 0..=255u8 {
            byte_tokens[b as usize] = token_to_id.get(&format!("<0x{b:02X}>")).copied();
        }
        let pieces = (0..n)
            .map(|i| piece_for(kind, &tokens[i], attrs[i]))
            .collect();
        let vocab = Vocab {
            scores: vec![0.0; n],
            tokens,
            attrs,
            token_to_id,
            specials,
            eog,
        };
        Ok(Tokenizer {
            kind,
            pre: None,
            bpe: None,
            vocab,
            pieces,
            special_cache: Vec::new(),
            byte_tokens,
            add_bos,
            add_eos,
            add_space_prefix: kind == TokenizerKind::Spm,
            clean_spaces,
            chat_template,
            hf: Some(Box::new(hf)),
        })
    }

    /// `tokenizer.json`'s encoding (special tokens in the text always parsed).
    pub(crate) fn encode_hf(
        hf: &tokenizers::Tokenizer,
        text: &str,
        add_special: bool,
    ) -> Result<Vec<u32>, TokenizerError> {
        let e = hf
            .encode(text, add_special)
            .map_err(|e| TokenizerError::Encode {
                text: text.chars().take(64).collect(),
                detail: e.to_string(),
            })?;
        Ok(e.get_ids().to_vec())
    }
}
