//! Building a plan for one binding of the dynamic dims: concrete shapes, the memory plan
//! (one arena; views into it and into the leaves), lowering node by node, then pipelines and
//! bind groups made once, so a run only records dispatches.
use super::{trace_on, CpuStep, Plan, Prepared, Segment, WgpuExecutable};
use crate::lower::{lower_node, LowerEnv, LowerError, NodeCtx, Step};
use crate::shader::WTensor;
use crate::WgpuError;
use rlx_ir::{Node, Op};
use std::collections::HashMap;

/// What lowering `n` came to: `None` lowered, `Some(reason)` a CPU fallback, or the error.
fn outcome(n: &Node, r: Result<(), LowerError>) -> Result<Option<String>, WgpuError> {
    match r {
        Ok(()) => Ok(None),
        Err(LowerError::Unsupported(why)) => Ok(Some(why)),
        Err(LowerError::Internal(e)) => Err(WgpuError::Lowering {
            node: n.label(),
            kind: n.op.kind(),
            source: Box::new(e),
        }),
    }
}

fn node_err(n: &Node, msg: impl Into<String>) -> WgpuError {
    WgpuError::Node {
        node: n.label(),
        msg: msg.into(),
    }
}

impl WgpuExecutable {
    pub(super) fn build_plan(&self, bindings: &HashMap<String, usize>) -> Result<Plan, WgpuError> {
        let nodes = self.graph.bind_static(bindings)?;
        let dims: Vec<Vec<usize>> = (nodes.iter())
            .map(|n| n.shape.static_dims().expect("static"))
            .collect();
        let bytes =
            |i: usize| dims[i].iter().product::<usize>() * nodes[i].shape.dtype.size_bytes();
        let g = &self.graph;
        // Verify mode keeps every node's value (no reuse, no views) so each can be compared.
        let rlx_opt::ArenaLayout {
            slots,
            views,
            arena_bytes,
        } = rlx_opt::arena_layout(g, &dims, self.opts.verify)?;
        if arena_bytes as u64 > self.gpu.caps.max_binding_bytes {
            return Err(WgpuError::device(
                "plan",
                format!(
                    "the plan's arena of {arena_bytes} bytes exceeds the adapter's largest \
                     storage binding ({} bytes)",
                    self.gpu.caps.max_binding_bytes
                ),
            ));
        }
        // Buffers of the plan: 0 the arena, then one per input and one per leaf.
        let mut buffers = vec![self.gpu.buffer("rlx arena", arena_bytes as u64)?];
        let mut inputs = HashMap::new();
        let mut tensors: Vec<WTensor> = Vec::with_capacity(g.nodes.len());
        for n in &g.nodes {
            let i = n.id.0;
            let (slab, off) = if let Some((base, off)) = views[i] {
                let b: &WTensor = &tensors[base];
                (b.slab, b.off + off as u64)
            } else if let Some(off) = slots[i] {
                (0, off as u64)
            } else if let Op::Input { .. } = n.op {
                buffers.push(self.gpu.buffer("rlx input", bytes(i) as u64)?);
                inputs.insert(i, buffers.len() - 1);
                (buffers.len() - 1, 0)
            } else if let Some(b) = self.leaves.get(&i) {
                buffers.push(b.clone());
                (buffers.len() - 1, 0)
            } else {
                return Err(node_err(n, "no memory was planned for this node"));
            };
            tensors.push(WTensor {
                slab,
                off,
                dims: dims[i].clone(),
                dtype: n.shape.dtype,
            });
        }
        // The portable option lowers as for an adapter without the optional features.
        let caps = if self.opts.portable {
            self.gpu.caps.without_optional()
        } else {
            self.gpu.caps.clone()
        };
        let mut env = LowerEnv::new(buffers.len());
        let mut steps: Vec<Result<Step, Box<CpuStep>>> = Vec::new();
        let mut dispatch = Vec::new();
        let trace = trace_on();
        for (n, bound) in g.nodes.iter().zip(&nodes) {
            if n.op.is_leaf() || (views[n.id.0].is_some() && !n.op.kind().is_in_place()) {
                continue;
            }
            let mut ctx = NodeCtx {
                node: bound,
                ins: n.inputs.iter().map(|i| tensors[i.0].clone()).collect(),
                out: tensors[n.id.0].clone(),
                caps: &caps,
                env: &mut env,
            };
            let before = ctx.env.steps.len();
            let r = lower_node(&mut ctx);
            match outcome(n, r)? {
                None => {
                    dispatch.push((n.id, n.op.kind(), None));
                    steps.extend(env.steps.drain(before..).map(Ok));
                }
                Some(why) => {
                    env.steps.truncate(before);
                    if trace {
                        eprintln!(
                            "[rlx-trace] wgpu: {} ({}) -> CPU fallback: {why}",
                            n.label(),
                            n.op.kind()
                        );
                    }
                    let ins = n.inputs.iter().map(|i| tensors[i.0].clone()).collect();
                    steps.push(Err(Box::new(CpuStep::new(
                        bound,
                        ins,
                        tensors[n.id.0].clone(),
                    )?)));
                    dispatch.push((n.id, n.op.kind(), Some(why)));
                }
            }
        }
        for &b in &env.scratch {
            buffers.push(self.gpu.buffer("rlx scratch", b)?);
        }
        let mut segments: Vec<Segment> = Vec::new();
        let mut cur: Vec<Prepared> = Vec::new();
        for s in steps {
            match s {
                Ok(Step::Kernel(k)) => cur.push(self.prepare(&k, &buffers)?),
                Ok(Step::Copy { src, dst, bytes }) => cur.push(Prepared::Copy { src, dst, bytes }),
                Err(c) => {
                    if !cur.is_empty() {
                        segments.push(Segment::Gpu(std::mem::take(&mut cur)));
                    }
                    segments.push(Segment::Cpu(c));
                }
            }
        }
        if !cur.is_empty() {
            segments.push(Segment::Gpu(cur));
        }
        Ok(Plan {
            tensors,
            buffers,
            inputs,
            segments,
            dispatch,
            arena_bytes,
        })
    }

    /// The pipeline and bind group of one kernel.
    fn prepare(
        &self,
        k: &crate::shader::Kernel,
        buffers: &[wgpu::Buffer],
    ) -> Result<Prepared, WgpuError> {
        let pipeline = self.gpu.pipeline(&k.label, &k.src, k.slabs.len())?;
        let layout = self.gpu.layout(k.slabs.len());
        let entries: Vec<wgpu::BindGroupEntry> = (k.slabs.iter().enumerate())
            .map(|(b, &s)| wgpu::BindGroupEntry {
                binding: b as u32,
                resource: buffers[s].as_entire_binding(),
            })
            .collect();
        let bind = self
            .gpu
            .device
            .create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &layout.0,
                entries: &entries,
            });
        Ok(Prepared::Dispatch {
            pipeline,
            bind,
            groups: k.groups,
            label: k.label.clone(),
        })
    }
}
