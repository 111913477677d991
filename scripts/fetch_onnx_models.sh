#!/usr/bin/env bash
# The real ONNX models of crates/rlx-onnx/tests/real_models.rs, into
# ${RLX_CACHE:-~/.cache/rlx}/onnx/ (never the checkout). Idempotent: what is there is kept.
#   ppocr_cls.onnx       PP-OCR v2.0 text-direction classifier (a MobileNetV3 CNN: Conv, BN,
#                        HardSigmoid, GlobalAveragePool, MatMul, Softmax; real weights,
#                        input x [N, 3, 48, 192], 2 classes), out of PyPI's
#                        rapidocr-onnxruntime wheel
#   minilm_int8.onnx     all-MiniLM-L6-v2 quantized by onnxruntime's quantize_dynamic
#                        (QOperator: DynamicQuantizeLinear + MatMulInteger)
#   ppocr_cls_qdq.onnx   the classifier quantized by quantize_static (QDQ, u8 activations,
#                        s8 weights, calibrated on seeded random images)
# all-MiniLM-L6-v2 itself (f32) is $RLX_CACHE/hf/all-MiniLM-L6-v2/model.onnx, written by
# scripts/ort_export.py with the venv of scripts/hf_ref_env.sh (torch), which this script
# runs when the venv is there; the int8 models need that venv too (numpy) plus onnxruntime
# ($RLX_CACHE/py-ort) and onnx + ml_dtypes ($RLX_CACHE/py-onnx, installed here).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${RLX_CACHE:-$HOME/.cache/rlx}"
out="$cache/onnx"
venv="$cache/hf-venv/bin/python"
py="${PYTHON:-python3}"
mkdir -p "$out" "$cache/wheels"

cls="$out/ppocr_cls.onnx"
if [ ! -s "$cls" ]; then
    "$py" -m pip download --quiet --disable-pip-version-check --no-input --no-deps \
        -d "$cache/wheels" "rapidocr-onnxruntime==1.4.4"
    wheel="$(ls "$cache"/wheels/rapidocr_onnxruntime-1.4.4-*.whl | head -n1)"
    "$py" - "$wheel" "$cls.tmp" <<'PYEOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    data = z.read("rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx")
open(sys.argv[2], "wb").write(data)
PYEOF
    mv "$cls.tmp" "$cls"
    # The wheel (15 MB, mostly the OCR detector and recognizer) is not needed any more.
    rm -f "$wheel"
fi

if [ ! -x "$venv" ]; then
    echo "fetch_onnx_models: no $venv (scripts/hf_ref_env.sh): MiniLM and the int8 models skipped" >&2
    exit 0
fi
minilm="$cache/hf/all-MiniLM-L6-v2/model.onnx"
[ -s "$minilm" ] || "$venv" "$here/ort_export.py" >/dev/null
# onnxruntime as scripts/ort_bench.py installs it; the quantizer needs onnx and ml_dtypes.
if [ ! -d "$cache/py-ort/onnxruntime" ]; then
    "$venv" -m pip install --quiet --disable-pip-version-check --no-deps --target "$cache/py-ort" \
        onnxruntime==1.32.0
fi
if ! PYTHONPATH="$cache/py-onnx" "$venv" -c "import onnx, ml_dtypes" 2>/dev/null; then
    "$venv" -m pip install --quiet --disable-pip-version-check --no-deps --target "$cache/py-onnx" \
        onnx==1.17.0 protobuf==5.29.3 ml_dtypes==0.5.1
fi
[ -s "$out/minilm_int8.onnx" ] ||
    "$venv" "$here/onnx_quantize.py" dynamic "$minilm" "$out/minilm_int8.onnx" 2>/dev/null
[ -s "$out/ppocr_cls_qdq.onnx" ] ||
    "$venv" "$here/onnx_quantize.py" static "$cls" "$out/ppocr_cls_qdq.onnx" x=1,3,48,192 2>/dev/null
ls -l "$out"
