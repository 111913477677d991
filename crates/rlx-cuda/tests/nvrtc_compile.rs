//! Every hand-written kernel source compiles with NVRTC for sm_90. Needs only libnvrtc and
//! the CUDA headers (CI takes both from PyPI wheels), no GPU. Skips when libnvrtc is absent
//! unless `RLX_REQUIRE_NVRTC=1`.
use rlx_cuda::kernels::{Lib, Src};
use rlx_cuda::nvrtc;

pub fn nvrtc_or_skip() -> bool {
    if nvrtc::nvrtc_available() {
        return true;
    }
    if rlx_ir::env::flag(rlx_ir::env::Switch::RequireNvrtc) {
        panic!("RLX_REQUIRE_NVRTC=1 but libnvrtc was not found on the loader path");
    }
    eprintln!("skipping: libnvrtc not found (set LD_LIBRARY_PATH to CUDA 13's lib folder)");
    false
}

#[test]
fn every_static_source_compiles_for_sm90() {
    if !nvrtc_or_skip() {
        return;
    }
    // RLX_KERNEL_SOURCES=norm,linalg compiles only those (a quick check while editing one).
    let only = rlx_ir::env::text(rlx_ir::env::Switch::KernelSources);
    let mut failed = Vec::new();
    for lib in Lib::ALL {
        let name = lib.name();
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|n| n == name))
        {
            continue;
        }
        match nvrtc::compile_uncached(name, &Src::Lib(lib).full(), "sm_90") {
            Ok(cubin) => {
                assert!(!cubin.is_empty(), "{name}: empty CUBIN");
                // With RLX_CACHE_DIR set, leave the CUBINs in that cache (warms a device run).
                if rlx_ir::env::is_set(rlx_ir::env::Switch::CacheDir) {
                    nvrtc::store(
                        nvrtc::cache_path(&Src::Lib(lib), "sm_90").as_deref(),
                        &cubin,
                    );
                }
                println!("{name}: {} bytes of sm_90 CUBIN", cubin.len());
            }
            Err(e) => failed.push(format!("{e}")),
        }
    }
    assert!(
        failed.is_empty(),
        "kernel sources failed to compile:\n{}",
        failed.join("\n")
    );
}
