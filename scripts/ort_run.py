"""ONNX Runtime (CPU) on the same .npy inputs as `rlx run`: the reference for the real-model
tests (crates/rlx-onnx/tests/real_models.rs) and the peer for bench/cpu_onnx_vs_ort.sh.

  PY scripts/ort_run.py MODEL.onnx --input NAME=FILE.npy ... [--output DIR] [--threads 2]
                        [--iters N] [--no-opt]

PY is a Python with numpy (the venv of scripts/hf_ref_env.sh); onnxruntime comes from the
interpreter if it has it, else from $RLX_CACHE/py-ort (scripts/ort_bench.py installs it there).
Writes DIR/<output name>.npy (names with characters other than [A-Za-z0-9._-] get "_" for
them, as `rlx run` does). Session: THREADS intra-op threads, 1 inter-op, sequential, all
graph optimisations (none with --no-opt: the ONNX semantics node by node, which ORT's fused
int8 kernels depart from — see tests/real_models.rs). With --iters N, prints `ort median_ms X` over N runs after a warm-up.
"""

import argparse
import os
import re
import statistics
import sys
import time

import numpy as np

CACHE = os.environ.get("RLX_CACHE", os.path.expanduser("~/.cache/rlx"))


def import_ort():
    try:
        import onnxruntime
    except ImportError:
        sys.path.append(os.path.join(CACHE, "py-ort"))
        import onnxruntime
    return onnxruntime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--input", action="append", default=[], metavar="NAME=FILE")
    ap.add_argument("--output")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=0)
    ap.add_argument("--no-opt", action="store_true")
    args = ap.parse_args()
    ort = import_ort()
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_DISABLE_ALL if args.no_opt
                                   else ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    # Errors only: the PP-OCR file's unused initializers otherwise fill the log.
    so.log_severity_level = 3
    sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
    feeds = {}
    for spec in args.input:
        name, path = spec.rsplit("=", 1)
        feeds[name] = np.load(path)
    outs = sess.run(None, feeds)
    if args.output:
        os.makedirs(args.output, exist_ok=True)
        for meta, value in zip(sess.get_outputs(), outs):
            fname = re.sub(r"[^A-Za-z0-9._-]", "_", meta.name) + ".npy"
            np.save(os.path.join(args.output, fname), value)
    if args.iters > 0:
        times = []
        for _ in range(args.iters):
            t = time.perf_counter()
            sess.run(None, feeds)
            times.append((time.perf_counter() - t) * 1e3)
        print(f"ort median_ms {statistics.median(times):.3f}")


if __name__ == "__main__":
    main()
