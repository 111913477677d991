#!/usr/bin/env bash
# One device call: the GPU parity suite (RLX_REQUIRE_CUDA=1), compute-sanitizer memcheck over
# the parity binaries, GPU training, then `rlx bench` beside PyTorch's anchor on the same GPU.
# Stage first: ../shared/device/stage.sh -p rlx-cuda -p rlx-runtime -p rlx-models --bin rlx
# and cp ../shared/bench/torch_anchor.py .device/
# and call the device tool with carry [".device", ".fashion"] and `bash bench/device_run.sh [parts]`.
# parts: any of tests sanitizer bench (default: all).
set -u
top=$(cd "$(dirname "$0")/.." && pwd); cd "$top"
out=${OUT:-/tmp/rlx-out}; mkdir -p "$out"
parts=${*:-tests sanitizer bench}
export RLX_CACHE_DIR=/tmp/rlx-cache
[ -d .fashion ] && export RLX_FASHION_MNIST="$top/.fashion"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [[ $parts == *tests* ]]; then
  echo "== parity suite and GPU tests (RLX_REQUIRE_CUDA=1)"
  bash .device/run-tests.sh 2>&1 | tee "$out/tests.txt"
fi
if [[ $parts == *sanitizer* ]]; then
  echo "== compute-sanitizer memcheck over the parity binaries"
  san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for t in .device/tests/parity_*; do
    (cd crates/rlx-cuda && RLX_REQUIRE_CUDA=1 timeout 240 "$san" --tool memcheck --print-limit 5 \
      "$top/$t" --test-threads 1 2>&1) | grep -E "ERROR SUMMARY|test result|Invalid|out of bounds" | sort | uniq -c | head -n 8 |
      sed "s|^|$(basename "$t"): |"
  done 2>&1 | tee "$out/sanitizer.txt"
fi
if [[ $parts == *bench* ]]; then
  echo "== rlx bench and the PyTorch anchor"
  ./.device/bin/rlx bench --device cuda --json "$out/rlx.json" 2>&1 | tee "$out/bench.txt"
  # ../shared does not travel to the device: stage copies the anchor into .device/.
  python3 .device/torch_anchor.py minilm mnist-cnn --compile --json "$out/torch.json" >/dev/null 2>"$out/torch.err"
  python3 bench/compare.py "$out/rlx.json" "$out/torch.json" | tee -a "$out/bench.txt"
fi
