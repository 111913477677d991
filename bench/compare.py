#!/usr/bin/env python3
"""Side-by-side table of `rlx bench --json` and the PyTorch anchor's JSON from the same
machine, with the ratios the CUDA issue targets.

  python3 bench/compare.py rlx.json torch.json
"""
import json, sys

rlx, torch = (json.load(open(p)) for p in sys.argv[1:3])
rows = []


def add(name, ours_key, peer_key, kind, target):
    o, p = rlx.get(ours_key), torch.get(peer_key)
    if o is None or p is None:
        rows.append((name, o, p, None, target, "missing"))
        return
    # time: ours/peer (lower is better); throughput: peer/ours = our throughput / theirs.
    r = o / p if kind == "time" else p / o
    ok = r <= target if kind == "time" else r >= target
    rows.append((name, o, p, r, target, "met" if ok else "missed"))


add("MNIST CNN train step b128 (vs eager)", "mnist_cnn_b128_train_step_ms",
    "mnist_cnn_b128_train_step_eager_ms", "time", 0.5)
for dt in ("float32", "float16"):
    add(f"MiniLM {dt} b1x128 latency (vs compile)", f"minilm_{dt}_b1_s128_ms",
        f"minilm_{dt}_compile_b1_s128_ms", "time", 0.5)
    add(f"MiniLM {dt} b32x128 throughput (vs compile)", f"minilm_{dt}_b32_s128_ms",
        f"minilm_{dt}_compile_b32_s128_ms", "throughput", 1.5)
    add(f"MiniLM {dt} b1x128 latency (vs eager)", f"minilm_{dt}_b1_s128_ms",
        f"minilm_{dt}_eager_b1_s128_ms", "time", 1.0)
print(f"GPU: {torch.get('gpu')}  torch {torch.get('torch')}")
print("| workload | rlx ms | torch ms | ratio | target | |")
print("|---|---:|---:|---:|---:|---|")
for name, o, p, r, t, verdict in rows:
    f = lambda v: "-" if v is None else f"{v:.4f}"
    rs = "-" if r is None else f"{r:.2f}x"
    tt = f"<= {t}x" if "latency" in name or "step" in name else f">= {t}x"
    print(f"| {name} | {f(o)} | {f(p)} | {rs} | {tt} | {verdict} |")
