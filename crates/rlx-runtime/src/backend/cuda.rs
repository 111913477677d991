//! `Executable` for the CUDA backend. Its executable takes `&mut self` and runs on one
//! device stream, so runs are serialised behind a lock here (they would be by the device
//! lock anyway). Inputs come checked by the session and are passed on as they are.
use super::Executable;
use crate::Error;
use rlx_cuda::CudaExecutable;
use rlx_ir::{CheckedInputs, Graph, HostTensor, NodeId, OpKind};
use std::sync::{Mutex, MutexGuard, PoisonError};

pub struct CudaBackend(Mutex<CudaExecutable>);

impl CudaBackend {
    pub fn new(exe: CudaExecutable) -> CudaBackend {
        CudaBackend(Mutex::new(exe))
    }

    fn lock(&self) -> MutexGuard<'_, CudaExecutable> {
        // A panic mid-run leaves no invariant a later run could trip on: every run re-uploads
        // its inputs and overwrites every value it reads.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Executable for CudaBackend {
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

    fn run_output_f32(
        &self,
        inputs: &CheckedInputs,
        k: usize,
        out: &mut Vec<f32>,
    ) -> Result<(), Error> {
        Ok(self.lock().run_output_f32(inputs, k, out)?)
    }

    /// Device time between CUDA events, inputs already resident.
    fn time_runs(
        &self,
        inputs: &CheckedInputs,
        writes: &[(usize, &str)],
        warmup: usize,
        iters: usize,
    ) -> Result<f64, Error> {
        Ok(self.lock().time_bound(inputs, writes, warmup, iters)?)
    }

    fn profile(
        &self,
        inputs: &CheckedInputs,
        iters: usize,
    ) -> Result<Option<Vec<rlx_cuda::ProfileRow>>, Error> {
        Ok(Some(self.lock().profile_bound(inputs, iters)?))
    }

    fn dispatch(&self) -> Vec<(NodeId, OpKind, Option<String>)> {
        self.lock().dispatch()
    }

    fn arena_bytes(&self) -> usize {
        self.lock().arena_bytes()
    }

    fn unplanned_bytes(&self) -> usize {
        // One buffer per node, in storage bytes.
        (self.lock().graph().nodes.iter())
            .filter(|n| !n.op.is_leaf())
            .map(|n| n.shape.numel().unwrap_or(0) * n.shape.dtype.size_bytes())
            .sum()
    }
}
