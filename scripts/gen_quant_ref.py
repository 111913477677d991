"""Reference dequantisations from gguf-py (llama.cpp's own numpy implementation of ggml's
block formats), for rlx-cpu's tests/linalg.rs `quant_matches_gguf_py` and
`quantize_matches_gguf_py`: a second, external check of the layouts besides the tests' own
f64 oracle, and of the 32-value formats' reference quantisers.

Random blocks (fixed seed) with finite, moderate f16 scales in the header slots, the rest
random bytes; each scheme's bytes (hex) and gguf-py's f32 values go into one small JSON.
Run: PYTHONPATH=${RLX_CACHE:-~/.cache/rlx}/py-gguf-0.19.0 python3 scripts/gen_quant_ref.py OUT.json
"""
import json
import random
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

# (scheme, blocks, block bytes, [(offset of an f16 scale, low, high)]).
SCHEMES = [
    ("Q8_0", 4, 34, [(0, 0.01, 0.2)]),
    ("Q4_0", 4, 18, [(0, 0.01, 0.2)]),
    ("Q4_1", 4, 20, [(0, 0.01, 0.2), (2, -1.0, 1.0)]),
    ("Q5_0", 4, 22, [(0, 0.01, 0.1)]),
    ("Q5_1", 4, 24, [(0, 0.01, 0.1), (2, -1.0, 1.0)]),
    ("Q4_K", 2, 144, [(0, 2e-4, 1e-3), (2, 2e-3, 2e-2)]),
    ("Q5_K", 2, 176, [(0, 2e-4, 1e-3), (2, 2e-3, 2e-2)]),
    ("Q6_K", 2, 210, [(208, 5e-5, 3e-4)]),
]


def main(out_path):
    rng = random.Random(20261201)
    out = {"generator": "scripts/gen_quant_ref.py, gguf-py 0.19.0", "schemes": []}
    for name, blocks, bb, scales in SCHEMES:
        raw = bytearray()
        for _ in range(blocks):
            b = bytearray(rng.randrange(256) for _ in range(bb))
            for off, lo, hi in scales:
                b[off : off + 2] = np.float16(rng.uniform(lo, hi)).tobytes()
            raw += b
        vals = dequantize(np.frombuffer(bytes(raw), dtype=np.uint8), getattr(T, name))
        vals = np.asarray(vals, dtype=np.float32).reshape(-1)
        out["schemes"].append(
            {"scheme": name, "hex": raw.hex(), "values": [float(v) for v in vals]}
        )
    # gguf-py's quantisers mirror ggml's quantize_row_*_ref for the 32-value formats (it has
    # none for the K-quants): normals, 4 rows of 64, quantised bytes in hex.
    x = np.array([rng.gauss(0.5, 2.0) for _ in range(256)], dtype=np.float32).reshape(4, 64)
    out["quantize_input"] = [float(v) for v in x.reshape(-1)]
    out["quantized"] = {}
    for name in ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"]:
        out["quantized"][name] = quantize(x, getattr(T, name)).tobytes().hex()
    with open(out_path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
