#!/usr/bin/env bash
# One device call: the GPU parity suite (RLX_REQUIRE_CUDA=1), compute-sanitizer memcheck over
# the parity binaries, GPU training, then `rlx bench` beside PyTorch's anchor on the same GPU.
# Pack first with bench/pack_device.sh (stages, prunes and xz-packs .device into .devpack/),
# then unpack on the device: tar -xJf .devpack/device.tar.xz
# and call the device tool with carry [".devpack"] and `bash bench/device_run.sh [parts]`.
# parts, run in the order given: tests sanitizer bench (default: all three). TEST_ARGS: extra
# arguments for every test binary (e.g. `--skip smollm2` when the real model did not travel).
set -u
top=$(cd "$(dirname "$0")/.." && pwd); cd "$top"
out=${OUT:-/tmp/rlx-out}; mkdir -p "$out"
parts=${*:-tests sanitizer bench}
export RLX_CACHE_DIR="$top/.device/cache"; mkdir -p "$RLX_CACHE_DIR"
[ -d .fashion ] && export RLX_FASHION_MNIST="$top/.fashion"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
tests() {
  echo "== parity suite and GPU tests (RLX_REQUIRE_CUDA=1), one process per test binary, in parallel"
  export RLX_REQUIRE_CUDA=1
  while read -r name dir; do
    [ -n "$name" ] || continue
    # Named crate-binary: two crates may both have a `cuda` test binary.
    tag="$(basename "$dir")-${name%-*}"
    ( cd "$dir" && timeout "${TEST_TIMEOUT:-300}" "$top/.device/tests/$name" ${TEST_ARGS:-} > "$out/t-$tag.log" 2>&1; echo $? > "$out/t-$tag.rc" ) &
  done < .device/tests/index
  wait
  fails=0
  for f in "$out"/t-*.log; do
    b=${f%.log}; rc=$(cat "$b.rc"); [ "$rc" = 0 ] || fails=$((fails+1))
    echo "[$rc] $(basename "$b" | cut -c3-): $(grep -E '^test result:' "$f" | tail -n 1)"
    [ "$rc" = 0 ] || grep -E "panicked|FAILED|rel-L2|differ|error" "$f" | head -n 12
  done 2>&1 | tee "$out/tests.txt"
  grep -h -E "^(digits|fashion|precision)" "$out"/t-*.log | tee -a "$out/tests.txt"
  # A binary that failed with parallel test threads runs again on one thread, to tell
  # thread interference from wrong results.
  while read -r name dir; do
    [ -n "$name" ] || continue
    [ "$(cat "$out/t-$(basename "$dir")-${name%-*}.rc")" = 0 ] && continue
    r=$(cd "$dir" && timeout "${TEST_TIMEOUT:-300}" "$top/.device/tests/$name" --test-threads 1 2>&1); rc=$?
    echo "[$rc] ${name%-*} (one thread): $(echo "$r" | grep -E '^test result:' | tail -n 1)" | tee -a "$out/tests.txt"
    echo "$r" | grep -E "panicked|rel-L2|differ" | head -n 6 | tee -a "$out/tests.txt"
  done < .device/tests/index
  cat "$out"/t-*.log > "$out/tests-full.log"; rm -f "$out"/t-*.log "$out"/t-*.rc
}
sanitizer() {
  echo "== compute-sanitizer memcheck over the parity binaries (big-size cases skipped: memcheck is slow)"
  san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for t in .device/tests/parity_*; do
    ( cd crates/rlx-cuda && RLX_REQUIRE_CUDA=1 timeout "${SAN_TIMEOUT:-200}" "$san" --tool memcheck --print-limit 5 \
        "$top/$t" --test-threads 4 --skip big --skip large > "$out/san-$(basename "$t" | cut -d- -f1).log" 2>&1 ) &
  done
  wait
  for f in "$out"/san-*.log; do
    echo "$(basename "$f"): $(grep -E 'ERROR SUMMARY' "$f" | tail -n 1) | $(grep -E '^test result' "$f" | tail -n 1)"
  done | tee "$out/sanitizer.txt"
  cat "$out"/san-*.log > "$out/sanitizer-full.log"; rm -f "$out"/san-*.log
}
bench() {
  echo "== rlx bench and the PyTorch anchor"
  ./.device/bin/rlx bench --device cuda --profile --json "$out/rlx.json" 2>&1 | tee "$out/bench.txt"
  # ../shared does not travel to the device: stage copies the anchor into .device/.
  timeout "${TORCH_TIMEOUT:-400}" python3 .device/torch_anchor.py minilm mnist-cnn --compile --json "$out/torch.json" >"$out/torch.jsonl" 2>"$out/torch.err"
  # Killed by the timeout, the anchor still printed its figures so far, one JSON line each.
  [ -s "$out/torch.json" ] || tail -n 1 "$out/torch.jsonl" > "$out/torch.json"
  python3 bench/compare.py "$out/rlx.json" "$out/torch.json" | tee -a "$out/bench.txt"
}
for p in $parts; do "$p"; done
