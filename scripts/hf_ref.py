"""transformers' own answers for the tiny HF decoders, for the rlx HF decoder tests.

  $(bash scripts/hf_ref_env.sh) scripts/hf_ref.py [HF_DIR] [OUT_DIR]

HF_DIR defaults to $RLX_CACHE/hf (tiny-llama, tiny-qwen2 written by scripts/gen_hf_tiny.py via
scripts/fetch_models.sh); OUT_DIR to crates/rlx-models/tests/data. Writes
hf_ref_tiny_{llama,qwen2}.json with, per prompt (tokenized by the folder's tokenizer through
AutoTokenizer, no special tokens added, which is what this tokenizer does anyway):
  ids            the prompt's token ids
  logits         {position: f32 logits over the model's vocab_size} for the last position and
                 three others (first, a middle one, the one before last, where they exist),
                 from one full forward pass, 7 significant digits
  generated      the greedy continuation, generate(do_sample=False, max_new_tokens=24) with the
                 folder's generation_config (so it stops early at eos <|im_end|>)
  min_margin     the smallest top-1 minus top-2 logit over the generation steps: how close a
                 step came to a tie (a test may allow a divergence only there)
plus the sha256 of model.safetensors, so a test can tell it reads the files this came from.
Everything in f32 on the CPU (qwen2's BF16 weights widen exactly).
"""

import hashlib
import json
import os
import sys

import tempfile

import tokenizers
import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("RLX_CACHE", os.path.expanduser("~/.cache/rlx"))
NEW_TOKENS = 24

PROMPTS = [
    "A",
    "The model reads a sentence",
    "In the morning the river was quiet, and the boat came down from the hills.",
    "Numbers: 1, 2, 3, 10, 2024 and 3.14; names: London, Paris, Tokyo. Café, naïve, 東京 🙂!",
    # Long enough that positions run past 100, prompt + continuation within 256 (rotary tables beyond the first few rows).
    " ".join(["the people on the bank waved and the children ran along the path"] * 4),
]
CHAT = [{"role": "system", "content": "You are brief."},
        {"role": "user", "content": "What is the time?"}]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sig7(xs):
    return [float(f"{x:.7g}") for x in xs]


def check_folder(folder, tok):
    """gen_hf_tiny.py writes config.json by hand: it must be what transformers itself saves,
    and transformers' tokenizer must agree with plain `tokenizers` on the same file."""
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        mine = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        AutoConfig.from_pretrained(folder).save_pretrained(tmp)
        with open(os.path.join(tmp, "config.json"), encoding="utf-8") as f:
            saved = json.load(f)
    saved.pop("_name_or_path", None)
    if mine != saved:
        diff = {k: (mine.get(k), saved.get(k)) for k in set(mine) | set(saved)
                if mine.get(k) != saved.get(k)}
        raise SystemExit(f"{folder}/config.json differs from save_pretrained's: {diff}")
    raw = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    for p in PROMPTS:
        if raw.encode(p, add_special_tokens=False).ids != tok(p, add_special_tokens=False).input_ids:
            raise SystemExit(f"{folder}: tokenizers and transformers disagree on {p!r}")


def reference(folder):
    tok = AutoTokenizer.from_pretrained(folder)
    check_folder(folder, tok)
    model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32)
    model.eval()
    prompts = [(p, tok(p, add_special_tokens=False).input_ids) for p in PROMPTS]
    chat = tok.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=False)
    prompts.append((chat, tok(chat, add_special_tokens=False).input_ids))
    cases = []
    for text, ids in prompts:
        x = torch.tensor([ids])
        mask = torch.ones_like(x)
        with torch.no_grad():
            logits = model(input_ids=x, attention_mask=mask).logits[0]
            gen = model.generate(x, attention_mask=mask, do_sample=False,
                                 max_new_tokens=NEW_TOKENS, pad_token_id=tok.pad_token_id,
                                 output_scores=True, return_dict_in_generate=True)
        n = len(ids)
        positions = sorted({0, n // 2, max(n - 2, 0), n - 1})
        margins = []
        for s in gen.scores:
            top = torch.topk(s[0].float(), 2).values
            margins.append(float(top[0] - top[1]))
        cases.append({
            "text": text,
            "ids": ids,
            "logits": {str(p): sig7(logits[p].tolist()) for p in positions},
            "generated": gen.sequences[0, n:].tolist(),
            "min_margin": round(min(margins), 6),
        })
    cfg = model.config
    return {
        "source": "scripts/hf_ref.py (transformers, f32, CPU)",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "folder": os.path.basename(folder.rstrip("/")),
        "architecture": cfg.architectures[0],
        "vocab_size": cfg.vocab_size,
        "safetensors_sha256": sha256(os.path.join(folder, "model.safetensors")),
        "max_new_tokens": NEW_TOKENS,
        "eos_token_id": model.generation_config.eos_token_id,
        "cases": cases,
    }


def main():
    hf_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(CACHE, "hf")
    out_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        HERE, "..", "crates", "rlx-models", "tests", "data")
    torch.manual_seed(0)
    for name in ("llama", "qwen2"):
        ref = reference(os.path.join(hf_dir, f"tiny-{name}"))
        path = os.path.join(out_dir, f"hf_ref_tiny_{name}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(ref, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        lens = [len(c["ids"]) for c in ref["cases"]]
        gens = [len(c["generated"]) for c in ref["cases"]]
        margin = min(c["min_margin"] for c in ref["cases"])
        print(f"{path}: prompts of {lens} tokens, generated {gens}, min margin {margin:.3f}")


if __name__ == "__main__":
    main()
