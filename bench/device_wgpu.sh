#!/usr/bin/env bash
# The wgpu backend on the H200 through NVIDIA's Vulkan driver, in one device call: the wgpu
# parity suite (RLX_REQUIRE_WGPU=1: a missing adapter fails), then `rlx bench` on wgpu and on
# CUDA side by side (same binary, same GPU), then PyTorch's anchor.
# Here, once: bash bench/device_wgpu.sh prepare   (Vulkan loader .debs into .gl/, git-ignored)
#             bash bench/pack_device.sh wgpu      (rlx-wgpu tests + rlx, .devpack/wgpu.tar.xz)
# Device call: carry [".devpack/wgpu.tar.xz", ".gl"],
#   tar -xJf .devpack/wgpu.tar.xz && bash bench/device_wgpu.sh [tests] [bench] [profile] [llm] [cli] [torch]
#   SmolLM2 decode: the file travels in pieces (64 MiB a call): carry .devmN/smol.partN with
#   successive calls (each call stashes the pieces it carries), `llm` in the call with the last
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
# Pieces of SmolLM2 carried by this call wait in /tmp/rlx-llm for the call that has them all.
mkdir -p /tmp/rlx-llm
for f in .devm*/smol.part*; do [ -f "$f" ] && cp "$f" /tmp/rlx-llm/; done
for p in $parts; do
  case $p in
  tests)
    echo "== wgpu parity suite on the H200 (RLX_REQUIRE_WGPU=1)"
    export RLX_REQUIRE_WGPU=1
    while read -r name dir; do
      case "$dir" in *rlx-wgpu) ;; *) continue ;; esac
      # TEST_ONLY=a,b runs only the binaries whose names start with those (BENCH_DEVICES=wgpu
      # likewise narrows the bench part).
      if [ -n "${TEST_ONLY:-}" ]; then
        keep=0; for t in ${TEST_ONLY//,/ }; do case "$name" in "$t"-*) keep=1 ;; esac; done
        [ $keep = 1 ] || continue
      fi
      r=$(cd "$dir" && timeout "${TEST_TIMEOUT:-300}" "$top/.device/tests/$name" 2>&1); rc=$?
      echo "[$rc] ${name%-*}: $(echo "$r" | grep -E '^test result:' | tail -n 1)"
      [ "$rc" = 0 ] || echo "$r" | grep -E "panicked|rel-L2|differ" | head -n 8
    done < .device/tests/index | tee "$out/wgpu-tests.txt"
    ;;
  bench)
    echo "== rlx bench: wgpu (Vulkan) beside CUDA on the same GPU"
    for d in ${BENCH_DEVICES:-wgpu cuda}; do
      ./.device/bin/rlx bench --device $d --suites matmul,encoder,cnn --json "$out/bench-$d.json" 2>&1 |
        grep -v XDG_RUNTIME | tee "$out/bench-$d.txt"
    done
    ;;
  llm)
    cat /tmp/rlx-llm/smol.part* > /tmp/rlx-llm/smol.gguf
    sha256sum /tmp/rlx-llm/smol.gguf
    for d in wgpu cuda; do
      ./.device/bin/rlx bench --device $d --suites llm --gguf /tmp/rlx-llm/smol.gguf --iters 5 2>&1 |
        grep -v XDG_RUNTIME | tee "$out/llm-$d.txt"
    done
    echo "== the decode step's kernels on wgpu (GPU timestamps)"
    ./.device/bin/rlx bench --device wgpu --suites llm --gguf /tmp/rlx-llm/smol.gguf --iters 3 \
      --profile 2>&1 | grep -v XDG_RUNTIME | grep -A 20 '^profile' | tee "$out/profile-llm-wgpu.txt"
    ;;
  profile)
    # Where wgpu's time goes: GPU timestamps per kernel, a table after each workload's row.
    echo "== rlx bench --profile on wgpu"
    ./.device/bin/rlx bench --device wgpu --suites encoder,cnn --iters 3 --profile 2>&1 |
      grep -v XDG_RUNTIME | tee "$out/profile-wgpu.txt"
    ;;
  cli)
    # The CLI jobs on the H200's Vulkan adapter (embed needs a model folder beyond a call's
    # 64 MiB; it runs on lavapipe in CI).
    echo "== rlx train digits --device wgpu"
    ./.device/bin/rlx train digits --device wgpu --epochs 3 2>&1 | grep -v XDG_RUNTIME | tail -n 6
    if [ -f /tmp/rlx-llm/smol.gguf ]; then
      echo "== rlx generate --device wgpu (SmolLM2-135M Q4_1), then the CPU"
      for d in wgpu cpu; do
        ./.device/bin/rlx generate --device $d --model /tmp/rlx-llm/smol.gguf \
          --prompt "The capital of France is" --max-tokens 24 2>&1 | grep -v XDG_RUNTIME | tail -n 4
      done
    fi
    ;;
  torch)
    timeout "${TORCH_TIMEOUT:-400}" python3 .device/torch_anchor.py minilm mnist-cnn \
      --json "$out/torch.json" >"$out/torch.jsonl" 2>"$out/torch.err"
    tail -n 20 "$out/torch.jsonl"
    ;;
  esac
done
