#!/usr/bin/env python3
"""Reference token ids for SmolLM2's vocabulary from HF `tokenizers`, for
crates/rlx-models/tests/tokenizer.rs (tests/data/hf_tokens_smollm2.json).

Two independent references, which must agree before anything is written:
  1. HF `tokenizers` built as SmolLM2's own tokenizer.json is (BPE over the GGUF's vocab and
     merges; pre-tokenizer Sequence[Digits(individual_digits), ByteLevel(use_regex)]; the
     control tokens as added special tokens), which is what transformers runs;
  2. a plain-Python byte-level BPE with llama.cpp's "smollm" regex list (`\\p{N}` then the
     GPT-2 regex, each splitting the pieces the previous left), via the `regex` module.

Needs the `gguf`, `tokenizers` and `regex` packages. Install them outside the checkout:
  pip install --target "${RLX_CACHE:-$HOME/.cache/rlx}/py-tokenizers" tokenizers==0.23.3 regex==2026.11.19
(`gguf` is put under the cache by scripts/fetch_models.sh). Run:
  python3 scripts/hf_tokens.py [out.json]
"""
import json
import os
import sys

CACHE = os.environ.get("RLX_CACHE", os.path.expanduser("~/.cache/rlx"))
for sub in ("py-gguf-0.19.0", "py-tokenizers"):
    sys.path.insert(0, os.path.join(CACHE, sub))

import gguf  # noqa: E402
import regex  # noqa: E402
import tokenizers  # noqa: E402
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers  # noqa: E402

MODEL = os.path.join(CACHE, "gguf", "SmolLM2-135M-Instruct.Q4_1.gguf")
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..", "crates", "rlx-models", "tests", "data",
    "hf_tokens_smollm2.json")

# Hard cases: contractions, digits, whitespace runs, scripts, emoji, code, odd code points.
PLAIN = [
    "Hello world",
    " Hello world",
    "Hello, world! How's it going? I'm fine, you're great, we've done it, they'll see, he'd go.",
    "DON'T SHOUT, IT'S OK; 'S 'T",
    "'s 't 're 've 'm 'll 'd",
    "1234567890",
    "3.14159 + 2,718 = 5.85959; 1e-10; 0x1F; 1,000,000",
    "abc123def456 7 89 000",
    "  multiple   spaces    here  ",
    "trailing spaces   ",
    "   ",
    "\n",
    "\n\n\nnewlines\n \n\t\ttabs\r\n",
    "tab\there\x0bvt\x0cff\x00nul\x7fdel",
    "",
    "Café déjà vu, naïve façade",
    "Привет, мир! Как дела?",
    "日本語のテキストと漢字",
    "中文测试：你好，世界！",
    "한국어 텍스트",
    "مرحبا بالعالم",
    "🙂😀👍🏽 👨\u200d👩\u200d👧\u200d👦 🇺🇸🇫🇷",
    "def f(x):\n    return x**2  # square\n\nprint(f(3))\n",
    "fn main() {\n\tlet v: Vec<u32> = vec![1, 2, 3];\n}",
    "<html><body class=\"x\">&nbsp;</body></html>",
    "∑_{i=1}^{n} x² ≤ ∞ ± √2 ½ ⅓",
    "Ünïcödé ß ẞ İ ı ǅ e\u0301 a\u0300",
    "user@example.com https://huggingface.co/HuggingFaceTB?q=1&x=2",
    "\u2019curly quotes\u2019 \u201cdouble\u201d \u2014 dash \u2026 ellipsis",
    "\u00a0non-breaking\u00a0space and\u3000ideographic space",
    "a\u200bb\u200dc\ufeffd",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "!!!???...,,,;;;",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ ٣٤٥ ४५६",
]
# Chat markup: with special parsing the markers are single tokens, without they are text.
SPECIAL = [
    ("<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n", True),
    ("<|im_end|><|im_start|>text<|endoftext|>more", True),
    ("<|im_start|>user\nHello!<|im_end|>", False),
]

GPT2_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
SMOLLM_RES = [r"\p{N}", GPT2_RE]


def field_strings(reader, key):
    f = reader.fields[key]
    return [bytes(f.parts[i]).decode("utf-8") for i in f.data]


def field_ints(reader, key):
    f = reader.fields[key]
    return [int(f.parts[i][0]) for i in f.data]


def byte_chars():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def split_all(text, res):
    """llama.cpp's unicode_regex_split: each regex cuts every current piece into matches
    and the gaps between them."""
    pieces = [text] if text else []
    for r in res:
        pat = regex.compile(r)
        out = []
        for p in pieces:
            pos = 0
            for m in pat.finditer(p):
                if m.start() > pos:
                    out.append(p[pos:m.start()])
                if m.end() > m.start():
                    out.append(m.group())
                pos = m.end()
            if pos < len(p):
                out.append(p[pos:])
        pieces = out
    return pieces


def plain_bpe(text, vocab, ranks, bmap):
    ids = []
    for word in split_all(text, SMOLLM_RES):
        syms = [bmap[b] for b in word.encode("utf-8")]
        while len(syms) > 1:
            best = None
            for i in range(len(syms) - 1):
                r = ranks.get((syms[i], syms[i + 1]))
                if r is not None and (best is None or r < best[0]):
                    best = (r, i)
            if best is None:
                break
            i = best[1]
            syms[i:i + 2] = [syms[i] + syms[i + 1]]
        ids.extend(vocab[s] for s in syms)
    return ids


def main():
    reader = gguf.GGUFReader(MODEL)
    tokens = field_strings(reader, "tokenizer.ggml.tokens")
    types = field_ints(reader, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in field_strings(reader, "tokenizer.ggml.merges")]
    vocab = {t: i for i, t in enumerate(tokens)}
    ranks = {m: i for i, m in enumerate(merges)}
    bmap = byte_chars()

    def hf(with_specials):
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ])
        tok.decoder = decoders.ByteLevel()
        if with_specials:
            tok.add_special_tokens([
                AddedToken(t, special=True, normalized=False)
                for t, ty in zip(tokens, types) if ty == 3
            ])
        return tok

    hf_special, hf_plain = hf(True), hf(False)
    cases = []
    bad = 0
    for text in PLAIN:
        ids = hf_plain.encode(text, add_special_tokens=False).ids
        ref = plain_bpe(text, vocab, ranks, bmap)
        if ids != ref:
            bad += 1
            print(f"DISAGREE {text!r}\n  hf    {ids}\n  plain {ref}")
        back = hf_plain.decode(ids)
        if back != text:
            print(f"note: HF decode differs for {text!r}: {back!r}")
        cases.append({"text": text, "add_bos": False, "special": False, "ids": ids})
    for text, special in SPECIAL:
        tok = hf_special if special else hf_plain
        ids = tok.encode(text, add_special_tokens=False).ids
        cases.append({"text": text, "add_bos": False, "special": special, "ids": ids})
    if bad:
        sys.exit(f"{bad} cases where the two references disagree; nothing written")
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump({
            "model": "SmolLM2-135M-Instruct.Q4_1.gguf",
            "source": "HF tokenizers (SmolLM2's tokenizer.json pipeline) over the GGUF vocab "
                      "and merges, cross-checked by a plain-Python BPE with llama.cpp's "
                      "smollm regexes; scripts/hf_tokens.py",
            "tokenizers_version": tokenizers.__version__,
            "cases": cases,
        }, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
