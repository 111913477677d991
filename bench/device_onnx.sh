#!/usr/bin/env bash
# Device steps of the ONNX work (issue 12), in the warm session after bench/device_embed.sh's
# part1 (bundle unpacked under /tmp/rlx-hf, MiniLM's config/tokenizer and the first part of
# its safetensors there):
#   stage   (here) .devo0/: the node suite (tar.xz, 2 MB) and the small real models;
#           .devo1/ and .devo2/: all-MiniLM-L6-v2's ONNX export split in two (90 MB), with
#           the rest of its safetensors (for the PyTorch peer) and the int8 MiniLM
#   suite   carry [".devo0", ".devm4"]: join the safetensors, unpack the suite, run it on CUDA
#           (`rlx onnx-test --device cuda`: every line, the summary, the passing cases that ran
#           nodes on the CPU), then list the cases that pass on the CPU (not in the committed
#           list) but not on CUDA
#   recv    carry [".devo1"]: keep the first part of model.onnx
#   models  carry [".devo2"]: join model.onnx, run the real models on CUDA with `rlx run`
#           (seeded .npy inputs, median of 50 runs, host to host), then PyTorch on the same
#           MiniLM inputs (bench/onnx_torch.py, eager and compiled) with rlx-vs-torch rel-L2
set -u
top=$(cd "$(dirname "$0")/.." && pwd); cd "$top"
here_cache="${RLX_CACHE:-$HOME/.cache/rlx}"
W=/tmp/rlx-hf; O=$W/onnx; mkdir -p $O
out=${OUT:-/tmp/rlx-out}; mkdir -p "$out"
export RLX_CACHE=$W/cache RLX_CACHE_DIR=$W/kcache
M=$W/cache/hf/all-MiniLM-L6-v2
rlx=$W/.device/bin/rlx
for step in "$@"; do case $step in
stage)
  c="$here_cache"
  rm -rf .devo0 .devo1 .devo2 && mkdir -p .devo0 .devo1 .devo2
  for d in .devo0 .devo1 .devo2; do grep -qx "/$d/" .git/info/exclude || echo "/$d/" >> .git/info/exclude; done
  (cd "$c" && tar -cf - onnx-node | xz -T2 -6 > "$top/.devo0/onnx-node.tar.xz")
  cp "$c"/onnx/ppocr_cls.onnx "$c"/onnx/ppocr_cls_qdq.onnx .devo0/
  cp crates/rlx-onnx/tests/data/node_expected_failures.txt .devo0/
  src="$c/hf/all-MiniLM-L6-v2/model.onnx"
  head -c 60000000 "$src" > .devo1/model.onnx.part1
  tail -c +60000001 "$src" > .devo2/model.onnx.part2
  sha256sum "$src" | cut -d' ' -f1 > .devo2/model.onnx.sha256
  cp "$c"/onnx/minilm_int8.onnx .devo2/
  du -sh .devo0 .devo1 .devo2 ;;
suite)
  cat $W/minilm.part1 .devm4/minilm.part2 > $M/model.safetensors
  [ "$(sha256sum $M/model.safetensors | cut -d' ' -f1)" = "$(cat $W/minilm.sha256)" ] && echo "safetensors ok"
  tar -xJf .devo0/onnx-node.tar.xz -C $O && cp .devo0/*.onnx $O/
  echo "== rlx onnx-test on CUDA (node suite, $(ls $O/onnx-node | wc -l) cases)"
  t0=$(date +%s)
  RLX_REQUIRE_CUDA=1 timeout 500 $rlx onnx-test $O/onnx-node --device cuda --failures-list $out/cuda_failures.txt > $out/onnx_cuda.txt 2>&1
  echo "rc=$? in $(( $(date +%s) - t0 )) s"
  tail -n 2 $out/onnx_cuda.txt
  echo "== cases that pass on the CPU (not in the committed list) but not on CUDA"
  cut -f1 .devo0/node_expected_failures.txt | grep -v '^#' | sort > $W/cpu_fail
  grep -v '^#' $out/cuda_failures.txt | cut -f1 | sort > $W/cuda_fail
  comm -13 $W/cpu_fail $W/cuda_fail | while read c; do grep "^$c: " $out/onnx_cuda.txt | cut -c1-220; done | head -60
  echo "(total: $(comm -13 $W/cpu_fail $W/cuda_fail | wc -l))"
  echo "== failure reasons on CUDA (top)"
  grep -v '^#' $out/cuda_failures.txt | cut -f2 | sort | uniq -c | sort -rn | head -12 ;;
recv)
  cp .devo1/model.onnx.part1 $W/ ;;
models)
  cat $W/model.onnx.part1 .devo2/model.onnx.part2 > $M/model.onnx
  [ "$(sha256sum $M/model.onnx | cut -d' ' -f1)" = "$(cat .devo2/model.onnx.sha256)" ] && echo "model.onnx ok"
  cp .devo2/minilm_int8.onnx $O/
  python3 - $W/in <<'PYEOF'
import os, sys
import numpy as np
out = sys.argv[1]
rng = np.random.default_rng(5)
for b, s in ((1, 128), (8, 128), (32, 128)):
    d = os.path.join(out, f"bert{b}x{s}"); os.makedirs(d, exist_ok=True)
    ids = rng.integers(1000, 30522, size=(b, s), dtype=np.int64)
    ids[:, 0], ids[:, -1] = 101, 102
    np.save(os.path.join(d, "input_ids.npy"), ids)
    np.save(os.path.join(d, "attention_mask.npy"), np.ones_like(ids))
    np.save(os.path.join(d, "token_type_ids.npy"), np.zeros_like(ids))
for b in (1, 8, 64):
    d = os.path.join(out, f"img{b}"); os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "x.npy"), rng.uniform(-1, 1, (b, 3, 48, 192)).astype(np.float32))
PYEOF
  runit() { # name model inputset
    local args=(); for f in $W/in/$3/*.npy; do args+=(--input "$(basename $f .npy)=$f"); done
    echo "== rlx run $1 ($3) on CUDA"
    RLX_DISPATCH_REPORT=1 timeout 120 $rlx run $2 "${args[@]}" --device cuda --iters 50 --output $W/out/$1-$3 2>&1 |
      grep -E "^(import|run:|output|rlx dispatch| +[A-Za-z].*fallback)" | cut -c1-200
  }
  for s in bert1x128 bert8x128 bert32x128; do runit minilm-f32 $M/model.onnx $s; done
  for s in bert1x128 bert8x128; do runit minilm-int8 $O/minilm_int8.onnx $s; done
  for s in img1 img8 img64; do runit ppocr-cls-f32 $O/ppocr_cls.onnx $s; runit ppocr-cls-qdq $O/ppocr_cls_qdq.onnx $s; done
  echo "== PyTorch on the same GPU, same MiniLM inputs (host to host)"
  python3 bench/onnx_torch.py $M $W/in/bert1x128 $W/in/bert8x128 $W/in/bert32x128 --iters 50 \
    --rlx-out $W/out/minilm-f32-bert1x128 --rlx-out $W/out/minilm-f32-bert8x128 --rlx-out $W/out/minilm-f32-bert32x128 2>&1 | grep -v Warning | tail -8 ;;
esac; done
