"""Write small random-weight Hugging Face model folders for the HF decoder tests, without torch.

  PYTHONPATH=$RLX_CACHE/py-hf-gen python3 scripts/gen_hf_tiny.py OUT_DIR

(py-hf-gen holds numpy and safetensors; scripts/fetch_models.sh installs it and calls this with
OUT_DIR = $RLX_CACHE/hf). Writes three folders:
  OUT_DIR/tiny-llama          LlamaForCausalLM, F32 weights, untied lm_head.weight,
                              rope_theta 1e4, rms eps 1e-5, one model.safetensors
  OUT_DIR/tiny-qwen2          Qwen2ForCausalLM, BF16 weights, q/k/v biases, tied embeddings (no
                              lm_head.weight, as save_pretrained drops it), rope_theta 1e6,
                              rms eps 1e-6, config vocab_size 392 > the tokenizer's 387 (padded
                              embedding rows, as real Qwen2 checkpoints have)
  OUT_DIR/tiny-llama-sharded  tiny-llama's exact tensors split over two files plus
                              model.safetensors.index.json
Shapes: hidden 64, 2 layers, 4 heads of 16, 2 KV heads, intermediate 176, 256 positions.

Reproducible byte for byte: weights come from a splitmix64 stream per tensor (seeded from the
model's seed and the tensor's name) turned into normals with Box-Muller in plain Python floats
and rounded to f32 (and to BF16, nearest-even, for qwen2), so numpy's version does not matter;
the JSON files are written with sorted keys. The tokenizer (shared by both models) is a
byte-level BPE built here: the 256 byte tokens in GPT-2's bytes_to_unicode alphabet, merges
learned by a small pure-Python BPE on TEXT below up to 384 tokens, then the added specials
<|endoftext|> (384), <|im_start|> (385), <|im_end|> (386). No BOS is added (no post-processor);
the ChatML chat template is in tokenizer_config.json.

Weights are scaled so logits are decisive (std of a few units): with a near-uniform random
model a greedy comparison would hinge on rounding. With a tied head the residual stream that
is mostly the input embedding would predict the input token everywhere, so qwen2's o_proj and
down_proj are scaled up to let the layers dominate.
"""

import json
import math
import os
import re
import shutil
import sys

import numpy as np
from safetensors import TensorSpec, serialize_file

TRANSFORMERS_VERSION = "4.44.2"
HIDDEN = 64
LAYERS = 2
HEADS = 4
KV_HEADS = 2
HEAD_DIM = HIDDEN // HEADS
FFN = 176
MAX_POS = 256
BPE_VOCAB = 384
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TOK_VOCAB = BPE_VOCAB + len(SPECIALS)
BOS_ID = BPE_VOCAB  # <|endoftext|>
EOS_ID = BPE_VOCAB + 2  # <|im_end|>
MASK64 = (1 << 64) - 1

# Training text for the merges: plain English, some digits and punctuation. Changing it changes
# the vocabulary and so every committed reference.
TEXT = """\
The small model reads a sentence one token at a time. Each token is a piece of a word, and the
pieces were learned from this very text: the most frequent pair of neighbours is merged into a
new token, again and again, until the vocabulary is large enough. That is the whole of the
byte pair encoding, and it is why the words that appear here often, like the, and, token or
model, end up as single tokens while rare words are spelled out byte by byte.
In the morning the river was quiet. A boat came down from the hills with apples, bread and
three barrels of water; the people on the bank waved, and the children ran along the path to
see it arrive. By the evening the market was full, the lamps were lit, and there was music in
the square until well after ten o'clock.
Numbers matter too: 1, 2, 3, 10, 20, 100, 2024 and 3.14 are written with digits, and a tokenizer
has to cope with them as well as with words. So do names such as London, Paris or Tokyo, and
questions: what is the time? Where are we going? Who wrote this? Nobody knows, and that is fine.
A model that has seen the text before will find it easy to continue; one that has not will have
to guess, and its guesses are only as good as the weights it was given.
"""

SPLIT_RE = re.compile(
    r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+"
)

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def bytes_to_unicode():
    """GPT-2's map from bytes to printable code points (so a BPE token is a plain string)."""
    keep = list(range(ord("!"), ord("~") + 1))
    keep += list(range(ord("\xa1"), ord("\xac") + 1)) + list(range(ord("\xae"), ord("\xff") + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def train_bpe():
    """Byte alphabet + merges to BPE_VOCAB tokens. Ties go to the lexicographically smallest
    pair so the result depends on TEXT alone."""
    b2u = bytes_to_unicode()
    vocab = [b2u[b] for b in range(256)]
    have = set(vocab)
    words = {}
    for piece in SPLIT_RE.findall(TEXT):
        w = tuple(b2u[b] for b in piece.encode("utf-8"))
        words[w] = words.get(w, 0) + 1
    merges = []
    while len(vocab) < BPE_VOCAB:
        pairs = {}
        for w, n in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + n
        if not pairs:
            raise SystemExit("training text too short for the vocabulary")
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        joined = best[0] + best[1]
        if joined not in have:
            have.add(joined)
            vocab.append(joined)
        new_words = {}
        for w, n in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(joined)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new_words[tuple(out)] = new_words.get(tuple(out), 0) + n
        words = new_words
    return vocab, merges


def tokenizer_json(vocab, merges):
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    added = [
        {"id": BPE_VOCAB + i, "content": s, "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": True}
        for i, s in enumerate(SPECIALS)
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": None,
        "decoder": dict(byte_level, add_prefix_space=True),
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {t: i for i, t in enumerate(vocab)},
            "merges": [f"{a} {b}" for a, b in merges],
        },
    }


def tokenizer_config():
    decoder = {
        str(BPE_VOCAB + i): {"content": s, "lstrip": False, "normalized": False,
                             "rstrip": False, "single_word": False, "special": True}
        for i, s in enumerate(SPECIALS)
    }
    return {
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "bos_token": SPECIALS[0],
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": SPECIALS[2],
        "model_max_length": MAX_POS,
        "pad_token": SPECIALS[0],
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
    }


def special_tokens_map():
    tok = lambda s: {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                     "single_word": False}
    return {"bos_token": tok(SPECIALS[0]), "eos_token": tok(SPECIALS[2]),
            "pad_token": tok(SPECIALS[0])}


def config_llama():
    """config.json as transformers 4.44.2's LlamaConfig.save_pretrained writes it."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "hidden_act": "silu",
        "hidden_size": HIDDEN,
        "initializer_range": 0.02,
        "intermediate_size": FFN,
        "max_position_embeddings": MAX_POS,
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "num_key_value_heads": KV_HEADS,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": None,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "transformers_version": TRANSFORMERS_VERSION,
        "use_cache": True,
        "vocab_size": TOK_VOCAB,
    }


QWEN2_VOCAB = 392


def config_qwen2():
    """config.json as transformers 4.44.2's Qwen2Config.save_pretrained writes it."""
    return {
        "architectures": ["Qwen2ForCausalLM"],
        "attention_dropout": 0.0,
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "hidden_act": "silu",
        "hidden_size": HIDDEN,
        "initializer_range": 0.02,
        "intermediate_size": FFN,
        "max_position_embeddings": MAX_POS,
        "max_window_layers": 28,
        "model_type": "qwen2",
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "num_key_value_heads": KV_HEADS,
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0,
        "sliding_window": None,  # 4.44 writes null while use_sliding_window is false
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "transformers_version": TRANSFORMERS_VERSION,
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": QWEN2_VOCAB,
    }


def generation_config():
    return {"_from_model_config": True, "bos_token_id": BOS_ID, "eos_token_id": EOS_ID,
            "transformers_version": TRANSFORMERS_VERSION}


def fnv1a64(s):
    h = 0xCBF29CE484222325
    for b in s.encode("utf-8"):
        h = ((h ^ b) * 0x100000001B3) & MASK64
    return h


def normals(seed, name, n, std, mean=0.0):
    """n normals from splitmix64 seeded by (seed, name), as float32."""
    state = (seed * 0x9E3779B97F4A7C15 ^ fnv1a64(name)) & MASK64
    out = []

    def next_u53():
        nonlocal state
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        z ^= z >> 31
        return z >> 11

    while len(out) < n:
        u1 = (next_u53() + 1) / 9007199254740992.0  # (0, 1]: log stays finite
        u2 = next_u53() / 9007199254740992.0
        r = math.sqrt(-2.0 * math.log(u1))
        out.append(r * math.cos(2.0 * math.pi * u2))
        out.append(r * math.sin(2.0 * math.pi * u2))
    return (np.array(out[:n], dtype=np.float64) * std + mean).astype(np.float32)


def model_tensors(seed, vocab, qkv_bias, tied, out_scale):
    """HF-named tensors (f32) for one model, in the layout save_pretrained writes."""
    t = {}

    def mat(name, rows, cols, scale=1.0):
        t[name] = normals(seed, name, rows * cols, scale / math.sqrt(cols)).reshape(rows, cols)

    def vec(name, n, std, mean=0.0):
        t[name] = normals(seed, name, n, std, mean)

    t["model.embed_tokens.weight"] = normals(seed, "model.embed_tokens.weight",
                                             vocab * HIDDEN, 1.0).reshape(vocab, HIDDEN)
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        vec(p + "input_layernorm.weight", HIDDEN, 0.1, 1.0)
        vec(p + "post_attention_layernorm.weight", HIDDEN, 0.1, 1.0)
        mat(p + "self_attn.q_proj.weight", HEADS * HEAD_DIM, HIDDEN, 2.0)
        mat(p + "self_attn.k_proj.weight", KV_HEADS * HEAD_DIM, HIDDEN, 2.0)
        mat(p + "self_attn.v_proj.weight", KV_HEADS * HEAD_DIM, HIDDEN)
        mat(p + "self_attn.o_proj.weight", HIDDEN, HEADS * HEAD_DIM, out_scale)
        if qkv_bias:
            vec(p + "self_attn.q_proj.bias", HEADS * HEAD_DIM, 0.5)
            vec(p + "self_attn.k_proj.bias", KV_HEADS * HEAD_DIM, 0.5)
            vec(p + "self_attn.v_proj.bias", KV_HEADS * HEAD_DIM, 0.5)
        mat(p + "mlp.gate_proj.weight", FFN, HIDDEN)
        mat(p + "mlp.up_proj.weight", FFN, HIDDEN)
        mat(p + "mlp.down_proj.weight", HIDDEN, FFN, out_scale)
    vec("model.norm.weight", HIDDEN, 0.1, 1.0)
    if not tied:
        mat("lm_head.weight", vocab, HIDDEN, 4.0)
    return t


def to_bf16_bits(a):
    """f32 -> BF16 bit patterns, round to nearest even (the values here are all finite)."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def write_safetensors(path, tensors, dtype):
    """dtype 'float32' or 'bfloat16'; metadata format=pt as transformers requires."""
    keep = {}
    specs = {}
    for name, a in tensors.items():
        data = np.ascontiguousarray(to_bf16_bits(a) if dtype == "bfloat16" else a.astype("<f4"))
        keep[name] = data
        specs[name] = TensorSpec(dtype=dtype, shape=list(a.shape), data_ptr=data.ctypes.data,
                                 data_len=data.nbytes)
    tmp = path + ".tmp"
    serialize_file(specs, tmp, metadata={"format": "pt"})
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return sum(d.nbytes for d in keep.values())


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, sort_keys=True, ensure_ascii=False)
        f.write("\n")


def write_folder(folder, config, tok, tensors, dtype):
    tmp = folder + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    write_json(os.path.join(tmp, "config.json"), config)
    write_json(os.path.join(tmp, "generation_config.json"), generation_config())
    write_json(os.path.join(tmp, "tokenizer.json"), tok)
    write_json(os.path.join(tmp, "tokenizer_config.json"), tokenizer_config())
    write_json(os.path.join(tmp, "special_tokens_map.json"), special_tokens_map())
    if isinstance(tensors, dict):
        write_safetensors(os.path.join(tmp, "model.safetensors"), tensors, dtype)
    else:
        # Sharded: a list of dicts, one per file, plus the index save_pretrained writes.
        n = len(tensors)
        weight_map, total = {}, 0
        for i, part in enumerate(tensors):
            fname = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
            total += write_safetensors(os.path.join(tmp, fname), part, dtype)
            for name in part:
                weight_map[name] = fname
        write_json(os.path.join(tmp, "model.safetensors.index.json"),
                   {"metadata": {"total_size": total}, "weight_map": weight_map})
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    vocab, merges = train_bpe()
    tok = tokenizer_json(vocab, merges)

    llama = model_tensors(2001, TOK_VOCAB, qkv_bias=False, tied=False, out_scale=1.0)
    write_folder(os.path.join(out, "tiny-llama"), config_llama(), tok, llama, "float32")
    # Shard 1: embeddings and layer 0; shard 2: the rest (what a size-capped save would do).
    first = {k: v for k, v in llama.items()
             if k.startswith("model.embed_tokens.") or k.startswith("model.layers.0.")}
    rest = {k: v for k, v in llama.items() if k not in first}
    write_folder(os.path.join(out, "tiny-llama-sharded"), config_llama(), tok, [first, rest],
                 "float32")

    qwen2 = model_tensors(2002, QWEN2_VOCAB, qkv_bias=True, tied=True, out_scale=4.0)
    write_folder(os.path.join(out, "tiny-qwen2"), config_qwen2(), tok, qwen2, "bfloat16")
    print(f"wrote {out}/tiny-llama, tiny-llama-sharded, tiny-qwen2 "
          f"({len(merges)} merges, tokenizer vocab {TOK_VOCAB})")


if __name__ == "__main__":
    main()
