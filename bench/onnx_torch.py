"""PyTorch peer for `rlx run` on the all-MiniLM-L6-v2 ONNX export (scripts/ort_export.py):
the same BERT encoder in plain torch (bench/embed_torch.py's `Bert`, weights from the model
folder's model.safetensors), the same inputs (.npy files rlx also reads), timed host to host as
`rlx run --iters` is (inputs copied to the GPU, forward, last_hidden_state copied back), the
median over ITERS runs after warm-up; fp32, eager and torch.compile.

  python3 bench/onnx_torch.py MODEL_DIR INPUT_DIR [INPUT_DIR …] [--iters 50] [--rlx-out DIR …]

Each INPUT_DIR holds input_ids.npy and attention_mask.npy. With --rlx-out (one per INPUT_DIR,
the folder `rlx run --output` wrote), the rel-L2 of rlx's last_hidden_state against torch's is
printed too.
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from embed_torch import Bert  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--rlx-out", action="append", default=[])
    a = ap.parse_args()
    dev = torch.device("cuda")
    bert = Bert(a.model_dir, dev, torch.float32)
    torch.backends.cuda.matmul.allow_tf32 = False
    compiled = torch.compile(bert.hidden)
    for n, d in enumerate(a.inputs):
        ids_np = np.load(os.path.join(d, "input_ids.npy"))
        mask_np = np.load(os.path.join(d, "attention_mask.npy"))
        ids_h, mask_h = torch.from_numpy(ids_np), torch.from_numpy(mask_np)
        for mode, fn in (("eager", bert.hidden), ("compile", compiled)):
            def step():
                with torch.no_grad():
                    return fn(ids_h.to(dev), mask_h.to(dev)).cpu()
            for _ in range(3):
                out = step()
            times = []
            for _ in range(a.iters):
                t = time.perf_counter()
                out = step()
                times.append((time.perf_counter() - t) * 1e3)
            line = (f"torch {mode} fp32 {os.path.basename(d)} {tuple(ids_np.shape)}: "
                    f"median {statistics.median(times):.3f} ms, min {min(times):.3f} ms")
            if n < len(a.rlx_out):
                r = np.load(os.path.join(a.rlx_out[n], "last_hidden_state.npy"))
                t_ = out.numpy().astype(np.float64)
                rel = np.linalg.norm(r - t_) / np.linalg.norm(t_)
                line += f"; rlx vs torch rel-L2 {rel:.2e}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
