"""ONNX Runtime on the CPU running all-MiniLM-L6-v2: the CPU peer for `rlx bench`'s embed row.

  $(bash scripts/hf_ref_env.sh) scripts/ort_bench.py [MODEL_DIR] [--threads 2] [--rounds 12]
                                                      [--workloads 1x128,32x128,mixed,sorted]

Needs MODEL_DIR/model.onnx (scripts/ort_export.py; MODEL_DIR defaults to
$RLX_CACHE/hf/all-MiniLM-L6-v2). onnxruntime comes from the interpreter if it has it, else from
$RLX_CACHE/py-ort, installed there with pip --target --no-deps on first use (inference needs
only numpy, which the venv has; --no-deps keeps pip from pulling a second numpy). Session: 2
intra-op threads, 1 inter-op, sequential, all graph optimisations. Workloads, each timed as the
median of ROUNDS rounds after a warm-up, mean pooling + L2 normalisation (numpy) included:
  1x128, 32x128   random ids, full masks
  mixed           256 sentences: the 36 of crates/rlx-models/tests/data/st_ref_minilm.json
                  cycled, their committed ids (the tokenizer's, truncated at 256 as
                  sentence-transformers does), in batches of 32 each padded to its longest
  mixed-sorted    the same sorted by length first, as SentenceTransformer.encode batches
Prints a table: ms per batch (for mixed: per batch of 32, averaged over the 8) and sentences/s.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("RLX_CACHE", os.path.expanduser("~/.cache/rlx"))
ORT_VERSION = "1.32.0"
REF = os.path.join(HERE, "..", "crates", "rlx-models", "tests", "data", "st_ref_minilm.json")
VOCAB = 30522


def import_ort():
    try:
        import onnxruntime
        return onnxruntime
    except ImportError:
        pass
    site = os.path.join(CACHE, "py-ort")
    if not os.path.isdir(os.path.join(site, "onnxruntime")):
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                        "--disable-pip-version-check", "--no-deps", "--target", site,
                        f"onnxruntime=={ORT_VERSION}"], check=True)
    sys.path.append(site)
    import onnxruntime
    return onnxruntime


def pad_batch(rows):
    n = max(len(r) for r in rows)
    ids = np.zeros((len(rows), n), dtype=np.int64)
    mask = np.zeros((len(rows), n), dtype=np.int64)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = r
        mask[i, :len(r)] = 1
    return ids, mask


def embed(sess, ids, mask):
    h = sess.run(None, {"input_ids": ids, "attention_mask": mask,
                        "token_type_ids": np.zeros_like(ids)})[0]
    m = mask[:, :, None].astype(np.float32)
    pooled = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


def timed(rounds, fn):
    fn()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir", nargs="?",
                    default=os.path.join(CACHE, "hf", "all-MiniLM-L6-v2"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--workloads", default="1x128,32x128,mixed,sorted",
                    help="comma list out of 1x128, 32x128, mixed, sorted")
    args = ap.parse_args()
    ort = import_ort()
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(os.path.join(args.model_dir, "model.onnx"), so,
                                providers=["CPUExecutionProvider"])

    with open(REF, encoding="utf-8") as f:
        ref = json.load(f)
    cases = ref["cases"]
    mixed = [cases[i % len(cases)]["ids"] for i in range(256)]
    batches = [pad_batch(mixed[i:i + 32]) for i in range(0, 256, 32)]
    by_len = sorted(mixed, key=len, reverse=True)
    sorted_batches = [pad_batch(by_len[i:i + 32]) for i in range(0, 256, 32)]

    # The committed embeddings double as a check that the timed pipeline is the right one.
    got = embed(sess, *pad_batch([c["ids"] for c in cases[:32]]))
    want = np.array([c["embedding"] for c in cases[:32]], dtype=np.float32)
    min_cos = float((got * want).sum(1).min())

    rng = np.random.default_rng(11)
    want_rows = set(args.workloads.split(","))
    rows = []
    for b in [b for b in (1, 32) if f"{b}x128" in want_rows]:
        ids = rng.integers(1000, VOCAB, size=(b, 128), dtype=np.int64)
        mask = np.ones_like(ids)
        t = timed(args.rounds, lambda: embed(sess, ids, mask))
        rows.append((f"{b}x128 random", t * 1e3, b / t))
    for key, name, bs in (("mixed", "mixed 256 (8 x 32)", batches),
                          ("sorted", "mixed 256, length-sorted", sorted_batches)):
        if key not in want_rows:
            continue
        t = timed(args.rounds, lambda: [embed(sess, i, m) for i, m in bs])
        rows.append((name, t * 1e3 / len(bs), 256 / t))

    print(f"onnxruntime {ort.__version__}, {args.threads} intra-op threads, median of "
          f"{args.rounds} rounds; cosine vs sentence-transformers (32 sentences) >= {min_cos:.7f}")
    print(f"{'workload':<28}{'ms/batch':>10}{'sent/s':>10}")
    for name, ms, sps in rows:
        print(f"{name:<28}{ms:>10.1f}{sps:>10.1f}")


if __name__ == "__main__":
    main()
