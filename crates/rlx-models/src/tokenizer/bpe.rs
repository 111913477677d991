//! Byte-level BPE (`tokenizer.ggml.model == "gpt2"`) on the `tokenizers` crate: the named
//! pre-tokenizer's regexes as `Split`s (isolated, so the text between matches stays a piece,
//! as llama.cpp's `unicode_regex_split` keeps it), GPT-2's byte → char map, and a `BPE`
//! model built from the GGUF vocabulary and merges (rank = merge index; lowest rank first,
//! leftmost on ties, as llama.cpp's bigram queue).
use super::pre::PreTokenizer;
use super::TokenizerError;
use std::collections::HashMap;
use std::sync::OnceLock;
use tokenizers::models::bpe::BPE;

use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{
    Model, OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer as _,
    SplitDelimiterBehavior,
};

/// GPT-2's reversible byte ↔ char map: printable Latin-1 bytes stand for themselves, the
/// other 68 take the code points from U+0100 up, so every byte string is printable text.
fn byte_chars() -> &'static ([char; 256], HashMap<char, u8>) {
    static MAP: OnceLock<([char; 256], HashMap<char, u8>)> = OnceLock::new();
    MAP.get_or_init(|| {
        let mut chars = ['\0'; 256];
        let mut next = 256u32;
        for b in 0..=255u8 {
            let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
            chars[b as usize] = if printable {
                char::from(b)
            } else {
                let c = char::from_u32(next).expect("U+0100..U+0143 are chars");
                next += 1;
                c
            };
        }
        let back = chars
            .iter()
            .enumerate()
            .map(|(b, &c)| (c, b as u8))
            .collect();
        (chars, back)
    })
}

/// A token's text in the byte-level alphabet → the bytes it stands for. A char outside the
/// alphabet is kept as llama.cpp's `llama_decode_text` keeps it: `[UNK_BYTE_0x…text]`.
pub(crate) fn byte_level_decode(text: &str) -> Vec<u8> {
    let back = &byte_chars().1;
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        match back.get(&c) {
            Some(&b) => out.push(b),
            None => {
                out.extend_from_slice(b"[UNK_BYTE_0x");
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                out.extend_from_slice(text.as_bytes());
                out.push(b']');
            }
        }
    }
    out
}

/// Bytes → the byte-level alphabet (what the vocabulary's strings are written in).
#[cfg(test)]
pub(crate) fn byte_level_encode(bytes: &[u8]) -> String {
    let chars = &byte_chars().0;
    bytes.iter().map(|&b| chars[b as usize]).collect()
}

pub(crate) struct BpeModel {
    splits: Sequence,
    byte_level: ByteLevel,
    model: BPE,
    /// Merges left out: repeats of an earlier pair, and those whose part or result is not a
    /// token (the `tokenizers` crate refuses them; llama.cpp would merge and then fall back
    /// to the bytes).
    pub(crate) dropped_merges: usize,
}

impl BpeModel {
    pub(crate) fn new(
        pre: &PreTokenizer,
        vocab: &HashMap<String, u32>,
        merges: Vec<(String, String)>,
    ) -> Result<BpeModel, TokenizerError> {
        let mut splits = Vec::with_capacity(pre.regexes.len());
        for re in &pre.regexes {
            let split = Split::new(
                SplitPattern::Regex(re.to_string()),
                SplitDelimiterBehavior::Isolated,
                false,
            )
            .map_err(|e| TokenizerError::Build {
                what: "pre-tokenizer regex",
                detail: format!("{re}: {e}"),
            })?;
            splits.push(PreTokenizerWrapper::Split(split));
        }
        let n = merges.len();
        // A repeated pair keeps its first rank, as llama.cpp's `bpe_ranks.emplace` does (the
        // `tokenizers` builder would let the last one win).
        let mut seen = std::collections::HashSet::with_capacity(n);
        let merges: Vec<(String, String)> = merges
            .into_iter()
            .filter(|(a, b)| {
                vocab.contains_key(a)
                    && vocab.contains_key(b)
                    && vocab.contains_key(&format!("{a}{b}"))
                    && seen.insert((a.clone(), b.clone()))
            })
            .collect();
        let dropped_merges = n - merges.len();
        let vocab: ahash_free::Vocab = vocab.iter().map(|(k, &v)| (k.clone(), v)).collect();
        let model = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .ignore_merges(pre.ignore_merges)
            .build()
            .map_err(|e| TokenizerError::Build {
                what: "BPE model",
                detail: e.to_string(),
            })?;
        Ok(BpeModel {
            splits: Sequence::new(splits),
            // No prefix space, no offset trimming, no regex of its own: the splits above
            // are the whole pre-tokenization.
            byte_level: ByteLevel::new(false, false, false),
            model,
            dropped_merges,
        })
    }

    /// The pieces the regexes cut `text` into (before the byte map), for tests and
    /// debugging.
    pub(crate) fn words(&self, text: &str) -> Result<Vec<String>, TokenizerError> {
        let mut pts = PreTokenizedString::from(text);
        self.splits
            .pre_tokenize(&mut pts)
            .map_err(|e| encode_err(text, e))?;
        Ok(pts
            .get_splits(OffsetReferential::Original, OffsetType::Byte)
            .into_iter()
            .map(|(s, _, _)| s.to_string())
            .collect())
    }

    /// Appends the ids of plain text (no special tokens in it) to `out`.
    pub(crate) fn encode(&self, text: &str, out: &mut Vec<u32>) -> Result<(), TokenizerError> {
        let mut pts = PreTokenizedString::from(text);
        self.splits
            .pre_tokenize(&mut pts)
            .and_then(|_| self.byte_level.pre_tokenize(&mut pts))
            .map_err(|e| encode_err(text, e))?;
        for (word, _, _) in pts.get_splits(OffsetReferential::Original, OffsetType::Byte) {
            let toks = self.model.tokenize(word).map_err(|e| encode_err(text, e))?;
            out.extend(toks.iter().map(|t| t.id));
        }
        Ok(())
    }
}

fn encode_err(text: &str, e: impl std::fmt::Display) -> TokenizerError {
    TokenizerError::Encode {
        text: text.chars().take(80).collect(),
        detail: e.to_string(),
    }
}

/// The vocabulary type the `tokenizers` builder takes, without naming its hasher crate.
mod ahash_free {
    pub(super) type Vocab = tokenizers::models::bpe::Vocab;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The regex pieces of `text` under the pre-tokenizer `name` (the vocabulary does not
    /// take part in splitting).
    fn words(name: &str, text: &str) -> Vec<String> {
        let pre = PreTokenizer::by_name(name).expect("known pre-tokenizer");
        let m = BpeModel::new(&pre, &HashMap::new(), vec![]).expect("regexes compile");
        m.words(text).expect("splits")
    }

    // Expected pieces were checked against Python's `regex` module running llama.cpp's
    // regex lists the same way (scripts/hf_tokens.py's split_all).
    #[test]
    fn llama3_groups_digits_by_three_and_folds_contraction_case() {
        assert_eq!(
            words("llama-bpe", "12345678 I'M HERE's"),
            ["123", "456", "78", " I", "'M", " HERE", "'s"]
        );
        assert_eq!(
            words("llama-bpe", "a\n\n  b\t\tc  "),
            ["a", "\n\n", " ", " b", "\t", "\tc", "  "]
        );
    }

    #[test]
    fn gpt2_contractions_are_lowercase_only_and_spaces_lead_words() {
        assert_eq!(
            words("gpt-2", "don't DON'T a   b  "),
            ["don", "'t", " DON", "'", "T", " a", "  ", " b", "  "]
        );
        // A whitespace run gives its last char to the next word only when that is a space.
        assert_eq!(
            words("gpt-2", "x\n\ny \tz"),
            ["x", "\n", "\n", "y", " ", "\t", "z"]
        );
    }

    #[test]
    fn qwen2_and_smollm_split_every_digit() {
        assert_eq!(
            words("qwen2", "12345 hello\n\n\nworld"),
            ["1", "2", "3", "4", "5", " hello", "\n\n\n", "world"]
        );
        assert_eq!(
            words("smollm", "I'm 12345 abc"),
            ["I", "'m", " ", "1", "2", "3", "4", "5", " abc"]
        );
        // \p{N} is every number, not only ASCII digits.
        assert_eq!(
            words("smollm", "x²½ 3.14"),
            ["x", "²", "½", " ", "3", ".", "1", "4"]
        );
    }

    #[test]
    fn every_table_regex_compiles() {
        for name in [
            "default",
            "llama3",
            "falcon",
            "starcoder",
            "smollm",
            "gpt-2",
            "qwen2",
            "stablelm2",
            "poro-chat",
            "bloom",
            "chatglm-bpe",
            "tekken",
            "gpt-4o",
            "seed-coder",
            "bailingmoe",
        ] {
            assert!(!words(name, "Hello, world 123!").is_empty(), "{name}");
        }
        assert!(PreTokenizer::by_name("no-such-pre").is_none());
    }

    #[test]
    fn byte_map_round_trips_every_byte() {
        let all: Vec<u8> = (0..=255).collect();
        let text = byte_level_encode(&all);
        assert_eq!(text.chars().count(), 256);
        assert_eq!(byte_level_decode(&text), all);
        // The two the vocabulary shows most: space and newline.
        assert_eq!(byte_level_encode(b" \n"), "\u{120}\u{10A}");
    }
}
