#!/usr/bin/env bash
# After `bench/device_llm.sh side` on the same warm machine: the decode step of each GGUF
# named (default the 0.5B Q4_K_M) under nsys with graph nodes traced, one step printed kernel
# by kernel (bench/nsys_step.py).
set -u
top=$(cd "$(dirname "$0")/.." && pwd); cd "$top"
W=/tmp/rlx-llm; out=${OUT:-/tmp/rlx-out}; mkdir -p "$out"
L=$(dirname "$(mktemp -u)")/rlx-llama-cpp
NSYS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys /usr/local/cuda*/nsight-systems*/bin/nsys 2>/dev/null | head -1)
[ -n "$NSYS" ] || { echo "no nsys on this machine"; ls /usr/local/cuda*/bin 2>/dev/null | head -50; exit 0; }
[ -x $W/rlx ] || { xz -dc .devbin/rlx.xz > $W/rlx && chmod +x $W/rlx; }
for f in ${@:-qwen05b-q4_k_m}; do
  $NSYS profile -t cuda --cuda-graph-trace=node -o $W/$f --force-overwrite true \
    $W/rlx bench --device cuda --suites llm --iters 1 --gguf $L/$f.gguf >/dev/null 2>&1
  $NSYS stats --report cuda_gpu_trace --format csv -o $W/$f $W/$f.nsys-rep >/dev/null 2>&1
  echo "== $f"
  python3 bench/nsys_step.py $W/${f}_cuda_gpu_trace.csv 2>&1 | tee $out/nsys_$f.txt | head -200
done
