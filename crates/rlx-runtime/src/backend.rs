//! The one interface a compiled graph runs through, whatever the device. Backends never
//! depend on rlx-runtime, so the trait lives here with its implementations for each
//! backend's executable (`cpu.rs`, `cuda.rs`, `wgpu.rs`); a new backend adds one file.
//!
//! Inputs reach an executable already checked by the session's binding table
//! (`CheckedInputs` can only be made by `IoBindings::check_inputs`), params already
//! checked against their declaration: implementations trust both.
use crate::Error;
use rlx_ir::{CheckedInputs, DType, Graph, HostTensor, NodeId, OpKind, SharedBytes};

mod cpu;
mod cuda;
mod wgpu;

pub use cpu::CpuBackend;
pub use cuda::CudaBackend;
pub use wgpu::WgpuBackend;

/// A graph compiled for one device. Shared by every thread that runs the compiled graph:
/// implementations lock what they must (the CPU runs concurrently; the GPU serialises).
pub trait Executable: Send + Sync {
    /// The graph as it runs (after the optimisation pipeline).
    fn graph(&self) -> Graph;

    /// Store a param's value (checked by the caller).
    fn set_param(&self, name: &str, value: &HostTensor) -> Result<(), Error>;

    /// The same with the value handed over, for backends that can keep its bytes rather
    /// than copy them (the CPU keeps packed quantised weights as they are).
    fn set_param_owned(&self, name: &str, value: HostTensor) -> Result<(), Error> {
        self.set_param(name, &value)
    }

    /// Store a U8 param (packed weights) from bytes shared with their owner, a mapped
    /// model file. A backend that reads host memory as it runs keeps them without a copy
    /// (the CPU); others copy them once to where they compute.
    fn set_param_shared(
        &self,
        name: &str,
        shape: &[usize],
        bytes: SharedBytes,
    ) -> Result<(), Error> {
        self.set_param_owned(name, HostTensor::new(shape, DType::U8, bytes.to_vec())?)
    }

    /// The current value of a param (after bound updates, the updated one).
    fn param_value(&self, name: &str) -> Result<HostTensor, Error>;

    /// Run once; then output `k` replaces param `p` for each `(k, p)` in `writes`. Returns
    /// the outputs in order, leaving out those in `writes` unless `return_updated`.
    fn run(
        &self,
        inputs: &CheckedInputs,
        writes: &[(usize, &str)],
        return_updated: bool,
    ) -> Result<Vec<HostTensor>, Error>;

    /// Run once (no bound writes) and write output `k`'s values as f32 into `out`, its
    /// capacity reused. By default through `run`; a device that stages its outputs in
    /// host memory overrides it to copy once, without allocating.
    fn run_output_f32(
        &self,
        inputs: &CheckedInputs,
        k: usize,
        out: &mut Vec<f32>,
    ) -> Result<(), Error> {
        output_f32_into(&self.run(inputs, &[], true)?, k, out)
    }

    /// Median milliseconds of one run with these inputs (and the bound updates). By default
    /// the wall time of whole runs; a device with its own clock overrides it.
    fn time_runs(
        &self,
        inputs: &CheckedInputs,
        writes: &[(usize, &str)],
        warmup: usize,
        iters: usize,
    ) -> Result<f64, Error> {
        let mut ts = Vec::with_capacity(iters.max(1));
        for i in 0..warmup + iters.max(1) {
            let t0 = std::time::Instant::now();
            self.run(inputs, writes, false)?;
            if i >= warmup {
                ts.push(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
        ts.sort_by(|a, b| a.total_cmp(b));
        Ok(ts[ts.len() / 2])
    }

    /// Per-kernel device times; `None` where there are no kernels to break down (the CPU).
    fn profile(
        &self,
        _inputs: &CheckedInputs,
        _iters: usize,
    ) -> Result<Option<Vec<rlx_cuda::ProfileRow>>, Error> {
        Ok(None)
    }

    /// Per compute node: id, kind and `Some(reason)` when it runs on the CPU instead of the
    /// compiled device.
    fn dispatch(&self) -> Vec<(NodeId, OpKind, Option<String>)>;

    /// Arena bytes of the current memory plan.
    fn arena_bytes(&self) -> usize;

    /// Arena bytes one buffer per node would take (what the plan saves against).
    fn unplanned_bytes(&self) -> usize;
}

/// Output `k` of a run's outputs as f32 into `out` (its capacity reused).
pub(crate) fn output_f32_into(
    outs: &[HostTensor],
    k: usize,
    out: &mut Vec<f32>,
) -> Result<(), Error> {
    let count = outs.len();
    let t = outs.get(k).ok_or(Error::NoSuchOutput { index: k, count })?;
    t.f32_into(out);
    Ok(())
}
