//! Replaying a plan on the executable's stream: its segments in order (a captured CUDA
//! graph, or the steps enqueued one by one, or a CPU fallback node between them), plus the
//! host ↔ device copies they need. `run_writeback`, `time_replays` and `profile` all replay
//! through `Plan::replay`.
use super::{trace_on, Plan};
use crate::device::{StreamSet, LT_WORKSPACE};
use crate::lower::DevTensor;
use crate::plan::{CpuStep, Step};
use crate::CudaError;
use cudarc::driver::{result as drv, sys};
use rlx_ir::HostTensor;

pub(super) struct GraphExec(pub(super) sys::CUgraphExec);

impl Drop for GraphExec {
    fn drop(&mut self) {
        // SAFETY: instantiated once in capture(), destroyed once here.
        unsafe {
            let _ = drv::graph::exec_destroy(self.0);
        }
    }
}

/// A run of consecutive GPU steps (captured when CUDA graphs are on), or one CPU step.
pub(super) enum Segment {
    Gpu {
        steps: Vec<Step>,
        graph: Option<GraphExec>,
    },
    Cpu(Box<CpuStep>),
}

impl Plan {
    /// Every segment once, in order, on `s.stream` (the caller holds the device lock and
    /// has bound the context).
    pub(super) fn replay(&self, s: &StreamSet) -> Result<(), CudaError> {
        for seg in &self.segments {
            match seg {
                Segment::Gpu { graph: Some(g), .. } => {
                    // SAFETY: g was instantiated from steps over live buffers of this plan.
                    unsafe { drv::graph::launch(g.0, s.stream) }
                        .map_err(|e| CudaError::driver("cuGraphLaunch", e))?
                }
                Segment::Gpu { steps, graph: None } => enqueue(s, steps)?,
                Segment::Cpu(c) => c.run(s)?,
            }
        }
        Ok(())
    }
}

impl CpuStep {
    /// Download the inputs, run the cached CPU executable, upload its output.
    pub(super) fn run(&self, s: &StreamSet) -> Result<(), CudaError> {
        let mut ins = Vec::with_capacity(self.ins.len());
        for ((name, t), planar) in self.names.iter().zip(&self.ins).zip(&self.planar) {
            let mut h = download(s, t)?;
            if let Some(q) = planar {
                let rb = t.dims.last().copied().unwrap_or(0);
                h.data = crate::planar::unpack(*q, &h.data, rb);
            }
            ins.push((name.as_str(), h));
        }
        let fail = |m: String| CudaError::Node {
            node: self.label.clone(),
            msg: m,
        };
        let outs = self
            .exe
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .run(&ins)
            .map_err(|e| fail(format!("CPU fallback failed: {e}")))?;
        if outs.len() != 1 + self.written.len() {
            return Err(fail(format!(
                "CPU fallback produced {} outputs",
                outs.len()
            )));
        }
        for (out, dst) in outs
            .iter()
            .zip(std::iter::once(&self.out).chain(&self.written))
        {
            if out.data.len() != dst.bytes() {
                return Err(fail(format!(
                    "CPU fallback produced {} bytes, {} planned",
                    out.data.len(),
                    dst.bytes()
                )));
            }
            upload(s, dst.ptr, &out.data)?;
        }
        Ok(())
    }
}

/// Copy `t` to the host on the executable's stream (so it is ordered after the kernels that
/// wrote it) and wait for it.
pub(super) fn download(s: &StreamSet, t: &DevTensor) -> Result<HostTensor, CudaError> {
    let mut data = vec![0u8; t.bytes()];
    // SAFETY: t.ptr holds t.bytes() bytes; the stream is synchronised before `data` is read.
    unsafe {
        drv::memcpy_dtoh_async(&mut data, t.ptr, s.stream)
            .map_err(|e| CudaError::driver("cuMemcpyDtoHAsync", e))?;
        drv::stream::synchronize(s.stream)
            .map_err(|e| CudaError::driver("cuStreamSynchronize", e))?;
    }
    Ok(HostTensor {
        shape: t.dims.clone(),
        dtype: t.dtype,
        data,
    })
}

/// Copy host bytes to the device on the executable's stream and wait for it (pageable
/// copies on the legacy stream would not be ordered before our non-blocking stream's work).
pub(super) fn upload(s: &StreamSet, dst: u64, data: &[u8]) -> Result<(), CudaError> {
    // SAFETY: dst holds at least data.len() bytes (callers check sizes); `data` outlives the
    // synchronisation.
    unsafe {
        drv::memcpy_htod_async(dst, data, s.stream)
            .map_err(|e| CudaError::driver("cuMemcpyHtoDAsync", e))?;
        drv::stream::synchronize(s.stream).map_err(|e| CudaError::driver("cuStreamSynchronize", e))
    }
}

/// Enqueue steps on the stream (no CPU steps here).
pub(super) fn enqueue(s: &StreamSet, steps: &[Step]) -> Result<(), CudaError> {
    for st in steps {
        match st {
            Step::Kernel(l) => l.enqueue(s.stream)?,
            Step::Gemm(g) => g
                .enqueue(s.lt, s.workspace.ptr, LT_WORKSPACE, s.stream as _)
                .map_err(|e| CudaError::Blas {
                    node: g.label.clone(),
                    msg: format!("{e:?}"),
                })?,
            // SAFETY: planned device buffers of the given sizes.
            Step::Copy { dst, src, bytes } => {
                unsafe { drv::memcpy_dtod_async(*dst, *src, *bytes, s.stream) }
                    .map_err(|e| CudaError::driver("cuMemcpyDtoDAsync", e))?
            }
            Step::Memset { dst, bytes } => {
                unsafe { drv::memset_d8_async(*dst, 0, *bytes, s.stream) }
                    .map_err(|e| CudaError::driver("cuMemsetD8Async", e))?
            }
            Step::Collective(c) => c.enqueue(s.stream)?,
            // SAFETY: the event belongs to the plan being replayed.
            Step::Join(j) => unsafe {
                drv::stream::wait_event(
                    s.stream,
                    j.0,
                    sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
                )
            }
            .map_err(|e| CudaError::driver("cuStreamWaitEvent", e))?,
            Step::Cpu(c) => {
                return Err(CudaError::Node {
                    node: c.label.clone(),
                    msg: "internal: CPU step inside a GPU segment".into(),
                })
            }
        }
    }
    Ok(())
}

/// Record the steps into a CUDA graph and instantiate it.
pub(super) fn capture(s: &StreamSet, steps: &[Step]) -> Result<GraphExec, CudaError> {
    // SAFETY: the stream is live and idle; capture ends on every path below.
    unsafe {
        drv::stream::begin_capture(
            s.stream,
            sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        )
        .map_err(|e| CudaError::driver("cuStreamBeginCapture", e))?;
        let r = enqueue(s, steps);
        let g = drv::stream::end_capture(s.stream);
        r?;
        let g = g.map_err(|e| CudaError::driver("cuStreamEndCapture", e))?;
        // A capture that recorded nothing would replay as a no-op and leave stale outputs:
        // refuse it loudly instead.
        let mut nodes = 0usize;
        let _ = sys::cuGraphGetNodes(g, std::ptr::null_mut(), &mut nodes);
        if trace_on() {
            eprintln!(
                "[rlx-trace] captured {} steps into a CUDA graph of {nodes} nodes",
                steps.len()
            );
        }
        if nodes == 0 && !steps.is_empty() {
            let _ = drv::graph::destroy(g);
            return Err(CudaError::Driver {
                call: "cuStreamEndCapture",
                msg: format!(
                    "the capture of {} steps recorded no graph nodes",
                    steps.len()
                ),
            });
        }
        let exec = drv::graph::instantiate(g, sys::CUgraphInstantiate_flags(0));
        let _ = drv::graph::destroy(g);
        Ok(GraphExec(
            exec.map_err(|e| CudaError::driver("cuGraphInstantiate", e))?,
        ))
    }
}
