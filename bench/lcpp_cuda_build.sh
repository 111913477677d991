#!/usr/bin/env bash
# Builds llama.cpp's CUDA llama-bench and llama-quantize (sm_90) on this GPU-less machine, so
# that a device session spends none of its 30 minutes on the ~6-minute build: nvcc, the CUDA
# 13.0 headers and cuBLAS come from PyPI wheels (the same CUDA 13.0 the H200 runs). About an
# hour on 2 cores, once; the result is kept in ${RLX_CACHE:-~/.cache/rlx}/lcpp-cuda.
#   bash bench/lcpp_cuda_build.sh          build (if absent), then pack for a device call:
#                                          .lcppbin/lcpp-bin.tar.xz.* and .lcpps (the anchor's
#                                          scripts and gguf-py), as `device_llm.sh side` reads
# Host code is built without -march=native (the device's CPU is not this one). The binaries
# need GLIBCXX_3.4.30 (g++ 12); this machine's libstdc++ travels in bin/fallback for a device
# whose own is older (it needs glibc 2.36, so it is not the default; a static libstdc++ in
# each library crashed at start: "free(): invalid pointer"); the binaries
# find their ggml / llama libraries through $ORIGIN and cuBLAS / cudart through the device's
# CUDA installation (`device_llm.sh` puts it on LD_LIBRARY_PATH).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${RLX_CACHE:-$HOME/.cache/rlx}
tools=$cache/build-tools
cuda=$cache/cuda-lcpp
out=$cache/lcpp-cuda
py=${PYTHON:-python3}

[ -x "$tools/cmake/data/bin/cmake" ] ||
  "$py" -m pip install -q --disable-pip-version-check --target "$tools" cmake==3.31.6 ninja==1.13.0
if ! [ -f "$cuda/include/cublas_v2.h" ]; then
  eval "$(bash "$top/scripts/cuda_toolkit.sh")"
  tmp=$(mktemp -d)
  "$py" -m pip install -q --disable-pip-version-check --no-deps --target "$tmp" nvidia-cublas==13.0.2.14
  rm -rf "$cuda"; cp -r "$CUDA_HOME" "$cuda"; cp -r "$tmp"/nvidia/cu13/. "$cuda"/; rm -rf "$tmp"
fi
# CMake's FindCUDAToolkit links against the unversioned names the wheels leave out.
for l in cudart cublas cublasLt; do ln -sf lib$l.so.13 "$cuda/lib/lib$l.so"; done
[ -d "$cuda/lib64" ] || ln -s lib "$cuda/lib64"
# No wheel carries the driver's link stub: an empty libcuda.so named libcuda.so.1 gives
# ggml-cuda its DT_NEEDED entry (kept by --no-as-needed, though the stub defines nothing);
# its cu* symbols resolve against the device's driver library when that loads (hence
# --allow-shlib-undefined for the executables).
if ! [ -f "$cuda/lib/stubs/libcuda.so" ]; then
  mkdir -p "$cuda/lib/stubs"
  echo "" | gcc -shared -x c - -Wl,-soname,libcuda.so.1 -o "$cuda/lib/stubs/libcuda.so"
fi
anchor=$top/../shared/bench
if ! [ -x "$out/build/bin/llama-bench" ]; then
  rm -rf "$out"; bash "$anchor/llama_cpp_anchor.sh" prepare "$out"
  # pip --target leaves cmake as a Python entry point; its executable sits under data/.
  export PATH=$tools/cmake/data/bin:$tools/bin:$cuda/bin:$PATH CUDA_HOME=$cuda
  export CUDACXX=$cuda/bin/nvcc
  # The CUDA architecture is given, so no GPU is queried; the wheels' cudart stub is enough
  # to link (the driver's libcuda is needed only at run time, through cudart).
  cmake -S "$out/src" -B "$out/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF \
    -DCUDAToolkit_ROOT="$cuda" -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON \
    -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined \
    -DCMAKE_SHARED_LINKER_FLAGS=-Wl,--no-as-needed \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF >"$out/cmake.log" 2>&1 ||
    { tail -30 "$out/cmake.log"; exit 1; }
  start=$(date +%s)
  cmake --build "$out/build" -j"$(nproc)" --target llama-bench llama-quantize >"$out/build.log" 2>&1 ||
    { grep -E "error|Error" "$out/build.log" | head -20; tail -20 "$out/build.log"; exit 1; }
  echo "built in $(( $(date +%s) - start )) s"
  mkdir -p "$out/build/bin/fallback"
  for l in libstdc++.so.6 libgcc_s.so.1; do cp -L "$(g++ -print-file-name=$l)" "$out/build/bin/fallback/"; done
fi
# What a device call needs beside the binaries: the anchor's scripts and gguf-py (~1 MB; the
# whole source tree is 33 MB of the 64 MiB a call carries).
rm -rf "$top/.lcppbin" "$top/.lcpps"; mkdir -p "$top/.lcppbin" "$top/.lcpps/src"
(cd "$out/build" && tar -cf - bin | xz -T0 -6 | split -b 15M - "$top/.lcppbin/lcpp-bin.tar.xz.")
cp "$anchor"/llama_cpp_anchor.sh "$anchor"/gen_gguf.py "$anchor"/smollm2_tokenizer.json "$top/.lcpps/"
cp -r "$out/src/gguf-py" "$top/.lcpps/src/"
du -sh "$top/.lcppbin" "$top/.lcpps"
