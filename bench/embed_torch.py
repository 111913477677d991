"""PyTorch peer for `rlx bench`'s embed row: all-MiniLM-L6-v2 sentences/s in plain torch.

  python3 bench/embed_torch.py MODEL_DIR [--device cuda|cpu] [--precisions fp32,fp16]
                                         [--modes eager,compile] [--rounds 10] [--no-st]

Needs only PyTorch (2.x on the GPU; 1.13 works on the CPU without compile): the BERT forward is
written here from MODEL_DIR's config.json and model.safetensors (the header parsed with json +
struct when the `safetensors` package is absent), then mean pooling over the mask and L2
normalisation, i.e. what sentence-transformers' pipeline for this model computes. Attention
uses F.scaled_dot_product_attention where torch has it (what transformers' BERT uses on torch
2.x), else matmul + softmax.

Workload, the one scripts/ort_bench.py times on the CPU: 256 sentences, the 36 of
crates/rlx-models/tests/data/st_ref_minilm.json cycled, as their committed token ids (the
tokenizer's, truncated at 256 as sentence-transformers does: no tokenizer needed here), in
batches of 32 each padded to its longest; "sorted" sorts by length first, as
SentenceTransformer.encode does. Each row is the median of ROUNDS rounds after warm-up (for
compile: after every batch shape has been seen; dynamic=True so a new length is no recompile).
If sentence_transformers is importable (and not --no-st) its encode() on the same device and
precision is timed too (tokenization included, as a user of it pays it).

Correctness: every mode's embeddings are compared with the reference (SentenceTransformer fp32
on the same device when present, else the committed CPU embeddings) and the smallest cosine is
printed; the script exits 1 below 0.9999 in fp32 or 0.999 in fp16/bf16.
"""

import argparse
import json
import math
import os
import statistics
import struct
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, "..", "crates", "rlx-models", "tests", "data", "st_ref_minilm.json")
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
ST_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
             "I64": torch.int64}


def load_safetensors(path):
    """name -> tensor. The package when present, else the format by hand: an 8-byte
    little-endian header length, a JSON header of dtype/shape/data_offsets, then the data."""
    try:
        from safetensors.torch import load_file
        return load_file(path)
    except ImportError:
        pass
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = ST_DTYPES[info["dtype"]]
        if end == start:
            out[name] = torch.zeros(info["shape"], dtype=dtype)
            continue
        buf = bytearray(blob[base + start:base + end])
        out[name] = torch.frombuffer(buf, dtype=dtype).reshape(info["shape"])
    return out


class Bert:
    """BertModel's encoder (absolute positions, token types, post-LN, exact GELU)."""

    def __init__(self, model_dir, device, dtype):
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
        if cfg.get("hidden_act", "gelu") != "gelu":
            raise SystemExit(f"hidden_act {cfg['hidden_act']!r}: only exact gelu is written")
        raw = load_safetensors(os.path.join(model_dir, "model.safetensors"))
        w = {}
        for k, v in raw.items():
            k = k[len("bert."):] if k.startswith("bert.") else k
            if v.is_floating_point():
                w[k] = v.to(device=device, dtype=dtype).contiguous()
        self.w = w
        self.layers = cfg["num_hidden_layers"]
        self.heads = cfg["num_attention_heads"]
        self.eps = cfg["layer_norm_eps"]
        self.sdpa = hasattr(F, "scaled_dot_product_attention")

    def lin(self, x, name):
        return F.linear(x, self.w[name + ".weight"], self.w[name + ".bias"])

    def ln(self, x, name):
        return F.layer_norm(x, x.shape[-1:], self.w[name + ".weight"], self.w[name + ".bias"],
                            self.eps)

    def attention(self, x, keep, p):
        b, s, h = x.shape
        d = h // self.heads

        def split(t):
            return t.view(b, s, self.heads, d).transpose(1, 2)

        q = split(self.lin(x, p + "attention.self.query"))
        k = split(self.lin(x, p + "attention.self.key"))
        v = split(self.lin(x, p + "attention.self.value"))
        if self.sdpa:
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])
        else:
            scores = q @ k.transpose(-1, -2) / math.sqrt(d)
            scores = scores.masked_fill(~keep[:, None, None, :], torch.finfo(scores.dtype).min)
            ctx = scores.softmax(-1) @ v
        return ctx.transpose(1, 2).reshape(b, s, h)

    def __call__(self, ids, mask):
        x = self.hidden(ids, mask)
        m = mask[:, :, None].to(x.dtype)
        pooled = (x * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return F.normalize(pooled.float(), dim=-1)

    def hidden(self, ids, mask):
        """The encoder's last_hidden_state (what the ONNX export outputs)."""
        keep = mask.bool()
        s = ids.shape[1]
        w = self.w
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:s][None]
             + w["embeddings.token_type_embeddings.weight"][0][None, None])
        x = self.ln(x, "embeddings.LayerNorm")
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            a = self.lin(self.attention(x, keep, p), p + "attention.output.dense")
            x = self.ln(a + x, p + "attention.output.LayerNorm")
            f = F.gelu(self.lin(x, p + "intermediate.dense"))
            x = self.ln(self.lin(f, p + "output.dense") + x, p + "output.LayerNorm")
        return x


def pad(rows, device):
    n = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), n, dtype=torch.long)
    mask = torch.zeros(len(rows), n, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.tensor(r)
        mask[i, :len(r)] = 1
    return ids.to(device), mask.to(device)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def median_time(rounds, device, fn):
    fn()
    sync(device)
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def min_cos(got, want):
    return float(F.cosine_similarity(got.float().cpu(), want.float().cpu(), dim=-1).min())


def time_st(model, texts, want, floor, prec, mode, rounds, device, warmup=0):
    """Time SentenceTransformer.encode over `texts`, print its row; True below the floor."""
    def encode():
        return model.encode(texts, batch_size=32, convert_to_tensor=True)
    with torch.no_grad():
        for _ in range(warmup):
            encode()
        t = median_time(rounds, device, encode)
        got = encode()
    c = min_cos(got, want)
    n = len(texts)
    print(f"{'st.encode':<10}{prec:<6}{mode:<9}{'sorted':<8}{t * 1e3:>9.1f}"
          f"{n / t:>10.1f}{c:>11.7f}")
    return c < floor


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--precisions", default=None, help="default fp32,fp16 on cuda, fp32 on cpu")
    ap.add_argument("--modes", default=None, help="default eager,compile where torch has it")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2, help="CPU threads (cpu device only)")
    ap.add_argument("--count", type=int, default=256,
                    help="sentences in the workload (a quick CPU check may take fewer)")
    ap.add_argument("--no-st", action="store_true", help="skip SentenceTransformer.encode")
    args = ap.parse_args()
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    precisions = (args.precisions or ("fp32,fp16" if device.type == "cuda" else "fp32")).split(",")
    has_compile = hasattr(torch, "compile")
    modes = (args.modes or ("eager,compile" if has_compile else "eager")).split(",")
    if "compile" in modes and not has_compile:
        raise SystemExit(f"torch {torch.__version__} has no torch.compile")

    with open(REF, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    n = args.count
    texts = [cases[i % len(cases)]["text"] for i in range(n)]
    rows = [cases[i % len(cases)]["ids"] for i in range(n)]
    order = sorted(range(n), key=lambda i: -len(rows[i]))
    workloads = {
        "mixed": [pad(rows[i:i + 32], device) for i in range(0, n, 32)],
        "sorted": [pad([rows[j] for j in order[i:i + 32]], device) for i in range(0, n, 32)],
    }
    ref_ids = list(range(n))
    sorted_ids = [j for i in range(0, n, 32) for j in order[i:i + 32]]

    st = None
    if not args.no_st:
        try:
            from sentence_transformers import SentenceTransformer
            st = SentenceTransformer(args.model_dir, device=str(device))
        except ImportError:
            pass
    if st is not None:
        with torch.no_grad():
            want = st.encode(texts, batch_size=32, convert_to_tensor=True).float().cpu()
        ref_name = f"SentenceTransformer fp32 on {device.type}"
    else:
        want = torch.tensor([cases[i % len(cases)]["embedding"] for i in range(n)])
        ref_name = "committed CPU embeddings (sentence-transformers fp32)"

    print(f"torch {torch.__version__} on {device}"
          + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else
             f", {torch.get_num_threads()} threads")
          + f"; {n} sentences in batches of 32; median of {args.rounds}; reference: {ref_name}")
    print(f"{'impl':<10}{'prec':<6}{'mode':<9}{'order':<8}{'ms/all':>9}{'sent/s':>10}"
          f"{'min cos':>11}")
    failed = False
    for prec in precisions:
        dtype = DTYPES[prec]
        bert = Bert(args.model_dir, device, dtype)
        floor = 0.9999 if prec == "fp32" else 0.999
        for mode in modes:
            fn = bert.__call__
            if mode == "compile":
                fn = torch.compile(fn, dynamic=True)
            for order_name, batches in workloads.items():
                idx = ref_ids if order_name == "mixed" else sorted_ids
                with torch.no_grad():
                    got = torch.cat([fn(i, m) for i, m in batches])
                    t = median_time(args.rounds, device, lambda: [fn(i, m) for i, m in batches])
                c = min_cos(got, want[idx])
                failed |= c < floor
                print(f"{'torch':<10}{prec:<6}{mode:<9}{order_name:<8}{t * 1e3:>9.1f}"
                      f"{n / t:>10.1f}{c:>11.7f}")
        del bert
        if st is not None:
            model = st.half() if prec == "fp16" else (st.bfloat16() if prec == "bf16" else st)
            failed |= time_st(model, texts, want, floor, prec, "eager", args.rounds, device)
            if "compile" in modes and hasattr(torch, "compile"):
                # The same encode() with its transformer compiled (dynamic shapes: the
                # padded length changes per batch); warm-up rounds see every batch shape.
                eager_model = model[0].auto_model
                model[0].auto_model = torch.compile(eager_model, dynamic=True)
                failed |= time_st(model, texts, want, floor, prec, "compile", args.rounds,
                                  device, warmup=2)
                model[0].auto_model = eager_model
            st = model.float()
    if failed:
        print("FAILED: a cosine is below the floor (0.9999 fp32, 0.999 fp16/bf16)")
        sys.exit(1)


if __name__ == "__main__":
    main()
