//! Training support: after a run, computed outputs overwrite param leaves in place (one
//! copy in the compute class, no host-tensor round trip), so the next run sees the updated
//! weights and optimizer state.
use super::pool::Arena;
use super::{alloc, buf_of, label, CpuExecutable, Want};
use crate::buffer::Storage;
use crate::error::CpuError;
use crate::plan::Plan;
use rlx_ir::HostTensor;
use std::sync::PoisonError;

impl CpuExecutable {
    /// Check that output `output` may write back into param `name`: the output exists and
    /// has exactly the param's (static) shape and dtype. Returns the param's node index.
    pub fn check_writeback(&self, output: usize, name: &str) -> Result<usize, CpuError> {
        let err = |msg: String| CpuError::Param {
            name: name.into(),
            msg,
        };
        let param = self
            .io
            .param(name)
            .map_err(|_| err("the graph has no such param".into()))?;
        let out = self.graph.outputs.get(output).ok_or_else(|| {
            err(format!(
                "output {output} does not exist (the graph has {})",
                self.graph.outputs.len()
            ))
        })?;
        let out_shape = &self.graph.nodes[out.0].shape;
        if param.shape.static_dims().is_none() || *out_shape != param.shape {
            return Err(err(format!(
                "output {output} is {out_shape}, the param is {}; a write-back needs the same static shape and dtype",
                param.shape
            )));
        }
        Ok(param.node.0)
    }

    /// Run, then for every `(output index, param name)` in `writes` replace the param's value
    /// with that output. All sources are read before any param is written, so an output
    /// that aliases another written param still sees the pre-run value. Returns the outputs
    /// not listed in `writes` (in order), or every output if `return_written`.
    pub fn run_writeback(
        &mut self,
        inputs: &[(&str, HostTensor)],
        writes: &[(usize, &str)],
        return_written: bool,
    ) -> Result<Vec<HostTensor>, CpuError> {
        let mut targets = Vec::with_capacity(writes.len());
        for (k, &(out, name)) in writes.iter().enumerate() {
            if writes[..k].iter().any(|&(_, n)| n == name) {
                return Err(CpuError::Param {
                    name: name.into(),
                    msg: "written back by more than one output".into(),
                });
            }
            targets.push((out, self.check_writeback(out, name)?));
        }
        let skip: Vec<usize> = if return_written {
            vec![]
        } else {
            targets.iter().map(|t| t.0).collect()
        };
        let checked = self.check(inputs)?;
        self.run_checked(&checked, &targets, Want::Outputs { skip: &skip })
    }

    /// Copy every write's source out of the run's values, then store them as the params'
    /// new values (`writes`: output index, param node id).
    pub(super) fn write_back(
        &self,
        plan: &Plan,
        arena: &Arena,
        leaves: &mut [Option<Storage>],
        writes: &[(usize, usize)],
    ) -> Result<(), CpuError> {
        let mut fresh = Vec::with_capacity(writes.len());
        for &(out, leaf) in writes {
            let node = &self.graph.nodes[self.graph.outputs[out].0];
            let param = &self.graph.nodes[leaf];
            let what = || format!("the new value of {}", label(param));
            let buf = buf_of(plan, arena, leaves, node)?;
            fresh.push(alloc::copy_buf(buf, param.shape.dtype, &what)?);
        }
        for (&(_, leaf), value) in writes.iter().zip(fresh) {
            match &leaves[leaf] {
                Some(old) if old.len() != value.len() => {
                    return Err(CpuError::Op {
                        node: label(&self.graph.nodes[leaf]),
                        op: "WriteBack",
                        msg: format!("{} values computed for {} slots", value.len(), old.len()),
                    })
                }
                _ => leaves[leaf] = Some(value),
            }
        }
        Ok(())
    }

    /// The current value of a param (after write-backs, the updated one).
    pub fn param_value(&self, name: &str) -> Result<HostTensor, CpuError> {
        let b = self.io.param(name)?;
        let dims = b.shape.static_dims().ok_or_else(|| CpuError::Param {
            name: name.into(),
            msg: format!("dynamic shape {}", b.shape),
        })?;
        let leaves = self.leaves.read().unwrap_or_else(PoisonError::into_inner);
        let value = leaves[b.node.0].as_ref().ok_or_else(|| CpuError::Param {
            name: name.into(),
            msg: "not set: call set_param first".into(),
        })?;
        let what = || format!("the value of param \"{name}\"");
        alloc::tensor_of(value.as_buf(), &dims, b.shape.dtype, &what)
    }
}
