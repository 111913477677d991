"""Reference 8-bit activation products from ggml itself (the CPU backend of the llama.cpp that
scripts/llama_ref.sh builds), for rlx-cpu's tests/q8act_ggml.rs: per weight scheme, x
quantised by the scheme's `vec_dot_type` `from_float` (Q8_0, Q8_1 or Q8_K) and the
products by its `vec_dot`, both called through ctypes from libggml-cpu.

Random weight blocks (fixed seed; finite, moderate f16 scales in the header slots, the rest
random bytes) and x of mixed magnitudes; weight, quantised-x and x's f32 bytes as hex, the
dots as floats (f32 values, exactly). K = 256: a multiple of both block lengths.
Run: PYTHONPATH=${RLX_CACHE:-~/.cache/rlx}/py-llama-cpp-0.3.36 python3 scripts/ggml_q8_ref.py OUT.json
"""
import ctypes
import json
import os
import sys

import numpy as np
import llama_cpp

LIB = os.path.join(os.path.dirname(llama_cpp.__file__), "lib")

# name: (ggml type, block values, block bytes, [(offset of an f16 scale, low, high)])
SCHEMES = {
    "Q4_0": (2, 32, 18, [(0, 0.01, 0.2)]),
    "Q4_1": (3, 32, 20, [(0, 0.01, 0.2), (2, -1.0, 1.0)]),
    "Q5_0": (6, 32, 22, [(0, 0.01, 0.1)]),
    "Q5_1": (7, 32, 24, [(0, 0.01, 0.1), (2, -1.0, 1.0)]),
    "Q8_0": (8, 32, 34, [(0, 0.01, 0.2)]),
    "Q4_K": (12, 256, 144, [(0, 2e-4, 1e-3), (2, 2e-3, 2e-2)]),
    "Q5_K": (13, 256, 176, [(0, 2e-4, 1e-3), (2, 2e-3, 2e-2)]),
    "Q6_K": (14, 256, 210, [(208, 5e-5, 3e-4)]),
}
# vec_dot_type: (block values, block bytes)
ACT = {8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36), 15: ("Q8_K", 256, 292)}
N, K, M = 4, 256, 2


class Traits(ctypes.Structure):
    _fields_ = [
        ("from_float", ctypes.c_void_p),
        ("vec_dot", ctypes.c_void_p),
        ("vec_dot_type", ctypes.c_int),
        ("nrows", ctypes.c_int64),
    ]


FROM_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
VEC_DOT = ctypes.CFUNCTYPE(
    None, ctypes.c_int, ctypes.POINTER(ctypes.c_float), ctypes.c_size_t, ctypes.c_void_p,
    ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
)


def main(out_path):
    ctypes.CDLL(os.path.join(LIB, "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
    cpu = ctypes.CDLL(os.path.join(LIB, "libggml-cpu.so"), mode=ctypes.RTLD_GLOBAL)
    cpu.ggml_get_type_traits_cpu.restype = ctypes.POINTER(Traits)
    cpu.ggml_cpu_init()
    rng = np.random.default_rng(20261203)
    out = {
        "generator": "scripts/ggml_q8_ref.py, llama-cpp-python " + llama_cpp.__version__,
        "system_info": llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
        "n": N, "k": K, "m": M,
        "schemes": [],
    }
    for name, (t, bl, bb, scales) in SCHEMES.items():
        tr = cpu.ggml_get_type_traits_cpu(t).contents
        act_name, abl, abb = ACT[tr.vec_dot_type]
        at = cpu.ggml_get_type_traits_cpu(tr.vec_dot_type).contents
        w = bytearray()
        for _ in range(N * K // bl):
            b = bytearray(rng.integers(0, 256, bb, dtype=np.uint8).tobytes())
            for off, lo, hi in scales:
                b[off : off + 2] = np.float16(rng.uniform(lo, hi)).tobytes()
            w += b
        mags = np.repeat(10.0 ** rng.uniform(-2, 1, M * K // 32), 32)
        x = (rng.standard_normal(M * K) * mags).astype(np.float32)
        arow = K // abl * abb
        xq = ctypes.create_string_buffer(M * arow)
        for i in range(M):
            FROM_FLOAT(at.from_float)(x[i * K :].ctypes.data, ctypes.addressof(xq) + i * arow, K)
        wbuf = ctypes.create_string_buffer(bytes(w), len(w))
        rb = K // bl * bb
        dots = []
        s = ctypes.c_float()
        for i in range(M):
            for r in range(N):
                VEC_DOT(tr.vec_dot)(
                    K, ctypes.byref(s), 0, ctypes.addressof(wbuf) + r * rb, 0,
                    ctypes.addressof(xq) + i * arow, 0, 1,
                )
                dots.append(float(s.value))
        out["schemes"].append({
            "scheme": name,
            "act": act_name,
            "w": bytes(w).hex(),
            "x": x.tobytes().hex(),
            "xq": xq.raw.hex(),
            "dots": dots,
        })
    with open(out_path, "w") as f:
        json.dump(out, f)
        f.write("\n")


main(sys.argv[1])
