//! Building a plan for one binding of the dynamic dims: concrete shapes, the memory plan
//! (one arena, views into it), lowering node by node, and the segments to replay. Lowering's
//! outcome decides each node: lowered, a CPU fallback (`Unsupported`, with its cached CPU
//! executable), or a hard error (`Internal`, see `outcome`).
use super::replay::{capture, Segment};
use super::{bytes_of, node_err, trace_on, CudaExecutable, Plan};
use crate::device::DevBuf;
use crate::lower::{lower_node, DevTensor, LowerError, Lowered, NodeCtx};
use crate::plan::{CpuStep, LowerEnv, Step};
use crate::CudaError;
use rlx_ir::{Node, Op};
use std::collections::HashMap;

/// What lowering `n` came to: `None` when it was lowered, `Some(reason)` when it runs on
/// the CPU (`Unsupported`), and an error naming the node when the GPU path itself failed
/// (`Internal`): those are never turned into a fallback.
pub(super) fn outcome(n: &Node, r: Lowered) -> Result<Option<String>, CudaError> {
    match r {
        Ok(()) => Ok(None),
        Err(LowerError::Unsupported(why)) => Ok(Some(why)),
        Err(LowerError::Internal(e)) => Err(CudaError::Lowering {
            node: n.label(),
            kind: n.op.kind(),
            source: Box::new(e),
        }),
    }
}

impl CudaExecutable {
    pub(super) fn build_plan(&self, bindings: &HashMap<String, usize>) -> Result<Plan, CudaError> {
        // Lowering allocates and sets up cuBLASLt; capture must not overlap any of that (in
        // any thread), so the whole build holds the device lock.
        let _dev = self.gpu.lock();
        let nodes = self.graph.bind_static(bindings)?;
        let t0 = std::time::Instant::now();
        let warmed = super::prewarm::compile_all(
            &self.gpu,
            &super::prewarm::sources(&self.graph, &self.planar),
        );
        if warmed > 0 && trace_on() {
            eprintln!(
                "[rlx-trace] compiled {warmed} kernel sources side by side in {:.2} s",
                t0.elapsed().as_secs_f64()
            );
        }
        let shapes: Vec<Vec<usize>> = (nodes.iter())
            .map(|n| n.shape.static_dims().expect("static"))
            .collect();
        let g = &self.graph;
        // Verify mode keeps every node's value (no reuse, no views) so each can be compared.
        let rlx_opt::ArenaLayout {
            slots,
            views,
            arena_bytes,
        } = rlx_opt::arena_layout(g, &shapes, self.opts.verify)?;
        let arena = DevBuf::new(&self.gpu, arena_bytes)?;
        // Every input in one device block, each at a 256-byte slot in node order, so a run
        // uploads them all in one copy from the same layout in its page-locked buffer.
        let mut inputs = HashMap::new();
        let mut input_bytes = 0usize;
        for n in &g.nodes {
            if let Op::Input { .. } = n.op {
                inputs.insert(n.id.0, input_bytes);
                input_bytes += bytes_of(&shapes[n.id.0], n).div_ceil(256) * 256;
            }
        }
        let input_buf = DevBuf::new(&self.gpu, input_bytes.max(256))?;
        let mut tensors: Vec<DevTensor> = Vec::with_capacity(g.nodes.len());
        for n in &g.nodes {
            let i = n.id.0;
            let dims = shapes[i].clone();
            let ptr = if let Some((base, off)) = views[i] {
                tensors[base].ptr + off as u64
            } else if let Some(off) = slots[i] {
                arena.ptr + off as u64
            } else if let Op::Input { .. } = n.op {
                input_buf.ptr + inputs[&i] as u64
            } else if let Some(b) = self.leaves.get(&i) {
                b.ptr
            } else {
                return Err(node_err(n, "no memory was planned for this node"));
            };
            tensors.push(DevTensor {
                ptr,
                dims,
                dtype: n.shape.dtype,
            });
        }
        // Params and constants (or views of them) that no in-place op of the plan writes:
        // the values a kernel may read before waiting on its predecessor (PDL).
        let root = |i: usize| views[i].map_or(i, |(b, _)| b);
        let written: std::collections::HashSet<usize> = (g.nodes.iter())
            .flat_map(|n| {
                n.op.written_inputs()
                    .iter()
                    .filter_map(|&k| n.inputs.get(k))
            })
            .map(|i| root(i.0))
            .collect();
        let fixed: Vec<bool> = (0..g.nodes.len())
            .map(|i| {
                let r = root(i);
                matches!(g.nodes[r].op, Op::Param { .. } | Op::Constant { .. })
                    && !written.contains(&r)
            })
            .collect();
        let mut env = LowerEnv::new(self.gpu.clone(), &self.streams, self.opts.force_variant);
        env.comm = self.comm.clone();
        env.planar = (self.planar.iter())
            .map(|(i, &q)| (self.leaves[i].ptr, q))
            .collect();
        if rlx_ir::env::flag(rlx_ir::env::Switch::L2Prefetch) {
            // Half of L2: the prefetched weights share it with the step's activations and caches.
            let budget = self.gpu.l2_bytes / 2;
            env.l2_prefetch = super::l2_prefetch::ranges(g, &tensors, &fixed, budget);
        }
        // Verify mode compares every node's value, the narrows' included: they all run.
        let qkv = if self.opts.verify {
            HashMap::new()
        } else {
            super::qkv_views::sources(g, &views, &tensors)
        };
        let unrun = super::qkv_views::skipped(&qkv);
        env.qkv = (qkv.iter())
            .map(|(&a, s)| (a, (tensors[s.src].clone(), s.cols)))
            .collect();
        let mut dispatch = Vec::new();
        let trace = trace_on();
        for (n, bound) in g.nodes.iter().zip(&nodes) {
            // Views are not run; an in-place write is a view of its cache that is.
            if n.op.is_leaf()
                || (views[n.id.0].is_some() && !n.op.kind().is_in_place())
                || unrun.contains(&n.id.0)
            {
                continue;
            }
            // A step that reads a collective's result or writes over its buffers waits for
            // it first (collectives run beside the main stream).
            if !env.pending.is_empty() {
                let touched: Vec<(u64, usize)> = (n.inputs.iter().map(|i| &tensors[i.0]))
                    .chain([&tensors[n.id.0]])
                    .map(|t| (t.ptr, t.bytes()))
                    .collect();
                env.join(Some(&touched));
            }
            let before = env.steps.len();
            let mut ctx = NodeCtx {
                node: bound,
                ins: n.inputs.iter().map(|i| tensors[i.0].clone()).collect(),
                fixed: n.inputs.iter().map(|i| fixed[i.0]).collect(),
                out: tensors[n.id.0].clone(),
                precision: self.opts.precision,
                env: &mut env,
            };
            let r = lower_node(&mut ctx);
            match outcome(n, r)? {
                None => dispatch.push((n.id, n.op.kind(), None)),
                Some(why) => {
                    env.steps.truncate(before);
                    // The CPU reads q, k and v from the narrows' buffers: run them now (the
                    // product is intact until here, see `qkv_views`).
                    for &j in qkv.get(&n.id.0).map(|s| &s.narrows[..]).unwrap_or(&[]) {
                        let mut c = NodeCtx {
                            node: &nodes[j],
                            ins: (g.nodes[j].inputs.iter())
                                .map(|i| tensors[i.0].clone())
                                .collect(),
                            fixed: vec![false; g.nodes[j].inputs.len()],
                            out: tensors[j].clone(),
                            precision: self.opts.precision,
                            env: &mut env,
                        };
                        if let Some(why) = outcome(&g.nodes[j], lower_node(&mut c))? {
                            return Err(node_err(
                                &g.nodes[j],
                                format!("narrow for a CPU step: {why}"),
                            ));
                        }
                        dispatch.push((g.nodes[j].id, g.nodes[j].op.kind(), None));
                    }
                    // A CPU step ends the GPU segment: nothing may be left running beside it.
                    env.join(None);
                    if trace {
                        eprintln!(
                            "[rlx-trace] {} ({}) -> CPU fallback: {why}",
                            n.label(),
                            n.op.kind(),
                        );
                    }
                    env.steps.push(Step::Cpu(Box::new(CpuStep::new(
                        bound,
                        n.inputs.iter().map(|i| tensors[i.0].clone()).collect(),
                        tensors[n.id.0].clone(),
                        n.inputs
                            .iter()
                            .map(|i| self.planar.get(&i.0).copied())
                            .collect(),
                    )?)));
                    dispatch.push((n.id, n.op.kind(), Some(why)));
                }
            }
        }
        env.join(None);
        let mut segments = Vec::new();
        let mut cur = Vec::new();
        for s in env.steps.drain(..) {
            match s {
                Step::Cpu(c) => {
                    if !cur.is_empty() {
                        segments.push(Segment::Gpu {
                            steps: std::mem::take(&mut cur),
                            graph: None,
                        });
                    }
                    segments.push(Segment::Cpu(c));
                }
                s => cur.push(s),
            }
        }
        if !cur.is_empty() {
            segments.push(Segment::Gpu {
                steps: cur,
                graph: None,
            });
        }
        if self.opts.cuda_graph {
            for seg in &mut segments {
                if let Segment::Gpu { steps, graph } = seg {
                    *graph = Some(capture(&self.streams, steps)?);
                }
            }
        }
        Ok(Plan {
            tensors,
            inputs,
            input_bytes,
            input_buf,
            segments,
            dispatch,
            arena_bytes,
            _arena: arena,
            _scratch: std::mem::take(&mut env.scratch),
            _events: std::mem::take(&mut env.events),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::outcome;
    use crate::lower::{LowerError, Lowered};
    use crate::CudaError;
    use rlx_ir::{DType, Graph, OpKind, Shape};

    fn node() -> rlx_ir::Node {
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[4, 8], DType::F32)).unwrap();
        let y = g.softmax(x, -1).unwrap();
        let mut n = g.nodes[y.0].clone();
        n.name = Some("probs".into());
        n
    }

    /// What a lowering function returns when a kernel source fails to compile: a
    /// `CudaError` raised with `?`, as `NodeCtx::launch` does after `Gpu::function`.
    fn failing_compile() -> Lowered {
        Err(CudaError::Compile {
            name: "reduce".into(),
            log: "error: expected a ';'".into(),
        })?;
        Ok(())
    }

    #[test]
    fn internal_errors_fail_loudly_and_name_the_node() {
        let n = node();
        match outcome(&n, failing_compile()) {
            Err(CudaError::Lowering { node, kind, source }) => {
                assert!(node.contains("%1") && node.contains("probs"), "{node}");
                assert_eq!(kind, OpKind::Softmax);
                assert!(matches!(*source, CudaError::Compile { .. }), "{source:?}");
            }
            other => panic!("an NVRTC failure must not become a fallback: {other:?}"),
        }
        let missing = Err(LowerError::Internal(CudaError::Compile {
            name: "norm".into(),
            log: "kernel norm_rows_f32 not found in module".into(),
        }));
        assert!(
            outcome(&n, missing).is_err(),
            "a missing symbol is internal"
        );
        let e = outcome(&n, Err(LowerError::internal(&n, "empty launch"))).unwrap_err();
        assert!(e.to_string().contains("probs"), "{e}");
    }

    #[test]
    fn unsupported_falls_back_with_its_reason() {
        let n = node();
        let r: Lowered = (|| crate::unsupported!("rank {} is above 8", 9))();
        assert_eq!(
            outcome(&n, r).unwrap(),
            Some("rank 9 is above 8".to_string())
        );
        assert_eq!(outcome(&n, Ok(())).unwrap(), None);
    }
}
