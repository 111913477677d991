"""The int8 models of the real-model tests, written with onnxruntime's quantizer:

  PY scripts/onnx_quantize.py dynamic FLOAT.onnx OUT.onnx   # QOperator: DynamicQuantizeLinear,
                                                            # MatMulInteger (quantize_dynamic)
  PY scripts/onnx_quantize.py static FLOAT.onnx OUT.onnx INPUT=D0,D1,...
                                                            # QDQ: QuantizeLinear /
                                                            # DequantizeLinear pairs around
                                                            # Conv, MatMul … (quantize_static)

PY is the venv of scripts/hf_ref_env.sh. The quantizer needs the `onnx` package and
ml_dtypes, installed with --no-deps into $RLX_CACHE/py-onnx (pinned, so the output is the same
file every time); onnxruntime is $RLX_CACHE/py-ort. Static calibration uses 16 seeded random
inputs, uniform in [-1, 1), of the given shape: the weights stay the model's real ones, only
the activation ranges come from this data.
"""

import os
import sys

import numpy as np

CACHE = os.environ.get("RLX_CACHE", os.path.expanduser("~/.cache/rlx"))
sys.path += [os.path.join(CACHE, "py-onnx"), os.path.join(CACHE, "py-ort")]

from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,  # noqa: E402
                                      quantize_dynamic, quantize_static)


class Random(CalibrationDataReader):
    def __init__(self, name, shape):
        rng = np.random.default_rng(7)
        self.items = iter([{name: rng.uniform(-1, 1, shape).astype(np.float32)}
                           for _ in range(16)])

    def get_next(self):
        return next(self.items, None)


def main():
    mode, src, dst = sys.argv[1:4]
    tmp = dst + ".tmp.onnx"
    if mode == "dynamic":
        quantize_dynamic(src, tmp, weight_type=QuantType.QInt8)
    elif mode == "static":
        name, dims = sys.argv[4].split("=")
        shape = [int(d) for d in dims.split(",")]
        quantize_static(src, tmp, Random(name, shape), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    else:
        raise SystemExit(f"unknown mode {mode}: dynamic or static")
    os.replace(tmp, dst)
    print(f"wrote {dst} ({os.path.getsize(dst)} bytes)")


if __name__ == "__main__":
    main()
