//! The CUDA executable: params resident on the device, one planned arena per binding of the
//! dynamic dims, the lowered steps captured into CUDA graphs (one per run of consecutive GPU
//! steps; a CPU-fallback node splits them), replayed per run.
use crate::device::{DevBuf, Gpu, PinnedBuf, StreamSet};
use crate::lower::DevTensor;
use crate::{CudaError, Precision};
use cudarc::driver::{result as drv, sys};
use replay::{upload, Segment};
use rlx_cpu::CpuExecutable;
use rlx_ir::{CheckedInputs, DimBindings, Graph, HostTensor, IoBindings, Node, NodeId, Op};
use std::collections::HashMap;
use std::sync::Arc;

/// Per-compile options of the CUDA backend.
#[derive(Clone, Debug, PartialEq)]
pub struct CudaOptions {
    pub precision: Precision,
    /// Capture the launches into a CUDA graph (`RLX_CUDA_GRAPH=0` turns it off).
    pub cuda_graph: bool,
    /// Run the CPU reference beside the GPU and report the first diverging node (`RLX_VERIFY=1`).
    pub verify: bool,
    /// Where a lowering has several kernel variants, take variant `k` (or its last one)
    /// instead of timing them: lets tests check every variant. `None`: the fastest.
    pub force_variant: Option<usize>,
    /// Hold the packed weights that only f32 products read in the planar row layout
    /// (`crate::planar`; `RLX_PLANAR=1`).
    pub planar: bool,
}

impl Default for CudaOptions {
    fn default() -> Self {
        CudaOptions {
            precision: Precision::F32,
            cuda_graph: rlx_ir::env::flag(rlx_ir::env::Switch::CudaGraph),
            verify: rlx_ir::env::flag(rlx_ir::env::Switch::Verify),
            force_variant: None,
            planar: rlx_ir::env::flag(rlx_ir::env::Switch::Planar),
        }
    }
}

impl CudaOptions {
    /// Strict f32, environment switches applied.
    pub fn strict() -> CudaOptions {
        CudaOptions::default()
    }
}

mod build;
mod l2_prefetch;
mod prewarm;
mod profile;
mod qkv_views;
mod replay;
pub use profile::ProfileRow;

fn trace_on() -> bool {
    rlx_ir::env::flag(rlx_ir::env::Switch::Trace)
}

/// One lowering for one binding of the dynamic dims.
struct Plan {
    tensors: Vec<DevTensor>,
    /// Each input's offset in `input_buf` (256-byte slots in node order).
    inputs: HashMap<usize, usize>,
    input_bytes: usize,
    input_buf: DevBuf,
    segments: Vec<Segment>,
    dispatch: Vec<(NodeId, rlx_ir::OpKind, Option<String>)>,
    arena_bytes: usize,
    _arena: DevBuf,
    _scratch: Vec<DevBuf>,
    /// Dropped after `segments` (their captured graphs use them).
    _events: crate::nccl::PlanEvents,
}

// SAFETY: raw CUDA handles inside are only used under the owning executable's &mut self.
unsafe impl Send for Plan {}

pub struct CudaExecutable {
    gpu: Arc<Gpu>,
    streams: StreamSet,
    graph: Graph,
    opts: CudaOptions,
    /// Params and constants, by node id.
    leaves: HashMap<usize, DevBuf>,
    /// The leaves held in the planar row layout (`crate::planar`), by node id.
    planar: HashMap<usize, rlx_ir::QuantScheme>,
    param_set: Vec<bool>,
    plan: Option<Plan>,
    /// The dynamic-dim sizes the current plan was built for.
    bindings: DimBindings,
    /// Plans of other bindings seen lately (most recent last), so a decoder that alternates
    /// prefill lengths with its one-token step keeps every captured graph.
    spare: Vec<(DimBindings, Plan)>,
    /// Name → node / declared shape of every input and param.
    io: IoBindings,
    reference: Option<CpuExecutable>,
    /// Page-locked staging of a run's inputs and outputs (grown as needed).
    staging: Option<PinnedBuf>,
    /// The NCCL group this executable is one rank of (none: a group of one).
    comm: Option<Arc<crate::nccl::NcclComm>>,
}

fn node_err(n: &Node, msg: impl Into<String>) -> CudaError {
    CudaError::Node {
        node: n.label(),
        msg: msg.into(),
    }
}

fn bytes_of(dims: &[usize], n: &Node) -> usize {
    dims.iter().product::<usize>() * n.shape.dtype.size_bytes()
}

impl CudaExecutable {
    /// Prepare `graph` for GPU `ordinal`: params get resident device buffers now (their
    /// shapes must be static), constants are uploaded once.
    pub fn new(
        graph: Graph,
        ordinal: usize,
        opts: CudaOptions,
    ) -> Result<CudaExecutable, CudaError> {
        CudaExecutable::new_rank(graph, ordinal, opts, None)
    }

    /// [`CudaExecutable::new`] as one rank of `comm`'s NCCL group (which must live on GPU
    /// `ordinal`): the graph's collectives become NCCL calls over it.
    pub fn new_rank(
        graph: Graph,
        ordinal: usize,
        opts: CudaOptions,
        comm: Option<Arc<crate::nccl::NcclComm>>,
    ) -> Result<CudaExecutable, CudaError> {
        if let Some(c) = comm.as_ref().filter(|c| c.ordinal() != ordinal) {
            return Err(CudaError::Nccl {
                call: "CudaExecutable::new_rank",
                msg: format!("{c:?} cannot serve a graph on cuda:{ordinal}"),
            });
        }
        // The verify reference is one process's CPU run: over several ranks its collectives
        // would be identities, and every node after one would read as diverging.
        if let Some(c) = comm.as_ref().filter(|c| opts.verify && c.ranks() > 1) {
            return Err(CudaError::Nccl {
                call: "CudaExecutable::new_rank",
                msg: format!(
                    "verify mode (RLX_VERIFY) checks against a one-process CPU run and cannot                      check {c:?}; unset it for mesh runs (the sharded paths are checked on                      simulated CPU ranks by the tests)"
                ),
            });
        }
        graph.verify()?;
        let io = IoBindings::new(&graph)?;
        let gpu = Gpu::get(ordinal)?;
        let streams = StreamSet::new(&gpu)?;
        let planar = match opts.planar {
            true => crate::planar::choose(&graph),
            false => HashMap::new(),
        };
        let mut leaves = HashMap::new();
        for n in &graph.nodes {
            match &n.op {
                Op::Param { .. } | Op::Constant { .. } => {
                    let dims = n.shape.static_dims().ok_or_else(|| {
                        node_err(
                            n,
                            format!("params and constants need static shapes, got {}", n.shape),
                        )
                    })?;
                    let buf = DevBuf::new(&gpu, bytes_of(&dims, n))?;
                    if let Op::Constant { data } = &n.op {
                        match planar.get(&n.id.0) {
                            Some(&s) => {
                                upload(&streams, buf.ptr, &crate::planar::pack(s, data, dims[1]))?
                            }
                            None => upload(&streams, buf.ptr, data)?,
                        }
                    }
                    leaves.insert(n.id.0, buf);
                }
                _ => {}
            }
        }
        let param_set = vec![false; graph.nodes.len()];
        let mut exe = CudaExecutable {
            gpu,
            streams,
            graph,
            opts,
            leaves,
            planar,
            param_set,
            plan: None,
            bindings: DimBindings::new(),
            spare: Vec::new(),
            io,
            reference: None,
            staging: None,
            comm,
        };
        // A graph without dynamic dims is lowered now, so the dispatch report is complete at
        // compile time and the first run pays no compilation.
        if exe.graph.inputs().all(|(_, s)| s.is_static()) {
            exe.plan = Some(exe.build_plan(&HashMap::new())?);
        }
        Ok(exe)
    }

    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The params held in the planar row layout (`CudaOptions::planar`), by name.
    pub fn planar_params(&self) -> Vec<String> {
        let mut v: Vec<String> = (self.planar.keys())
            .filter_map(|&i| match &self.graph.nodes[i].op {
                Op::Param { name } => Some(name.clone()),
                _ => None,
            })
            .collect();
        v.sort();
        v
    }

    pub fn gpu_name(&self) -> &str {
        &self.gpu.name
    }

    fn param_node(&self, name: &str) -> Result<&Node, CudaError> {
        Ok(&self.graph.nodes[self.io.param(name)?.node.0])
    }

    /// Upload a param (checked against its declaration by the binding table).
    pub fn set_param(&mut self, name: &str, value: &HostTensor) -> Result<(), CudaError> {
        let _dev = self.gpu.lock();
        let node = self.io.check_param(name, value)?.node.0;
        let buf = &self.leaves[&node];
        self.gpu.bind()?;
        match self.planar.get(&node) {
            Some(&s) => {
                let rb = value.shape.last().copied().unwrap_or(0);
                upload(
                    &self.streams,
                    buf.ptr,
                    &crate::planar::pack(s, &value.data, rb),
                )?
            }
            None => upload(&self.streams, buf.ptr, &value.data)?,
        }
        self.param_set[node] = true;
        if let Some(r) = &mut self.reference {
            r.set_param(name, value)?;
        }
        Ok(())
    }

    /// The current device value of a param.
    pub fn param_value(&self, name: &str) -> Result<HostTensor, CudaError> {
        let n = self.param_node(name)?;
        let dims = n.shape.static_dims().unwrap_or_default();
        let rb = dims.last().copied().unwrap_or(0);
        let mut t = self.download(&DevTensor {
            ptr: self.leaves[&n.id.0].ptr,
            dims,
            dtype: n.shape.dtype,
        })?;
        if let Some(&s) = self.planar.get(&n.id.0) {
            t.data = crate::planar::unpack(s, &t.data, rb);
        }
        Ok(t)
    }

    /// What the device holds for input `name` in the current plan (what the last run read):
    /// lets tests check that a run's uploads landed and nothing overwrote them.
    pub fn input_value(&self, name: &str) -> Result<HostTensor, CudaError> {
        let id = self.io.input(name)?.node.0;
        let plan = self.plan.as_ref().ok_or_else(|| CudaError::Node {
            node: name.into(),
            msg: "no plan yet: run first".into(),
        })?;
        self.download(&plan.tensors[id])
    }

    fn download(&self, t: &DevTensor) -> Result<HostTensor, CudaError> {
        let _dev = self.gpu.lock();
        self.gpu.bind()?;
        replay::download(&self.streams, t)
    }

    /// Per compute node of the current plan: id, op kind, and `Some(reason)` when it runs on
    /// the CPU. Empty before the first run.
    pub fn dispatch(&self) -> Vec<(NodeId, rlx_ir::OpKind, Option<String>)> {
        self.plan
            .as_ref()
            .map(|p| p.dispatch.clone())
            .unwrap_or_default()
    }

    /// Device bytes of the current plan's arena.
    pub fn arena_bytes(&self) -> usize {
        self.plan.as_ref().map_or(0, |p| p.arena_bytes)
    }

    /// Check inputs against the binding table (and that every param is set), for the
    /// entry points that take plain `(name, tensor)` pairs; the `_bound` ones trust
    /// inputs a session checked.
    pub fn check<'a>(
        &self,
        inputs: &'a [(&'a str, HostTensor)],
    ) -> Result<CheckedInputs<'a>, CudaError> {
        let checked = self.io.check_inputs(inputs.iter().map(|(n, t)| (*n, t)))?;
        if let Some(p) = self.io.params().iter().find(|p| !self.param_set[p.node.0]) {
            let n = &self.graph.nodes[p.node.0];
            return Err(node_err(n, "param not set: call set_param first"));
        }
        Ok(checked)
    }

    /// Run with named inputs; returns the graph's outputs.
    pub fn run(&mut self, inputs: &[(&str, HostTensor)]) -> Result<Vec<HostTensor>, CudaError> {
        let checked = self.check(inputs)?;
        Ok(self
            .run_bound(&checked, &[], true)?
            .into_iter()
            .flatten()
            .collect())
    }

    /// `run_bound` on plain inputs, checked first.
    pub fn run_writeback(
        &mut self,
        inputs: &[(&str, HostTensor)],
        writes: &[(usize, &str)],
        return_updated: bool,
    ) -> Result<Vec<Option<HostTensor>>, CudaError> {
        let checked = self.check(inputs)?;
        self.run_bound(&checked, writes, return_updated)
    }

    /// Run on checked inputs (every param set: `check` or the session made sure), then copy
    /// output `k` over param `p` for each `(k, p)` in `writes` (on the device). Outputs
    /// bound to a param are returned only when `return_updated`; the others always (`None`
    /// in place of a skipped one).
    pub fn run_bound(
        &mut self,
        inputs: &CheckedInputs,
        writes: &[(usize, &str)],
        return_updated: bool,
    ) -> Result<Vec<Option<HostTensor>>, CudaError> {
        let outs: Vec<NodeId> = self.graph.outputs.clone();
        let wanted = |k: usize| return_updated || !writes.iter().any(|(o, _)| *o == k);
        self.run_staged(inputs, writes, &wanted, |plan, host, placed| {
            placed
                .iter()
                .zip(&outs)
                .map(|(at, id)| {
                    at.map(|off| {
                        let t = &plan.tensors[id.0];
                        HostTensor {
                            shape: t.dims.clone(),
                            dtype: t.dtype,
                            data: host[off..off + t.bytes()].to_vec(),
                        }
                    })
                })
                .collect()
        })
    }

    /// Run on checked inputs and write output `k`'s values as f32 into `out` (its capacity
    /// reused): one copy from the page-locked buffer, no allocation once `out` has grown —
    /// a decode step's logits (600 KB for a 152k vocabulary) cost a fresh allocation's page
    /// faults and two copies through `run_bound`.
    pub fn run_output_f32(
        &mut self,
        inputs: &CheckedInputs,
        k: usize,
        out: &mut Vec<f32>,
    ) -> Result<(), CudaError> {
        let Some(&id) = self.graph.outputs.get(k) else {
            return Err(CudaError::Node {
                node: format!("output {k}"),
                msg: format!("the graph has {} outputs", self.graph.outputs.len()),
            });
        };
        let wanted = |j: usize| j == k;
        self.run_staged(inputs, &[], &wanted, |plan, host, placed| {
            let t = &plan.tensors[id.0];
            let off = placed[k].expect("wanted output placed");
            HostTensor::decode_f32_into(t.dtype, &host[off..off + t.bytes()], out);
        })
    }

    /// The body of every run: plan, staged inputs, replay, bound writes, then `consume`
    /// reads the wanted outputs from the page-locked buffer (`placed[k]`: output k's offset).
    fn run_staged<R>(
        &mut self,
        inputs: &CheckedInputs,
        writes: &[(usize, &str)],
        wanted: &dyn Fn(usize) -> bool,
        consume: impl FnOnce(&Plan, &[u8], &[Option<usize>]) -> R,
    ) -> Result<R, CudaError> {
        // Runs in different threads share the device: their uploads, launches and downloads
        // are serialised with each other and with plan building (see `device_lock`).
        let _dev = self.gpu.lock();
        for (_, pname) in writes {
            if self.planar.contains_key(&self.param_node(pname)?.id.0) {
                return Err(CudaError::Node {
                    node: (*pname).to_string(),
                    msg: "this packed weight is stored in the planar layout (RLX_PLANAR=1), \
                          which runs do not write; unset RLX_PLANAR to update it"
                        .into(),
                });
            }
        }
        self.gpu.bind()?;
        if self.plan.is_none() || *inputs.dims() != self.bindings {
            self.switch_plan(inputs.dims())?;
        }
        let reference = if self.opts.verify {
            Some(self.reference_values(inputs)?)
        } else {
            None
        };
        let stream = self.streams.stream;
        let outs: Vec<NodeId> = self.graph.outputs.clone();
        // One page-locked buffer holds this run's inputs, then its outputs (256-byte slots).
        let slot = |b: usize| b.div_ceil(256) * 256;
        let plan = self.plan.as_ref().expect("plan");
        let need = std::iter::once(plan.input_bytes)
            .chain(
                (outs.iter().enumerate())
                    .filter(|(k, _)| wanted(*k))
                    .map(|(_, id)| slot(plan.tensors[id.0].bytes())),
            )
            .sum::<usize>();
        if self.staging.as_ref().is_none_or(|s| s.bytes < need) {
            self.staging = Some(PinnedBuf::new(&self.gpu, need.next_power_of_two())?);
        }
        let mut staging = self.staging.take().expect("staging");
        let run = self.replay_staged(inputs, &outs, wanted, staging.as_mut_slice());
        let placed = match run {
            Ok(p) => p,
            Err(e) => {
                // Finish whatever was queued before the buffer is reused.
                // SAFETY: stream is live.
                let _ = unsafe { drv::stream::synchronize(stream) };
                self.staging = Some(staging);
                return Err(e);
            }
        };
        let plan = self.plan.as_ref().expect("plan");
        if let Some(want) = reference {
            self.compare_reference(&want)?;
        }
        for (k, pname) in writes {
            let id = outs.get(*k).ok_or_else(|| CudaError::Node {
                node: format!("output {k}"),
                msg: "no such output".into(),
            })?;
            let src = &plan.tensors[id.0];
            let pid = self.param_node(pname)?.id.0;
            let dst = self.leaves[&pid].ptr;
            if src.ptr != dst {
                // SAFETY: both buffers hold src.bytes() bytes (shapes checked by bind_update).
                unsafe { drv::memcpy_dtod_async(dst, src.ptr, src.bytes(), stream) }
                    .map_err(|e| CudaError::driver("cuMemcpyDtoDAsync", e))?;
            }
        }
        // SAFETY: stream is live.
        let synced = unsafe { drv::stream::synchronize(stream) }
            .map_err(|e| CudaError::driver("cuStreamSynchronize (a kernel failed)", e));
        if let Err(e) = synced {
            self.staging = Some(staging);
            return Err(e);
        }
        let result = consume(plan, staging.as_slice(), &placed);
        self.staging = Some(staging);
        Ok(result)
    }

    /// Queue a run through the page-locked `host` buffer: the inputs copied in and uploaded,
    /// the plan replayed, the wanted outputs downloaded after them. Returns each output's
    /// offset in `host` (`None` when not wanted); the caller synchronises before reading.
    fn replay_staged(
        &self,
        inputs: &CheckedInputs,
        outs: &[NodeId],
        wanted: &dyn Fn(usize) -> bool,
        host: &mut [u8],
    ) -> Result<Vec<Option<usize>>, CudaError> {
        let stream = self.streams.stream;
        let plan = self.plan.as_ref().expect("plan");
        // Each input at its slot of the plan's input block; one copy uploads them all when
        // every input is given (a decode step's four took four copies, each a driver call
        // and a transfer the replay waited behind), else each given one alone.
        let all = inputs.tensors().len() == plan.inputs.len();
        for &(name, t) in inputs.tensors() {
            let id = self.io.input(name)?.node.0;
            let (off, n) = (plan.inputs[&id], t.data.len());
            host[off..off + n].copy_from_slice(&t.data);
            if !all {
                // On the run's stream, so the replay below is ordered after it.
                // SAFETY: the slot was sized from these very dims in build_plan; the staged
                // bytes stay untouched until the caller's synchronisation.
                let dst = plan.input_buf.ptr + off as u64;
                unsafe { drv::memcpy_htod_async(dst, &host[off..off + n], stream) }
                    .map_err(|e| CudaError::driver("cuMemcpyHtoDAsync", e))?;
            }
        }
        if all && plan.input_bytes > 0 {
            // SAFETY: input_buf holds input_bytes bytes, every slot was just staged (the
            // padding between slots is copied too, harmlessly); the caller synchronises.
            let src = &host[..plan.input_bytes];
            unsafe { drv::memcpy_htod_async(plan.input_buf.ptr, src, stream) }
                .map_err(|e| CudaError::driver("cuMemcpyHtoDAsync", e))?;
        }
        let mut off = plan.input_bytes;
        plan.replay(&self.streams)?;
        let mut placed = Vec::with_capacity(outs.len());
        for (k, id) in outs.iter().enumerate() {
            if !wanted(k) {
                placed.push(None);
                continue;
            }
            let t = &plan.tensors[id.0];
            let n = t.bytes();
            // SAFETY: t holds n bytes; the caller synchronises before reading the slot.
            unsafe { drv::memcpy_dtoh_async(&mut host[off..off + n], t.ptr, stream) }
                .map_err(|e| CudaError::driver("cuMemcpyDtoHAsync", e))?;
            placed.push(Some(off));
            off += n.div_ceil(256) * 256;
        }
        Ok(placed)
    }

    /// Make the plan for `dims` current: a spare one if it was built before, else a new one;
    /// the current plan becomes a spare (the oldest beyond `MAX_SPARE_PLANS` is dropped).
    fn switch_plan(&mut self, dims: &DimBindings) -> Result<(), CudaError> {
        const MAX_SPARE_PLANS: usize = 8;
        let found = self.spare.iter().position(|(d, _)| d == dims);
        let next = match found {
            Some(i) => self.spare.remove(i).1,
            None => self.build_plan(dims)?,
        };
        if let Some(cur) = self.plan.replace(next) {
            let old = std::mem::replace(&mut self.bindings, dims.clone());
            self.spare.push((old, cur));
            if self.spare.len() > MAX_SPARE_PLANS {
                self.spare.remove(0);
            }
        } else {
            self.bindings = dims.clone();
        }
        Ok(())
    }

    /// Device time of one run, as PyTorch's benchmarks measure it: inputs are uploaded once,
    /// then the plan (and the bound param updates) is replayed `warmup + iters` times; each
    /// timed replay sits between two CUDA events. Returns the median in milliseconds.
    pub fn time_replays(
        &mut self,
        inputs: &[(&str, HostTensor)],
        writes: &[(usize, &str)],
        warmup: usize,
        iters: usize,
    ) -> Result<f64, CudaError> {
        let checked = self.check(inputs)?;
        self.time_bound(&checked, writes, warmup, iters)
    }

    /// `time_replays` on checked inputs.
    pub fn time_bound(
        &mut self,
        inputs: &CheckedInputs,
        writes: &[(usize, &str)],
        warmup: usize,
        iters: usize,
    ) -> Result<f64, CudaError> {
        let _dev = self.gpu.lock();
        self.run_bound(inputs, writes, false)?;
        let stream = self.streams.stream;
        let plan = self.plan.as_ref().expect("plan after a run");
        let mut copies = Vec::new();
        for (k, pname) in writes {
            let src = &plan.tensors[self.graph.outputs[*k].0];
            let dst = self.leaves[&self.param_node(pname)?.id.0].ptr;
            if src.ptr != dst {
                copies.push((dst, src.ptr, src.bytes()));
            }
        }
        let ev = |_| {
            drv::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
                .map_err(|e| CudaError::driver("cuEventCreate", e))
        };
        let (start, end) = (ev(0)?, ev(1)?);
        let mut times = Vec::with_capacity(iters);
        for i in 0..warmup + iters {
            // SAFETY: events and stream are live; the plan's buffers outlive the replay.
            unsafe {
                drv::event::record(start, stream)
                    .map_err(|e| CudaError::driver("cuEventRecord", e))?;
            }
            plan.replay(&self.streams)?;
            for &(dst, src, bytes) in &copies {
                unsafe { drv::memcpy_dtod_async(dst, src, bytes, stream) }
                    .map_err(|e| CudaError::driver("cuMemcpyDtoDAsync", e))?;
            }
            unsafe {
                drv::event::record(end, stream)
                    .map_err(|e| CudaError::driver("cuEventRecord", e))?;
                drv::event::synchronize(end)
                    .map_err(|e| CudaError::driver("cuEventSynchronize", e))?;
                if i >= warmup {
                    times.push(
                        drv::event::elapsed(start, end)
                            .map_err(|e| CudaError::driver("cuEventElapsedTime", e))?
                            as f64,
                    );
                }
            }
        }
        // SAFETY: created above, destroyed once.
        unsafe {
            let _ = drv::event::destroy(start);
            let _ = drv::event::destroy(end);
        }
        times.sort_by(|a, b| a.total_cmp(b));
        Ok(times.get(times.len() / 2).copied().unwrap_or(0.0))
    }

    /// Verify mode: every node's value on the CPU reference for these inputs, with the
    /// params as they are on the device now.
    fn reference_values(&mut self, inputs: &CheckedInputs) -> Result<Vec<HostTensor>, CudaError> {
        if self.reference.is_none() {
            self.reference = Some(CpuExecutable::new(self.graph.clone())?);
        }
        let params: Vec<(String, HostTensor)> = self
            .graph
            .params()
            .map(|(n, _)| n.to_string())
            .collect::<Vec<_>>()
            .into_iter()
            .map(|n| self.param_value(&n).map(|v| (n, v)))
            .collect::<Result<_, _>>()?;
        let r = self.reference.as_mut().expect("reference");
        for (n, v) in &params {
            r.set_param(n, v)?;
        }
        Ok(r.run_all(&inputs.to_owned_pairs())?)
    }

    fn compare_reference(&self, want: &[HostTensor]) -> Result<(), CudaError> {
        let plan = self.plan.as_ref().expect("plan");
        for n in &self.graph.nodes {
            if n.op.is_leaf() {
                continue;
            }
            let got = self.download(&plan.tensors[n.id.0])?;
            crate::verify::check_node(n, &got, &want[n.id.0], self.opts.precision)?;
        }
        Ok(())
    }
}
