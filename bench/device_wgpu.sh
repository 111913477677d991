#!/usr/bin/env bash
# The wgpu backend on the H200 through NVIDIA's Vulkan driver, in one device call: the wgpu
# parity suite (RLX_REQUIRE_WGPU=1: a missing adapter fails), then `rlx bench` on wgpu and on
# CUDA side by side (same binary, same GPU), then PyTorch's anchor.
# Here, once: bash bench/device_wgpu.sh prepare   (Vulkan loader .debs into .gl/, git-ignored)
#             bash bench/pack_device.sh           (stages rlx-wgpu's tests too)
# Device call: carry [".devpack/device.tar.xz", ".gl"],
#   tar -xJf .devpack/device.tar.xz && bash bench/device_wgpu.sh [tests] [bench] [torch]
#   SmolLM2 decode: carry .devm1/smol.part1 with the tests call, then .devm2/smol.part2 and `llm`
set -u
top=$(cd "$(dirname "$0")/.." && pwd); cd "$top"
if [ "${1:-}" = prepare ]; then
  grep -qx '/.gl/' .git/info/exclude || echo /.gl/ >> .git/info/exclude
  mkdir -p .gl /tmp/amd64/partial
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  apt-get $o update -qq && (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
  exit
fi
out=${OUT:-/tmp/rlx-out}; mkdir -p "$out"
parts=${*:-tests bench torch}
# The loader is not installed on the device: unpack the carried .debs (only these, into /).
if ! ldconfig -p | grep -q libvulkan; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$icd" ] && export VK_DRIVER_FILES="$icd"
export RLX_WGPU_ADAPTER=${RLX_WGPU_ADAPTER:-NVIDIA}
./.device/bin/rlx devices 2>&1 | grep -v XDG_RUNTIME | tee "$out/devices.txt"
for p in $parts; do
  case $p in
  tests)
    [ -f .devm1/smol.part1 ] && mkdir -p /tmp/rlx-llm && cp .devm1/smol.part1 /tmp/rlx-llm/
    echo "== wgpu parity suite on the H200 (RLX_REQUIRE_WGPU=1)"
    export RLX_REQUIRE_WGPU=1
    while read -r name dir; do
      case "$dir" in *rlx-wgpu) ;; *) continue ;; esac
      r=$(cd "$dir" && timeout "${TEST_TIMEOUT:-300}" "$top/.device/tests/$name" 2>&1); rc=$?
      echo "[$rc] ${name%-*}: $(echo "$r" | grep -E '^test result:' | tail -n 1)"
      [ "$rc" = 0 ] || echo "$r" | grep -E "panicked|rel-L2|differ" | head -n 8
    done < .device/tests/index | tee "$out/wgpu-tests.txt"
    ;;
  bench)
    echo "== rlx bench: wgpu (Vulkan) beside CUDA on the same GPU"
    for d in wgpu cuda; do
      ./.device/bin/rlx bench --device $d --suites matmul,encoder,cnn --json "$out/bench-$d.json" 2>&1 |
        grep -v XDG_RUNTIME | tee "$out/bench-$d.txt"
    done
    ;;
  llm)
    # SmolLM2 travels in two calls (64 MiB a call): part1 is stashed by the tests call.
    [ -f .devm2/smol.part2 ] && cat /tmp/rlx-llm/smol.part1 .devm2/smol.part2 > /tmp/rlx-llm/smol.gguf
    sha256sum /tmp/rlx-llm/smol.gguf
    for d in wgpu cuda; do
      ./.device/bin/rlx bench --device $d --suites llm --gguf /tmp/rlx-llm/smol.gguf --iters 5 2>&1 |
        grep -v XDG_RUNTIME | tee "$out/llm-$d.txt"
    done
    ;;
  torch)
    timeout "${TORCH_TIMEOUT:-400}" python3 .device/torch_anchor.py minilm mnist-cnn \
      --json "$out/torch.json" >"$out/torch.jsonl" 2>"$out/torch.err"
    tail -n 20 "$out/torch.jsonl"
    ;;
  esac
done
