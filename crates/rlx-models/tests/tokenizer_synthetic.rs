//! Tokenizers from small GGUFs written in the test (rlx-io's test writer): SentencePiece
//! score-ordered joins, byte fallback and prefix spaces; BPE merge ranks and USER_DEFINED
//! tokens; and every malformed-metadata path as a typed error, never a panic.
#[path = "../../rlx-io/tests/gguf_writer/mod.rs"]
mod gguf_writer;

use gguf_writer::Writer;
use rlx_io::gguf::{Array, Gguf, Strings, Value};
use rlx_models::tokenizer::{Tokenizer, TokenizerError};

fn strings(items: &[&str]) -> Value {
    Value::Array(Array::String(items.iter().collect::<Strings>()))
}

fn build(w: Writer) -> Result<Tokenizer, TokenizerError> {
    let gguf = Gguf::from_bytes(&w.bytes()).expect("the test writer writes valid GGUF");
    Tokenizer::from_gguf(&gguf)
}

/// A Llama-2-style vocabulary: <unk> <s> </s>, 256 byte tokens, then pieces.
fn spm() -> (Writer, Vec<String>) {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    let pieces = [
        ("▁", -1.0),
        ("▁h", -2.0),
        ("▁he", -3.0),
        ("▁hel", -4.0),
        ("▁hell", -5.0),
        ("▁hello", -6.0),
        ("▁w", -2.0),
        ("or", -0.5),
        ("▁wor", -3.0),
        ("▁worl", -4.0),
        ("▁world", -5.0),
        ("h", -9.0),
        ("e", -9.0),
        ("l", -9.0),
        ("o", -9.0),
        ("w", -9.0),
        ("r", -9.0),
        ("d", -9.0),
    ];
    let mut scores = vec![0.0f32; tokens.len()];
    let mut types = vec![2, 3, 3];
    types.extend([6; 256]);
    for (p, s) in pieces {
        tokens.push(p.into());
        scores.push(s);
        types.push(1);
    }
    let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let w = Writer::new(3)
        .kv("tokenizer.ggml.model", Value::String(b"llama".to_vec()))
        .kv("tokenizer.ggml.tokens", strings(&refs))
        .kv("tokenizer.ggml.scores", Value::Array(Array::F32(scores)))
        .kv("tokenizer.ggml.token_type", Value::Array(Array::I32(types)));
    (w, tokens)
}

#[test]
fn sentencepiece_joins_by_score_and_falls_back_to_bytes() {
    let (w, tokens) = spm();
    let tok = build(w).unwrap();
    let id = |t: &str| tokens.iter().position(|x| x == t).unwrap() as u32;
    assert!(tok.adds_bos());
    // "or" (the best score) joins first, yet the pieces still grow into ▁world.
    assert_eq!(
        tok.encode("hello world", true, false).unwrap(),
        [1, id("▁hello"), id("▁world")]
    );
    // é is no token: its two UTF-8 bytes come as <0xC3> <0xA9>.
    let ids = tok.encode("hé", false, false).unwrap();
    assert_eq!(ids, [id("▁h"), 3 + 0xC3, 3 + 0xA9]);
    assert_eq!(tok.decode(&ids).unwrap(), "hé");
    // After a parsed special token the text gets a prefix space again.
    assert_eq!(
        tok.encode("<s>hello", false, true).unwrap(),
        [1, id("▁hello")]
    );
    // Unparsed, "<s>" is plain text: '<', 's', '>' are no pieces, so they are bytes.
    assert_eq!(
        tok.encode("<s>", false, false).unwrap(),
        [id("▁"), 3 + b'<' as u32, 3 + b's' as u32, 3 + b'>' as u32]
    );
    // Decoding drops the prefix space of the first token only (llama.cpp keeps it when
    // BOS comes first, since its lstrip applies to position 0).
    assert_eq!(
        tok.decode_with(&[id("▁hello"), id("▁world")], false)
            .unwrap(),
        "hello world"
    );
    assert_eq!(
        tok.decode_with(&[1, id("▁hello")], false).unwrap(),
        " hello"
    );
    assert_eq!(
        tok.decode_with(&[1, id("▁hello")], true).unwrap(),
        "<s> hello"
    );
    assert_eq!(tok.encode("", true, false).unwrap(), [1]);
}

#[test]
fn sentencepiece_stream_decoder_joins_byte_tokens() {
    let (w, _) = spm();
    let tok = build(w).unwrap();
    let ids = tok.encode("h😀", false, false).unwrap();
    assert_eq!(ids.len(), 1 + 4, "▁h then four byte tokens");
    let mut dec = tok.stream_decoder(false);
    let outs: Vec<String> = ids.iter().map(|&i| dec.push(i).unwrap()).collect();
    assert_eq!(outs, ["h", "", "", "", "😀"]);
}

/// A byte-level BPE vocabulary: a, b, ab, Ġ (space), Ġa and a USER_DEFINED "<tool>".
fn bpe(extra: impl FnOnce(Writer) -> Writer) -> Result<Tokenizer, TokenizerError> {
    let w = Writer::new(3)
        .kv("tokenizer.ggml.model", Value::String(b"gpt2".to_vec()))
        .kv("tokenizer.ggml.pre", Value::String(b"gpt-2".to_vec()))
        .kv(
            "tokenizer.ggml.tokens",
            strings(&["a", "b", "ab", "Ġ", "Ġa", "<tool>"]),
        )
        .kv(
            "tokenizer.ggml.token_type",
            Value::Array(Array::I32(vec![1, 1, 1, 1, 1, 4])),
        )
        .kv("tokenizer.ggml.merges", strings(&["a b", "Ġ a"]))
        .kv("tokenizer.ggml.bos_token_id", Value::U32(0))
        .kv("tokenizer.ggml.eos_token_id", Value::U32(1));
    build(extra(w))
}

#[test]
fn bpe_takes_the_lowest_rank_merge_first() {
    let tok = bpe(|w| w).unwrap();
    // " ab": "a b" (rank 0) beats "Ġ a" (rank 1), and "Ġ ab" is no merge.
    assert_eq!(tok.encode("ab ab", false, false).unwrap(), [2, 3, 2]);
    assert_eq!(tok.encode(" a", false, false).unwrap(), [4]);
    // USER_DEFINED tokens are cut out even without special parsing.
    assert_eq!(tok.encode("a<tool>b", false, false).unwrap(), [0, 5, 1]);
    assert_eq!(tok.decode(&[0, 5, 1]).unwrap(), "a<tool>b");
    // gpt-2's default asks for no BOS; add_bos_token turns it on.
    assert_eq!(tok.encode("a", true, false).unwrap(), [0]);
    let tok = bpe(|w| w.kv("tokenizer.ggml.add_bos_token", Value::Bool(true))).unwrap();
    assert_eq!(tok.encode("a", true, false).unwrap(), [0, 0]);
    assert!(matches!(
        tok.render_chat(&[], false),
        Err(TokenizerError::NoChatTemplate)
    ));
}

#[test]
fn a_repeated_merge_keeps_its_first_rank() {
    // "Ġ a" first (rank 0), then "a b", then "Ġ a" again: " ab" must join Ġa before ab.
    let w = Writer::new(3)
        .kv("tokenizer.ggml.model", Value::String(b"gpt2".to_vec()))
        .kv("tokenizer.ggml.pre", Value::String(b"gpt-2".to_vec()))
        .kv(
            "tokenizer.ggml.tokens",
            strings(&["a", "b", "ab", "Ġ", "Ġa"]),
        )
        .kv(
            "tokenizer.ggml.merges",
            strings(&["Ġ a", "a b", "Ġ a", "x y"]),
        );
    let tok = build(w).unwrap();
    assert_eq!(tok.encode(" ab", false, false).unwrap(), [4, 1]);
    assert_eq!(
        tok.dropped_merges(),
        2,
        "the repeat and the out-of-vocabulary one"
    );
}

#[test]
fn malformed_metadata_is_a_typed_error() {
    let err = |w: Writer| build(w).unwrap_err();
    let base = || {
        Writer::new(3)
            .kv("tokenizer.ggml.tokens", strings(&["a", "b"]))
            .kv("tokenizer.ggml.merges", strings(&["a b"]))
    };
    let e = err(base().kv("tokenizer.ggml.model", Value::String(b"bert".to_vec())));
    assert!(
        matches!(e, TokenizerError::UnsupportedModel { ref model } if model == "bert"),
        "{e}"
    );
    let e = err(base()
        .kv("tokenizer.ggml.model", Value::String(b"gpt2".to_vec()))
        .kv("tokenizer.ggml.pre", Value::String(b"no-such".to_vec())));
    assert!(
        matches!(e, TokenizerError::UnsupportedPre { ref pre } if pre == "no-such"),
        "{e}"
    );
    let e = err(Writer::new(3)
        .kv("tokenizer.ggml.model", Value::String(b"gpt2".to_vec()))
        .kv("tokenizer.ggml.tokens", strings(&["a"])));
    assert!(e.to_string().contains("tokenizer.ggml.merges"), "{e}");
    let e = err(Writer::new(3)
        .kv("tokenizer.ggml.model", Value::String(b"gpt2".to_vec()))
        .kv("tokenizer.ggml.tokens", strings(&["a", "a"]))
        .kv("tokenizer.ggml.merges", strings(&[])));
    assert!(e.to_string().contains("duplicate token"), "{e}");
    let e = err(base()
        .kv("tokenizer.ggml.model", Value::String(b"gpt2".to_vec()))
        .kv(
            "tokenizer.ggml.token_type",
            Value::Array(Array::I32(vec![1])),
        ));
    assert!(e.to_string().contains("token_type"), "{e}");
    let e = err(base()
        .kv("tokenizer.ggml.model", Value::String(b"gpt2".to_vec()))
        .kv("tokenizer.ggml.scores", Value::Array(Array::F32(vec![0.0]))));
    assert!(e.to_string().contains("scores"), "{e}");
    // gpt2's default BOS id 11 is out of range here, so asking for BOS cannot work.
    let e = err(base()
        .kv("tokenizer.ggml.model", Value::String(b"gpt2".to_vec()))
        .kv("tokenizer.ggml.add_bos_token", Value::Bool(true)));
    assert!(matches!(e, TokenizerError::MissingSpecial { .. }), "{e}");
    let e = err(base().kv("tokenizer.ggml.model", Value::U32(3)));
    assert!(e.to_string().contains("tokenizer.ggml.model"), "{e}");
    let e = err(Writer::new(3)
        .kv("tokenizer.ggml.model", Value::String(b"llama".to_vec()))
        .kv("tokenizer.ggml.tokens", strings(&[])));
    assert!(matches!(e, TokenizerError::Inconsistent { .. }), "{e}");
}
