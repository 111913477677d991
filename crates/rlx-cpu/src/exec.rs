//! The executor: binds shapes, plans the arena, runs one thunk per node. Constants and
//! params are shared by every run (behind a read-write lock: a write-back or `set_param`
//! waits for runs in flight); each run takes its own arena from a pool, so runs from
//! several threads proceed in parallel. Inputs are checked by `rlx_ir::IoBindings`, once.
use crate::buffer::{Buf, BufMut, LeafBytes, OutView, Storage, TensorView};
use crate::comm::Communicator;
use crate::error::CpuError;
use crate::plan::{make_plan, Loc, Plan, PlanMode};
use crate::quant::QuantAct;
use half::{bf16, f16};
use rlx_ir::{
    CheckedInputs, ComputeClass, DType, DimBindings, Graph, HostTensor, IoBindings, Node, Op,
    SharedBytes,
};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

mod alloc;
mod cache_write;
mod pool;
#[cfg(test)]
mod tests;
mod writeback;

use cache_write::RowWrite;
use pool::{Arena, ArenaPool};

/// How many plans (distinct bindings of dynamic dims) an executable keeps.
pub const PLAN_CACHE: usize = 8;

/// A plan and the dynamic-dim sizes it was made for.
struct BoundPlan {
    dims: DimBindings,
    plan: Plan,
}

/// A graph ready to run on the CPU. `Send + Sync`: runs may share it across threads.
pub struct CpuExecutable {
    graph: Graph,
    io: IoBindings,
    /// Constant and param values by node id (inputs live in each run's arena).
    leaves: RwLock<Vec<Option<Storage>>>,
    mode: PlanMode,
    /// Plans of the most recent bindings of dynamic dims, least recently used first (at
    /// most `PLAN_CACHE`), so batches that alternate between a few shapes plan each once.
    plans: Mutex<Vec<Arc<BoundPlan>>>,
    pool: ArenaPool,
    /// Params that in-place ops (a KV-cache write) write: during a run each is moved into
    /// the run's own leaf slots, where the write may borrow it mutably.
    in_place_params: Vec<usize>,
    /// The group this executable is one rank of (collectives exchange through it); none:
    /// a group of one.
    comm: Option<Arc<dyn Communicator>>,
    /// How products with a quantised weight compute (default f32 activations).
    quant_act: QuantAct,
    /// The graph has collectives: its runs stay on the caller's thread (see `in_pool`).
    collective: bool,
}

/// Which values a run returns.
enum Want<'a> {
    /// The graph's outputs, less these output indices.
    Outputs { skip: &'a [usize] },
    /// Every node's value (verify mode).
    All,
}

/// Convert a host tensor into the storage a leaf of its dtype gets: its compute class, and
/// U8 as bytes.
pub fn to_storage(t: &HostTensor) -> Storage {
    if t.dtype == DType::U8 {
        return Storage::U8(t.data.clone().into());
    }
    match t.dtype.compute_class() {
        ComputeClass::F32 => Storage::F32(t.to_f32_vec()),
        ComputeClass::F64 => Storage::F64(t.to_f64_vec()),
        ComputeClass::I64 => Storage::I64(t.to_i64_vec()),
    }
}

/// Convert computed values back into `dtype` storage.
pub fn from_buf(buf: Buf, shape: &[usize], dtype: DType) -> HostTensor {
    match buf {
        Buf::F32(s) => match dtype {
            DType::F32 => HostTensor::from_f32(shape, s),
            _ => HostTensor::from_f32_as(shape, s, dtype),
        },
        Buf::F64(s) => HostTensor::from_f64_as(shape, s, dtype),
        Buf::I64(s) => match dtype {
            DType::I64 => HostTensor::from_i64(shape, s),
            _ => HostTensor::from_f64_as(
                shape,
                &s.iter().map(|&v| v as f64).collect::<Vec<_>>(),
                dtype,
            ),
        },
        Buf::U8(s) => match dtype {
            DType::U8 => HostTensor {
                shape: shape.to_vec(),
                dtype,
                data: s.to_vec(),
            },
            _ => HostTensor::from_f64_as(
                shape,
                &s.iter().map(|&v| v as f64).collect::<Vec<_>>(),
                dtype,
            ),
        },
    }
}

/// Ops whose thunks read U8 leaf bytes (`Buf::U8`) themselves; every other op gets such
/// an input widened to i64 for the length of its thunk.
fn reads_bytes(op: &Op) -> bool {
    matches!(
        op,
        Op::DequantMatMul { .. } | Op::FusedDequantMatMul { .. } | Op::Gather { .. }
    )
}

/// Make values obey their storage dtype (half rounding, integer wrap, bool 0/1).
pub(crate) fn normalise(data: BufMut, dtype: DType) {
    match (data, dtype) {
        (BufMut::F32(s), DType::F16) => s.iter_mut().for_each(|v| *v = f16::from_f32(*v).to_f32()),
        (BufMut::F32(s), DType::BF16) => {
            s.iter_mut().for_each(|v| *v = bf16::from_f32(*v).to_f32())
        }
        (BufMut::I64(s), DType::I32) => s.iter_mut().for_each(|v| *v = *v as i32 as i64),
        (BufMut::I64(s), DType::U8) => s.iter_mut().for_each(|v| *v = *v as u8 as i64),
        (BufMut::I64(s), DType::Bool) => s.iter_mut().for_each(|v| *v = (*v != 0) as i64),
        _ => {}
    }
}

fn label(node: &Node) -> String {
    node.label()
}

impl CpuExecutable {
    /// Take a graph; constants are decoded now, params wait for `set_param`.
    pub fn new(graph: Graph) -> Result<CpuExecutable, CpuError> {
        graph.verify()?;
        let io = IoBindings::new(&graph)?;
        let mut leaves = vec![None; graph.nodes.len()];
        for n in &graph.nodes {
            if let Op::Constant { data } = &n.op {
                let dims = n.shape.static_dims().ok_or_else(|| CpuError::Op {
                    node: label(n),
                    op: "Constant",
                    msg: "constant with a dynamic dim".into(),
                })?;
                let want = (dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d)))
                    .and_then(|k| k.checked_mul(n.shape.dtype.size_bytes()));
                if want != Some(data.len()) {
                    return Err(CpuError::Op {
                        node: label(n),
                        op: "Constant",
                        msg: format!("{} bytes for shape {}", data.len(), n.shape),
                    });
                }
                let what = || format!("constant {}", label(n));
                leaves[n.id.0] = Some(alloc::decode(data, n.shape.dtype, &what)?);
            }
        }
        let in_place_params = (graph.nodes.iter())
            .flat_map(|n| n.op.written_inputs().iter().map(|&k| n.inputs[k].0))
            .filter(|&t| matches!(graph.nodes[t].op, Op::Param { .. }))
            .collect();
        Ok(CpuExecutable {
            io,
            leaves: RwLock::new(leaves),
            mode: PlanMode::Reuse,
            plans: Mutex::new(Vec::new()),
            pool: ArenaPool::default(),
            in_place_params,
            comm: None,
            quant_act: QuantAct::F32,
            collective: graph.nodes.iter().any(|n| n.op.kind().is_collective()),
            graph,
        })
    }

    /// Make this executable one rank of `comm`'s group: its collectives exchange values
    /// with the other ranks' executables, which must run the same graph.
    pub fn set_communicator(&mut self, comm: Arc<dyn Communicator>) {
        self.comm = Some(comm);
    }

    /// Choose the numerics of DequantMatMul / FusedDequantMatMul with a quantised weight
    /// ([`QuantAct::Q8`]: llama.cpp's 8-bit activations and integer block dots).
    pub fn set_quant_act(&mut self, quant_act: QuantAct) {
        self.quant_act = quant_act;
    }

    pub fn quant_act(&self) -> QuantAct {
        self.quant_act
    }

    /// The group this executable is a rank of, if any.
    pub fn communicator(&self) -> Option<&Arc<dyn Communicator>> {
        self.comm.as_ref()
    }

    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The graph's input/param binding table.
    pub fn io(&self) -> &IoBindings {
        &self.io
    }

    /// The plan of the last run.
    fn current_plan(&self) -> Option<Arc<BoundPlan>> {
        (self.plans.lock().unwrap_or_else(PoisonError::into_inner))
            .last()
            .cloned()
    }

    /// How many plans are cached (one per recent binding of dynamic dims).
    pub fn cached_plans(&self) -> usize {
        self.plans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Arena bytes of the current plan (0 before the first run).
    pub fn arena_bytes(&self) -> usize {
        self.current_plan().map_or(0, |p| p.plan.planned_bytes)
    }

    /// Bytes held by constants and params (U8 ones as their bytes, integers as i64, floats
    /// in their compute class).
    pub fn leaf_bytes(&self) -> usize {
        let leaves = self.leaves.read().unwrap_or_else(PoisonError::into_inner);
        leaves.iter().flatten().map(Storage::bytes).sum()
    }

    /// What the arena would take with one buffer per node (0 before the first run).
    pub fn unplanned_bytes(&self) -> usize {
        self.current_plan().map_or(0, |p| p.plan.unplanned_bytes)
    }

    /// The most runs that have held an arena at the same time (1 if runs never overlapped).
    pub fn peak_concurrent_runs(&self) -> usize {
        self.pool.peak()
    }

    /// Choose the arena layout (takes effect at the next run).
    pub fn set_plan_mode(&mut self, mode: PlanMode) {
        if mode != self.mode {
            self.mode = mode;
            (self.plans.get_mut().unwrap_or_else(PoisonError::into_inner)).clear();
        }
    }

    /// Set a weight by name; its shape and dtype must match the graph's param.
    pub fn set_param(&mut self, name: &str, value: &HostTensor) -> Result<(), CpuError> {
        self.io.check_param(name, value)?;
        self.set_param_checked(name, value)
    }

    /// Set a weight whose value the binding table has already checked (waits for runs in
    /// flight). The name must still be a param's.
    pub fn set_param_checked(&self, name: &str, value: &HostTensor) -> Result<(), CpuError> {
        let id = self.io.param(name)?.node.0;
        let what = || format!("param \"{name}\"");
        // Converted before taking the lock, so runs are held up only by the store.
        let v = alloc::storage_of(value, &what)?;
        self.leaves.write().unwrap_or_else(PoisonError::into_inner)[id] = Some(v);
        Ok(())
    }

    /// `set_param_checked` with the value handed over: U8 bytes (packed quantised weights,
    /// most of a model) become the leaf without a copy.
    pub fn set_param_owned_checked(&self, name: &str, value: HostTensor) -> Result<(), CpuError> {
        let id = self.io.param(name)?.node.0;
        let what = || format!("param \"{name}\"");
        let v = alloc::storage_from(value, &what)?;
        self.leaves.write().unwrap_or_else(PoisonError::into_inner)[id] = Some(v);
        Ok(())
    }

    /// Set a U8 param (packed weights) to bytes shared with their owner, without a copy —
    /// a range of a mapped model file. Its dims and length are checked against the param.
    pub fn set_param_shared(
        &self,
        name: &str,
        shape: &[usize],
        bytes: SharedBytes,
    ) -> Result<(), CpuError> {
        let b = self.io.param(name)?;
        b.check_parts(shape, DType::U8, bytes.len())?;
        let id = b.node.0;
        self.leaves.write().unwrap_or_else(PoisonError::into_inner)[id] =
            Some(Storage::U8(LeafBytes::Shared(bytes)));
        Ok(())
    }

    /// Check inputs (and that every param is set) for the `&mut self` entry points, which
    /// callers use without a session in front.
    fn check<'a>(
        &self,
        inputs: &'a [(&'a str, HostTensor)],
    ) -> Result<CheckedInputs<'a>, CpuError> {
        let checked = self.io.check_inputs(inputs.iter().map(|(n, t)| (*n, t)))?;
        let leaves = self.leaves.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(p) = self.io.params().iter().find(|p| leaves[p.node.0].is_none()) {
            return Err(CpuError::Param {
                name: p.name.clone(),
                msg: "not set: call set_param first".into(),
            });
        }
        Ok(checked)
    }

    /// Run with named inputs; returns the graph's outputs in order.
    pub fn run(&mut self, inputs: &[(&str, HostTensor)]) -> Result<Vec<HostTensor>, CpuError> {
        let checked = self.check(inputs)?;
        self.run_checked(&checked, &[], Want::Outputs { skip: &[] })
    }

    /// Run and return every node's value (leaves included), indexed by node id.
    /// Used by verify mode to find the first diverging node.
    pub fn run_all(&mut self, inputs: &[(&str, HostTensor)]) -> Result<Vec<HostTensor>, CpuError> {
        self.set_plan_mode(PlanMode::KeepAll);
        let checked = self.check(inputs)?;
        self.run_checked(&checked, &[], Want::All)
    }

    /// Run with inputs the binding table has checked; params must all be set. With
    /// `writes`, output `k` then replaces param `p` for each `(k, p)` (the run holds the
    /// params exclusively); outputs listed there are left out unless `return_written`.
    /// Runs without writes share the params and proceed in parallel.
    pub fn run_bound(
        &self,
        inputs: &CheckedInputs,
        writes: &[(usize, &str)],
        return_written: bool,
    ) -> Result<Vec<HostTensor>, CpuError> {
        let mut targets = Vec::with_capacity(writes.len());
        for &(out, name) in writes {
            targets.push((out, self.io.param(name)?.node.0));
        }
        let skip: Vec<usize> = if return_written {
            vec![]
        } else {
            targets.iter().map(|t| t.0).collect()
        };
        self.run_checked(inputs, &targets, Want::Outputs { skip: &skip })
    }

    /// The plan for these dynamic-dim sizes: a cached one (moved to the most recent end),
    /// or a new one, which evicts the least recently used when the cache is full.
    fn plan_for(&self, dims: &DimBindings) -> Result<Arc<BoundPlan>, CpuError> {
        let mut plans = self.plans.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = plans.iter().position(|p| p.dims == *dims) {
            let p = plans.remove(i);
            plans.push(p.clone());
            return Ok(p);
        }
        let p = Arc::new(BoundPlan {
            dims: dims.clone(),
            plan: make_plan(&self.graph, dims, self.mode)?,
        });
        if plans.len() >= PLAN_CACHE {
            plans.remove(0);
        }
        plans.push(p.clone());
        Ok(p)
    }

    /// The run itself: `writes` holds `(output index, param node id)`.
    fn run_checked(
        &self,
        inputs: &CheckedInputs,
        writes: &[(usize, usize)],
        want: Want,
    ) -> Result<Vec<HostTensor>, CpuError> {
        let bp = self.plan_for(inputs.dims())?;
        let plan = &bp.plan;
        let mut arena = self
            .pool
            .checkout(plan.sizes, self.graph.nodes.len(), &self.graph.name)?;
        for &(name, t) in inputs.tensors() {
            let id = self.io.input(name)?.node.0;
            let what = || format!("input \"{name}\"");
            arena.inputs[id] = Some(alloc::storage_of(t, &what)?);
        }
        if writes.is_empty() && self.in_place_params.is_empty() {
            let leaves = self.leaves.read().unwrap_or_else(PoisonError::into_inner);
            self.in_pool(|| self.execute_plan(plan, &mut arena, &leaves))?;
            return self.collect(plan, &arena, &leaves, &want);
        }
        let mut leaves = self.leaves.write().unwrap_or_else(PoisonError::into_inner);
        // Params written in place move into this run's slots (found first by `Leaves::get`)
        // and come back whatever the run's outcome.
        for &t in &self.in_place_params {
            arena.inputs[t] = leaves[t].take();
        }
        let run = self
            .in_pool(|| self.execute_plan(plan, &mut arena, &leaves))
            .and_then(|()| self.collect(plan, &arena, &leaves, &want));
        for &t in &self.in_place_params {
            leaves[t] = arena.inputs[t].take();
        }
        let values = run?;
        self.write_back(plan, &arena, &mut leaves, writes)?;
        Ok(values)
    }

    /// The values a run returns, in fresh (fallibly allocated) host tensors.
    fn collect(
        &self,
        plan: &Plan,
        arena: &Arena,
        leaves: &[Option<Storage>],
        want: &Want,
    ) -> Result<Vec<HostTensor>, CpuError> {
        let ids: Vec<usize> = match want {
            Want::All => (0..self.graph.nodes.len()).collect(),
            Want::Outputs { skip } => (self.graph.outputs.iter().enumerate())
                .filter(|(k, _)| !skip.contains(k))
                .map(|(_, o)| o.0)
                .collect(),
        };
        let mut out = Vec::with_capacity(ids.len());
        for i in ids {
            let node = &self.graph.nodes[i];
            let buf = buf_of(plan, arena, leaves, node)?;
            let what = || format!("the value of node {}", label(node));
            out.push(alloc::tensor_of(
                buf,
                &plan.shapes[i],
                node.shape.dtype,
                &what,
            )?);
        }
        Ok(out)
    }

    /// Run `f` on a thread of rayon's pool: the ops' parallel loops then split work inside
    /// the pool, where a caller outside it would hand every op's loop over and sleep until
    /// it is done — a decode step is ~300 small ops, and those hand-offs were a quarter of
    /// its time on 2 cores. Graphs with collectives stay on the caller's thread: their ranks
    /// wait for one another inside a run, and ranks parked on all the pool's threads would
    /// leave none for the rank they wait for.
    fn in_pool<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        if self.collective {
            f()
        } else {
            rayon::scope(|_| f())
        }
    }

    fn execute_plan(
        &self,
        plan: &Plan,
        arena: &mut Arena,
        leaves: &[Option<Storage>],
    ) -> Result<(), CpuError> {
        let arenas = Arenas {
            f32: (arena.f32.as_mut_ptr(), arena.f32.len()),
            f64: (arena.f64.as_mut_ptr(), arena.f64.len()),
            i64: (arena.i64.as_mut_ptr(), arena.i64.len()),
        };
        let shared = leaves;
        for (i, node) in self.graph.nodes.iter().enumerate() {
            if node.op.kind().is_in_place() {
                self.write_in_place(plan, &arenas, shared, &mut arena.inputs, node)?;
                continue;
            }
            if let Op::CachedAttention { spec, rope } = &node.op {
                // This call's rows go into both caches first (k rotated as RopeCacheWrite
                // does), then the node's thunk attends over the written caches.
                let ins = &node.inputs;
                let krot = rope.map(|r| (spec.head_dim, r.n_rot, r.style, [ins[6], ins[7]]));
                let rows = [(ins[3], ins[1], krot), (ins[4], ins[2], None)];
                for (cache, new, rot) in rows {
                    let w = RowWrite {
                        target: cache.0,
                        new: new.0,
                        pos: ins[5].0,
                        axis: 1,
                        rope: rot.map(|(d, n, s, t)| (d, n, s, t.map(|i| i.0))),
                    };
                    self.write_rows(plan, &arenas, shared, &mut arena.inputs, node, w)?;
                }
            }
            let leaves = Leaves {
                shared,
                inputs: &arena.inputs,
            };
            let Loc::Arena { pool, off, len } = plan.locs[i] else {
                continue;
            };
            if plan.is_view[i] {
                continue;
            }
            // The plan promises an output never overlaps a live input; check it, since the
            // slices below are built from raw pointers on that promise.
            for &inp in &node.inputs {
                if let Loc::Arena {
                    pool: p,
                    off: o,
                    len: l,
                } = plan.locs[inp.0]
                {
                    if p == pool && o < off + len && off < o + l {
                        return Err(CpuError::Op {
                            node: label(node),
                            op: node.op.kind().name(),
                            msg: format!("memory plan overlaps output with input {inp}"),
                        });
                    }
                }
            }
            let mut datas = Vec::with_capacity(node.inputs.len());
            for &inp in &node.inputs {
                let j = inp.0;
                // SAFETY: bounds are checked in read_loc; the output slice below is disjoint
                // from every input (checked above) and from leaf storage.
                let data = unsafe { read_loc(&arenas, &leaves, plan.locs[j]) }
                    .ok_or_else(|| no_value(&self.graph.nodes[j]))?;
                datas.push(data);
            }
            let widened = widen_bytes(node, &datas)?;
            let mut ins = Vec::with_capacity(node.inputs.len());
            for ((&inp, data), w) in node.inputs.iter().zip(datas).zip(&widened) {
                let j = inp.0;
                ins.push(TensorView {
                    shape: &plan.shapes[j],
                    dtype: self.graph.nodes[j].shape.dtype,
                    data: w.as_deref().map_or(data, Buf::I64),
                });
            }
            let dtype = node.shape.dtype;
            // SAFETY: see above.
            let out = unsafe { arenas.out(pool, off, len) }.ok_or_else(|| CpuError::Op {
                node: label(node),
                op: node.op.kind().name(),
                msg: "memory plan slot lies outside the arena".into(),
            })?;
            let out_view = OutView {
                shape: &plan.shapes[i],
                dtype,
                data: out,
            };
            let node = plan.bound[i].as_ref().unwrap_or(node);
            let done = if node.op.kind().is_collective() {
                let tag = format!("{} {}", node.op.kind(), label(node));
                crate::comm::run(&node.op, &tag, self.comm.as_deref(), &ins[0], out_view)
            } else {
                crate::ops::eval_with(node, &ins, out_view, self.quant_act)
            };
            done.map_err(|e| match e {
                CpuError::Op { msg, .. } => CpuError::Op {
                    node: label(node),
                    op: node.op.kind().name(),
                    msg,
                },
                other => other,
            })?;
            // SAFETY: the thunk's borrows have ended.
            if let Some(out) = unsafe { arenas.out(pool, off, len) } {
                normalise(out, dtype);
            }
        }
        Ok(())
    }
}

/// For an op that does not read bytes, an i64 copy of each U8 leaf input (`None` where the
/// input is used as it is). A thunk only ever sees one class per integer tensor this way.
fn widen_bytes(node: &Node, datas: &[Buf]) -> Result<Vec<Option<Vec<i64>>>, CpuError> {
    let keep = reads_bytes(&node.op);
    datas
        .iter()
        .map(|d| match d {
            Buf::U8(s) if !keep => {
                let what = || format!("an i64 copy of a U8 input of node {}", label(node));
                let mut v = alloc::with_capacity(s.len(), &what)?;
                v.extend(s.iter().map(|&b| b as i64));
                Ok(Some(v))
            }
            _ => Ok(None),
        })
        .collect()
}

fn no_value(n: &Node) -> CpuError {
    CpuError::Op {
        node: label(n),
        op: n.op.kind().name(),
        msg: match &n.op {
            Op::Param { name } => format!("param \"{name}\" is not set: call set_param first"),
            Op::Input { name } => format!("input \"{name}\" was not fed"),
            _ => "no value (or a plan range outside it)".into(),
        },
    }
}

/// The value of node `n` after a run (a shared borrow of the arena: nothing writes it).
fn buf_of<'a>(
    plan: &Plan,
    arena: &'a Arena,
    leaves: &'a [Option<Storage>],
    n: &Node,
) -> Result<Buf<'a>, CpuError> {
    let arenas = Arenas {
        f32: (arena.f32.as_ptr() as *mut f32, arena.f32.len()),
        f64: (arena.f64.as_ptr() as *mut f64, arena.f64.len()),
        i64: (arena.i64.as_ptr() as *mut i64, arena.i64.len()),
    };
    let leaves = Leaves {
        shared: leaves,
        inputs: &arena.inputs,
    };
    // SAFETY: the shared borrow of the arena covers 'a; nothing writes it meanwhile.
    unsafe { read_loc(&arenas, &leaves, plan.locs[n.id.0]) }.ok_or_else(|| no_value(n))
}

/// Where leaf values live during a run: the run's inputs, else the shared constants and params.
struct Leaves<'a> {
    shared: &'a [Option<Storage>],
    inputs: &'a [Option<Storage>],
}

impl<'a> Leaves<'a> {
    fn get(&self, node: usize) -> Option<&'a Storage> {
        (self.inputs.get(node)?.as_ref()).or_else(|| self.shared.get(node)?.as_ref())
    }
}

/// Raw views of the three arenas, so one node's output and its inputs (disjoint ranges of
/// the same arena, as planned) can be borrowed at once.
struct Arenas {
    f32: (*mut f32, usize),
    f64: (*mut f64, usize),
    i64: (*mut i64, usize),
}

impl Arenas {
    /// # Safety
    /// The range must not be borrowed elsewhere while the slice lives.
    unsafe fn out<'a>(&self, pool: usize, off: usize, len: usize) -> Option<BufMut<'a>> {
        let fits = |n: usize| off.checked_add(len).is_some_and(|e| e <= n);
        match pool {
            0 if fits(self.f32.1) => Some(BufMut::F32(std::slice::from_raw_parts_mut(
                self.f32.0.add(off),
                len,
            ))),
            1 if fits(self.f64.1) => Some(BufMut::F64(std::slice::from_raw_parts_mut(
                self.f64.0.add(off),
                len,
            ))),
            2 if fits(self.i64.1) => Some(BufMut::I64(std::slice::from_raw_parts_mut(
                self.i64.0.add(off),
                len,
            ))),
            _ => None,
        }
    }
}

/// The values at `loc`, or `None` for an unset leaf or a range outside its storage.
///
/// # Safety
/// The range must not be mutably borrowed while the returned view lives.
unsafe fn read_loc<'a>(arenas: &Arenas, leaves: &Leaves<'a>, loc: Loc) -> Option<Buf<'a>> {
    match loc {
        Loc::Leaf { node, off, len } => {
            let r = off..off.checked_add(len)?;
            Some(match leaves.get(node)?.as_buf() {
                Buf::F32(s) => Buf::F32(s.get(r)?),
                Buf::F64(s) => Buf::F64(s.get(r)?),
                Buf::I64(s) => Buf::I64(s.get(r)?),
                Buf::U8(s) => Buf::U8(s.get(r)?),
            })
        }
        Loc::Arena { pool, off, len } => {
            let fits = |n: usize| off.checked_add(len).is_some_and(|e| e <= n);
            match pool {
                0 if fits(arenas.f32.1) => Some(Buf::F32(std::slice::from_raw_parts(
                    arenas.f32.0.add(off),
                    len,
                ))),
                1 if fits(arenas.f64.1) => Some(Buf::F64(std::slice::from_raw_parts(
                    arenas.f64.0.add(off),
                    len,
                ))),
                2 if fits(arenas.i64.1) => Some(Buf::I64(std::slice::from_raw_parts(
                    arenas.i64.0.add(off),
                    len,
                ))),
                _ => None,
            }
        }
    }
}

/// Build, run once and return the outputs: the shortest path from a graph to numbers.
pub fn run_graph(
    graph: &Graph,
    params: &[(&str, HostTensor)],
    inputs: &[(&str, HostTensor)],
) -> Result<Vec<HostTensor>, CpuError> {
    let mut exe = CpuExecutable::new(graph.clone())?;
    for (n, t) in params {
        exe.set_param(n, t)?;
    }
    exe.run(inputs)
}
