#!/usr/bin/env bash
# Stage the GPU test binaries and the rlx binary, keep only the ones the device run needs,
# and pack them (xz) under .devpack/ so they fit the device tool's 64 MiB transfer.
#   bash bench/pack_device.sh   then run with carry [".devpack"]:
#   tar -xJf .devpack/device.tar.xz && bash bench/device_run.sh
# `bash bench/pack_device.sh wgpu` packs only rlx-wgpu's tests and the rlx binary (the pack
# bench/device_wgpu.sh needs, well under the limit) as .devpack/wgpu.tar.xz.
# `bash bench/pack_device.sh llm` packs the LLM work's GPU tests only (quant, attention,
# linalg, norm and graph parity, the decoder and runtime CUDA tests, smoke) as
# .devpack/device.tar.xz:
# the whole set grew past the 64 MiB a call carries (78 MB on 2026-12-04); it also writes
# .devbin/rlx.xz for `bench/device_llm.sh side`.
set -euo pipefail
cd "$(dirname "$0")/.."
pack=device; crates=(-p rlx-cuda -p rlx-wgpu -p rlx-runtime -p rlx-models)
keep='^(parity_|bench_hooks-|shader_corpus-|smoke-|cuda-|wgpu-|train_digits-|embed_cuda-|hf_decoder-)'
if [ "${1:-}" = wgpu ]; then pack=wgpu; crates=(-p rlx-wgpu); fi
if [ "${1:-}" = llm ]; then
  crates=(-p rlx-cuda -p rlx-runtime -p rlx-models)
  keep='^(parity_quant-|parity_attention-|parity_linalg-|parity_graphs-|parity_norm-|smoke-|cuda-)'
fi
../shared/device/stage.sh "${crates[@]}" --bin rlx >/dev/null
grep -E "$keep" .device/tests/index > .device/tests/index.keep
for f in .device/tests/*-*; do
  grep -q "^$(basename "$f") " .device/tests/index.keep || rm -f "$f"
done
mv .device/tests/index.keep .device/tests/index
cp ../shared/bench/torch_anchor.py .device/
# gguf-py and PyYAML (pure Python) for scripts/gguf_requant.py on the device (its numpy is
# the device's).
rm -rf .device/py && mkdir -p .device/py
cp -r "${RLX_CACHE:-$HOME/.cache/rlx}"/py-gguf-0.19.0/{gguf,yaml} .device/py/
# Kernel CUBINs compiled here for sm_90 (same NVRTC 13.0 as the device) spare the device's
# first compile of every hand-written source.
rm -rf .device/cache && mkdir -p .device/cache
cu13=$(python3 -c "import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], 'cu13'))")
LD_LIBRARY_PATH="$cu13/lib" RLX_CUDA_INCLUDE="$cu13/include" RLX_CACHE_DIR="$PWD/.device/cache" cargo test -q --release -p rlx-cuda --test nvrtc_compile >/dev/null
grep -qx '/.devpack/' .git/info/exclude || echo '/.devpack/' >> .git/info/exclude
mkdir -p .devpack
XZ_OPT="-T2 -9" tar -cJf ".devpack/$pack.tar.xz" .device
du -sh ".devpack/$pack.tar.xz"
# The llm pack's second call (`device_llm.sh side variants`, beside llama.cpp's binaries
# from bench/lcpp_cuda_build.sh) carries only the rlx binary.
if [ "${1:-}" = llm ]; then
  mkdir -p .devbin && xz -T2 -9 -c .device/bin/rlx > .devbin/rlx.xz && du -sh .devbin/rlx.xz
fi
size=$(stat -c %s ".devpack/$pack.tar.xz")
# The device tool's 64 MiB counts the working tree (~6 MB tracked) with what is carried; -9's
# 64 MiB dictionary shares the test binaries' common code (session 33: 18.8 -> 11.2 MB).
tree=$(git ls-files -z | xargs -0 stat -c %s | awk '{s+=$1} END {print s}')
[ $((size + tree)) -le $((64 << 20)) ] || echo "warning: .devpack/$pack.tar.xz and the working tree are over the 64 MiB a device call carries; pack fewer tests (e.g. \`llm\`)" >&2
