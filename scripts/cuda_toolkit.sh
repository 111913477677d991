#!/usr/bin/env bash
# nvcc, ptxas and the CUDA 13.0 headers from PyPI wheels, for checks that need no GPU: building
# the device benchmarks (bench/cuda_micro) before a device call, and register / spill counts
# of the kernels. Installs into ~/.cache/rlx/cuda-toolkit (once) and prints the exports to use:
#   eval "$(bash scripts/cuda_toolkit.sh)"
#   nvcc -arch=sm_90 -O3 -std=c++17 --resource-usage -c FILE.cu
set -euo pipefail
root=${RLX_CACHE:-$HOME/.cache/rlx}/cuda-toolkit
if ! [ -x "$root/bin/nvcc" ]; then
  tmp=$(mktemp -d)
  python3 -m pip install -q --disable-pip-version-check --no-deps --target "$tmp" \
    nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88 \
    nvidia-cuda-cccl==13.0.85 nvidia-cuda-runtime==13.0.96 >&2
  mkdir -p "$root"
  cp -r "$tmp"/nvidia/cu13/. "$root"/
  rm -rf "$tmp"
fi
echo "export PATH=$root/bin:\$PATH CUDA_HOME=$root"
