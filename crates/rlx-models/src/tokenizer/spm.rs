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

#[cfg(test)]
mod tests {
    use super::*;

    /// The algorithm without a heap or links: join the best adjacent pair (highest score,
    /// leftmost on ties) whose text is a token until none is; then pieces → ids or bytes.
    fn naive(
        text: &str,
        vocab: &HashMap<String, u32>,
        scores: &[f32],
        bytes: &[Option<u32>; 256],
    ) -> Vec<u32> {
        let mut syms: Vec<String> = text.chars().map(String::from).collect();
        loop {
            let mut best: Option<(f32, usize)> = None;
            for i in 0..syms.len().saturating_sub(1) {
                let joined = format!("{}{}", syms[i], syms[i + 1]);
                if let Some(&id) = vocab.get(&joined) {
                    let s = scores[id as usize];
                    if best.is_none_or(|(b, _)| s > b) {
                        best = Some((s, i));
                    }
                }
            }
            let Some((_, i)) = best else { break };
            let right = syms.remove(i + 1);
            syms[i].push_str(&right);
        }
        let mut out = Vec::new();
        for s in syms {
            match vocab.get(&s) {
                Some(&id) => out.push(id),
                None => out.extend(s.bytes().filter_map(|b| bytes[b as usize])),
            }
        }
        out
    }

    #[test]
    fn heap_and_links_equal_the_naive_algorithm() {
        let mut rng = rlx_testutil::Rng::new("spm_heap_and_links_equal_the_naive_algorithm");
        let mut next = move |n: usize| rng.below(n);
        let alphabet = ['a', 'b', 'c', '▁', 'é'];
        for _ in 0..200 {
            // Single chars except 'c' and 'é' (byte fallback), plus random 2–4 char pieces
            // with scores from a small set, so ties are common.
            let mut vocab = HashMap::new();
            let mut scores = Vec::new();
            for c in ['a', 'b', '▁'] {
                vocab.insert(c.to_string(), scores.len() as u32);
                scores.push(-10.0);
            }
            for _ in 0..next(12) {
                let len = 2 + next(3);
                let p: String = (0..len).map(|_| alphabet[next(alphabet.len())]).collect();
                if let std::collections::hash_map::Entry::Vacant(e) = vocab.entry(p) {
                    e.insert(scores.len() as u32);
                    scores.push(-(next(4) as f32));
                }
            }
            let mut bytes = [None; 256];
            for b in [b'c', 0xC3, 0xA9] {
                bytes[b as usize] = Some(1000 + b as u32);
            }
            let text: String = (0..next(30))
                .map(|_| alphabet[next(alphabet.len())])
                .collect();
            let m = SpmModel {
                token_to_id: &vocab,
                scores: &scores,
                byte_tokens: &bytes,
            };
            let mut got = Vec::new();
            m.encode(&text, &mut got);
            assert_eq!(
                got,
                naive(&text, &vocab, &scores, &bytes),
                "text {text:?}, vocab {vocab:?}"
            );
        }
    }
}
