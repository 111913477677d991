#!/usr/bin/env bash
# rlx against ONNX Runtime (2 intra-op threads) on this machine's CPU, on the real ONNX models
# of scripts/fetch_onnx_models.sh, rounds alternated (rlx, ORT, rlx, ORT …) so the VM's speed
# drift hits both alike. Both read the same seeded .npy inputs; each prints the median of
# ITERS runs after a warm-up (`rlx run --iters`, scripts/ort_run.py --iters). rlx runs on its
# rayon pool, 2 threads here (RAYON_NUM_THREADS=2), to match ORT's 2.
#   bash bench/cpu_onnx_vs_ort.sh [ROUNDS] [ITERS]
# Needs a release rlx (cargo build --release -p rlx-cli) and the venv of scripts/hf_ref_env.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
iters=${2:-20}
cache="${RLX_CACHE:-$HOME/.cache/rlx}"
py="$cache/hf-venv/bin/python"
rlx=./target/release/rlx
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" - "$tmp" <<'PYEOF'
import os, sys
import numpy as np
out = sys.argv[1]
rng = np.random.default_rng(5)
for b, s in ((1, 128), (8, 128)):
    d = os.path.join(out, f"bert{b}x{s}")
    os.makedirs(d)
    ids = rng.integers(1000, 30522, size=(b, s), dtype=np.int64)
    ids[:, 0], ids[:, -1] = 101, 102
    np.save(os.path.join(d, "input_ids.npy"), ids)
    np.save(os.path.join(d, "attention_mask.npy"), np.ones_like(ids))
    np.save(os.path.join(d, "token_type_ids.npy"), np.zeros_like(ids))
for b in (1, 8):
    d = os.path.join(out, f"img{b}")
    os.makedirs(d)
    np.save(os.path.join(d, "x.npy"), rng.uniform(-1, 1, (b, 3, 48, 192)).astype(np.float32))
PYEOF
# name | model | input set
cases="minilm-f32-1x128 $cache/hf/all-MiniLM-L6-v2/model.onnx bert1x128
minilm-f32-8x128 $cache/hf/all-MiniLM-L6-v2/model.onnx bert8x128
minilm-int8-1x128 $cache/onnx/minilm_int8.onnx bert1x128
minilm-int8-8x128 $cache/onnx/minilm_int8.onnx bert8x128
ppocr-cls-f32-b1 $cache/onnx/ppocr_cls.onnx img1
ppocr-cls-f32-b8 $cache/onnx/ppocr_cls.onnx img8
ppocr-cls-qdq-b1 $cache/onnx/ppocr_cls_qdq.onnx img1
ppocr-cls-qdq-b8 $cache/onnx/ppocr_cls_qdq.onnx img8"
for r in $(seq "$rounds"); do
  while read -r name model set; do
    [ -s "$model" ] || continue
    args=()
    for f in "$tmp/$set"/*.npy; do args+=(--input "$(basename "$f" .npy)=$f"); done
    if t=$(RAYON_NUM_THREADS=2 $rlx run "$model" "${args[@]}" --iters "$iters" 2>&1 |
           awk '/^run: median/{print $3}') && [ -n "$t" ]; then
      echo "$r rlx $name $t"
    else
      echo "$r rlx $name fail"
    fi
    t=$("$py" scripts/ort_run.py "$model" "${args[@]}" --threads 2 --iters "$iters" |
        awk '/^ort median_ms/{print $3}')
    echo "$r ort $name $t"
  done <<<"$cases"
done >"$tmp/times"
echo "| model | rlx ms (median of rounds) | ORT ms | ORT time / rlx time (>1: rlx faster) |"
echo "|---|---:|---:|---:|"
awk '{k=$3; if ($2=="rlx") r[k]=r[k]" "$4; else o[k]=o[k]" "$4; if (!(k in seen)) {seen[k]=1; order[n++]=k}}
  function med(s,   a, m, i, j, t) { m=split(s, a, " "); for (i=1;i<=m;i++) for (j=i+1;j<=m;j++)
      if (a[j]+0 < a[i]+0) {t=a[i]; a[i]=a[j]; a[j]=t}; return a[int((m+1)/2)] }
  END {for (i=0;i<n;i++) {k=order[i]; a=med(r[k]); b=med(o[k]);
       if (r[k] ~ /fail/) printf "| %s | fails | %.2f | - |\n", k, b;
       else printf "| %s | %.2f | %.2f | %.2f |\n", k, a, b, b/a}}' "$tmp/times"
