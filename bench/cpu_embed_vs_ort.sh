#!/usr/bin/env bash
# rlx against ONNX Runtime on this machine's CPU, all-MiniLM-L6-v2 (real weights), rounds
# alternated so the VM's speed drift hits both alike: encoder 1x128 and 32x128 (random ids,
# full masks) and the 256-sentence workload of the committed reference (sorted by length,
# batches of 32, as SentenceTransformer.encode runs it). Needs a release rlx, the venv of
# scripts/hf_ref_env.sh and the ONNX export of scripts/ort_export.py.
#   bash bench/cpu_embed_vs_ort.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
cache="${RLX_CACHE:-$HOME/.cache/rlx}"
py="$cache/hf-venv/bin/python"
m="$cache/hf/all-MiniLM-L6-v2"
[ -s "$m/model.onnx" ] || "$py" scripts/ort_export.py >/dev/null
texts=crates/rlx-models/tests/data/st_ref_minilm.json
for r in $(seq "$rounds"); do
  ./target/release/rlx bench --device cpu --suites encoder,embed --model "$m" --texts "$texts" \
      --iters 10 2>&1 | awk -F'|' -v r="$r" '/batch 1 x 128/{print r, "rlx", "1x128", $5}
      /batch 32 x 128/{print r, "rlx", "32x128", $5} /embed 256/{print r, "rlx", "sorted256", $5}'
  "$py" scripts/ort_bench.py --threads 2 --rounds 10 --workloads 1x128,32x128,sorted 2>&1 |
      awk -v r="$r" '/^1x128/{print r, "ort", "1x128", $3} /^32x128/{print r, "ort", "32x128", $3}
      /length-sorted/{print r, "ort", "sorted256", $4 * 8}'
done | awk '{t[$3" "$2]=t[$3" "$2]" "$4; if ($2=="rlx") rl[$1" "$3]=$4; else ot[$1" "$3]=$4}
  END {for (k in rl) {split(k, a, " ");
       printf "| %s | %s | %.1f | %.1f | %.2f |\n", a[2], a[1], rl[k], ot[k], ot[k]/rl[k]}}' |
  sort > /tmp/rlx-vs-ort.$$
echo "| workload | round | rlx ms | ORT ms | ORT time / rlx time (>1: rlx faster) |"
echo "|---|---:|---:|---:|---:|"
cat /tmp/rlx-vs-ort.$$ && rm -f /tmp/rlx-vs-ort.$$
