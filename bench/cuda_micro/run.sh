#!/usr/bin/env bash
# On the device: build and run the GEMV microbenchmark (nvcc, sm_90).
#   bench/cuda_micro/run.sh               the working tree's kernels/quant.cu
#   bench/cuda_micro/run.sh OLD_QUANT_CU  the same, then built against OLD_QUANT_CU (e.g. a
#                                         `git show BASE:crates/rlx-cuda/kernels/quant.cu` saved
#                                         before the call), each case's best timings side by side
# MICRO_ONLY=text limits both runs to the cases whose description holds the text.
set -eu
old=""
[ -n "${1:-}" ] && old=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
cd "$(dirname "$0")"
nvcc -arch=sm_90 -O3 -std=c++17 -o /tmp/gemv_bench gemv_bench.cu -lcuda 2>&1 | grep -v "warning #" | head -20
if [ -z "$old" ]; then
  /tmp/gemv_bench
  exit 0
fi
# An older quant.cu held the whole module (quant_gemv.cu came later).
sed -e "s#../../crates/rlx-cuda/kernels/quant.cu#$old#" -e "/quant_gemv.cu/d" gemv_bench.cu > /tmp/gemv_bench_old.cu
sed -i "s#../../crates/rlx-cuda/kernels/common.cuh#$PWD/../../crates/rlx-cuda/kernels/common.cuh#" /tmp/gemv_bench_old.cu
nvcc -arch=sm_90 -O3 -std=c++17 -o /tmp/gemv_bench_old /tmp/gemv_bench_old.cu -lcuda 2>&1 | grep -v "warning #" | head -20
/tmp/gemv_bench > /tmp/micro_new.txt; /tmp/gemv_bench_old > /tmp/micro_old.txt
for v in old new; do
  echo "=== $v"
  grep -E "^[A-Za-z0-9].*N=|MISMATCH|cold best" /tmp/micro_$v.txt
done
