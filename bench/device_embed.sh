#!/usr/bin/env bash
# Device steps of the Hugging Face work (issue 11), after bench/pack_device.sh's bundle:
#   stage   (here) split all-MiniLM-L6-v2 and the tiny HF decoders into .devm3/ (configs,
#           tokenizer, tiny folders, first 45 MB of the weights) and .devm4/ (the rest): the
#           device tool moves 64 MiB a call
#   part1   carry [".devpack/device.tar.xz", ".devm3"]: unpack under /tmp/rlx-hf
#   part2   carry [".devm4"]: join the weights, check sha256, run the HF tests on CUDA
#           (embedder f32/f16/bf16 vs sentence-transformers, tiny decoders vs transformers),
#           `rlx embed` and `rlx generate --model DIR` on CUDA, then the embed benchmark
#           beside PyTorch (bench/embed_torch.py: fp32/fp16, eager and torch.compile)
#   parity  the whole GPU parity suite from the unpacked bundle (bench/device_run.sh tests)
set -u
top=$(cd "$(dirname "$0")/.." && pwd); cd "$top"
here_cache="${RLX_CACHE:-$HOME/.cache/rlx}"
W=/tmp/rlx-hf; mkdir -p $W/cache/hf
out=${OUT:-/tmp/rlx-out}; mkdir -p "$out"
export RLX_CACHE=$W/cache RLX_CACHE_DIR=$W/kcache
M=$W/cache/hf/all-MiniLM-L6-v2
texts=crates/rlx-models/tests/data/st_ref_minilm.json
for step in "$@"; do case $step in
stage)
  c="$here_cache"; src="$c/hf/all-MiniLM-L6-v2"
  rm -rf .devm3 .devm4 && mkdir -p .devm3/minilm .devm4
  for d in .devm3 .devm4; do grep -qx "/$d/" .git/info/exclude || echo "/$d/" >> .git/info/exclude; done
  (cd "$src" && tar -cf - --exclude=model.safetensors --exclude=model.onnx .) | tar -xf - -C .devm3/minilm
  cp -r "$c"/hf/tiny-llama "$c"/hf/tiny-qwen2 .devm3/
  head -c 38000000 "$src/model.safetensors" > .devm3/minilm.part1
  tail -c +38000001 "$src/model.safetensors" > .devm4/minilm.part2
  sha256sum "$src/model.safetensors" | cut -d' ' -f1 > .devm3/minilm.sha256
  du -sh .devm3 .devm4 ;;
part1)
  tar -xJf .devpack/device.tar.xz -C $W && cp -r .devm3/minilm $M && cp -r .devm3/tiny-* $W/cache/hf/
  cp .devm3/minilm.part1 .devm3/minilm.sha256 $W/
  mkdir -p $RLX_CACHE_DIR && cp -r $W/.device/cache/. $RLX_CACHE_DIR/ 2>/dev/null
  ls $W/.device/tests | head -40 ;;
part2)
  cat $W/minilm.part1 .devm4/minilm.part2 > $M/model.safetensors
  [ "$(sha256sum $M/model.safetensors | cut -d' ' -f1)" = "$(cat $W/minilm.sha256)" ] && echo "weights ok"
  export RLX_REQUIRE_CUDA=1
  for t in $W/.device/tests/embed_cuda-* $W/.device/tests/hf_decoder-*; do
    echo "== $(basename $t)"; (cd crates/rlx-models && timeout 300 $t --nocapture --test-threads 1 2>&1 | grep -vE "^$" | tail -20)
  done
  echo "== rlx embed on CUDA"
  timeout 120 $W/.device/bin/rlx embed --model $M --device cuda "Hello world" "GPUs are fast." 2>&1 | cut -c1-160
  echo "== rlx generate --model DIR on CUDA"
  timeout 120 $W/.device/bin/rlx generate --model $W/cache/hf/tiny-llama --device cuda --prompt Hello --max-tokens 12 2>&1 | tail -3
  echo "== rlx bench embed (CUDA), then PyTorch on the same GPU"
  $W/.device/bin/rlx bench --device cuda --suites embed --model $M --texts $texts --iters 7 2>&1 | tee $out/rlx_embed.txt
  python3 bench/embed_torch.py $M 2>&1 | tee $out/torch_embed.txt ;;
parity)
  ln -sfn $W/.device .device && bash bench/device_run.sh tests ;;
esac; done
