#!/usr/bin/env bash
# Device steps of the mesh work (issue 14) on the one GPU this machine lends, after
# bench/device_run.sh's bundle is unpacked (tar -xJf .devpack/device.tar.xz):
#   dp   `rlx train digits` on cuda:0 alone, then as a one-rank NCCL data-parallel mesh
#        (`--devices cuda:0`: gradient buckets all-reduced by NCCL on the side stream)
#   tp   `rlx generate` on a tiny random-weight llama GGUF (TINY=path; default
#        .devm1/cache/gguf/tiny-llama.gguf): cuda alone, a one-rank mesh, the CPU; and a two-GPU mesh,
#        which a one-GPU machine must refuse with a clear error
set -u
top=$(cd "$(dirname "$0")/.." && pwd); cd "$top"
out=${OUT:-/tmp/rlx-out}; mkdir -p "$out"
export RLX_CACHE_DIR="$top/.device/cache"; mkdir -p "$RLX_CACHE_DIR"
rlx=./.device/bin/rlx
for step in "$@"; do case $step in
dp)
  for args in "--device cuda" "--devices cuda:0"; do
    echo "== rlx train digits $args"
    $rlx train digits $args 2>&1 | tail -n 6
  done ;;
tp)
  m=${TINY:-.devm1/cache/gguf/tiny-llama.gguf}
  for args in "--device cuda" "--devices cuda:0" "--device cpu"; do
    echo "== rlx generate $(basename "$m") $args"
    $rlx generate --model "$m" --prompt "The capital of France is" --max-tokens 24 $args \
      > "$out/gen.txt" 2> "$out/gen.err"; echo "rc=$?"
    cat "$out/gen.txt"; echo; tail -n 3 "$out/gen.err"
  done
  echo "== rlx generate --devices cuda:0,cuda:1 (one GPU here: must be refused)"
  $rlx generate --model "$m" --prompt "x" --max-tokens 4 --devices cuda:0,cuda:1 2>&1 | tail -n 3 ;;
*) echo "unknown step $step" ;;
esac; done
