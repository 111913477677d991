//! Tokenizers built from a GGUF file's `tokenizer.*` metadata, encoding and decoding as
//! llama.cpp's `llama_tokenize` / `llama_detokenize` do, so token ids match it exactly.
//!
//! - `tokenizer.ggml.model == "gpt2"`: byte-level BPE ([`bpe`], on the `tokenizers` crate)
//!   with the regex pre-tokenizer that `tokenizer.ggml.pre` names ([`pre`]).
//! - `tokenizer.ggml.model == "llama"`: SentencePiece BPE by scores with `<0xXX>` byte
//!   fallback ([`spm`]).
//! - Special tokens (CONTROL, USER_DEFINED, UNKNOWN) are cut out of the text before the model
//!   sees it, longest first: CONTROL/UNKNOWN ones only when `parse_special` is on,
//!   USER_DEFINED ones always (llama.cpp's `tokenizer_st_partition`).
//! - [`StreamDecoder`] releases text only at UTF-8 character boundaries.
//! - [`Tokenizer::render_chat`] renders `tokenizer.chat_template` ([`chat`]).
mod bpe;
mod chat;
mod error;
mod hf;
mod pre;
mod spm;
mod stream;
mod vocab;

pub use chat::Message;
pub use error::TokenizerError;
pub use pre::PreTokenizer;
pub use stream::StreamDecoder;
pub use vocab::TokenAttr;

use bpe::BpeModel;
use rlx_io::gguf::Gguf;
use std::collections::BTreeSet;
use vocab::Vocab;

/// The tokenizer family (`tokenizer.ggml.model`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizerKind {
    /// `"gpt2"`: byte-level BPE with merges.
    Bpe,
    /// `"llama"`: SentencePiece BPE by scores.
    Spm,
}

/// A piece of the input after special-token partitioning.
enum Fragment {
    Text(usize, usize),
    Token(u32),
}

pub struct Tokenizer {
    kind: TokenizerKind,
    pre: Option<PreTokenizer>,
    bpe: Option<BpeModel>,
    vocab: Vocab,
    /// Each token's bytes as llama.cpp's `token_to_piece(special = true)` gives them.
    pieces: Vec<Vec<u8>>,
    /// CONTROL / USER_DEFINED / UNKNOWN ids, longest text first (ties by id).
    special_cache: Vec<u32>,
    /// SentencePiece byte fallback: the token for each byte.
    byte_tokens: Box<[Option<u32>; 256]>,
    add_bos: bool,
    add_eos: bool,
    pub(crate) add_space_prefix: bool,
    clean_spaces: bool,
    chat_template: Option<String>,
    /// A Hugging Face `tokenizer.json`, which then does all the encoding.
    hf: Option<Box<tokenizers::Tokenizer>>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("kind", &self.kind)
            .field("pre", &self.pre.as_ref().map(|p| &p.name))
            .field("n_vocab", &self.n_vocab())
            .field("bos", &self.bos_id())
            .field("eos", &self.eos_id())
            .field("tokenizer_json", &self.hf.is_some())
            .finish()
    }
}

fn opt_bool(md: &rlx_io::gguf::Metadata, key: &str) -> Result<Option<bool>, TokenizerError> {
    match md.get(key) {
        None => Ok(None),
        Some(_) => Ok(Some(md.get_bool(key)?)),
    }
}

impl Tokenizer {
    /// Builds the tokenizer that the GGUF's metadata describes.
    pub fn from_gguf(gguf: &Gguf) -> Result<Tokenizer, TokenizerError> {
        let md = gguf.metadata();
        let model = md.get_str("tokenizer.ggml.model")?;
        let (kind, defaults) = match model {
            "gpt2" => (TokenizerKind::Bpe, (Some(11), Some(11), None)),
            "llama" => (TokenizerKind::Spm, (Some(1), Some(2), Some(0))),
            other => {
                return Err(TokenizerError::UnsupportedModel {
                    model: other.to_string(),
                })
            }
        };
        let vocab = Vocab::load(md, defaults)?;
        let (mut add_bos, mut add_space_prefix, clean_spaces, pre, bpe) = match kind {
            TokenizerKind::Bpe => {
                let name = match md.get("tokenizer.ggml.pre") {
                    None => "default",
                    Some(_) => md.get_str("tokenizer.ggml.pre")?,
                };
                let pre =
                    PreTokenizer::by_name(name).ok_or_else(|| TokenizerError::UnsupportedPre {
                        pre: name.to_string(),
                    })?;
                let merges = md
                    .get_str_array("tokenizer.ggml.merges")?
                    .into_iter()
                    .filter_map(split_merge)
                    .collect();
                let bpe = BpeModel::new(&pre, &vocab.token_to_id, merges)?;
                (pre.add_bos, false, pre.clean_spaces, Some(pre), Some(bpe))
            }
            TokenizerKind::Spm => (true, true, false, None, None),
        };
        let mut add_eos = false;
        if let Some(v) = opt_bool(md, "tokenizer.ggml.add_space_prefix")? {
            add_space_prefix = v;
        }
        if let Some(v) = opt_bool(md, "tokenizer.ggml.add_bos_token")? {
            add_bos = v;
        }
        if let Some(v) = opt_bool(md, "tokenizer.ggml.add_eos_token")? {
            add_eos = v;
        }
        if add_bos && vocab.specials.bos.is_none() {
            return Err(TokenizerError::MissingSpecial {
                key: "tokenizer.ggml.add_bos_token",
                which: "BOS",
            });
        }
        if add_eos && vocab.specials.eos.is_none() {
            return Err(TokenizerError::MissingSpecial {
                key: "tokenizer.ggml.add_eos_token",
                which: "EOS",
            });
        }
        let chat_template = match md.get("tokenizer.chat_template") {
            None => None,
            Some(_) => Some(md.get_str("tokenizer.chat_template")?.to_string()),
        };

        let mut special_cache: Vec<u32> = (0..vocab.tokens.len() as u32)
            .filter(|&i| {
                vocab.attrs[i as usize].any(TokenAttr(
                    TokenAttr::CONTROL.0 | TokenAttr::USER_DEFINED.0 | TokenAttr::UNKNOWN.0,
                ))
            })
            .collect();
        special_cache.sort_by_key(|&i| std::cmp::Reverse(vocab.tokens[i as usize].len()));

        let mut byte_tokens = Box::new([None; 256]);
        for b in 0..=255u8 {
            let hex = format!("<0x{b:02X}>");
            byte_tokens[b as usize] = vocab.token_to_id.get(&hex).copied().or_else(|| {
                std::str::from_utf8(&[b])
                    .ok()
                    .and_then(|s| vocab.token_to_id.get(s).copied())
            });
        }
        let pieces = (0..vocab.tokens.len())
            .map(|i| piece_for(kind, &vocab.tokens[i], vocab.attrs[i]))
            .collect();
        Ok(Tokenizer {
            kind,
            pre,
            bpe,
            vocab,
            pieces,
            special_cache,
            byte_tokens,
            add_bos,
            add_eos,
            add_space_prefix,
            clean_spaces,
            chat_template,
            hf: None,
        })
    }

    /// Text → token ids. `add_special` adds BOS/EOS where the vocabulary asks for them;
    /// `parse_special` turns CONTROL token texts (`<|im_start|>`) in `text` into their ids
    /// (otherwise they are tokenized as the plain text they spell).
    pub fn encode(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
    ) -> Result<Vec<u32>, TokenizerError> {
        if let Some(hf) = &self.hf {
            return Tokenizer::encode_hf(hf, text, add_special);
        }
        let frags = self.partition(text, parse_special);
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.add_bos {
            out.extend(self.vocab.specials.bos);
        }
        match self.kind {
            TokenizerKind::Bpe => {
                let bpe = self.bpe.as_ref().expect("BPE tokenizers hold a BPE model");
                for f in frags {
                    match f {
                        Fragment::Text(s, e) => bpe.encode(&text[s..e], &mut out)?,
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
            TokenizerKind::Spm => {
                let spm = spm::SpmModel {
                    token_to_id: &self.vocab.token_to_id,
                    scores: &self.vocab.scores,
                    byte_tokens: &self.byte_tokens,
                };
                // A space goes before the first text and before text after a special token.
                let mut prev_special = true;
                for f in frags {
                    match f {
                        Fragment::Text(s, e) => {
                            let mut t = String::with_capacity(e - s + 3);
                            if self.add_space_prefix && prev_special {
                                t.push(' ');
                            }
                            t.push_str(&text[s..e]);
                            spm.encode(&t.replace(' ', "\u{2581}"), &mut out);
                            prev_special = false;
                        }
                        Fragment::Token(id) => {
                            out.push(id);
                            prev_special = true;
                        }
                    }
                }
            }
        }
        if add_special && self.add_eos {
            out.extend(self.vocab.specials.eos);
        }
        Ok(out)
    }

    /// Cuts special-token texts out of `text`: one token at a time, longest first, every
    /// occurrence in every remaining text piece.
    fn partition(&self, text: &str, parse_special: bool) -> Vec<Fragment> {
        let mut frags = Vec::new();
        if text.is_empty() {
            return frags;
        }
        frags.push(Fragment::Text(0, text.len()));
        let skip = TokenAttr(TokenAttr::CONTROL.0 | TokenAttr::UNKNOWN.0);
        for &id in &self.special_cache {
            if !parse_special && self.vocab.attrs[id as usize].any(skip) {
                continue;
            }
            let pat = self.vocab.tokens[id as usize].as_str();
            if !text.contains(pat) {
                continue;
            }
            let mut next = Vec::with_capacity(frags.len() + 2);
            for f in frags {
                let Fragment::Text(s, e) = f else {
                    next.push(f);
                    continue;
                };
                let mut cur = s;
                while let Some(p) = text[cur..e].find(pat) {
                    if p > 0 {
                        next.push(Fragment::Text(cur, cur + p));
                    }
                    next.push(Fragment::Token(id));
                    cur += p + pat.len();
                }
                if cur < e {
                    next.push(Fragment::Text(cur, e));
                }
            }
            frags = next;
        }
        frags
    }

    /// The pieces the pre-tokenizer regexes cut plain `text` into (BPE); SentencePiece has
    /// no pre-tokenizer, so its one piece is the text.
    pub fn pre_tokenize(&self, text: &str) -> Result<Vec<String>, TokenizerError> {
        match &self.bpe {
            Some(b) => b.words(text),
            None => Ok(vec![text.to_string()]),
        }
    }

    /// Token ids → text, special tokens rendered as their text (what the ids stand for;
    /// the inverse of `encode(text, false, true)`).
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        self.decode_with(ids, true)
    }

    /// Token ids → text as llama.cpp's `llama_detokenize(remove_special = false,
    /// unparse_special = special)`: CONTROL tokens are empty unless `special`, the
    /// SentencePiece prefix space is dropped, and vocabularies that ask for it get HF's
    /// `clean_up_tokenization_spaces`. Bytes that are not UTF-8 become U+FFFD.
    pub fn decode_with(&self, ids: &[u32], special: bool) -> Result<String, TokenizerError> {
        let mut bytes = Vec::new();
        for (pos, &id) in ids.iter().enumerate() {
            let lstrip = usize::from(pos == 0 && self.add_space_prefix);
            bytes.extend_from_slice(self.piece_bytes_at(id, pos, lstrip, special)?);
        }
        if self.clean_spaces {
            bytes = clean_spaces(&bytes);
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// One token's bytes (may be part of a UTF-8 character), as llama.cpp's
    /// `token_to_piece(id, lstrip = 0, special)`.
    pub fn token_to_piece(&self, id: u32, special: bool) -> Result<&[u8], TokenizerError> {
        self.piece_bytes_at(id, 0, 0, special)
    }

    pub(crate) fn piece_bytes(
        &self,
        id: u32,
        lstrip: usize,
        special: bool,
    ) -> Result<&[u8], TokenizerError> {
        self.piece_bytes_at(id, 0, lstrip, special)
    }

    fn piece_bytes_at(
        &self,
        id: u32,
        pos: usize,
        lstrip: usize,
        special: bool,
    ) -> Result<&[u8], TokenizerError> {
        let i = self.check(id, pos)?;
        if !special
            && self.vocab.attrs[i].any(TokenAttr(TokenAttr::UNKNOWN.0 | TokenAttr::CONTROL.0))
        {
            return Ok(&[]);
        }
        let p = &self.pieces[i][..];
        let n = p.iter().take(lstrip).take_while(|&&b| b == b' ').count();
        Ok(&p[n..])
    }

    fn check(&self, id: u32, pos: usize) -> Result<usize, TokenizerError> {
        let n_vocab = self.n_vocab();
        if (id as usize) < n_vocab {
            Ok(id as usize)
        } else {
            Err(TokenizerError::TokenOutOfRange { id, pos, n_vocab })
        }
    }

    /// A decoder for generated tokens that never splits a UTF-8 character; `special`
    /// renders CONTROL tokens (llama.cpp's `common_token_to_piece(…, special)`).
    pub fn stream_decoder(&self, special: bool) -> StreamDecoder<'_> {
        StreamDecoder::new(self, special)
    }

    /// Renders `tokenizer.chat_template` for `messages` (HF `apply_chat_template` semantics).
    pub fn render_chat(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String, TokenizerError> {
        let t = self
            .chat_template
            .as_deref()
            .ok_or(TokenizerError::NoChatTemplate)?;
        let text = |id: Option<u32>| id.map_or("", |i| self.vocab.tokens[i as usize].as_str());
        chat::render(
            t,
            messages,
            add_generation_prompt,
            text(self.bos_id()),
            text(self.eos_id()),
        )
    }

    pub fn kind(&self) -> TokenizerKind {
        self.kind
    }
    /// The BPE pre-tokenizer (`None` for SentencePiece).
    pub fn pre_tokenizer(&self) -> Option<&PreTokenizer> {
        self.pre.as_ref()
    }
    pub fn n_vocab(&self) -> usize {
        self.vocab.tokens.len()
    }
    pub fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }
    pub fn bos_id(&self) -> Option<u32> {
        self.vocab.specials.bos
    }
    pub fn eos_id(&self) -> Option<u32> {
        self.vocab.specials.eos
    }
    /// The end-of-turn token (from metadata, else found by its text).
    pub fn eot_id(&self) -> Option<u32> {
        self.vocab.specials.eot
    }
    pub fn unk_id(&self) -> Option<u32> {
        self.vocab.specials.unk
    }
    pub fn pad_id(&self) -> Option<u32> {
        self.vocab.specials.pad
    }
    /// Every id that ends generation (EOS, EOT, EOM, FIM pad/repo/sep and the tokens
    /// llama.cpp recognises by text), ascending.
    pub fn eos_ids(&self) -> Vec<u32> {
        self.vocab.eog.iter().copied().collect()
    }
    pub fn is_eog(&self, id: u32) -> bool {
        self.vocab.eog.contains(&id)
    }
    /// Whether `encode(…, add_special = true, …)` adds BOS / EOS.
    pub fn adds_bos(&self) -> bool {
        self.add_bos
    }
    pub fn adds_eos(&self) -> bool {
        self.add_eos
    }
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.vocab.tokens.get(id as usize).map(String::as_str)
    }
    pub fn token_attr(&self, id: u32) -> Option<TokenAttr> {
        self.vocab.attrs.get(id as usize).copied()
    }
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab.token_to_id.get(text).copied()
    }
    /// Merges left out of the BPE model: repeats of an earlier pair, and those whose part or
    /// result is not a token.
    pub fn dropped_merges(&self) -> usize {
        self.bpe.as_ref().map_or(0, |b| b.dropped_merges)
    }
    /// The end-of-generation set as a sorted set.
    pub fn eog_set(&self) -> &BTreeSet<u32> {
        &self.vocab.eog
    }
}

/// `"a b"` → `("a", "b")`, split at the first space after the first byte (a merge's left
/// part may itself be a space-like char); a merge with no such space is meaningless, skipped.
fn split_merge(m: &str) -> Option<(String, String)> {
    let p = m.as_bytes().iter().skip(1).position(|&b| b == b' ')? + 1;
    Some((m[..p].to_string(), m[p + 1..].to_string()))
}

/// A token's bytes when rendered with `special = true`.
fn piece_for(kind: TokenizerKind, text: &str, attr: TokenAttr) -> Vec<u8> {
    let verbatim =
        TokenAttr(TokenAttr::UNKNOWN.0 | TokenAttr::CONTROL.0 | TokenAttr::USER_DEFINED.0);
    if attr.any(verbatim) {
        return text.as_bytes().to_vec();
    }
    if attr.any(TokenAttr::NORMAL) {
        return match kind {
            TokenizerKind::Bpe => bpe::byte_level_decode(text),
            TokenizerKind::Spm => text.replace('\u{2581}', " ").into_bytes(),
        };
    }
    if attr.any(TokenAttr::BYTE) {
        // "<0xXX>"
        return text
            .get(3..5)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .map_or_else(Vec::new, |b| vec![b]);
    }
    Vec::new()
}

/// llama.cpp's three clean-up passes: drop the space before `?!.,`, around a lone `'`, and
/// before `'s 'm 're 've`.
fn clean_spaces(t: &[u8]) -> Vec<u8> {
    if t.is_empty() {
        return Vec::new();
    }
    let mut a = vec![t[0]];
    for i in 1..t.len() {
        if t[i - 1] == b' ' && matches!(t[i], b'?' | b'!' | b'.' | b',') {
            a.pop();
        }
        a.push(t[i]);
    }
    // A lone apostrophe between spaces loses both; the skipped space reads as NUL after.
    let mut src = a.clone();
    let mut b = vec![src[0]];
    let mut i = 1;
    while i < src.len() {
        let x = src[i];
        if x == b'\'' && i + 1 < src.len() && src[i - 1] == b' ' && src[i + 1] == b' ' {
            b.pop();
            i += 1;
            src[i] = 0;
        }
        b.push(x);
        i += 1;
    }
    let mut c = vec![b[0]];
    for i in 1..b.len() {
        if b[i - 1] == b' ' && b[i] == b'\'' && i + 1 < b.len() {
            let x1 = b[i + 1];
            let x2 = b.get(i + 2).copied();
            let drop = matches!(x1, b's' | b'm')
                || (i + 2 < b.len() && matches!((x1, x2), (b'r', Some(b'e')) | (b'v', Some(b'e'))));
            if drop {
                c.pop();
            }
        }
        c.push(b[i]);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_split_at_the_first_space_after_byte_zero() {
        assert_eq!(split_merge("Ġ t"), Some(("Ġ".into(), "t".into())));
        assert_eq!(split_merge("  x"), Some((" ".into(), "x".into())));
        assert_eq!(split_merge("nospace"), None);
    }

    #[test]
    fn clean_spaces_follows_llama_cpp() {
        let c = |s: &str| String::from_utf8(clean_spaces(s.as_bytes())).unwrap();
        assert_eq!(c("Hello , world !"), "Hello, world!");
        assert_eq!(c("a ' b"), "a'b");
        assert_eq!(c("it 's we 're I 'd"), "it's we're I 'd");
        assert_eq!(c(""), "");
    }
}
