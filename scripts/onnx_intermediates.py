"""Bisect an ONNX model node by node: expose intermediate values as extra graph outputs and
run the modified model through ONNX Runtime (graph optimisations off and on) and through the
onnx package's ReferenceEvaluator (the spec's own semantics); then compare any two runs,
rlx's included, value by value in graph order.

  PY scripts/onnx_intermediates.py expose MODEL.onnx DIR [--input NAME=FILE.npy ...]
        [--ops OP,OP,...] [--names NAME,NAME,...] [--no-ref]
      writes DIR/model.onnx (the model with the chosen values as outputs: every node output
      of the listed op types, plus the listed names; all node outputs when neither is given)
      and DIR/{ort_noopt,ort_opt,ref}/<value>.npy.
  cargo run -q -p rlx-cli -- run DIR/model.onnx --input NAME=FILE.npy ... --output DIR/rlx
  PY scripts/onnx_intermediates.py compare DIR A B [--tol T]
      prints max |A - B| and rel-L2 for every value both runs hold, in graph order, and marks
      the first whose max |A - B| exceeds T (default 1e-4) relative to max |B|.

Exposing a value stops ORT fusing across it (a fused subgraph cannot publish its inside), so
for ORT-with-optimisations pick values at fusion boundaries (e.g. --ops Add,DynamicQuantize-
Linear's float inputs). PY is the venv of scripts/hf_ref_env.sh with $RLX_CACHE/py-onnx and
$RLX_CACHE/py-ort on PYTHONPATH. File names: characters outside [A-Za-z0-9._-] become "_", as
`rlx run` writes them.
"""

import argparse
import os
import re
import sys

import numpy as np

CACHE = os.environ.get("RLX_CACHE", os.path.expanduser("~/.cache/rlx"))
sys.path += [os.path.join(CACHE, "py-onnx"), os.path.join(CACHE, "py-ort")]

import onnx  # noqa: E402
from onnx import helper, shape_inference  # noqa: E402


def fname(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def expose(model, ops, names):
    """The model with the chosen node outputs appended to its graph outputs (typed by shape
    inference; a value inference cannot type is left out with a note)."""
    inferred = shape_inference.infer_shapes(model)
    types = {v.name: v.type for v in inferred.graph.value_info}
    have = {o.name for o in model.graph.output}
    chosen = []
    for node in model.graph.node:
        if node.op_type == "Constant":
            continue
        for out in node.output:
            if not out or out in have:
                continue
            if (not ops and not names) or node.op_type in ops or out in names:
                chosen.append(out)
    for name in chosen:
        t = types.get(name)
        if t is None or not t.HasField("tensor_type"):
            print(f"note: {name} has no inferred type; not exposed", file=sys.stderr)
            continue
        vi = helper.make_empty_tensor_value_info(name)
        vi.type.tensor_type.elem_type = t.tensor_type.elem_type
        model.graph.output.append(vi)
        have.add(name)
    return model


def save_all(dirname, names, values):
    os.makedirs(dirname, exist_ok=True)
    for n, v in zip(names, values):
        np.save(os.path.join(dirname, fname(n) + ".npy"), np.asarray(v))


def run_ort(path, feeds, optimise):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.log_severity_level = 3
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimise
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    return names, s.run(None, feeds)


def reference(model):
    """The ReferenceEvaluator, patched for two gaps of onnx 1.17 with older opsets:
    DequantizeLinear is registered only from opset 19 (whose per-tensor / per-axis semantics
    are those of opsets 10 and 13), and BatchNormalization-9 runs in training mode (batch
    statistics) whenever the node carries a `momentum` attribute, though before opset 14 the
    op always normalises with the given running mean and variance."""
    from onnx.reference import ReferenceEvaluator
    from onnx.reference.op_run import OpRun
    from onnx.reference.ops.op_dequantize_linear import DequantizeLinear_21

    class DequantizeLinear(DequantizeLinear_21):
        op_domain = ""

    class BatchNormalization(OpRun):
        op_domain = ""

        def _run(self, x, scale, bias, mean, var, epsilon=None, momentum=None,
                 training_mode=None):
            shape = [1, -1] + [1] * (x.ndim - 2)
            eps = 1e-5 if epsilon is None else epsilon
            inv = 1.0 / np.sqrt(var.reshape(shape) + eps)
            y = (x - mean.reshape(shape)) * inv * scale.reshape(shape) + bias.reshape(shape)
            return (y.astype(x.dtype),)

    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                default=21)
    extra = [DequantizeLinear] if opset < 19 else []
    extra += [BatchNormalization] if opset < 14 else []
    return ReferenceEvaluator(model, new_ops=extra)


def cmd_expose(a):
    model = onnx.load(a.model)
    ops = set(filter(None, a.ops.split(",")))
    names = set(filter(None, a.names.split(",")))
    model = expose(model, ops, names)
    os.makedirs(a.dir, exist_ok=True)
    path = os.path.join(a.dir, "model.onnx")
    onnx.save(model, path)
    feeds = {}
    for spec in a.input:
        k, f = spec.rsplit("=", 1)
        feeds[k] = np.load(f)
    for tag, opt in (("ort_noopt", False), ("ort_opt", True)):
        n, v = run_ort(path, feeds, opt)
        save_all(os.path.join(a.dir, tag), n, v)
        print(f"{tag}: {len(n)} values")
    if not a.no_ref:
        ev = reference(model)
        n = [o.name for o in model.graph.output]
        save_all(os.path.join(a.dir, "ref"), n, ev.run(None, feeds))
        print(f"ref: {len(n)} values")


def cmd_compare(a):
    model = onnx.load(os.path.join(a.dir, "model.onnx"))
    da, db = os.path.join(a.dir, a.a), os.path.join(a.dir, a.b)
    first = None
    for node in model.graph.node:
        for out in node.output:
            fa, fb = (os.path.join(d, fname(out) + ".npy") for d in (da, db))
            if not (os.path.exists(fa) and os.path.exists(fb)):
                continue
            x, y = np.load(fa).astype(np.float64), np.load(fb).astype(np.float64)
            if x.shape != y.shape:
                print(f"{node.op_type:22} {out}: shapes {x.shape} vs {y.shape}")
                continue
            d = np.abs(x - y)
            mx = float(d.max()) if d.size else 0.0
            ref = float(np.abs(y).max()) if y.size else 0.0
            den = float(np.sqrt((y * y).sum()))
            rel = float(np.sqrt((d * d).sum()) / den) if den > 0 else mx
            bad = mx > a.tol * max(ref, 1e-30)
            mark = ""
            if bad and first is None:
                first = out
                mark = "  <== first divergence"
            if bad or not a.only_bad:
                print(f"{node.op_type:22} {out}: max|d| {mx:.3e} (max|b| {ref:.3e}) "
                      f"rel-L2 {rel:.3e} n_diff {int((d > 0).sum())}/{d.size}{mark}")
    print(f"first divergence: {first}")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("expose")
    e.add_argument("model")
    e.add_argument("dir")
    e.add_argument("--input", action="append", default=[], metavar="NAME=FILE")
    e.add_argument("--ops", default="")
    e.add_argument("--names", default="")
    e.add_argument("--no-ref", action="store_true")
    c = sub.add_parser("compare")
    c.add_argument("dir")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--tol", type=float, default=1e-4)
    c.add_argument("--only-bad", action="store_true")
    a = ap.parse_args()
    cmd_expose(a) if a.cmd == "expose" else cmd_compare(a)


if __name__ == "__main__":
    main()
