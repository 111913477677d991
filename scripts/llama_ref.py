"""Write llama.cpp reference data for rlx's model tests (run through scripts/llama_ref.sh).

Outputs, under crates/rlx-models/tests/data/ (committed; tests read only these files):
  llama_ref_smollm2_q4_1.json  per prompt: token ids, a greedy continuation, and teacher-forced
                               top-k logits at every position of prompt + continuation
  llama_ref_smollm2_q4_1_exact.json, llama_ref_smollm2_mix.json, llama_ref_smollm2_mix_exact.json
                               the same for the file's F32 copy (f32 KV cache), for SmolLM2
                               requantized to every type (scripts/gguf_requant.py), and for
                               that file's F32 copy
  llama_tokens_smollm2.json    tokenizer-only cases: ids for hard and edge-case strings
  llama_ref_<arch>_tiny.json   the same as the first for the random-weight GGUFs that
                               scripts/gen_gguf_arch.py writes, where those files exist
  llama_tokens_<arch>_tiny.json  the tokenizer cases through those files' vocabularies

Everything runs with one thread and fixed settings so a rerun gives the same bytes; the
settings are written into each file's header. Floats are rounded to 5 significant digits.
"""

import argparse
import hashlib
import json
import os
import sys

import numpy as np

import llama_cpp
from llama_cpp import Llama

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "crates", "rlx-models", "tests", "data")
CACHE = os.environ.get("RLX_CACHE", os.path.expanduser("~/.cache/rlx"))

N_CTX = 512
N_THREADS = 1
N_BATCH = 512
TOP_K = 8
N_CONTINUE = 32

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

# Each prompt stresses one part of byte-level BPE pre-tokenization or the model itself.
PROMPTS = [
    ("english", "The capital of France is"),
    ("story", "Once upon a time, in a small village by the sea,"),
    ("accents", "Café, naïve, résumé, São Paulo, Zürich, Ångström and Øresund are"),
    ("emoji", "I love pizza 🍕 and cats 🐱! 👨‍👩‍👧‍👦 family time 🎉 is"),
    ("cjk", "日本の首都は東京です。中国的首都是北京。한국의 수도는"),
    ("whitespace", "Line one\n\n\nLine two    with   spaces\n\n    indented\n  \n"),
    ("tabs", "name\tage\tcity\nAlice\t30\tParis\nBob\t25\t"),
    (
        "code",
        "def fibonacci(n):\n    if n < 2:\n        return n\n"
        "    return fibonacci(n - 1) + fibonacci(n - 2)\n\n\ndef main():\n    ",
    ),
    ("numbers", "In 2024 there were 366 days; pi is 3.14159265358979 and 1234567890 + 9876543210 ="),
    ("contractions", "I'm sure they'll say it's fine, don't you think? We've"),
    ("mixed_scripts", "Hello world! Привет, мир! Γειά σου Κόσμε! مرحبا"),
    ("json", '{"name": "rlx", "tags": ["ml", "compiler"], "version": 10, "nested": {"a": null, '),
    ("chat", None),  # rendered from the GGUF's chat template below
]
CHAT_MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]

# Tokenizer-only strings: the prompts above plus edge cases for the pre-tokenizer regex.
TOKEN_CASES = [
    ("empty", ""),
    ("space", " "),
    ("two_spaces", "  "),
    ("newlines3", "\n\n\n"),
    ("tab", "\t"),
    ("hello", "Hello world"),
    ("hello_lead_space", " Hello world"),
    ("hello_trail_space", "Hello world "),
    ("hello_both_spaces", "  Hello world  "),
    ("hello_lower", "hello world"),
    ("contractions_short", "don't I'll"),
    ("contractions_upper", "DON'T I'LL WE'RE YOU'VE HE'D"),
    ("apostrophes_curly", "don’t it’s"),
    ("digits10", "1234567890"),
    ("digits_mixed", "3.14159 1,000,000 0x1F 1e-10 12ab34"),
    ("spaces_runs", "a  b   c    d     e"),
    ("newline_space_mix", "a\n \n  \n\tb \n"),
    ("crlf", "line1\r\nline2\r\n"),
    ("emoji_zwj_family", "👨‍👩‍👧‍👦"),
    ("emoji_zwj_mixed", "👩🏽‍💻 🏳️‍🌈 ❤️‍🔥 🇫🇷"),
    ("emoji_runs", "🍕🍕🍕 🐱🐶"),
    ("cjk_chinese", "我爱自然语言处理。"),
    ("cjk_japanese", "こんにちは、世界！カタカナ"),
    ("korean", "안녕하세요 세계"),
    ("accents_nfc", "é ñ ü ç"),
    ("accents_nfd", "e\u0301 n\u0303 u\u0308"),
    ("mixed_scripts_long", "English, Русский, Ελληνικά, العربية, עברית, हिन्दी, ไทย"),
    ("punct", "Hello!!! What?? ...and--then; (x) [y] {z} <w> @#$%^&*"),
    ("url", "https://example.com/path?q=1&r=two#frag"),
    ("code_long", None),  # below
    ("special_text_plain", "<|im_start|>user\nHi<|im_end|>"),
    ("control_chars", "a\u0000b\u0007c\u001bd"),
    ("zero_width", "a\u200bb\ufeffc"),
    ("long_word", "Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism"),
]
CODE_LONG = '''#include <stdio.h>

struct Point { int x, y; };

static int dot(const struct Point *a, const struct Point *b) {
\treturn a->x * b->x + a->y * b->y;
}

int main(void) {
    struct Point p = {3, -4}, q = {10, 20};
    for (int i = 0; i < 10; ++i) {
        if (i % 3 == 0) {
            printf("%d: %d\\n", i, dot(&p, &q));
        }
    }
    return 0; // done
}
'''
# Strings with control tokens, tokenized both with and without special-token parsing.
SPECIAL_CASES = [
    ("chat_turn", "<|im_start|>user\nHi there!<|im_end|>\n<|im_start|>assistant\n"),
    ("special_inline", "text<|im_end|>more <|endoftext|> end"),
    ("special_lookalike", "<|im_start |> <im_start> <|im_start|"),
]


def sig(x):
    """Round to 5 significant digits (enough to compare logits, small in JSON)."""
    return float(f"{float(x):.5g}")


def file_info(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return {"file": os.path.basename(path), "size": os.path.getsize(path), "sha256": h.hexdigest()}


def gguf_meta(path):
    """The few metadata values the data's readers care about (via gguf-py, beside the binding)."""
    try:
        import gguf
    except ImportError:
        return {}
    r = gguf.GGUFReader(path)
    out = {}
    for key in (
        "general.architecture",
        "tokenizer.ggml.model",
        "tokenizer.ggml.pre",
        "tokenizer.ggml.add_bos_token",
        "tokenizer.ggml.add_space_prefix",
        "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id",
    ):
        f = r.fields.get(key)
        if f is not None:
            out[key] = f.contents()
    f = r.fields.get("tokenizer.chat_template")
    if f is not None:
        out["tokenizer.chat_template"] = f.contents()
    return out


def load(path, kv_f32=False):
    # GGML_TYPE_F32 = 0 for an f32 KV cache (the exact reference); None keeps the default f16.
    kv = {"type_k": 0, "type_v": 0} if kv_f32 else {}
    return Llama(
        **kv,
        model_path=path,
        n_ctx=N_CTX,
        n_batch=N_BATCH,
        n_ubatch=N_BATCH,
        n_threads=N_THREADS,
        n_threads_batch=N_THREADS,
        n_gpu_layers=0,
        seed=0,
        logits_all=True,
        flash_attn=False,
        verbose=False,
    )


def settings(kv_f32=False):
    return {
        "n_ctx": N_CTX,
        "n_batch": N_BATCH,
        "n_ubatch": N_BATCH,
        "n_threads": N_THREADS,
        "n_threads_batch": N_THREADS,
        "n_gpu_layers": 0,
        "seed": 0,
        "logits_all": True,
        "flash_attn": False,
        "kv_cache_type": "f32" if kv_f32 else "f16 (llama.cpp default)",
        "build": "CPU only, GGML_NATIVE=OFF (ggml's default x86 set: AVX2, FMA, F16C; see system_info), no BLAS, no OpenMP",
        "prompt_tokenize": {"add_bos": True, "special": True},
        "sampling": {
            "method": "greedy: argmax of the last position's logits, lowest id on ties",
            "temperature": 0.0,
            "repeat_penalty": 1.0,
            "top_k": None,
            "top_p": None,
            "min_p": None,
            "ignore_eos": True,
            "n_continue": N_CONTINUE,
            "decode": "prompt as one batch, then one token per llama_decode call",
            "cross_check": "generate_agrees: Llama.generate(temp=0, repeat_penalty=1) gave the same tokens",
            "step_topk": "continuation_step_topk[i]: top-k of the incremental logits that chose continuation token i",
        },
        "teacher_forced": {
            "top_k": TOP_K,
            "decode": "prompt + continuation as one fresh batch, logits at every position",
            "row_meaning": "row i holds the logits after token i, i.e. predicting token i+1",
            "gap": "top1 logit - top2 logit",
            "step_vs_batch_max_abs_diff": "max |teacher-forced - incremental| logit over the continuation rows, all ids",
            "step_vs_batch_rel_l2": "||teacher-forced - incremental|| / ||incremental|| over the continuation rows",
        },
        "rounding": "floats to 5 significant digits",
    }


def topk_rows(scores):
    """Per row: top-k ids by descending logit (lowest id first among equals), values, gap."""
    rows = []
    for row in scores:
        row = np.asarray(row, dtype=np.float32)
        # argsort on (-logit, id) so ties order by id, as a stable sort of the negated row does
        idx = np.argsort(-row, kind="stable")[:TOP_K]
        vals = row[idx]
        rows.append(
            {
                "ids": [int(i) for i in idx],
                "logits": [sig(v) for v in vals],
                "gap": sig(vals[0] - vals[1]),
            }
        )
    return rows


def greedy(llm, prompt_ids):
    """Greedy decode as llama.cpp serves it: the prompt as one batch, then one token per
    llama_decode. Returns the tokens and, per step, the full logit row that chose it."""
    llm.reset()
    llm.eval(prompt_ids)
    out = []
    step_rows = []
    for _ in range(N_CONTINUE):
        last = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        tok = int(np.argmax(last))  # numpy argmax returns the first maximum: the lowest id
        step_rows.append(last)
        out.append(tok)
        llm.eval([tok])
    return out, np.stack(step_rows)


def greedy_via_binding(llm, prompt_ids):
    llm.reset()
    out = []
    for tok in llm.generate(prompt_ids, temp=0.0, repeat_penalty=1.0, reset=True):
        out.append(int(tok))
        if len(out) == N_CONTINUE:
            break
    return out


def teacher_forced(llm, ids):
    llm.reset()
    llm.eval(ids)
    return np.array(llm.scores[: len(ids)], dtype=np.float32)


def detok(llm, ids):
    return llm.detokenize(ids, special=True).decode("utf-8", errors="replace")


def render_chat(template, messages):
    import jinja2

    env = jinja2.Environment(trim_blocks=False, lstrip_blocks=False)
    return env.from_string(template).render(
        messages=messages, add_generation_prompt=True, bos_token="<|im_start|>", eos_token="<|im_end|>"
    )


def header(llm, path):
    h = {
        "generator": "scripts/llama_ref.py",
        "llama_cpp_python": llama_cpp.__version__,
        "llama_cpp_commit": LLAMA_CPP_COMMIT,
        "system_info": llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
        "model": file_info(path),
        "n_vocab": llm.n_vocab(),
        "bos_id": int(llm.token_bos()),
        "eos_id": int(llm.token_eos()),
        "gguf_metadata": {k: v for k, v in gguf_meta(path).items() if k != "tokenizer.chat_template"},
    }
    return h


def reference(path, prompts, out_path, kv_f32=False, source=None):
    llm = load(path, kv_f32)
    meta = gguf_meta(path)
    cases = []
    for name, text in prompts:
        extra = {}
        if text is None:
            text = render_chat(meta["tokenizer.chat_template"], CHAT_MESSAGES)
            extra = {"messages": CHAT_MESSAGES, "chat_template": "tokenizer.chat_template, add_generation_prompt"}
        b = text.encode("utf-8")
        ids = [int(t) for t in llm.tokenize(b, add_bos=True, special=True)]
        plain = [int(t) for t in llm.tokenize(b, add_bos=False, special=False)]
        cont, step = greedy(llm, ids)
        check = greedy_via_binding(llm, ids)
        if check != cont:
            print(f"warning: {name}: Llama.generate disagrees with the argmax loop", file=sys.stderr)
        tf = teacher_forced(llm, ids + cont)
        rows = topk_rows(tf)
        # llama.cpp's own batched (teacher-forced) and one-token-at-a-time logits differ in
        # rounding; how much bounds what any other implementation can be asked to match.
        tf_cont = tf[len(ids) - 1 : len(ids) - 1 + len(cont)]
        step_vs_batch = float(np.max(np.abs(tf_cont - step)))
        step_vs_batch_l2 = float(np.linalg.norm(tf_cont - step) / np.linalg.norm(step))
        disagree = [
            i for i in range(len(cont)) if rows[len(ids) - 1 + i]["ids"][0] != cont[i]
        ]
        if disagree:
            print(f"warning: {name}: teacher-forced top-1 differs from greedy at {disagree}", file=sys.stderr)
        case = {
            "name": name,
            "text": text,
            **extra,
            "prompt_ids": ids,
            "prompt_ids_no_bos_no_special": plain,
            "continuation_ids": cont,
            "continuation_text": detok(llm, cont),
            "generate_agrees": check == cont,
            "continuation_step_topk": topk_rows(step),
            "step_vs_batch_max_abs_diff": sig(step_vs_batch),
            "step_vs_batch_rel_l2": sig(step_vs_batch_l2),
            "teacher_forced": rows,
        }
        cases.append(case)
        print(f"{name}: {len(ids)} prompt tokens, continuation {detok(llm, cont)!r}")
    h = {**header(llm, path), "settings": settings(kv_f32)}
    if source is not None:
        h["source"] = {
            **file_info(source),
            "conversion": "scripts/gguf_to_f32.py: every tensor decoded to F32 (ggml's formulas), "
            "metadata copied; llama.cpp then multiplies f32 activations by f32 weights",
        }
    doc = {"header": h, "cases": cases}
    write_json(out_path, doc)


def tokens(path, out_path):
    llm = load(path)
    cases = []
    texts = [(n, t) for n, t in PROMPTS if t is not None]
    texts += [(n, CODE_LONG if t is None else t) for n, t in TOKEN_CASES]
    for name, text in texts:
        b = text.encode("utf-8")
        ids = [int(t) for t in llm.tokenize(b, add_bos=False, special=False)]
        cases.append(
            {
                "name": name,
                "text": text,
                "add_bos": False,
                "special": False,
                "ids": ids,
                "roundtrip": llm.detokenize(ids) == b,
            }
        )
    for name, text in SPECIAL_CASES:
        b = text.encode("utf-8")
        for special in (False, True):
            ids = [int(t) for t in llm.tokenize(b, add_bos=False, special=special)]
            cases.append(
                {
                    "name": f"{name}_special_{str(special).lower()}",
                    "text": text,
                    "add_bos": False,
                    "special": special,
                    "ids": ids,
                    "roundtrip": llm.detokenize(ids, special=True) == b,
                }
            )
    # add_bos=True on one string, to record whether llama.cpp adds a BOS for this model
    b = b"Hello world"
    cases.append(
        {
            "name": "hello_add_bos",
            "text": "Hello world",
            "add_bos": True,
            "special": False,
            "ids": [int(t) for t in llm.tokenize(b, add_bos=True, special=False)],
            "roundtrip": None,
        }
    )
    h = header(llm, path)
    h["settings"] = {
        "call": "Llama.tokenize(text.encode('utf-8'), add_bos=<case>, special=<case>)",
        "roundtrip": "Llama.detokenize(ids) == the text's bytes (special=True for special cases)",
    }
    write_json(out_path, {"header": h, "cases": cases})


def write_json(path, doc):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


# The sdist carries no git data (its build-info says "unknown"); the binding's CHANGELOG names
# the vendored commit: "[0.3.36] feat: update llama.cpp to ggml-org/llama.cpp@0c1e57098".
LLAMA_CPP_COMMIT = {"0.3.36": "0c1e57098"}.get(llama_cpp.__version__)

ARCH_PROMPTS = [
    ("english", "The capital of France is"),
    ("code", "def add(a, b):\n    return a + b\n"),
    ("mixed", "Café 🍕 日本 1234567890"),
]


def exact(path, out):
    """The reference of `path`'s weights in f32: its F32 copy (written beside it once), an f32
    KV cache."""
    f32 = path[: -len(".gguf")] + ".f32.gguf"
    if not os.path.exists(f32):
        import subprocess

        subprocess.run([sys.executable, os.path.join(HERE, "gguf_to_f32.py"), path, f32], check=True)
    reference(f32, PROMPTS, out, kv_f32=True, source=path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=["smollm2", "exact", "mix", "tokens", "arch"], action="append")
    args = ap.parse_args()
    only = set(args.only or ["smollm2", "exact", "mix", "tokens", "arch"])
    smol = os.path.join(CACHE, "gguf", "SmolLM2-135M-Instruct.Q4_1.gguf")
    if "smollm2" in only:
        reference(smol, PROMPTS, os.path.join(DATA, "llama_ref_smollm2_q4_1.json"))
    if "exact" in only:
        # The same weights without llama.cpp's roundings of activations (Q8_1 x in its Q4_1
        # products) and of the KV cache (f16): an F32 copy of the file, an f32 cache.
        exact(smol, os.path.join(DATA, "llama_ref_smollm2_q4_1_exact.json"))
    if "mix" in only:
        # SmolLM2 requantized to every type (scripts/gguf_requant.py): llama.cpp's own kernels
        # on the file, and its f32 arithmetic on the file's F32 copy.
        mix = os.path.join(CACHE, "gguf", "SmolLM2-135M-Instruct.mix.gguf")
        reference(mix, PROMPTS, os.path.join(DATA, "llama_ref_smollm2_mix.json"))
        exact(mix, os.path.join(DATA, "llama_ref_smollm2_mix_exact.json"))
    if "tokens" in only:
        tokens(smol, os.path.join(DATA, "llama_tokens_smollm2.json"))
    if "arch" in only:
        for arch in ("llama", "qwen2", "gemma3"):
            path = os.path.join(CACHE, "gguf", f"tiny-{arch}.gguf")
            if not os.path.exists(path):
                print(f"skip {arch}: {path} absent (scripts/gen_gguf_arch.py writes it)")
                continue
            reference(path, ARCH_PROMPTS, os.path.join(DATA, f"llama_ref_{arch}_tiny.json"))
            # The hard strings through each tiny vocabulary: the Llama 3 and Qwen2
            # pre-tokenizer regexes and SentencePiece with byte fallback.
            tokens(path, os.path.join(DATA, f"llama_tokens_{arch}_tiny.json"))


if __name__ == "__main__":
    main()
