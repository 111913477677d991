//! `Executable` for the CPU reference executor. It is shared without a lock: each run takes
//! its own arena, params sit behind the executor's read-write lock.
use super::Executable;
use crate::Error;
use rlx_cpu::{CpuError, CpuExecutable};
use rlx_ir::{CheckedInputs, Graph, HostTensor, NodeId, OpKind, SharedBytes};

pub struct CpuBackend(pub CpuExecutable);

/// A binding mistake reported by the executor itself reads as the session's own.
fn lift(e: CpuError) -> Error {
    match e {
        CpuError::Bind(b) => b.into(),
        e => Error::Cpu(e),
    }
}

impl Executable for CpuBackend {
    fn graph(&self) -> Graph {
        self.0.graph().clone()
    }

    fn set_param(&self, name: &str, value: &HostTensor) -> Result<(), Error> {
        self.0.set_param_checked(name, value).map_err(lift)
    }

    fn set_param_owned(&self, name: &str, value: HostTensor) -> Result<(), Error> {
        self.0.set_param_owned_checked(name, value).map_err(lift)
    }

    fn set_param_shared(
        &self,
        name: &str,
        shape: &[usize],
        bytes: SharedBytes,
    ) -> Result<(), Error> {
        self.0.set_param_shared(name, shape, bytes).map_err(lift)
    }

    fn param_value(&self, name: &str) -> Result<HostTensor, Error> {
        self.0.param_value(name).map_err(lift)
    }

    fn run(
        &self,
        inputs: &CheckedInputs,
        writes: &[(usize, &str)],
        return_updated: bool,
    ) -> Result<Vec<HostTensor>, Error> {
        self.0
            .run_bound(inputs, writes, return_updated)
            .map_err(lift)
    }

    fn dispatch(&self) -> Vec<(NodeId, OpKind, Option<String>)> {
        // The CPU runs every op natively.
        (self.0.graph().nodes.iter())
            .filter(|n| !n.op.is_leaf())
            .map(|n| (n.id, n.op.kind(), None))
            .collect()
    }

    fn arena_bytes(&self) -> usize {
        self.0.arena_bytes()
    }

    fn unplanned_bytes(&self) -> usize {
        self.0.unplanned_bytes()
    }
}
