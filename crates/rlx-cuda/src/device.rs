//! The GPU: availability checks (before cudarc is touched, since it panics when the driver
//! library is missing), one primary context per ordinal, device buffers, and the module cache.
use crate::kernels::Src;
use crate::CudaError;
use cudarc::cublaslt::{result as lt, sys as ltsys};
use cudarc::driver::{result as drv, sys, CudaContext};
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, Mutex, OnceLock};

/// Serialises what may synchronise a whole device (allocation, free, module loads, library
/// handle setup — cuBLASLt's may call cudaDeviceSynchronize) against CUDA-graph capture in
/// another thread, which such a call would invalidate. One lock per GPU: the ranks of a mesh
/// driven from one process run on different GPUs at once (a run that waits for a NCCL peer
/// must not hold the peer's GPU). Re-entrant within a thread, so plan building can hold it
/// across the allocations it makes.
pub(crate) struct DeviceLock {
    ordinal: usize,
    _guard: Option<std::sync::MutexGuard<'static, ()>>,
}

thread_local! {
    static LOCK_DEPTH: std::cell::RefCell<HashMap<usize, usize>> = Default::default();
}

pub(crate) fn device_lock(ordinal: usize) -> DeviceLock {
    static LOCKS: OnceLock<Mutex<HashMap<usize, &'static Mutex<()>>>> = OnceLock::new();
    let depth = LOCK_DEPTH.with(|d| {
        let mut d = d.borrow_mut();
        let v = d.entry(ordinal).or_insert(0);
        *v += 1;
        *v - 1
    });
    let lock = *(LOCKS.get_or_init(Default::default).lock())
        .unwrap_or_else(|p| p.into_inner())
        .entry(ordinal)
        .or_insert_with(|| Box::leak(Box::new(Mutex::new(()))));
    DeviceLock {
        ordinal,
        _guard: (depth == 0).then(|| lock.lock().unwrap_or_else(|p| p.into_inner())),
    }
}

impl Drop for DeviceLock {
    fn drop(&mut self) {
        LOCK_DEPTH.with(|d| {
            if let Some(v) = d.borrow_mut().get_mut(&self.ordinal) {
                *v -= 1;
            }
        });
    }
}

/// cuBLASLt workspace per executable.
pub const LT_WORKSPACE: usize = 32 << 20;

/// Whether `Device::Cuda(ordinal)` can be used here; the error says why not.
pub fn check_available(ordinal: usize) -> Result<(), CudaError> {
    let un = |reason: String| CudaError::Unavailable {
        device: ordinal,
        reason,
    };
    // SAFETY: only tries to dlopen the driver library.
    if !unsafe { sys::is_culib_present() } {
        return Err(un(
            "the CUDA driver library (libcuda.so) was not found; install the NVIDIA driver or use Device::Cpu".into(),
        ));
    }
    drv::init().map_err(|e| un(format!("cuInit failed: {e:?}")))?;
    let n = drv::device::get_count().map_err(|e| un(format!("{e:?}")))?;
    if ordinal >= n as usize {
        return Err(un(format!("this machine has {n} CUDA device(s)")));
    }
    // SAFETY: dlopen checks only.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(un(
            "libnvrtc was not found; put CUDA 13's lib folder on LD_LIBRARY_PATH".into(),
        ));
    }
    if !unsafe { ltsys::is_culib_present() } {
        return Err(un(
            "libcublasLt was not found; put CUDA 13's lib folder on LD_LIBRARY_PATH".into(),
        ));
    }
    Ok(())
}

/// One GPU: its primary context and compiled modules, shared by every executable on it.
pub struct Gpu {
    pub(crate) ctx: Arc<CudaContext>,
    pub ordinal: usize,
    pub arch: String,
    pub name: String,
    /// Streaming multiprocessors (sizes grid-stride launches).
    pub sms: u32,
    /// L2 cache bytes (bounds what a decode step requests into it ahead of use).
    pub l2_bytes: usize,
    modules: Mutex<HashMap<String, Module>>,
}

struct Module(sys::CUmodule);
// SAFETY: a CUmodule is a context-global handle, usable from any thread with the context bound.
unsafe impl Send for Module {}

/// A function handle (context-global).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Func(pub sys::CUfunction);
// SAFETY: as for Module.
unsafe impl Send for Func {}
unsafe impl Sync for Func {}

impl Gpu {
    /// The shared GPU for `ordinal` (created on first use).
    pub fn get(ordinal: usize) -> Result<Arc<Gpu>, CudaError> {
        static GPUS: OnceLock<Mutex<HashMap<usize, Arc<Gpu>>>> = OnceLock::new();
        check_available(ordinal)?;
        let mut map = GPUS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(g) = map.get(&ordinal) {
            return Ok(g.clone());
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| CudaError::Unavailable {
            device: ordinal,
            reason: format!("context creation failed: {e:?}"),
        })?;
        let (maj, min) = ctx
            .compute_capability()
            .map_err(|e| CudaError::driver("compute_capability", e))?;
        let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
        let sms = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(|e| CudaError::driver("multiprocessor count", e))?
            .max(1) as u32;
        let l2_bytes = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
            .map_err(|e| CudaError::driver("L2 cache size", e))?
            .max(0) as usize;
        let gpu = Arc::new(Gpu {
            ctx,
            ordinal,
            arch: format!("sm_{maj}{min}"),
            name,
            sms,
            l2_bytes,
            modules: Mutex::new(HashMap::new()),
        });
        map.insert(ordinal, gpu.clone());
        Ok(gpu)
    }

    /// Compute capability 9.0 or later: programmatic dependent launch exists.
    pub(crate) fn hopper_or_later(&self) -> bool {
        (self.arch.trim_start_matches("sm_").get(..1))
            .and_then(|d| d.parse::<u32>().ok())
            .is_some_and(|maj| maj >= 9)
            || self.arch.len() > "sm_90".len()
    }

    /// This GPU's [`device_lock`].
    pub(crate) fn lock(&self) -> DeviceLock {
        device_lock(self.ordinal)
    }

    pub(crate) fn bind(&self) -> Result<(), CudaError> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| CudaError::driver("bind_to_thread", e))
    }

    /// Compile (or fetch) `src` and look up `func` in it — for a sharded library, in the
    /// shard that holds `func` (`kernels/shard.rs`), the whole library only if that fails.
    pub(crate) fn function(&self, src: &Src, func: &str) -> Result<Func, CudaError> {
        if let Src::Lib(lib) = src {
            if let Some(tag) = lib.shard_of(func) {
                match self.function_in(&Src::Shard(*lib, tag), func) {
                    Ok(f) => return Ok(f),
                    // RLX_TRACE=1 says why; CI checks every kernel is in its shard.
                    Err(e) if rlx_ir::env::flag(rlx_ir::env::Switch::Trace) => {
                        eprintln!("[rlx-cuda] {func}: shard {tag} failed ({e}); the whole library")
                    }
                    Err(_) => {}
                }
            }
        }
        self.function_in(src, func)
    }

    /// Whether the module of `src` is loaded already.
    pub(crate) fn is_loaded(&self, src: &Src) -> bool {
        (self.modules.lock().unwrap_or_else(|p| p.into_inner())).contains_key(&src.name())
    }

    /// Load `cubin` as module `key` (bound context), unless a module of that name is loaded.
    pub(crate) fn load_module(&self, key: &str, cubin: &[u8]) -> Result<sys::CUmodule, CudaError> {
        let _dev = self.lock();
        let mut mods = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = mods.get(key) {
            return Ok(m.0);
        }
        // SAFETY: cubin is a complete CUBIN image produced by NVRTC for this arch.
        let m = unsafe { drv::module::load_data(cubin.as_ptr() as *const _) }
            .map_err(|e| CudaError::driver("cuModuleLoadData", e))?;
        mods.insert(key.to_string(), Module(m));
        Ok(m)
    }

    fn function_in(&self, src: &Src, func: &str) -> Result<Func, CudaError> {
        self.bind()?;
        let key = src.name();
        let loaded = self
            .modules
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .map(|m| m.0);
        let m = match loaded {
            Some(m) => m,
            // NVRTC runs outside the module map's lock so threads compiling different
            // sources overlap; if two compile the same one, the first module loaded wins.
            None => {
                // RLX_TRACE=1: a library compiled here was not foreseen by the plan's prewarm.
                if !matches!(src, Src::Generated(_))
                    && rlx_ir::env::flag(rlx_ir::env::Switch::Trace)
                {
                    eprintln!("[rlx-trace] {key}: compiled on first use ({func})");
                }
                self.load_module(&key, &crate::nvrtc::compile(src, &self.arch)?)?
            }
        };
        let cname = CString::new(func).map_err(|_| CudaError::Compile {
            name: key.clone(),
            log: "kernel name contains NUL".into(),
        })?;
        // SAFETY: m is a loaded module.
        let f = unsafe { drv::module::get_function(m, cname) }.map_err(|e| CudaError::Compile {
            name: key,
            log: format!("kernel {func} not found in module: {e:?}"),
        })?;
        Ok(Func(f))
    }
}

/// Device memory owned by the plan or executable; freed on drop.
pub struct DevBuf {
    pub ptr: u64,
    pub bytes: usize,
    gpu: Arc<Gpu>,
}

impl DevBuf {
    pub fn new(gpu: &Arc<Gpu>, bytes: usize) -> Result<DevBuf, CudaError> {
        gpu.bind()?;
        let _dev = gpu.lock();
        // Zero-byte tensors still get a distinct, valid address.
        let n = bytes.max(256);
        // SAFETY: plain device allocation in the bound context.
        let ptr = unsafe { drv::malloc_sync(n) }.map_err(|e| CudaError::Driver {
            call: "cuMemAlloc",
            msg: format!("{e:?} ({n} bytes)"),
        })?;
        // cuMemsetD8 is queued on the legacy stream and returns before it has run; our
        // streams are non-blocking, so nothing orders it before a later upload into this
        // buffer. On a busy GPU it landed after the upload and zeroed the inputs. Wait for it.
        // SAFETY: ptr is a fresh allocation of n bytes.
        unsafe { drv::memset_d8_sync(ptr, 0, n) }
            .map_err(|e| CudaError::driver("cuMemsetD8", e))?;
        drv::ctx::synchronize().map_err(|e| CudaError::driver("cuCtxSynchronize", e))?;
        Ok(DevBuf {
            ptr,
            bytes,
            gpu: gpu.clone(),
        })
    }
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        let _dev = self.gpu.lock();
        if self.gpu.bind().is_ok() {
            // SAFETY: ptr came from malloc_sync and is freed once.
            unsafe {
                let _ = drv::free_sync(self.ptr);
            }
        }
    }
}

/// Page-locked host memory (`cuMemAllocHost`), through which a run stages its inputs and
/// outputs: copies from and to it are truly asynchronous and run at the link's full speed,
/// where pageable memory costs the driver a bounce through its own staging per copy (a
/// decode step's logits are 0.2-0.6 MB).
pub struct PinnedBuf {
    ptr: *mut u8,
    pub bytes: usize,
    gpu: Arc<Gpu>,
}

// SAFETY: plain host memory owned by this value alone; it is read and written only through
// `&self` / `&mut self`.
unsafe impl Send for PinnedBuf {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for PinnedBuf {}

impl PinnedBuf {
    pub fn new(gpu: &Arc<Gpu>, bytes: usize) -> Result<PinnedBuf, CudaError> {
        gpu.bind()?;
        let n = bytes.max(256);
        // SAFETY: a plain page-locked allocation in the bound context.
        let ptr = unsafe { drv::malloc_host(n, 0) }.map_err(|e| CudaError::Driver {
            call: "cuMemAllocHost",
            msg: format!("{e:?} ({n} bytes)"),
        })?;
        Ok(PinnedBuf {
            ptr: ptr as *mut u8,
            bytes: n,
            gpu: gpu.clone(),
        })
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr holds `bytes` bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.bytes) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, borrowed mutably through self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.bytes) }
    }
}

impl Drop for PinnedBuf {
    fn drop(&mut self) {
        if self.gpu.bind().is_ok() {
            // SAFETY: ptr came from malloc_host and is freed once.
            unsafe {
                let _ = drv::free_host(self.ptr as *mut std::ffi::c_void);
            }
        }
    }
}

/// A stream and a cuBLASLt handle with its workspace, owned by one executable.
pub(crate) struct StreamSet {
    pub stream: sys::CUstream,
    /// Where collectives run beside `stream` (see `nccl::Overlap`).
    pub side: sys::CUstream,
    pub lt: ltsys::cublasLtHandle_t,
    pub workspace: DevBuf,
}

// SAFETY: used only under the owning executable's lock.
unsafe impl Send for StreamSet {}

impl StreamSet {
    pub fn new(gpu: &Arc<Gpu>) -> Result<StreamSet, CudaError> {
        gpu.bind()?;
        let _dev = gpu.lock();
        let stream = drv::stream::create(drv::stream::StreamKind::NonBlocking)
            .map_err(|e| CudaError::driver("cuStreamCreate", e))?;
        let lt = lt::create_handle().map_err(|e| CudaError::Blas {
            node: "-".into(),
            msg: format!("cublasLtCreate: {e:?}"),
        })?;
        let workspace = DevBuf::new(gpu, LT_WORKSPACE)?;
        let side = drv::stream::create(drv::stream::StreamKind::NonBlocking)
            .map_err(|e| CudaError::driver("cuStreamCreate", e))?;
        Ok(StreamSet {
            stream,
            side,
            lt,
            workspace,
        })
    }
}

impl Drop for StreamSet {
    fn drop(&mut self) {
        let _dev = self.workspace.gpu.lock();
        // SAFETY: created in new, destroyed once.
        unsafe {
            let _ = drv::stream::synchronize(self.stream);
            let _ = lt::destroy_handle(self.lt);
            let _ = drv::stream::destroy(self.stream);
            let _ = drv::stream::synchronize(self.side);
            let _ = drv::stream::destroy(self.side);
        }
    }
}

/// For tests that need a GPU: true when `ordinal` is usable; otherwise prints why and returns
/// false, or panics when `RLX_REQUIRE_CUDA=1` (the device runs set it, so a missing GPU
/// fails there instead of skipping).
pub fn gpu_or_skip(ordinal: usize) -> bool {
    match check_available(ordinal) {
        Ok(()) => true,
        Err(e) => {
            if rlx_ir::env::flag(rlx_ir::env::Switch::RequireCuda) {
                panic!("RLX_REQUIRE_CUDA=1 but no GPU: {e}");
            }
            eprintln!("skipping GPU test: {e}");
            false
        }
    }
}
