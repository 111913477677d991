//! Host emulation of kernel sources (tests only): CUDA C++ compiled by g++ against the CUDA
//! headers' host paths (`__half` rounding and conversions are the real ones), with the few
//! device intrinsics the emulated code uses written out for the host. Kernels whose threads
//! do not talk to each other run as one sequential "thread" of their grid; per-thread device
//! functions (a GEMV's block decoders) are called directly.
use std::path::{Path, PathBuf};
use std::process::Command;

pub const HOST_DEFINES: &str = "#pragma once
#define __host__
#define __device__
#define __global__
#define __forceinline__ inline __attribute__((always_inline))
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
#define __cudart_builtin__
#define __device_builtin__
#define __CUDA_ALIGN__(n) __attribute__((aligned(n)))
#define CUDARTAPI
#define __location__(a)
#define __inline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __restrict__ __restrict
";

/// libcu++'s `<nv/target>` for a host-only build: every NV_IF_ELSE_TARGET takes its host
/// branch (with or without parentheses around it).
pub const NV_TARGET: &str = "#pragma once
#define NV_EW_ISH(...) NV_EW_ISH __VA_ARGS__
#define NV_EW_ESC(...) NV_EW_ESC_(__VA_ARGS__)
#define NV_EW_ESC_(...) NV_EW_VAN##__VA_ARGS__
#define NV_EW_VANNV_EW_ISH
#define NV_EW_UNPAREN(...) NV_EW_ESC(NV_EW_ISH __VA_ARGS__)
#define NV_IF_ELSE_TARGET(q, t, ...) NV_EW_UNPAREN(__VA_ARGS__)
";

/// What every emulation needs: libm, and CUDA's rounding-mode arithmetic.
macro_rules! math_prelude {
    () => {
        "#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
// Host float arithmetic is IEEE round-to-nearest; `volatile` keeps g++ from contracting to FMA.
static inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
static inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
static inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
"
    };
}

/// One sequential "thread" a grid: shuffles are identities and barriers no-ops, which is
/// exact for kernels whose threads do not talk to each other (and for per-thread device
/// functions).
pub const PRELUDE: &str = concat!(
    math_prelude!(),
    "struct EwDim3 { unsigned x, y, z; };
static EwDim3 blockIdx = {0, 0, 0}, threadIdx = {0, 0, 0}, blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
static inline float __shfl_xor_sync(unsigned, float v, int) { return v; }
static inline double __shfl_xor_sync(unsigned, double v, int) { return v; }
static inline void __syncthreads() {}
"
);

/// Whole blocks of cooperating threads: every thread of a block is a fiber (ucontext) with
/// its own `threadIdx`, run until it reaches a barrier or ends. `__syncthreads` releases when
/// every live thread of the block has reached one, a warp barrier (each `__shfl_xor_sync`
/// takes two: publish, read) when every live lane of the warp has; a thread that ends drops
/// out of both, as on the GPU. Blocks run one after another, so `__shared__` is `static`
/// storage and the dynamic array is one buffer, filled with NaN bytes before each block so a
/// read of anything not staged shows. A barrier no set of threads can pass (divergent
/// barriers, a shuffle with lanes gone) stops the program with the threads' states.
/// `emu_launch(grid, block, smem_bytes, body)` runs `body` (a kernel call) over a 1-D grid,
/// `emu_launch2(grid_x, grid_y, ..)` over a 2-D one (x fastest).
pub const THREADED: &str = concat!(
    math_prelude!(),
    r#"#include <ucontext.h>
#include <functional>
#include <vector>
struct EwDim3 { unsigned x, y, z; };
static EwDim3 blockIdx = {0, 0, 0}, blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
enum { EMU_RUN, EMU_BLOCK, EMU_WARP, EMU_DONE };
struct EmuThread { ucontext_t uc; EwDim3 idx; int state; bool started; std::vector<char> stack; };
static std::vector<EmuThread> emu_t;
static unsigned emu_cur;
static ucontext_t emu_sched;
static std::function<void()> emu_body;
static void* emu_dyn_smem;
#define threadIdx (emu_t[emu_cur].idx)
#define __shared__ static
static void emu_wait(int kind) {
    emu_t[emu_cur].state = kind;
    swapcontext(&emu_t[emu_cur].uc, &emu_sched);
}
static inline void __syncthreads() { emu_wait(EMU_BLOCK); }
static inline void __syncwarp(unsigned = 0xffffffffu) { emu_wait(EMU_WARP); }
template <class V>
static V emu_shfl_xor(V v, int o, V* slot) {
    const unsigned t = threadIdx.x;
    slot[t] = v;
    emu_wait(EMU_WARP);
    const V r = slot[(t & ~31u) | ((t ^ (unsigned)o) & 31u)];
    emu_wait(EMU_WARP);
    return r;
}
static float emu_slot_f[1024];
static double emu_slot_d[1024];
static inline float __shfl_xor_sync(unsigned, float v, int o) { return emu_shfl_xor(v, o, emu_slot_f); }
static inline double __shfl_xor_sync(unsigned, double v, int o) { return emu_shfl_xor(v, o, emu_slot_d); }
static void emu_entry() {
    emu_body();
    emu_t[emu_cur].state = EMU_DONE;
    swapcontext(&emu_t[emu_cur].uc, &emu_sched);
}
// Runs every runnable thread until it blocks, then opens the barriers that every live
// member has reached (warps first), until all threads are done.
static void emu_block() {
    const unsigned n = (unsigned)emu_t.size();
    for (;;) {
        for (unsigned i = 0; i < n; ++i) {
            if (emu_t[i].state != EMU_RUN) continue;
            emu_cur = i;
            if (!emu_t[i].started) {
                emu_t[i].started = true;
                getcontext(&emu_t[i].uc);
                emu_t[i].uc.uc_stack.ss_sp = emu_t[i].stack.data();
                emu_t[i].uc.uc_stack.ss_size = emu_t[i].stack.size();
                emu_t[i].uc.uc_link = nullptr;
                makecontext(&emu_t[i].uc, emu_entry, 0);
            }
            swapcontext(&emu_sched, &emu_t[i].uc);
        }
        bool live = false, opened = false, all_block = true;
        for (unsigned w = 0; w < n; w += 32) {
            bool any = false, all = true;
            for (unsigned i = w; i < n && i < w + 32; ++i) {
                const int s = emu_t[i].state;
                if (s == EMU_DONE) continue;
                live = true;
                any = any || s == EMU_WARP;
                all = all && s == EMU_WARP;
                all_block = all_block && s == EMU_BLOCK;
            }
            if (any && all) {
                for (unsigned i = w; i < n && i < w + 32; ++i)
                    if (emu_t[i].state == EMU_WARP) emu_t[i].state = EMU_RUN;
                opened = true;
            }
        }
        if (!live) return;
        if (!opened && all_block) {
            for (auto& t : emu_t)
                if (t.state == EMU_BLOCK) t.state = EMU_RUN;
            opened = true;
        }
        if (!opened) {
            fprintf(stderr, "emulated block %u: no barrier can open; thread states (1 block, 2 warp, 3 done):", blockIdx.x);
            for (unsigned i = 0; i < n; ++i) fprintf(stderr, " %d", emu_t[i].state);
            fprintf(stderr, "\n");
            exit(3);
        }
    }
}
static void emu_launch2(unsigned grid, unsigned grid_y, unsigned block, size_t smem,
                        std::function<void()> body) {
    gridDim = {grid, grid_y, 1};
    blockDim = {block, 1, 1};
    emu_body = body;
    const size_t bytes = (smem + 256) / 256 * 256;
    char* dyn = (char*)aligned_alloc(256, bytes);
    emu_dyn_smem = dyn;
    emu_t.resize(block);
    for (unsigned by = 0; by < grid_y; ++by)
    for (unsigned b = 0; b < grid; ++b) {
        blockIdx = {b, by, 0};
        memset(dyn, 0xff, bytes);
        for (unsigned i = 0; i < block; ++i) {
            emu_t[i].idx = {i, 0, 0};
            emu_t[i].state = EMU_RUN;
            emu_t[i].started = false;
            emu_t[i].stack.resize(64 << 10);
        }
        emu_block();
    }
    free(dyn);
}
static void emu_launch(unsigned grid, unsigned block, size_t smem, std::function<void()> body) {
    emu_launch2(grid, 1, block, smem, body);
}
// Fibers never run at once, so read-modify-writes are atomic and fences are no-ops.
static inline unsigned atomicAdd(unsigned* p, unsigned v) { const unsigned o = *p; *p = o + v; return o; }
static inline void __threadfence() {}
template <class V> static inline V __ldcg(const V* p) { return *p; }
"#
);

/// `src` with each `extern __shared__ T name[];` (a kernel's dynamic shared array) turned
/// into a pointer to [`THREADED`]'s buffer.
pub fn dynamic_shared(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    for line in src.lines() {
        let t = line.trim();
        match t
            .strip_prefix("extern __shared__ ")
            .and_then(|r| r.strip_suffix("[];"))
            .and_then(|r| r.split_once(' '))
        {
            Some((ty, name)) => {
                out.push_str(&format!("{ty}* {name} = ({ty}*)emu_dyn_smem;\n"));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// Device intrinsics beyond PRELUDE's, for quant.cu (`__byte_perm` without the
/// sign-replicating selectors, bit 3 of a selector nibble, which it does not use), and CUDA's
/// integer min / max.
pub const PRELUDE_BITS: &str = "
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    unsigned long long v = ((unsigned long long)y << 32) | x, r = 0;
    for (int k = 0; k < 4; ++k) r |= ((v >> (8 * ((s >> (4 * k)) & 7))) & 0xffull) << (8 * k);
    return (unsigned)r;
}
static inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned sh) {
    unsigned long long v = ((unsigned long long)hi << 32) | lo;
    return (unsigned)(v >> (sh & 31));
}
";

/// File input and output of the emulation programs: `rd` a whole file (256-byte aligned, as a
/// device allocation), `wr` bytes.
pub const FILE_IO: &str = "static const char* rd(const char* p) {
    FILE* f = fopen(p, \"rb\");
    if (!f) exit(1);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char* b = (char*)aligned_alloc(256, (n + 255) / 256 * 256);
    if (fread(b, 1, n, f) != (size_t)n) exit(1);
    fclose(f);
    return b;
}
static void wr(const char* p, const void* b, size_t n) {
    FILE* f = fopen(p, \"wb\");
    if (!f || fwrite(b, 1, n, f) != n) exit(1);
    fclose(f);
}
";

/// Append `bytes` to an emulation's input blob at a 256-byte boundary (where a device
/// allocation starts) and return their offset in it.
pub fn put_aligned(blob: &mut Vec<u8>, bytes: impl IntoIterator<Item = u8>) -> usize {
    blob.resize(blob.len().next_multiple_of(256), 0);
    let off = blob.len();
    blob.extend(bytes);
    off
}

/// `v` as the little-endian bytes of f16 (`half`) or f32 values, as a kernel stores them.
pub fn storage_bytes(v: &[f64], half: bool) -> Vec<u8> {
    if half {
        (v.iter())
            .flat_map(|&x| half::f16::from_f64(x).to_le_bytes())
            .collect()
    } else {
        v.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect()
    }
}

/// The f32 values an emulation wrote to `name` in `dir`, as f64.
pub fn read_f32s(dir: &Path, name: &str) -> Vec<f64> {
    (std::fs::read(dir.join(name)).unwrap().chunks_exact(4))
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()) as f64)
        .collect()
}

/// The largest |got − want| / (1 + |want|); a NaN anywhere makes it infinite.
pub fn worst_error(got: &[f64], want: &[f64]) -> f64 {
    (got.iter().zip(want))
        .map(|(g, w)| (g - w).abs() / (1.0 + w.abs()))
        .fold(
            0.0,
            |a, e| if e.is_nan() { f64::INFINITY } else { a.max(e) },
        )
}

/// A fresh folder with the host stand-ins of the CUDA headers, and the CUDA include folder;
/// `None` (printed) where g++ or the headers (`RLX_CUDA_INCLUDE`) are missing.
pub fn workdir(tag: &str) -> Option<(PathBuf, PathBuf)> {
    let Some(inc) = crate::nvrtc::include_dirs().into_iter().next() else {
        eprintln!("skipping host emulation: no CUDA headers (set RLX_CUDA_INCLUDE)");
        return None;
    };
    if Command::new("g++").arg("--version").output().is_err() {
        eprintln!("skipping host emulation: no g++");
        return None;
    }
    let dir = std::env::temp_dir().join(format!("rlx_{tag}_host_{}", std::process::id()));
    std::fs::create_dir_all(dir.join("crt")).unwrap();
    std::fs::create_dir_all(dir.join("nv")).unwrap();
    std::fs::write(dir.join("crt/host_defines.h"), HOST_DEFINES).unwrap();
    std::fs::write(dir.join("nv/target"), NV_TARGET).unwrap();
    Some((dir, inc))
}

/// Compile `text` as `dir/NAME.cpp` with g++ and run it in `dir`; panics with g++'s or the
/// program's error output.
pub fn build_and_run(dir: &Path, inc: &Path, name: &str, text: &str) {
    let src = format!("{name}.cpp");
    std::fs::write(dir.join(&src), text).unwrap();
    let built = Command::new("g++")
        .args(["-O1", "-std=c++17", "-w", "-I."])
        .arg(format!("-I{}", inc.display()))
        .args([src.as_str(), "-o", name, "-lm"])
        .current_dir(dir)
        .output()
        .unwrap();
    succeeded(&built, &format!("g++ ({})", dir.display()));
    let ran = Command::new(dir.join(name))
        .current_dir(dir)
        .output()
        .unwrap();
    succeeded(&ran, name);
}

/// Fails with the count and the first dozen of `failed` (one line each) unless it is empty.
pub fn assert_none_failed(failed: &[String], what: &str) {
    assert!(
        failed.is_empty(),
        "{} {what} differ:\n{}",
        failed.len(),
        failed[..failed.len().min(12)].join("\n")
    );
}

/// Panics with the first lines of a failed command's error output.
fn succeeded(out: &std::process::Output, what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    let head: Vec<&str> = err.lines().take(40).collect();
    assert!(out.status.success(), "{what} failed:\n{}", head.join("\n"));
}
