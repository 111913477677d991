#!/usr/bin/env bash
# Device steps of the LLM work (issue 10), after bench/device_run.sh's bundle is unpacked:
#   part1   carry [".devpack/device.tar.xz", ".devm1"]: unpack, stash the tiny GGUFs and the
#           first part of SmolLM2 under /tmp/rlx-llm (kept while the machine stays warm)
#   part2   carry [".devm2"]: the rest of SmolLM2 (the device tool moves 64 MiB a call), check
#           its sha256, write its every-type requantization (scripts/gguf_requant.py), run the
#           decoder tests on CUDA and `rlx generate` on the real model
#   stash   carry [".devm1"], right after bench/device_embed.sh's calls in the same warm
#           session: the bundle already unpacked under /tmp/rlx-hf serves this part too
#   smol    rlx bench on the real SmolLM2 only (decode, prefill, and the per-kernel profile)
#   micro   the decode GEMV microbenchmark (bench/cuda_micro: nvcc, hot and L2-cold timings)
#   lcpp    carry [".lcpp"] (../shared/bench/llama_cpp_anchor.sh prepare .lcpp): build llama.cpp
#           with CUDA and run llama-bench, with the micro benchmark beside the build; the
#           built binaries come back under $OUT as lcpp-bin.tar.xz.* for `lcppbin`
#   lcppbuild carry [".lcpp"]: the same build and the GGUFs, no benchmark (for `side` next)
#   lcppbin carry [".lcpp", ".lcppbin"]: the same llama-bench run from binaries built earlier
#   side    carry [".lcpps", ".lcppbin", ".devbin"] (.lcpps: the anchor's scripts and gguf-py;
#           .lcppbin: llama.cpp's binaries from `lcpp` or built here by bench/lcpp_cuda_build.sh;
#           .devbin/rlx.xz: the release rlx, xz-compressed, or .devpack unpacked first: its
#           .device/bin/rlx): llama-bench from the saved
#           binaries, then rlx bench (and its decode profile) on the same GGUFs, then the
#           micro benchmark — the side-by-side in one call
#   target  carry [".lcpps", ".lcppbin", ".devpack"] (unpacked first): side and ab in short, the
#           0.5B Q4_K_M and SmolLM2 Q4_1 rows only, two rounds
#   ab      carry [".devbin"] with rlx_old.xz beside rlx.xz, right after `side`: the two
#           binaries (this one also with RLX_GEMV_TS=1) alternated on the 0.5B Q4_K_M and
#           SmolLM2 Q4_1 files
#   variants carry [".devbin"], right after `side` (same warm machine): rlx bench again with
#           RLX_PLANAR=1, RLX_PRECISION=f16 and both
#   bench   carry [".lcpp"]: llama.cpp's llama-bench (built here, ~6 min) and `rlx bench` on the
#           same random-weight GGUFs, one after the other in this call, plus the real SmolLM2
set -u
top=$(cd "$(dirname "$0")/.." && pwd); cd "$top"
W=/tmp/rlx-llm; mkdir -p $W/cache/gguf
out=${OUT:-/tmp/rlx-out}; mkdir -p "$out"
export RLX_CACHE=$W/cache RLX_CACHE_DIR=$W/kcache
smol=$W/cache/gguf/SmolLM2-135M-Instruct.Q4_1.gguf
# The release rlx: .devbin/rlx.xz, or the unpacked bundle's (carry .devpack instead of .devbin
# when llama.cpp's binaries, the anchor and the bundle travel in one call).
get_rlx() {
  if [ -e .devbin/rlx.xz ]; then xz -dc .devbin/rlx.xz > $W/rlx; else cp .device/bin/rlx $W/rlx; fi
  chmod +x $W/rlx
}
# llama.cpp's saved binaries (.lcppbin) unpacked under $L, with the libraries they load.
lcpp_setup() {
  L=$(dirname "$(mktemp -u)")/rlx-llama-cpp; mkdir -p $L/src/build
  # Binaries built on the host (bench/lcpp_cuda_build.sh) load cuBLAS / cudart from the
  # device's CUDA 13 installation, wherever it is.
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
      $(python3 -c 'import nvidia; print(*[p + "/cu13/lib" for p in nvidia.__path__])' 2>/dev/null); do
    [ -e "$d/libcublas.so.13" ] && export LD_LIBRARY_PATH=$d:${LD_LIBRARY_PATH:-}
  done
  [ -x $L/src/build/bin/llama-bench ] || { cat .lcppbin/lcpp-bin.tar.xz.* | xz -d | tar -xf - -C $L/src/build && cp -r .lcpps/src/gguf-py $L/src/; }
  # g++ 12's libstdc++ (bin/fallback) only where the device's own is too old for the binaries.
  ldd $L/src/build/bin/llama-bench 2>&1 | grep -q "GLIBCXX.*not found" &&
    export LD_LIBRARY_PATH=$L/src/build/bin/fallback:${LD_LIBRARY_PATH:-}
  ldd $L/src/build/bin/llama-bench 2>&1 | grep "not found"
}
for step in "$@"; do case $step in
part1)
  tar -xJf .devpack/device.tar.xz -C $W && cp .devm1/tiny-*.gguf $W/cache/gguf/ && cp .devm1/smol.part1 $W/
  mkdir -p $RLX_CACHE_DIR && cp -r $W/.device/cache/. $RLX_CACHE_DIR/ 2>/dev/null
  ls $W/.device/tests | head -40; du -sh $W ;;
part2)
  cat $W/smol.part1 .devm2/smol.part2 > $smol && sha256sum $smol
  # SmolLM2 requantized to every type, written here from the real file (gguf-py in the pack,
  # the device's numpy): the same bytes as scripts/fetch_models.sh writes.
  PYTHONPATH=$W/.device/py python3 scripts/gguf_requant.py $smol $W/cache/gguf/SmolLM2-135M-Instruct.mix.gguf 2>&1 | tail -2
  sha256sum $W/cache/gguf/SmolLM2-135M-Instruct.mix.gguf
  export RLX_REQUIRE_CUDA=1
  t=$(ls $W/.device/tests/cuda-* | while read f; do grep -q "cuda_smollm2" "$f" 2>/dev/null && echo $f; done | head -1)
  echo "== rlx-models decoder tests on CUDA ($t)"
  (cd crates/rlx-models && timeout 400 $t --nocapture --test-threads 1 2>&1 | grep -vE "^$" | tail -40)
  echo "== rlx generate on CUDA (greedy, real SmolLM2 Q4_1)"
  RLX_DISPATCH_REPORT=1 timeout 120 $W/.device/bin/rlx generate --model $smol --device cuda \
    --prompt "The capital of France is" --max-tokens 48 2>&1 | tail -30
  echo "== rlx generate --chat on CUDA (sampled, seed 7)"
  timeout 120 $W/.device/bin/rlx generate --model $smol --device cuda --chat --temperature 0.7 --seed 7 \
    --prompt "Write a haiku about GPUs." --max-tokens 64 2>&1 | tail -12 ;;
micro)
  bash bench/cuda_micro/run.sh 2>&1 | tee $out/micro.txt ;;
lcpp)
  (bash bench/cuda_micro/run.sh >$out/micro.txt 2>&1) & mp=$!
  bash .lcpp/llama_cpp_anchor.sh run 2>&1 | tee $out/llama_bench.txt
  wait $mp; cat $out/micro.txt
  L=$(dirname "$(mktemp -u)")/rlx-llama-cpp
  (cd $L/src/build && tar -cf - bin | xz -T0 -6 | split -b 15M - $out/lcpp-bin.tar.xz.) ; ls -la $out ;;
lcppbuild)
  # carry [".lcpp"] (the anchor's prepare): build llama.cpp's CUDA llama-bench and
  # llama-quantize under $L (as the anchor's `run` does, ~6 min on 16 cores) while the f16
  # GGUFs are written beside it, quantize them, and send the binaries back as
  # lcpp-bin.tar.xz.* (for a later `side`'s .lcppbin) — no benchmark, so a `side` that follows
  # in the same warm machine finds everything in place and measures both systems back to back.
  L=$(dirname "$(mktemp -u)")/rlx-llama-cpp; mkdir -p $L
  [ -d $L/src ] || cp -r .lcpp/src $L/src
  ( [ -f $L/qwen05b-f16.gguf ] || python3 .lcpp/gen_gguf.py $L/src $L/qwen05b-f16.gguf 896 24 14 2 4864 151936 .lcpp/smollm2_tokenizer.json >/dev/null
    [ -f $L/smollm135-f16.gguf ] || python3 .lcpp/gen_gguf.py $L/src $L/smollm135-f16.gguf 576 30 9 3 1536 49152 .lcpp/smollm2_tokenizer.json >/dev/null ) & gp=$!
  start=$(date +%s)
  (cd $L/src && cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_BUILD_TESTS=OFF \
     -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF \
     -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=ON >$L/cmake.log 2>&1 &&
   cmake --build build -j"$(nproc)" --target llama-bench llama-quantize >$L/build.log 2>&1) ||
    { tail -20 $L/cmake.log $L/build.log; exit 1; }
  echo "llama.cpp built in $(( $(date +%s) - start )) s"; wait $gp
  B=$L/src/build/bin
  $B/llama-quantize $L/smollm135-f16.gguf $L/smollm135-q4_1.gguf Q4_1 >/dev/null 2>&1
  $B/llama-quantize $L/qwen05b-f16.gguf $L/qwen05b-q4_k_m.gguf Q4_K_M >/dev/null 2>&1
  ls -la $L/*.gguf
  (cd $L/src/build && tar -cf - bin | xz -T0 -6 | split -b 15M - $out/lcpp-bin.tar.xz.) ; ls -la $out ;;
lcppbin)
  L=$(dirname "$(mktemp -u)")/rlx-llama-cpp; mkdir -p $L/src/build
  cat .lcppbin/lcpp-bin.tar.xz.* | xz -d | tar -xf - -C $L/src/build && cp -r .lcpp/src/gguf-py $L/src/
  bash .lcpp/llama_cpp_anchor.sh run 2>&1 | tee $out/llama_bench.txt ;;
side)
  lcpp_setup
  echo "== llama.cpp (CUDA) llama-bench: pp512 / tg128"
  bash .lcpps/llama_cpp_anchor.sh run 2>&1 | tee $out/llama_bench.txt
  get_rlx
  echo "== rlx bench, same GGUFs, same GPU, right after"
  $W/rlx bench --device cuda --suites llm --iters 5 --gguf $L/smollm135-q4_1.gguf \
    --gguf $L/smollm135-f16.gguf --gguf $L/qwen05b-f16.gguf --gguf $L/qwen05b-q4_k_m.gguf 2>&1 | tee $out/rlx_bench.txt
  for f in qwen05b-f16 qwen05b-q4_k_m; do
    $W/rlx bench --device cuda --suites llm --iters 2 --profile --gguf $L/$f.gguf 2>&1 | grep -A20 "^profile: "
  done 2>&1 | tee $out/rlx_profile.txt
  [ -n "${MICRO:-}" ] && bash bench/cuda_micro/run.sh 2>&1 | grep -E "^[A-Za-z0-9]|MISMATCH|today|best|wide" | tee $out/micro.txt ;;
target)
  # The short form of `side` + `ab` for a call with little device time left: only the rows
  # still in question (0.5B Q4_K_M, with SmolLM2 Q4_1 beside it), llama.cpp before and after
  # rlx (default, then RLX_GEMV_TS=1) on the same files.
  lcpp_setup; B=$L/src/build/bin
  [ -f $L/qwen05b-f16.gguf ] || python3 .lcpps/gen_gguf.py $L/src $L/qwen05b-f16.gguf 896 24 14 2 4864 151936 .lcpps/smollm2_tokenizer.json >/dev/null
  [ -f $L/smollm135-f16.gguf ] || python3 .lcpps/gen_gguf.py $L/src $L/smollm135-f16.gguf 576 30 9 3 1536 49152 .lcpps/smollm2_tokenizer.json >/dev/null
  [ -f $L/qwen05b-q4_k_m.gguf ] || $B/llama-quantize $L/qwen05b-f16.gguf $L/qwen05b-q4_k_m.gguf Q4_K_M >/dev/null 2>&1
  [ -f $L/smollm135-q4_1.gguf ] || $B/llama-quantize $L/smollm135-f16.gguf $L/smollm135-q4_1.gguf Q4_1 >/dev/null 2>&1
  get_rlx
  for r in 1 2; do
    for m in qwen05b-q4_k_m smollm135-q4_1; do
      echo "== llama.cpp $m (round $r)"; $B/llama-bench -m $L/$m.gguf -p 512 -n 128 -ngl 99 -fa 1 -r 5 -o md 2>/dev/null | grep -E "pp512|tg128"
    done
    for e in RLX_NONE=1 RLX_GEMV_TS=1; do
      echo "== rlx ($e, round $r)"
      env $e $W/rlx bench --device cuda --suites llm --iters 5 --gguf $L/qwen05b-q4_k_m.gguf \
        --gguf $L/smollm135-q4_1.gguf 2>&1 | grep -E "tg128|pp512"
    done
  done 2>&1 | tee $out/rlx_target.txt ;;
ab)
  # After `side` (its GGUFs in /tmp): the rlx binary of an earlier commit (.devbin/rlx_old.xz)
  # and this one, alternated twice on the same files, decode and prefill rows only.
  L=$(dirname "$(mktemp -u)")/rlx-llama-cpp
  [ -x $W/rlx ] || get_rlx
  [ -e .devbin/rlx_old.xz ] && xz -dc .devbin/rlx_old.xz > $W/rlx_old && chmod +x $W/rlx_old
  # AB="rlx 'RLX_GEMV_TS=1 rlx'" leaves the old binary out (a shorter call).
  eval "set -- ${AB:-rlx_old rlx 'RLX_GEMV_TS=1 rlx'}"
  # ABM: the GGUFs (names under $L, without .gguf) to run them on.
  g=""; for m in ${ABM:-qwen05b-q4_k_m smollm135-q4_1}; do g="$g --gguf $L/$m.gguf"; done
  for r in 1 2; do for b in "$@"; do
    echo "== round $r: $b"
    e=""; [ "$b" != "${b#RLX_}" ] && e=${b% *}
    env $e $W/${b##* } bench --device cuda --suites llm --iters 5 $g 2>&1 | grep -E "tg128|pp512" | tee -a $out/rlx_ab.txt
  done; done ;;
variants)
  # After `side` in the same warm session (its llama.cpp binaries and GGUFs still in /tmp):
  # the same rlx bench rows with the planar weight layout, then under the f16 policy.
  L=$(dirname "$(mktemp -u)")/rlx-llama-cpp
  [ -x $W/rlx ] || { xz -dc .devbin/rlx.xz > $W/rlx && chmod +x $W/rlx; }
  for v in "RLX_PLANAR=1" "RLX_PRECISION=f16" "RLX_PLANAR=1 RLX_PRECISION=f16"; do
    echo "== rlx bench with $v"
    env $v $W/rlx bench --device cuda --suites llm --iters 5 --gguf $L/smollm135-q4_1.gguf \
      --gguf $L/qwen05b-f16.gguf --gguf $L/qwen05b-q4_k_m.gguf 2>&1 | tee -a $out/rlx_variants.txt
  done ;;
bench)
  echo "== llama.cpp (CUDA) llama-bench: pp512 / tg128"
  bash .lcpp/llama_cpp_anchor.sh run 2>&1 | tee $out/llama_bench.txt
  L=$(dirname "$(mktemp -u)")/rlx-llama-cpp
  echo "== rlx bench, same GGUFs, same GPU, right after"
  $W/.device/bin/rlx bench --device cuda --suites llm --iters 5 \
    --gguf $L/smollm135-q4_1.gguf --gguf $smol --gguf $L/smollm135-f16.gguf \
    --gguf $L/qwen05b-f16.gguf --gguf $L/qwen05b-q4_k_m.gguf 2>&1 | tee $out/rlx_bench.txt
  for f in qwen05b-f16 qwen05b-q4_k_m; do
    $W/.device/bin/rlx bench --device cuda --suites llm --iters 2 --profile --gguf $L/$f.gguf 2>&1 | grep -A22 "^profile: .*decode"
  done ;;
stash)
  mkdir -p $W && cp -r /tmp/rlx-hf/.device $W/ && cp .devm1/tiny-*.gguf $W/cache/gguf/ && cp .devm1/smol.part1 $W/
  mkdir -p $RLX_CACHE_DIR && cp -r $W/.device/cache/. $RLX_CACHE_DIR/ 2>/dev/null; du -sh $W ;;
smol)
  $W/.device/bin/rlx bench --device cuda --suites llm --iters 5 --gguf $smol 2>&1 | tee $out/rlx_smol.txt
  $W/.device/bin/rlx bench --device cuda --suites llm --iters 2 --profile --gguf $smol 2>&1 | tail -45 ;;
profile)
  L=$(dirname "$(mktemp -u)")/rlx-llama-cpp
  $W/.device/bin/rlx bench --device cuda --suites llm --iters 2 --profile --gguf $L/smollm135-q4_1.gguf 2>&1 | tail -40 ;;
esac; done
