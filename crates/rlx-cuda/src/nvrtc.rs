//! NVRTC: kernel source → CUBIN for the device's architecture, cached on disk by a hash of
//! the source, the architecture and the NVRTC version.
use crate::kernels::{hash, Src};
use crate::CudaError;
use cudarc::nvrtc::{result, sys};
use std::ffi::CString;
use std::path::PathBuf;

/// Whether libnvrtc can be loaded (cudarc panics on first use when it cannot).
pub fn nvrtc_available() -> bool {
    // SAFETY: only tries to dlopen the library names.
    unsafe { sys::is_culib_present() }
}

/// Directories searched for `cuda_fp16.h` / `cuda_bf16.h`: `RLX_CUDA_INCLUDE` (colon-separated),
/// `$CUDA_HOME/include`, `/usr/local/cuda/include`.
pub fn include_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(v) = rlx_ir::env::text(rlx_ir::env::Switch::CudaInclude) {
        dirs.extend(v.split(':').filter(|s| !s.is_empty()).map(PathBuf::from));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Ok(v) = std::env::var(var) {
            dirs.push(PathBuf::from(v).join("include"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/include"));
    dirs.push(PathBuf::from(
        "/usr/local/cuda/targets/x86_64-linux/include",
    ));
    dirs.retain(|d| d.join("cuda_fp16.h").exists());
    dirs
}

fn nvrtc_version() -> (i32, i32) {
    let (mut a, mut b) = (0, 0);
    // SAFETY: out-pointers to two ints.
    unsafe { sys::nvrtcVersion(&mut a, &mut b) };
    (a, b)
}

fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = rlx_ir::env::text(rlx_ir::env::Switch::CacheDir) {
        return Some(PathBuf::from(d).join("cuda"));
    }
    let base = std::env::var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|_| std::env::var("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .ok()?;
    Some(base.join("rlx").join("cuda"))
}

/// Compile `src` for `arch` (e.g. `sm_90`) and return the CUBIN; a disk cache hit skips NVRTC.
pub fn compile(src: &Src, arch: &str) -> Result<Vec<u8>, CudaError> {
    let name = src.name();
    let text = src.full();
    if !nvrtc_available() {
        return Err(CudaError::Compile {
            name,
            log: "libnvrtc was not found; put it on LD_LIBRARY_PATH (CUDA 13)".into(),
        });
    }
    let cached = cache_path(src, arch);
    if let Some(p) = &cached {
        if let Ok(bytes) = std::fs::read(p) {
            if !bytes.is_empty() {
                return Ok(bytes);
            }
        }
    }
    let cubin = compile_uncached(&name, &text, arch)?;
    store(cached.as_deref(), &cubin);
    Ok(cubin)
}

/// Where the disk cache keeps `src` compiled for `arch` (None without a cache folder).
pub fn cache_path(src: &Src, arch: &str) -> Option<PathBuf> {
    let text = src.full();
    let (maj, min) = nvrtc_version();
    let key = hash(&format!("{arch}|{maj}.{min}|{text}"));
    cache_dir().map(|d| d.join(format!("{}-{key:016x}.cubin", src.name())))
}

/// Put a CUBIN into the disk cache (a failed write only costs a recompile later).
pub fn store(path: Option<&std::path::Path>, cubin: &[u8]) {
    if let Some(p) = path {
        // A failed cache write only costs a recompile next time.
        if let Some(d) = p.parent() {
            let _ = std::fs::create_dir_all(d);
        }
        let tmp = p.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, cubin).is_ok() {
            let _ = std::fs::rename(&tmp, p);
        }
    }
}

/// NVRTC without the cache; the log is returned as the error on failure.
pub fn compile_uncached(name: &str, text: &str, arch: &str) -> Result<Vec<u8>, CudaError> {
    let err = |log: String| CudaError::Compile {
        name: name.to_string(),
        log,
    };
    let csrc = CString::new(text).map_err(|_| err("source contains a NUL byte".into()))?;
    let cname = CString::new(format!("{name}.cu")).expect("no NUL in name");
    let prog = result::create_program(&csrc, Some(&cname)).map_err(|e| err(format!("{e:?}")))?;
    let mut opts = vec![
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_string(),
        "-default-device".to_string(),
    ];
    for d in include_dirs() {
        opts.push(format!("--include-path={}", d.display()));
    }
    // RLX_NVRTC_VERBOSE=1: ptxas reports registers, shared memory and spills per kernel.
    let verbose = rlx_ir::env::flag(rlx_ir::env::Switch::NvrtcVerbose);
    if verbose {
        opts.push("--ptxas-options=-v".to_string());
    }
    // SAFETY: prog is a live program from create_program; it is destroyed once below.
    let out = unsafe {
        let compiled = result::compile_program(prog, &opts);
        let log = result::get_program_log(prog)
            .map(|l| {
                let bytes: Vec<u8> = l.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
                String::from_utf8_lossy(&bytes).into_owned()
            })
            .unwrap_or_default();
        if verbose {
            eprintln!("[rlx-nvrtc] {name}.cu for {arch}:\n{log}");
        }
        let out = match compiled {
            Err(e) => Err(err(format!("{e:?}\n{log}"))),
            Ok(()) => {
                let mut size = 0usize;
                let r = sys::nvrtcGetCUBINSize(prog, &mut size);
                if r != sys::nvrtcResult::NVRTC_SUCCESS || size == 0 {
                    Err(err(format!(
                        "no CUBIN ({r:?}); compile for a real sm_ arch"
                    )))
                } else {
                    let mut buf = vec![0u8; size];
                    let r = sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut _);
                    if r == sys::nvrtcResult::NVRTC_SUCCESS {
                        Ok(buf)
                    } else {
                        Err(err(format!("nvrtcGetCUBIN: {r:?}")))
                    }
                }
            }
        };
        let _ = result::destroy_program(prog);
        out
    };
    out
}
