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

pub const PRELUDE: &str = "#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct EwDim3 { unsigned x, y, z; };
static EwDim3 blockIdx = {0, 0, 0}, threadIdx = {0, 0, 0}, blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
static inline float __shfl_xor_sync(unsigned, float v, int) { return v; }
static inline double __shfl_xor_sync(unsigned, double v, int) { return v; }
static inline void __syncthreads() {}
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
// Host float arithmetic is IEEE round-to-nearest; `volatile` keeps g++ from contracting to FMA.
static inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
static inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
static inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
";

/// Device intrinsics beyond PRELUDE's, for the block decoders of quant.cu (`__byte_perm`
/// without the sign-replicating selectors, bit 3 of a selector nibble, which they do not use).
pub const PRELUDE_BITS: &str = "
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

/// Panics with the first lines of a failed command's error output.
fn succeeded(out: &std::process::Output, what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    let head: Vec<&str> = err.lines().take(40).collect();
    assert!(out.status.success(), "{what} failed:\n{}", head.join("\n"));
}
