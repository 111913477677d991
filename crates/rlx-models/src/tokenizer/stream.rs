//! Streaming detokenization: a token can end in the middle of a UTF-8 character (byte-level
//! BPE splits emoji and CJK across tokens; SentencePiece emits `<0xXX>` bytes), so text is
//! released only up to the last complete character and the tail waits for the next token.
use super::{Tokenizer, TokenizerError};

/// Turns a stream of token ids into text pieces that are always valid UTF-8.
///
/// ```ignore
/// let mut dec = tokenizer.stream_decoder(false);
/// for id in generated { print!("{}", dec.push(id)?); }
/// print!("{}", dec.finish());
/// ```
pub struct StreamDecoder<'t> {
    tok: &'t Tokenizer,
    special: bool,
    pending: Vec<u8>,
    first: bool,
}

impl<'t> StreamDecoder<'t> {
    pub(crate) fn new(tok: &'t Tokenizer, special: bool) -> Self {
        StreamDecoder {
            tok,
            special,
            pending: Vec::new(),
            first: true,
        }
    }

    /// Adds one token; returns the text it completes (possibly empty).
    pub fn push(&mut self, id: u32) -> Result<String, TokenizerError> {
        let piece = self.tok.piece_bytes(id, 0, self.special)?;
        // SentencePiece vocabularies put a space before the first word; llama.cpp's
        // detokenizer drops it from the first token.
        let piece = if self.first && self.tok.add_space_prefix && piece.first() == Some(&b' ') {
            &piece[1..]
        } else {
            piece
        };
        self.first = false;
        self.pending.extend_from_slice(piece);
        Ok(self.take_complete())
    }

    /// The bytes still held back (an incomplete character at the end of the stream),
    /// with U+FFFD for what never completed.
    pub fn finish(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }

    /// Releases the longest prefix that can no longer change: everything up to an
    /// incomplete (but so far valid) UTF-8 sequence at the end. Invalid bytes in the middle
    /// become U+FFFD at once, as they cannot become valid later.
    fn take_complete(&mut self) -> String {
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    out.push_str(std::str::from_utf8(good).expect("checked valid"));
                    match e.error_len() {
                        Some(n) => {
                            out.push('\u{FFFD}');
                            rest = &bad[n..];
                        }
                        None => {
                            rest = bad;
                            break;
                        }
                    }
                }
            }
        }
        let keep = rest.to_vec();
        self.pending = keep;
        out
    }
}
