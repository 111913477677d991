//! SentencePiece BPE (`tokenizer.ggml.model == "llama"`: Llama 2, Gemma), as llama.cpp's
//! `llm_tokenizer_spm` does it: no merges list — start from UTF-8 chars, repeatedly join the
//! adjacent pair whose concatenation is the highest-scoring vocabulary token (leftmost on
//! ties), then emit each final piece; a piece that is no token is re-split along the joins
//! that made it, and a char that is no token falls back to its `<0xXX>` byte tokens.
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// One symbol of the working string: a byte range of the text, linked to its neighbours.
#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// A candidate join of symbols `left` and `right` (adjacent when queued).
struct Bigram {
    left: usize,
    right: usize,
    score: f32,
    /// The joined byte length when queued: a later mismatch means a side was joined since.
    len: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Bigram {
    /// Max-heap order: higher score first, then the leftmost.
    fn cmp(&self, o: &Self) -> Ordering {
        self.score
            .total_cmp(&o.score)
            .then_with(|| o.left.cmp(&self.left))
    }
}

pub(crate) struct SpmModel<'a> {
    pub(crate) token_to_id: &'a HashMap<String, u32>,
    pub(crate) scores: &'a [f32],
    /// `<0xXX>` token for each byte (or the byte itself as a one-char token).
    pub(crate) byte_tokens: &'a [Option<u32>; 256],
}

impl SpmModel<'_> {
    /// Appends the ids of `text` (spaces already escaped to `▁`) to `out`.
    pub(crate) fn encode(&self, text: &str, out: &mut Vec<u32>) {
        let mut symbols: Vec<Symbol> = Vec::new();
        for (i, (start, c)) in text.char_indices().enumerate() {
            symbols.push(Symbol {
                start,
                len: c.len_utf8(),
                prev: i.checked_sub(1),
                next: None,
            });
            if i > 0 {
                symbols[i - 1].next = Some(i);
            }
        }
        if symbols.is_empty() {
            return;
        }
        let mut queue = BinaryHeap::new();
        // Which two symbols a joined piece came from, to re-split a piece that is no token.
        let mut rev_merge: HashMap<(usize, usize), (usize, usize)> = HashMap::new();
        for i in 1..symbols.len() {
            self.try_add(text, &symbols, i - 1, i, &mut queue, &mut rev_merge);
        }
        while let Some(b) = queue.pop() {
            let (l, r) = (symbols[b.left], symbols[b.right]);
            if l.len == 0 || r.len == 0 || l.len + r.len != b.len {
                continue;
            }
            symbols[b.left].len += r.len;
            symbols[b.right].len = 0;
            symbols[b.left].next = r.next;
            if let Some(n) = r.next {
                symbols[n].prev = Some(b.left);
            }
            if let Some(p) = symbols[b.left].prev {
                self.try_add(text, &symbols, p, b.left, &mut queue, &mut rev_merge);
            }
            if let Some(n) = symbols[b.left].next {
                self.try_add(text, &symbols, b.left, n, &mut queue, &mut rev_merge);
            }
        }
        let mut i = Some(0);
        while let Some(s) = i {
            self.resegment(
                text,
                &symbols,
                symbols[s].start,
                symbols[s].len,
                &rev_merge,
                out,
            );
            i = symbols[s].next;
        }
    }

    fn try_add(
        &self,
        text: &str,
        symbols: &[Symbol],
        left: usize,
        right: usize,
        queue: &mut BinaryHeap<Bigram>,
        rev_merge: &mut HashMap<(usize, usize), (usize, usize)>,
    ) {
        let (l, r) = (symbols[left], symbols[right]);
        let piece = &text[l.start..l.start + l.len + r.len];
        let Some(&id) = self.token_to_id.get(piece) else {
            return;
        };
        let score = self.scores.get(id as usize).copied().unwrap_or(0.0);
        queue.push(Bigram {
            left,
            right,
            score,
            len: piece.len(),
        });
        // Keyed by the byte span: llama.cpp keys by the piece text, and the same text can
        // occur twice; by span the re-split is the one that made this very piece.
        rev_merge.insert((l.start, piece.len()), (left, right));
    }

    fn resegment(
        &self,
        text: &str,
        symbols: &[Symbol],
        start: usize,
        len: usize,
        rev_merge: &HashMap<(usize, usize), (usize, usize)>,
        out: &mut Vec<u32>,
    ) {
        let piece = &text[start..start + len];
        if let Some(&id) = self.token_to_id.get(piece) {
            out.push(id);
            return;
        }
        match rev_merge.get(&(start, len)) {
            Some(&(l, r)) => {
                let ls = symbols[l].start;
                let rs = symbols[r].start;
                self.resegment(text, symbols, ls, rs - ls, rev_merge, out);
                self.resegment(text, symbols, rs, start + len - rs, rev_merge, out);
            }
            None => {
                for &b in piece.as_bytes() {
                    // A byte with no token is dropped, as llama.cpp's BPE fallback drops it.
                    if let Some(id) = self.byte_tokens[b as usize] {
                        out.push(id);
                    }
                }
            }
        }
    }
}
