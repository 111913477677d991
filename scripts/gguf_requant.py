"""Write SmolLM2 with its weights requantized to a mix of every GGUF type rlx reads, for the
decoder tests against llama.cpp (scripts/llama_ref.py --only mix):

    python3 scripts/gguf_requant.py SmolLM2-135M-Instruct.Q4_1.gguf OUT.gguf   (PYTHONPATH: gguf-py)

Every tensor is decoded with gguf-py, then stored again as (per layer i of 30):
  attn_q / attn_k / attn_v / attn_output / ffn_gate / ffn_up (576 columns, not a multiple of
      256, so 32-value types only): Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 in turn, shifted by one type
      per tensor kind so that every kind meets every type
  ffn_down (1536 columns): Q4_K, Q5_K, Q6_K in turn; layer 28 BF16, layer 29 F16
  token_embd (the tied head too): Q5_1; norms stay F32
so one real model holds all eleven types, K-quants and 5-bit types included, which a Q4_K_M
file mixes the same way (576-column matrices fall back to Q5_0 / Q8_0 in llama.cpp's too).

The K-quant encoders are written here (gguf-py decodes K-quants but does not encode them):
plain min / max per sub-block, scales rounded to the formats' 6- and 8-bit levels — not
ggml's error-minimising search, which a test needs no more than valid blocks. The 32-value
types use gguf-py's encoders. Only IEEE arithmetic (no transcendental functions), so the
same input gives the same bytes on any machine; the test reference records the output's
sha256 and scripts/fetch_models.sh rewrites the file when it differs.
"""

import sys

import numpy as np

from gguf import GGMLQuantizationType as T
from gguf import GGUFReader, GGUFWriter
from gguf.quants import dequantize, quantize

from gguf_to_f32 import copy_fields

LEGACY = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]
KQUANT = [T.Q4_K, T.Q5_K, T.Q6_K]
KINDS = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up"]


def f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def levels(want, step, top):
    """Integer levels of `want` in units of `step` (0 where the step is 0), clamped to top."""
    safe = np.where(step > 0, step, 1.0)
    return np.where(step > 0, np.clip(np.rint(want / safe), 0, top), 0).astype(np.uint8)


def pack_scale_min(ls, lm):
    """ggml's 12-byte packing of eight 6-bit scales and mins (get_scale_min_k4 reads it)."""
    q = np.zeros((ls.shape[0], 12), dtype=np.uint8)
    q[:, 0:4] = ls[:, 0:4] | ((ls[:, 4:8] >> 4) << 6)
    q[:, 4:8] = lm[:, 0:4] | ((lm[:, 4:8] >> 4) << 6)
    q[:, 8:12] = (ls[:, 4:8] & 0x0F) | ((lm[:, 4:8] & 0x0F) << 4)
    return q


def encode_q45_k(x, five):
    """Q4_K (144 bytes) or Q5_K (176 bytes) per 256 values: y = d·sc·q - dmin·m."""
    top = 31 if five else 15
    sub = x.reshape(-1, 8, 32).astype(np.float32)
    off = -np.minimum(sub.min(axis=2), 0.0)  # mins ≤ 0 only: the format subtracts dmin·m
    mx = sub.max(axis=2)
    dmin = f16(off.max(axis=1) / 63.0)
    lm = levels(off, dmin.astype(np.float32)[:, None], 63)
    lifted = np.maximum(mx + dmin.astype(np.float32)[:, None] * lm, 0.0)
    step = lifted / top
    d = f16(step.max(axis=1) / 63.0)
    ls = levels(step, d.astype(np.float32)[:, None], 63)
    s = d.astype(np.float32)[:, None] * ls  # (n, 8)
    o = dmin.astype(np.float32)[:, None] * lm
    safe = np.where(s > 0, s, 1.0)[:, :, None]
    q = np.where(s[:, :, None] > 0, np.clip(np.rint((sub + o[:, :, None]) / safe), 0, top), 0)
    q = q.astype(np.uint8).reshape(-1, 4, 2, 32)  # (block, pair c, half, lane)
    n = sub.shape[0]
    qs = (q[:, :, 0, :] & 0x0F) | ((q[:, :, 1, :] & 0x0F) << 4)  # (n, 4, 32)
    parts = [d.view(np.uint8).reshape(n, 2), dmin.view(np.uint8).reshape(n, 2), pack_scale_min(ls, lm)]
    if five:
        hi = (q >> 4) & 1  # bit (2c + half) of qh[lane]
        shifts = (2 * np.arange(4)[:, None] + np.arange(2)[None, :]).astype(np.uint8)
        qh = (hi << shifts[None, :, :, None]).sum(axis=(1, 2)).astype(np.uint8)
        parts.append(qh)
    parts.append(qs.reshape(n, 128))
    return np.concatenate(parts, axis=1)


def encode_q6_k(x):
    """Q6_K (210 bytes) per 256 values: ql[128], qh[64], int8 scales[16], d; y = d·sc·(q-32)."""
    sub = x.reshape(-1, 16, 16).astype(np.float32)
    step = np.abs(sub).max(axis=2) / 32.0
    d = f16(step.max(axis=1) / 127.0)
    sc = levels(step, d.astype(np.float32)[:, None], 127)
    s = d.astype(np.float32)[:, None] * sc
    safe = np.where(s > 0, s, 1.0)[:, :, None]
    q = np.where(s[:, :, None] > 0, np.clip(np.rint(sub / safe), -32, 31), 0)
    u = (q + 32).astype(np.uint8).reshape(-1, 2, 4, 32)  # (block, half h, group g, lane l)
    n = u.shape[0]
    ql = np.zeros((n, 2, 64), dtype=np.uint8)
    ql[:, :, 0:32] = (u[:, :, 0] & 0x0F) | ((u[:, :, 2] & 0x0F) << 4)
    ql[:, :, 32:64] = (u[:, :, 1] & 0x0F) | ((u[:, :, 3] & 0x0F) << 4)
    qh = np.zeros((n, 2, 32), dtype=np.uint8)
    for g in range(4):
        qh |= (u[:, :, g] >> 4) << (2 * g)
    return np.concatenate(
        [ql.reshape(n, 128), qh.reshape(n, 64), sc.view(np.uint8), d.view(np.uint8).reshape(n, 2)], axis=1
    )


def encode(x, qtype):
    """Rows of x (rows × cols, f32) as GGUF bytes of qtype, shaped as GGUFWriter wants them."""
    rows, cols = x.shape
    if qtype == T.F16:
        return x.astype(np.float16)
    if qtype in LEGACY or qtype == T.BF16:
        return quantize(x, qtype)
    flat = x.reshape(-1, 256)
    if qtype == T.Q6_K:
        b = encode_q6_k(flat)
    else:
        b = encode_q45_k(flat, qtype == T.Q5_K)
    return b.reshape(rows, -1)


def choose(name):
    if name == "token_embd.weight":
        return T.Q5_1
    parts = name.split(".")
    if parts[0] != "blk" or parts[-1] != "weight":
        return None
    i, kind = int(parts[1]), parts[2]
    if kind in KINDS:
        return LEGACY[(i + KINDS.index(kind)) % len(LEGACY)]
    if kind == "ffn_down":
        return {28: T.BF16, 29: T.F16}.get(i, KQUANT[i % len(KQUANT)])
    return None


def main():
    src, dst = sys.argv[1], sys.argv[2]
    r = GGUFReader(src)
    w = GGUFWriter(dst, r.fields["general.architecture"].contents())
    copy_fields(r, w)
    counts = {}
    for t in r.tensors:
        shape = [int(v) for v in reversed(t.shape.tolist())]
        if t.tensor_type == T.F32:
            x = np.asarray(t.data, dtype=np.float32).reshape(shape)
        else:
            x = dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        qtype = choose(t.name) if x.ndim == 2 else None
        if qtype is None:
            w.add_tensor(t.name, x, raw_dtype=T.F32)
            qtype = T.F32
        else:
            data = encode(x, qtype)
            back = dequantize(data, qtype)
            err = np.abs(back.reshape(shape) - x).max() / max(np.abs(x).max(), 1e-30)
            if err > 0.25:
                raise SystemExit(f"{t.name}: {qtype.name} round trip off by {err:.3g} of max |x|")
            w.add_tensor(t.name, data, raw_dtype=qtype)
        counts[qtype.name] = counts.get(qtype.name, 0) + 1
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {dst}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
