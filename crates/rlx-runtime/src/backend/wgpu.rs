//! `Executable` for the wgpu backend. Its executable takes `&mut self` and owns one queue,
//! so runs are serialised behind a lock here.
use super::Executable;
use crate::Error;
use rlx_ir::{CheckedInputs, Graph, HostTensor, NodeId, OpKind};
use rlx_wgpu::WgpuExecutable;
use std::sync::{Mutex, MutexGuard, PoisonError};

pub struct WgpuBackend(Mutex<WgpuExecutable>);

impl WgpuBackend {
    pub fn new(exe: WgpuExecutable) -> WgpuBackend {
        WgpuBackend(Mutex::new(exe))
    }

    fn lock(&self) -> MutexGuard<'_, WgpuExecutable> {
        // A panic mid-run leaves nothing a later run trips on: each run re-uploads its
        // inputs and overwrites every value it reads.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Executable for WgpuBackend {
    fn graph(&self) -> Graph {
        self.lock().graph().clone()
    }

    fn set_param(&self, name: &str, value: &HostTensor) -> Result<(), Error> {
        Ok(self.lock().set_param(name, value)?)
    }

    fn param_value(&self, name: &str) -> Result<HostTensor, Error> {
        Ok(self.lock().param_value(name)?)
    }

    fn run(
        &self,
        inputs: &CheckedInputs,
        writes: &[(usize, &str)],
        return_updated: bool,
    ) -> Result<Vec<HostTensor>, Error> {
        Ok(self
            .lock()
            .run_bound(inputs, writes, return_updated)?
            .into_iter()
            .flatten()
            .collect())
    }

    fn time_runs(
        &self,
        inputs: &CheckedInputs,
        writes: &[(usize, &str)],
        warmup: usize,
        iters: usize,
    ) -> Result<f64, Error> {
        Ok(self.lock().time_replays(inputs, writes, warmup, iters)?)
    }

    fn profile(
        &self,
        inputs: &CheckedInputs,
        iters: usize,
    ) -> Result<Option<Vec<rlx_cuda::ProfileRow>>, Error> {
        let Some(p) = self.lock().profile_runs(inputs, iters)? else {
            return Ok(None);
        };
        Ok(Some(
            p.rows()
                .into_iter()
                .map(|(what, launches, ms)| rlx_cuda::ProfileRow { what, launches, ms })
                .collect(),
        ))
    }

    fn dispatch(&self) -> Vec<(NodeId, OpKind, Option<String>)> {
        self.lock().dispatch()
    }

    fn arena_bytes(&self) -> usize {
        self.lock().arena_bytes()
    }

    fn unplanned_bytes(&self) -> usize {
        (self.lock().graph().nodes.iter())
            .filter(|n| !n.op.is_leaf())
            .map(|n| n.shape.numel().unwrap_or(0) * n.shape.dtype.size_bytes())
            .sum()
    }
}
