//! The executor behind a `CompiledGraph`: the CPU reference or the CUDA backend.
use crate::Error;
use rlx_cpu::CpuExecutable;
use rlx_cuda::CudaExecutable;
use rlx_ir::{Graph, HostTensor, NodeId};

pub(crate) enum Backend {
    Cpu(Box<CpuExecutable>),
    Cuda(Box<CudaExecutable>),
}

impl Backend {
    pub fn set_param(&mut self, name: &str, value: &HostTensor) -> Result<(), Error> {
        match self {
            Backend::Cpu(e) => Ok(e.set_param(name, value)?),
            Backend::Cuda(e) => Ok(e.set_param(name, value)?),
        }
    }

    pub fn run(&mut self, inputs: &[(&str, HostTensor)]) -> Result<Vec<HostTensor>, Error> {
        match self {
            Backend::Cpu(e) => Ok(e.run(inputs)?),
            Backend::Cuda(e) => Ok(e.run(inputs)?),
        }
    }

    /// Outputs bound to a param are left out unless `return_updated`.
    pub fn run_writeback(
        &mut self,
        inputs: &[(&str, HostTensor)],
        writes: &[(usize, &str)],
        return_updated: bool,
    ) -> Result<Vec<HostTensor>, Error> {
        match self {
            Backend::Cpu(e) => Ok(e.run_writeback(inputs, writes, return_updated)?),
            Backend::Cuda(e) => Ok(e
                .run_writeback(inputs, writes, return_updated)?
                .into_iter()
                .flatten()
                .collect()),
        }
    }

    /// Per-kernel device times on the GPU; `None` on the CPU (no kernels to break down).
    pub fn profile(
        &mut self,
        inputs: &[(&str, HostTensor)],
        iters: usize,
    ) -> Result<Option<Vec<rlx_cuda::ProfileRow>>, Error> {
        match self {
            Backend::Cuda(e) => Ok(Some(e.profile(inputs, iters)?)),
            Backend::Cpu(_) => Ok(None),
        }
    }

    /// Median milliseconds of one run with these inputs (and the bound updates): device
    /// time between CUDA events on the GPU, wall time on the CPU.
    pub fn time_runs(
        &mut self,
        inputs: &[(&str, HostTensor)],
        writes: &[(usize, &str)],
        warmup: usize,
        iters: usize,
    ) -> Result<f64, Error> {
        match self {
            Backend::Cuda(e) => Ok(e.time_replays(inputs, writes, warmup, iters)?),
            Backend::Cpu(e) => {
                let mut ts = Vec::with_capacity(iters);
                for i in 0..warmup + iters.max(1) {
                    let t0 = std::time::Instant::now();
                    e.run_writeback(inputs, writes, false)?;
                    if i >= warmup {
                        ts.push(t0.elapsed().as_secs_f64() * 1e3);
                    }
                }
                ts.sort_by(|a, b| a.total_cmp(b));
                Ok(ts[ts.len() / 2])
            }
        }
    }

    pub fn param_value(&self, name: &str) -> Result<HostTensor, Error> {
        match self {
            Backend::Cpu(e) => Ok(e.param_value(name)?),
            Backend::Cuda(e) => Ok(e.param_value(name)?),
        }
    }

    pub fn graph(&self) -> &Graph {
        match self {
            Backend::Cpu(e) => e.graph(),
            Backend::Cuda(e) => e.graph(),
        }
    }

    pub fn arena_bytes(&self) -> usize {
        match self {
            Backend::Cpu(e) => e.arena_bytes(),
            Backend::Cuda(e) => e.arena_bytes(),
        }
    }

    pub fn unplanned_bytes(&self) -> usize {
        match self {
            Backend::Cpu(e) => e.unplanned_bytes(),
            // One buffer per node in storage bytes.
            Backend::Cuda(e) => e
                .graph()
                .nodes
                .iter()
                .filter(|n| !n.op.is_leaf())
                .map(|n| {
                    n.shape
                        .static_dims()
                        .map_or(0, |d| d.iter().product::<usize>())
                        * n.shape.dtype.size_bytes()
                })
                .sum(),
        }
    }

    /// Per compute node: kind and `Some(reason)` when it runs on the CPU (CUDA only; the
    /// CPU backend runs everything natively).
    pub fn dispatch(&self) -> Vec<(NodeId, rlx_ir::OpKind, Option<String>)> {
        match self {
            Backend::Cpu(e) => e
                .graph()
                .nodes
                .iter()
                .filter(|n| !n.op.is_leaf())
                .map(|n| (n.id, n.op.kind(), None))
                .collect(),
            Backend::Cuda(e) => e.dispatch(),
        }
    }
}
