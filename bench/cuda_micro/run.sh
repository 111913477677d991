#!/usr/bin/env bash
# On the device: build and run the GEMV microbenchmark (nvcc, sm_90).
set -eu
cd "$(dirname "$0")"
nvcc -arch=sm_90 -O3 -std=c++17 -o /tmp/gemv_bench gemv_bench.cu -lcuda 2>&1 | grep -v "warning #" | head -20
/tmp/gemv_bench
