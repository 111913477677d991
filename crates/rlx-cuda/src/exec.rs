//! The CUDA executable (stub API; the implementation lands with the executor).
use crate::{CudaError, Precision};
use rlx_ir::{Graph, HostTensor, NodeId};

/// Per-compile options of the CUDA backend.
#[derive(Clone, Debug, PartialEq)]
pub struct CudaOptions {
    pub precision: Precision,
    /// Capture the launches into a CUDA graph (`RLX_CUDA_GRAPH=0` turns it off).
    pub cuda_graph: bool,
    /// Run the CPU reference beside the GPU and report the first diverging node (`RLX_VERIFY=1`).
    pub verify: bool,
}

impl Default for CudaOptions {
    fn default() -> Self {
        CudaOptions {
            precision: Precision::F32,
            cuda_graph: std::env::var("RLX_CUDA_GRAPH").map_or(true, |v| v != "0"),
            verify: std::env::var("RLX_VERIFY").is_ok_and(|v| v == "1"),
        }
    }
}

impl CudaOptions {
    /// Strict f32, environment switches applied.
    pub fn strict() -> CudaOptions {
        CudaOptions::default()
    }
}

pub struct CudaExecutable {
    graph: Graph,
}

impl CudaExecutable {
    pub fn new(
        graph: Graph,
        ordinal: usize,
        opts: CudaOptions,
    ) -> Result<CudaExecutable, CudaError> {
        let _ = (ordinal, opts);
        Ok(CudaExecutable { graph })
    }
    pub fn set_param(&mut self, name: &str, value: &HostTensor) -> Result<(), CudaError> {
        let _ = (name, value);
        Ok(())
    }
    pub fn run(&mut self, inputs: &[(&str, HostTensor)]) -> Result<Vec<HostTensor>, CudaError> {
        let _ = inputs;
        Ok(vec![])
    }
    /// Per compute node of the last plan: id, op kind, and `Some(reason)` when it fell back.
    pub fn dispatch(&self) -> Vec<(NodeId, &'static str, Option<String>)> {
        let _ = &self.graph;
        vec![]
    }
}
