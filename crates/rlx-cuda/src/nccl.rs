//! NCCL communicators, through `cudarc`'s bindings (loaded at run time like the rest of
//! CUDA: nothing NCCL is needed to build). A [`NcclComm`] is one rank's handle; the plan
//! records its collectives as steps on the executable's stream, so they are captured into
//! the CUDA graph beside the kernels (NCCL supports stream capture since 2.9).
//!
//! Two ways to make a group: [`NcclComm::init_all`] (one process driving several local
//! GPUs, `ncclCommInitAll`) and [`NcclComm::init_rank`] (one process per GPU: every rank
//! calls it with the same [`NcclId`], which rank 0 made and sent to the others — see
//! `rlx_runtime::rendezvous`).
use crate::device::Gpu;
use crate::CudaError;
use cudarc::driver::result as drv;
use cudarc::driver::sys::{CUevent, CUevent_wait_flags, CUstream};
use cudarc::nccl::{result as nc, sys};
use rlx_ir::{CollectiveReduce, DType};
use std::fmt;
use std::sync::Arc;

/// The version NCCL reports as `major·10000 + minor·100 + patch`, or an error when no
/// library can be loaded.
pub fn version() -> Result<i32, CudaError> {
    if !available() {
        return Err(no_library());
    }
    nc::get_nccl_version().map_err(|e| nccl_err("ncclGetVersion", e))
}

/// Whether a NCCL library (`libnccl.so`) can be loaded.
pub fn available() -> bool {
    // SAFETY: only probes the loader.
    unsafe { sys::is_culib_present() }
}

fn no_library() -> CudaError {
    CudaError::Nccl {
        call: "load",
        msg: "no NCCL library found (libnccl.so): install NCCL (libnccl2 + libnccl-dev, or \
              link libnccl.so beside the libnccl.so.2 of PyPI's nvidia-nccl wheel) and put it \
              on the loader path"
            .into(),
    }
}

fn nccl_err(call: &'static str, e: nc::NcclError) -> CudaError {
    CudaError::Nccl {
        call,
        msg: format!("{:?}", e.0),
    }
}

/// The id every rank of one group shares; rank 0 makes it and hands it to the others.
#[derive(Clone, Copy)]
pub struct NcclId(sys::ncclUniqueId);

impl NcclId {
    pub const BYTES: usize = 128;

    pub fn new() -> Result<NcclId, CudaError> {
        if !available() {
            return Err(no_library());
        }
        nc::get_uniqueid()
            .map(NcclId)
            .map_err(|e| nccl_err("ncclGetUniqueId", e))
    }

    pub fn to_bytes(&self) -> [u8; NcclId::BYTES] {
        self.0.internal.map(|c| c as u8)
    }

    pub fn from_bytes(b: &[u8]) -> Result<NcclId, CudaError> {
        let b: &[u8; NcclId::BYTES] = b.try_into().map_err(|_| CudaError::Nccl {
            call: "NcclId::from_bytes",
            msg: format!("an id is {} bytes, got {}", NcclId::BYTES, b.len()),
        })?;
        Ok(NcclId(sys::ncclUniqueId {
            internal: b.map(|c| c as ::core::ffi::c_char),
        }))
    }
}

/// One rank of a NCCL group, on one GPU.
pub struct NcclComm {
    comm: sys::ncclComm_t,
    rank: usize,
    ranks: usize,
    ordinal: usize,
}

// SAFETY: a communicator may be used from any thread, one call at a time; each rank's plan
// issues its calls from the thread that runs it, and runs of one executable are serialised.
unsafe impl Send for NcclComm {}
unsafe impl Sync for NcclComm {}

impl NcclComm {
    /// One communicator per GPU of `ordinals` (rank i on `ordinals[i]`), in this process.
    pub fn init_all(ordinals: &[usize]) -> Result<Vec<Arc<NcclComm>>, CudaError> {
        if !available() {
            return Err(no_library());
        }
        let mut seen = ordinals.to_vec();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() != ordinals.len() || ordinals.is_empty() {
            return Err(CudaError::Nccl {
                call: "ncclCommInitAll",
                msg: format!(
                    "needs distinct GPUs, got {ordinals:?} (NCCL allows one rank per GPU)"
                ),
            });
        }
        for &o in ordinals {
            Gpu::get(o)?.bind()?;
        }
        let mut comms = vec![std::ptr::null_mut(); ordinals.len()];
        let devs: Vec<i32> = ordinals.iter().map(|&o| o as i32).collect();
        // SAFETY: `comms` has room for one handle per device.
        unsafe { nc::comm_init_all(comms.as_mut_ptr(), devs.len() as i32, devs.as_ptr()) }
            .map_err(|e| nccl_err("ncclCommInitAll", e))?;
        Ok((comms.into_iter().enumerate())
            .map(|(rank, comm)| {
                Arc::new(NcclComm {
                    comm,
                    rank,
                    ranks: ordinals.len(),
                    ordinal: ordinals[rank],
                })
            })
            .collect())
    }

    /// This process's rank of a group of `ranks` processes, on GPU `ordinal`; every rank
    /// passes the same `id`. Blocks until every rank has joined.
    pub fn init_rank(
        ordinal: usize,
        rank: usize,
        ranks: usize,
        id: NcclId,
    ) -> Result<Arc<NcclComm>, CudaError> {
        if rank >= ranks {
            return Err(CudaError::Nccl {
                call: "ncclCommInitRank",
                msg: format!("rank {rank} of a group of {ranks}"),
            });
        }
        Gpu::get(ordinal)?.bind()?;
        let mut comm = std::ptr::null_mut();
        // SAFETY: `comm` receives the handle; the device's context is current.
        unsafe { nc::comm_init_rank(&mut comm, ranks as i32, id.0, rank as i32) }
            .map_err(|e| nccl_err("ncclCommInitRank", e))?;
        Ok(Arc::new(NcclComm {
            comm,
            rank,
            ranks,
            ordinal,
        }))
    }

    pub fn rank(&self) -> usize {
        self.rank
    }
    pub fn ranks(&self) -> usize {
        self.ranks
    }
    /// The GPU this rank runs on.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// Stop every collective of this communicator in flight (a failed peer): calls waiting
    /// on it return errors instead of hanging.
    pub fn abort(&self) {
        // SAFETY: the handle is live until drop; NCCL allows abort from another thread.
        let _ = unsafe { sys::ncclCommAbort(self.comm) };
    }

    pub(crate) fn raw(&self) -> sys::ncclComm_t {
        self.comm
    }
}

impl Drop for NcclComm {
    fn drop(&mut self) {
        // SAFETY: last use of the handle.
        let _ = unsafe { nc::comm_destroy(self.comm) };
    }
}

impl fmt::Debug for NcclComm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "NcclComm(rank {} of {} on cuda:{})",
            self.rank, self.ranks, self.ordinal
        )
    }
}

/// NCCL's type for a storage dtype (Bool travels as bytes; it is never reduced).
pub(crate) fn data_type(dt: DType) -> sys::ncclDataType_t {
    use sys::ncclDataType_t::*;
    match dt {
        DType::F32 => ncclFloat32,
        DType::F16 => ncclFloat16,
        DType::BF16 => ncclBfloat16,
        DType::F64 => ncclFloat64,
        DType::I32 => ncclInt32,
        DType::I64 => ncclInt64,
        DType::U8 | DType::Bool => ncclUint8,
    }
}

pub(crate) fn red_op(r: CollectiveReduce) -> sys::ncclRedOp_t {
    match r {
        CollectiveReduce::Sum => sys::ncclRedOp_t::ncclSum,
        CollectiveReduce::Mean => sys::ncclRedOp_t::ncclAvg,
        CollectiveReduce::Max => sys::ncclRedOp_t::ncclMax,
    }
}

/// Which collective a plan step runs.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CollKind {
    AllReduce(sys::ncclRedOp_t),
    /// `count` is each rank's part.
    AllGather,
    /// `count` is each rank's part of the result.
    ReduceScatter(sys::ncclRedOp_t),
}

/// Where a collective runs beside the main stream: it waits for `ready` (recorded on the
/// main stream when its input is written), runs on `side`, and records `done`, which the
/// plan's first step that touches its buffers waits for (`Step::Join`). Kernels that do not
/// touch them run meanwhile — how a data-parallel step's gradient all-reduces overlap the
/// rest of the backward pass. Captured, the fork and join become edges of the CUDA graph.
pub(crate) struct Overlap {
    pub side: CUstream,
    pub ready: CUevent,
    pub done: CUevent,
}

/// One NCCL call of a plan: fixed device pointers, like a kernel launch.
pub(crate) struct CollectiveCall {
    pub kind: CollKind,
    pub send: u64,
    pub recv: u64,
    pub count: usize,
    pub dtype: sys::ncclDataType_t,
    pub comm: Arc<NcclComm>,
    pub label: String,
    pub overlap: Option<Overlap>,
}

// SAFETY: the stream and events are owned by the executable and its plan, used under the
// executable's lock.
unsafe impl Send for CollectiveCall {}
unsafe impl Sync for CollectiveCall {}

fn drv_err(call: &'static str, e: cudarc::driver::DriverError) -> CudaError {
    CudaError::driver(call, e)
}

impl CollectiveCall {
    pub fn enqueue(&self, main: CUstream) -> Result<(), CudaError> {
        let stream = match &self.overlap {
            None => main,
            Some(o) => {
                // SAFETY: live stream and events (owned by the executable / plan).
                unsafe {
                    drv::event::record(o.ready, main).map_err(|e| drv_err("cuEventRecord", e))?;
                    drv::stream::wait_event(
                        o.side,
                        o.ready,
                        CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
                    )
                    .map_err(|e| drv_err("cuStreamWaitEvent", e))?;
                }
                o.side
            }
        };
        self.call(stream)?;
        if let Some(o) = &self.overlap {
            // SAFETY: as above.
            unsafe { drv::event::record(o.done, o.side) }
                .map_err(|e| drv_err("cuEventRecord", e))?;
        }
        Ok(())
    }

    fn call(&self, stream: CUstream) -> Result<(), CudaError> {
        let (s, r, st) = (
            self.send as *const std::ffi::c_void,
            self.recv as *mut std::ffi::c_void,
            stream as sys::cudaStream_t,
        );
        let c = self.comm.raw();
        // SAFETY: planned device buffers of `count` (gather: `count · ranks` at recv;
        // reduce-scatter: `count · ranks` at send) elements of `dtype`; the comm is live.
        let res = unsafe {
            match self.kind {
                CollKind::AllReduce(op) => nc::all_reduce(s, r, self.count, self.dtype, op, c, st),
                CollKind::AllGather => nc::all_gather(s, r, self.count, self.dtype, c, st),
                CollKind::ReduceScatter(op) => {
                    nc::reduce_scatter(s, r, self.count, self.dtype, op, c, st)
                }
            }
        };
        res.map(|_| ()).map_err(|e| CudaError::Nccl {
            call: "collective",
            msg: format!("{}: {:?}", self.label, e.0),
        })
    }
}

/// Events a plan made for its collectives, destroyed with it.
#[derive(Default)]
pub(crate) struct PlanEvents(pub Vec<CUevent>);

// SAFETY: as for `CollectiveCall`.
unsafe impl Send for PlanEvents {}
unsafe impl Sync for PlanEvents {}

impl PlanEvents {
    pub fn make(&mut self) -> Result<CUevent, CudaError> {
        let e = drv::event::create(cudarc::driver::sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map_err(|e| drv_err("cuEventCreate", e))?;
        self.0.push(e);
        Ok(e)
    }
}

impl Drop for PlanEvents {
    fn drop(&mut self) {
        for &e in &self.0 {
            // SAFETY: created by `make`, destroyed once; the plan's graphs are gone first.
            let _ = unsafe { drv::event::destroy(e) };
        }
    }
}
