"""llama.cpp's CPU speed on a GGUF (the peer of `rlx bench --device cpu --suites llm`):
pp128 (one 128-token batch) and tg32 (32 single-token decode calls from an empty cache),
with llama-cpp-python 0.3.36's libllama (built by scripts/llama_ref.sh), median of 3.

  PYTHONPATH=$RLX_CACHE/py-llama-cpp-0.3.36 python3 scripts/llama_cpu_bench.py MODEL.gguf [THREADS]
"""
import statistics
import sys
import time

from llama_cpp import Llama


def main():
    path = sys.argv[1]
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    llm = Llama(model_path=path, n_ctx=512, n_batch=512, n_threads=threads,
                n_threads_batch=threads, verbose=False)
    vocab = llm.n_vocab()
    toks = [(i * 7919 + 13) % vocab for i in range(128)]
    pp, tg = [], []
    for rep in range(4):
        llm.reset()
        llm._ctx.kv_cache_clear() if hasattr(llm._ctx, "kv_cache_clear") else None
        t = time.perf_counter()
        llm.eval(toks)
        if rep:
            pp.append(time.perf_counter() - t)
        llm.reset()
        llm._ctx.kv_cache_clear() if hasattr(llm._ctx, "kv_cache_clear") else None
        t = time.perf_counter()
        for k in range(32):
            llm.eval([toks[k]])
        if rep:
            tg.append((time.perf_counter() - t) / 32)
    print(f"llama.cpp CPU {threads} threads: pp128 {128 / statistics.median(pp):.1f} tok/s, "
          f"tg32 {1 / statistics.median(tg):.1f} tok/s")


main()
