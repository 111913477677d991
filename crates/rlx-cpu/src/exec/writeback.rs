//! Training support: after a run, computed outputs overwrite param leaves in place (one
//! copy in the compute class, no host-tensor round trip), so the next run sees the updated
//! weights and optimizer state.
use super::{label, CpuExecutable};
use crate::buffer::{Buf, Storage};
use crate::error::CpuError;
use rlx_ir::{HostTensor, Op};

impl CpuExecutable {
    /// Check that output `output` may write back into param `name`: the output exists and
    /// has exactly the param's (static) shape and dtype. Returns the param's node index.
    pub fn check_writeback(&self, output: usize, name: &str) -> Result<usize, CpuError> {
        let err = |msg: String| CpuError::Param {
            name: name.into(),
            msg,
        };
        let param = self
            .graph
            .nodes
            .iter()
            .find(|n| matches!(&n.op, Op::Param { name: p } if p == name))
            .ok_or_else(|| err("the graph has no such param".into()))?;
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
        Ok(param.id.0)
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
        let values = self.run_nodes(inputs, false, &skip)?;
        let plan = self.plan.take().ok_or_else(|| CpuError::Op {
            node: self.graph.name.clone(),
            op: "WriteBack",
            msg: "no plan after a run".into(),
        })?;
        let mut fresh = Vec::with_capacity(targets.len());
        for &(out, _) in &targets {
            let i = self.graph.outputs[out].0;
            fresh.push(match self.buf_of(&plan, i) {
                Buf::F32(s) => Storage::F32(s.to_vec()),
                Buf::F64(s) => Storage::F64(s.to_vec()),
                Buf::I64(s) => Storage::I64(s.to_vec()),
            });
        }
        self.plan = Some(plan);
        for ((_, leaf), value) in targets.into_iter().zip(fresh) {
            match &self.leaves[leaf] {
                Some(old) if old.len() != value.len() => {
                    return Err(CpuError::Op {
                        node: label(&self.graph.nodes[leaf]),
                        op: "WriteBack",
                        msg: format!("{} values computed for {} slots", value.len(), old.len()),
                    })
                }
                _ => self.leaves[leaf] = Some(value),
            }
        }
        Ok(values.into_iter().flatten().collect())
    }

    /// The current value of a param (after write-backs, the updated one).
    pub fn param_value(&self, name: &str) -> Result<HostTensor, CpuError> {
        let node = self.param_node(name)?;
        let dims = node.shape.static_dims().ok_or_else(|| CpuError::Param {
            name: name.into(),
            msg: format!("dynamic shape {}", node.shape),
        })?;
        let value = self.leaves[node.id.0]
            .as_ref()
            .ok_or_else(|| CpuError::Param {
                name: name.into(),
                msg: "not set: call set_param first".into(),
            })?;
        Ok(super::from_buf(value.as_buf(), &dims, node.shape.dtype))
    }
}
