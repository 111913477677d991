#!/usr/bin/env bash
# Fetch the ONNX backend node suite (onnx/backend/test/data/node, 1765 cases) out of the
# onnx==1.22.0 wheel (newer wheels no longer ship the data) into
# ${RLX_CACHE:-~/.cache/rlx}/onnx-node/ and print that path. Idempotent: a complete copy is kept.
set -euo pipefail
version=1.22.0
cache="${RLX_CACHE:-$HOME/.cache/rlx}"
dest="$cache/onnx-node"
py="${PYTHON:-python3}"
if [ -f "$dest/.complete-$version" ]; then
    echo "$dest"
    exit 0
fi
mkdir -p "$cache/wheels"
wheel="$(ls "$cache"/wheels/onnx-"$version"-*.whl 2>/dev/null | head -n1 || true)"
if [ -z "$wheel" ]; then
    "$py" -m pip download --quiet --disable-pip-version-check --no-deps \
        -d "$cache/wheels" "onnx==$version" >&2
    wheel="$(ls "$cache"/wheels/onnx-"$version"-*.whl | head -n1)"
fi
tmp="$(mktemp -d "$cache/onnx-node.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# Python's zipfile, not unzip: a fresh machine may lack the unzip tool.
"$py" - "$wheel" "$tmp" <<'PY'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith("onnx/backend/test/data/node/")]
    if not names:
        sys.exit(f"{wheel} holds no onnx/backend/test/data/node")
    z.extractall(dest, names)
PY
rm -rf "$dest"
mv "$tmp/onnx/backend/test/data/node" "$dest"
touch "$dest/.complete-$version"
echo "$dest"
