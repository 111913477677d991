#!/usr/bin/env bash
# Developer tool, not run by tests or CI: regenerate the llama.cpp reference data under
# crates/rlx-models/tests/data/ (committed; tests read only that). It builds llama.cpp's
# Python binding from its PyPI sdist (CPU only, no native -march so the numbers do not hang
# on this machine's ISA extensions) into ${RLX_CACHE:-~/.cache/rlx}, outside the checkout,
# once; later runs reuse it. The build takes minutes (about 8 on 2 cores).
#   scripts/llama_ref.sh            install if absent, then run scripts/llama_ref.py
#   scripts/llama_ref.sh --install  install only
# Needs the model files of scripts/fetch_models.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${RLX_CACHE:-$HOME/.cache/rlx}"
py="${PYTHON:-python3}"

LLAMA_CPP_PY_VERSION=0.3.36
site="$cache/py-llama-cpp-$LLAMA_CPP_PY_VERSION"
if ! PYTHONPATH="$site" "$py" -c "import llama_cpp" 2>/dev/null; then
    # Only llama-cpp-python itself from source: its build tools (cmake, ninja,
    # scikit-build-core) come as wheels. `--no-binary :all:` would build cmake from source too.
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_BLAS=OFF -DGGML_OPENMP=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
        "$py" -m pip install --disable-pip-version-check --target "$site.tmp" \
        --no-binary llama-cpp-python "llama-cpp-python==$LLAMA_CPP_PY_VERSION"
    rm -rf "$site"
    mv "$site.tmp" "$site"
fi
[ "${1:-}" = "--install" ] && exit 0

"$here/fetch_models.sh" >/dev/null
gguf_site="$cache/py-gguf-0.19.0"
# The tiny random-weight llama / qwen2 / gemma3 files, rewritten every time (seconds; seeded,
# so the same bytes) so that the references never describe a stale file.
PYTHONPATH="$gguf_site" "$py" "$here/gen_gguf_arch.py" \
    "$cache/gguf/SmolLM2-135M-Instruct.Q4_1.gguf" "$cache/gguf"
PYTHONPATH="$site:$gguf_site" "$py" "$here/llama_ref.py" "$@"
