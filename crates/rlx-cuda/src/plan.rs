//! What lowering produces: a list of steps over fixed device pointers.
use crate::device::{DevBuf, Func, Gpu, StreamSet, LT_WORKSPACE};
use crate::gemm::{GemmCall, GemmDesc};
use crate::kernels::Src;
use crate::lower::{DevTensor, KArgs, LowerError};
use crate::precision::Precision;
use rlx_cpu::CpuExecutable;
use rlx_ir::{Graph, Node, Op, Shape};
use std::sync::{Arc, Mutex};

pub(crate) struct Launch {
    pub func: Func,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub smem: u32,
    pub args: KArgs,
    pub label: String,
    /// Launched with programmatic stream serialization (PDL): the kernel may start while the
    /// previous one drains. Only for kernels whose every thread runs `pdl_wait()`
    /// (`griddepcontrol.wait`) before reading anything an earlier kernel wrote and before
    /// writing anything (kernels/quant.cu: dq_gemv_st).
    pub pdl: bool,
}

/// Whether PDL launches are on (`RLX_PDL=0` turns them off; read once).
pub(crate) fn pdl_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| rlx_ir::env::flag(rlx_ir::env::Switch::Pdl))
}

impl Launch {
    /// Enqueue this launch on `stream`.
    pub fn enqueue(&self, stream: cudarc::driver::sys::CUstream) -> Result<(), crate::CudaError> {
        let mut ptrs: Vec<*mut std::ffi::c_void> = self
            .args
            .vals
            .iter()
            .map(|v| v.as_ptr() as *mut std::ffi::c_void)
            .collect();
        if self.pdl && pdl_enabled() {
            return self.enqueue_pdl(stream, &mut ptrs);
        }
        // SAFETY: the argument list matches the kernel signature (each lowering arm's
        // contract) and every pointer in it is a live device buffer of the plan.
        unsafe {
            cudarc::driver::result::launch_kernel(
                self.func.0,
                (self.grid[0], self.grid[1], self.grid[2]),
                (self.block[0], self.block[1], self.block[2]),
                self.smem,
                stream,
                &mut ptrs,
            )
        }
        .map_err(|e| crate::CudaError::Driver {
            call: "cuLaunchKernel",
            msg: format!("{}: {e:?}", self.label),
        })
    }

    /// `cuLaunchKernelEx` with the programmatic-stream-serialization attribute.
    fn enqueue_pdl(
        &self,
        stream: cudarc::driver::sys::CUstream,
        ptrs: &mut [*mut std::ffi::c_void],
    ) -> Result<(), crate::CudaError> {
        use cudarc::driver::sys;
        // SAFETY: a zeroed attribute value is a valid union; the field set is the one the id
        // names.
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let cfg = sys::CUlaunchConfig {
            gridDimX: self.grid[0],
            gridDimY: self.grid[1],
            gridDimZ: self.grid[2],
            blockDimX: self.block[0],
            blockDimY: self.block[1],
            blockDimZ: self.block[2],
            sharedMemBytes: self.smem,
            hStream: stream,
            attrs: &mut attr,
            numAttrs: 1,
        };
        // SAFETY: as in `enqueue`; `cfg` and `attr` outlive the call.
        let r = unsafe {
            sys::cuLaunchKernelEx(&cfg, self.func.0, ptrs.as_mut_ptr(), std::ptr::null_mut())
        };
        if r == sys::CUresult::CUDA_SUCCESS {
            Ok(())
        } else {
            Err(crate::CudaError::Driver {
                call: "cuLaunchKernelEx",
                msg: format!("{}: {r:?}", self.label),
            })
        }
    }
}

/// A node the GPU path could not lower: run on the CPU thunks with copies at its boundary.
/// Its one-node CPU executable (inputs `in0`, `in1`, … of the bound shapes) is built once
/// with the plan; each run downloads the inputs, runs it and uploads the result.
pub(crate) struct CpuStep {
    pub exe: Mutex<CpuExecutable>,
    /// `input_name(k)` for each input, made once so a run allocates no names.
    pub names: Vec<String>,
    pub ins: Vec<DevTensor>,
    pub out: DevTensor,
    /// Where the CPU graph's further outputs go back to: the caches an op writes in place
    /// beside its output (`CachedAttention`).
    pub written: Vec<DevTensor>,
    pub label: String,
    /// Per input: the scheme of a weight held in the planar layout, unpacked after download.
    pub planar: Vec<Option<rlx_ir::QuantScheme>>,
}

impl CpuStep {
    /// The CPU step for `node` (its op bound to this plan's shapes) over `ins` into `out`.
    pub fn new(
        node: &Node,
        ins: Vec<DevTensor>,
        out: DevTensor,
        planar: Vec<Option<rlx_ir::QuantScheme>>,
    ) -> Result<CpuStep, crate::CudaError> {
        let mut g = Graph::new("cpu_fallback");
        let mut ids = Vec::with_capacity(ins.len());
        for (k, t) in ins.iter().enumerate() {
            ids.push(g.input(input_name(k), Shape::new(&t.dims, t.dtype))?);
        }
        let mut written = Vec::new();
        match &node.op {
            // The CPU runs the fused op on its own caches; here they live on the device, so
            // the fallback is the ops it stands for with the written caches as outputs too.
            Op::CachedAttention { spec, rope } => {
                let outs = cached_attention_parts(&mut g, &ids, spec, rope)?;
                written = vec![ins[3].clone(), ins[4].clone()];
                g.set_outputs(outs);
            }
            _ => {
                let id = g.push_node(node.op.clone(), ids, node.shape.clone());
                g.set_outputs(vec![id]);
            }
        }
        let exe = CpuExecutable::new(g).map_err(|e| crate::CudaError::Node {
            node: node.label(),
            msg: format!("cannot prepare the CPU fallback: {e}"),
        })?;
        Ok(CpuStep {
            exe: Mutex::new(exe),
            names: (0..ins.len()).map(input_name).collect(),
            ins,
            out,
            written,
            label: node.label(),
            planar,
        })
    }
}

/// `CachedAttention` over fallback inputs `ids` as the ops it stands for: [the attention,
/// the written k cache, the written v cache].
fn cached_attention_parts(
    g: &mut Graph,
    ids: &[rlx_ir::NodeId],
    spec: &rlx_ir::AttentionSpec,
    rope: &Option<rlx_ir::CachedRope>,
) -> Result<Vec<rlx_ir::NodeId>, rlx_ir::IrError> {
    let (mut q, mut k) = (ids[0], ids[1]);
    if let Some(r) = rope {
        q = g.rope(q, ids[6], ids[7], spec.head_dim, r.n_rot, r.style)?;
        k = g.rope(k, ids[6], ids[7], spec.head_dim, r.n_rot, r.style)?;
    }
    let kc = g.cache_write(ids[3], k, ids[5], 1)?;
    let vc = g.cache_write(ids[4], ids[2], ids[5], 1)?;
    let a = g.attention_cached(q, kc, vc, ids[5], spec.clone())?;
    Ok(vec![a, kc, vc])
}

/// Name of the CPU fallback graph's input `k`.
pub(crate) fn input_name(k: usize) -> String {
    format!("in{k}")
}

pub(crate) enum Step {
    Kernel(Launch),
    Gemm(GemmCall),
    Copy {
        dst: u64,
        src: u64,
        bytes: usize,
    },
    Memset {
        dst: u64,
        bytes: usize,
    },
    /// A NCCL collective (see `lower::collective`).
    Collective(Box<crate::nccl::CollectiveCall>),
    /// The main stream waits for a collective that ran beside it (`nccl::Overlap`).
    Join(JoinEvent),
    Cpu(Box<CpuStep>),
}

/// Lowering's state: the GPU (for compiling modules and allocating scratch), the stream set
/// (for cuBLASLt's handle), and the steps recorded so far.
pub(crate) struct LowerEnv {
    pub gpu: Arc<Gpu>,
    lt: cudarc::cublaslt::sys::cublasLtHandle_t,
    stream: cudarc::driver::sys::CUstream,
    workspace: u64,
    force_variant: Option<usize>,
    pub steps: Vec<Step>,
    pub scratch: Vec<DevBuf>,
    /// The group this plan's collectives run over (none: a group of one).
    pub comm: Option<Arc<crate::nccl::NcclComm>>,
    /// The stream collectives run on beside the main one, and the events of the plan.
    pub side: cudarc::driver::sys::CUstream,
    pub events: crate::nccl::PlanEvents,
    /// Collectives running beside the main stream that no later step has waited for yet.
    pub pending: Vec<Pending>,
    /// Device addresses of the weights held in the planar row layout (`crate::planar`).
    pub planar: std::collections::HashMap<u64, rlx_ir::QuantScheme>,
    /// Per `CachedAttention` node id: the weight ranges its kernel requests into L2 for the
    /// products after it (`exec::l2_prefetch`).
    pub l2_prefetch: std::collections::HashMap<usize, Vec<(u64, u64)>>,
    /// Per `CachedAttention` node id: the fused qkv product it reads q, k and v from and
    /// their (start, len) columns, its narrows not run (`exec::qkv_views`).
    pub qkv: std::collections::HashMap<usize, (crate::lower::DevTensor, [(usize, usize); 3])>,
}

/// A collective in flight on the side stream: the byte ranges it reads and writes.
pub(crate) struct Pending {
    pub ranges: [(u64, usize); 2],
    pub done: cudarc::driver::sys::CUevent,
}

/// `cuStreamWaitEvent` on the main stream.
#[derive(Clone, Copy, Debug)]
pub(crate) struct JoinEvent(pub cudarc::driver::sys::CUevent);

impl LowerEnv {
    /// Make the main stream wait for every pending collective whose buffers overlap one of
    /// `ranges` (all of them with `None`): a step that reads a collective's result, or
    /// writes where the collective reads or writes, must not run beside it.
    pub fn join(&mut self, ranges: Option<&[(u64, usize)]>) {
        let touches = |p: &Pending| match ranges {
            None => true,
            Some(rs) => (rs.iter()).any(|&(a, n)| {
                (p.ranges.iter())
                    .any(|&(b, m)| n > 0 && m > 0 && a < b + m as u64 && b < a + n as u64)
            }),
        };
        let (hit, keep): (Vec<Pending>, Vec<Pending>) = self.pending.drain(..).partition(touches);
        self.pending = keep;
        self.steps
            .extend(hit.into_iter().map(|p| Step::Join(JoinEvent(p.done))));
    }
}

impl LowerEnv {
    pub fn new(gpu: Arc<Gpu>, streams: &StreamSet, force_variant: Option<usize>) -> LowerEnv {
        LowerEnv {
            gpu,
            lt: streams.lt,
            stream: streams.stream,
            workspace: streams.workspace.ptr,
            force_variant,
            steps: Vec::new(),
            scratch: Vec::new(),
            comm: None,
            side: streams.side,
            events: Default::default(),
            pending: Vec::new(),
            planar: Default::default(),
            l2_prefetch: Default::default(),
            qkv: Default::default(),
        }
    }

    pub fn function(&mut self, src: &Src, func: &str) -> Result<Func, LowerError> {
        // A source that does not compile or lacks the symbol is a bug, never a fallback.
        Ok(self.gpu.function(src, func)?)
    }

    pub fn scratch(&mut self, bytes: usize) -> Result<u64, LowerError> {
        let b = DevBuf::new(&self.gpu, bytes)?;
        let p = b.ptr;
        self.scratch.push(b);
        Ok(p)
    }

    pub fn prepare_gemm(
        &mut self,
        g: GemmDesc,
        precision: Precision,
    ) -> Result<GemmCall, LowerError> {
        let mut call = crate::gemm::prepare(self.lt, LT_WORKSPACE, &g, precision)?;
        crate::tune::gemm(
            &mut call,
            self.lt,
            self.stream,
            self.workspace,
            LT_WORKSPACE,
        )?;
        Ok(call)
    }

    /// The fastest of `cands` for `key` (timed once per process, see `tune`).
    pub fn fastest(&mut self, key: &str, mut cands: Vec<Launch>) -> Result<Launch, LowerError> {
        let i = match self.force_variant {
            Some(k) => k.min(cands.len().saturating_sub(1)),
            None => crate::tune::kernel(key, &cands, self.stream)?,
        };
        Ok(cands.swap_remove(i))
    }

    /// [`Self::fastest`] timed with the L2 cache flushed before each run (see
    /// `tune::kernel_flushed`); the flush buffer exists only while tuning.
    pub fn fastest_cold(
        &mut self,
        key: &str,
        mut cands: Vec<Launch>,
    ) -> Result<Launch, LowerError> {
        let i = match self.force_variant {
            Some(k) => k.min(cands.len().saturating_sub(1)),
            None if cands.len() > 1
                && crate::tune::enabled()
                && crate::tune::kernel_choice(key).is_none() =>
            {
                let buf = DevBuf::new(&self.gpu, FLUSH_BYTES)?;
                crate::tune::kernel_flushed(key, &cands, self.stream, Some((buf.ptr, buf.bytes)))?
            }
            None => crate::tune::kernel(key, &cands, self.stream)?,
        };
        Ok(cands.swap_remove(i))
    }
}

/// Bytes overwritten to evict the L2 cache before a cold timing (the H200's L2 is 50 MB).
const FLUSH_BYTES: usize = 128 << 20;
