"""Export all-MiniLM-L6-v2's BertModel to ONNX, for the CPU peer benchmark (scripts/ort_bench.py).

  $(bash scripts/hf_ref_env.sh) scripts/ort_export.py [MODEL_DIR]

MODEL_DIR defaults to $RLX_CACHE/hf/all-MiniLM-L6-v2; writes MODEL_DIR/model.onnx (the cache,
never the checkout): torch.onnx.export, opset 14, inputs input_ids, attention_mask,
token_type_ids (int64 [batch, seq], both axes dynamic), output last_hidden_state
[batch, seq, 384]. Pooling is left to the caller, as sentence-transformers does it outside the
transformer too. When onnxruntime is importable (the venv, or $RLX_CACHE/py-ort where
scripts/ort_bench.py installs it) the export is checked against transformers on two padded
batches of different shapes.
"""

import os
import sys

import numpy as np
import torch
import transformers
from transformers import AutoTokenizer, BertModel

CACHE = os.environ.get("RLX_CACHE", os.path.expanduser("~/.cache/rlx"))
NAMES = ["input_ids", "attention_mask", "token_type_ids"]


class LastHidden(torch.nn.Module):
    """BertModel with a plain tensor output, so the graph has one named output."""

    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask, token_type_ids):
        out = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                        token_type_ids=token_type_ids, return_dict=False)
        return out[0]


def check(path, model, tok):
    sys.path.append(os.path.join(CACHE, "py-ort"))
    try:
        import onnxruntime as ort
    except ImportError:
        print("onnxruntime not found: export not checked")
        return
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for texts in (["hello"], ["a short one", "a rather longer sentence, with more tokens in it",
                              "mid length text here"]):
        feat = tok(texts, padding=True, return_tensors="pt")
        with torch.no_grad():
            want = model(**{k: feat[k] for k in NAMES}).numpy()
        got = sess.run(None, {k: feat[k].numpy() for k in NAMES})[0]
        err = float(np.abs(got - want).max())
        print(f"check batch {tuple(feat['input_ids'].shape)}: max |ort - torch| = {err:.2e}")
        if err > 1e-4:
            raise SystemExit("exported model disagrees with transformers")


def main():
    model_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(CACHE, "hf",
                                                                    "all-MiniLM-L6-v2")
    path = os.path.join(model_dir, "model.onnx")
    # The checkpoint's unused pooler weights are expected; keep the output to what matters.
    transformers.logging.set_verbosity_error()
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = LastHidden(BertModel.from_pretrained(model_dir, add_pooling_layer=False)).eval()
    feat = tok(["an example sentence", "another"], padding=True, return_tensors="pt")
    axes = {k: {0: "batch", 1: "seq"} for k in NAMES}
    axes["last_hidden_state"] = {0: "batch", 1: "seq"}
    tmp = path + ".tmp"
    with torch.no_grad():
        torch.onnx.export(model, tuple(feat[k] for k in NAMES), tmp, input_names=NAMES,
                          output_names=["last_hidden_state"], dynamic_axes=axes,
                          opset_version=14, do_constant_folding=True)
    os.replace(tmp, path)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")
    check(path, model, tok)


if __name__ == "__main__":
    main()
