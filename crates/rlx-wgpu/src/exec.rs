//! The wgpu executable: params resident in their own buffers, one planned arena per binding
//! of the dynamic dims, pipelines and bind groups made once per plan. wgpu cannot resubmit a
//! finished command buffer, so a run records the prepared dispatches into one compute pass
//! (per run of GPU steps; a CPU-fallback node splits them) and submits it.
use crate::device::Gpu;
use crate::shader::WTensor;
use crate::WgpuError;
use rlx_cpu::CpuExecutable;
use rlx_ir::{CheckedInputs, DimBindings, Graph, HostTensor, IoBindings, Node, NodeId, Op, Shape};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

mod build;

/// Per-compile options of the wgpu backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WgpuOptions {
    /// Run the CPU reference beside the GPU and report the first diverging node (`RLX_VERIFY=1`).
    pub verify: bool,
    /// Lower as for an adapter without optional features (no subgroup operations, no f16
    /// arithmetic) whatever this one offers: the path every adapter can take, kept under
    /// test on adapters that would otherwise always take the faster one.
    pub portable: bool,
}

impl Default for WgpuOptions {
    fn default() -> Self {
        WgpuOptions {
            verify: rlx_ir::env::flag(rlx_ir::env::Switch::Verify),
            portable: false,
        }
    }
}

fn trace_on() -> bool {
    rlx_ir::env::flag(rlx_ir::env::Switch::Trace)
}

/// A recorded step: a dispatch with its bind group, or a buffer copy.
pub(crate) enum Prepared {
    Dispatch {
        pipeline: Arc<wgpu::ComputePipeline>,
        bind: wgpu::BindGroup,
        groups: [u32; 3],
        label: String,
    },
    Copy {
        src: (usize, u64),
        dst: (usize, u64),
        bytes: u64,
    },
}

pub(crate) enum Segment {
    Gpu(Vec<Prepared>),
    Cpu(Box<CpuStep>),
}

/// A node the GPU path does not lower: its one-node CPU executable, run between downloads
/// of its inputs and an upload of its output.
pub(crate) struct CpuStep {
    exe: Mutex<CpuExecutable>,
    names: Vec<String>,
    ins: Vec<WTensor>,
    out: WTensor,
    /// Where the fallback graph's further outputs go: the caches the op writes in place.
    written: Vec<WTensor>,
}

impl CpuStep {
    fn new(node: &Node, ins: Vec<WTensor>, out: WTensor) -> Result<CpuStep, WgpuError> {
        let mut g = Graph::new("cpu_fallback");
        let mut ids = Vec::with_capacity(ins.len());
        let names: Vec<String> = (0..ins.len()).map(|k| format!("in{k}")).collect();
        for (k, t) in ins.iter().enumerate() {
            ids.push(g.input(names[k].clone(), Shape::new(&t.dims, t.dtype))?);
        }
        let mut written = Vec::new();
        match &node.op {
            // The CPU would write its own copies of the caches: here they live on the device,
            // so the fallback is the ops it stands for, the written caches outputs too.
            Op::CachedAttention { spec, rope } => {
                let (mut q, mut k) = (ids[0], ids[1]);
                if let Some(r) = rope {
                    q = g.rope(q, ids[6], ids[7], spec.head_dim, r.n_rot, r.style)?;
                    k = g.rope(k, ids[6], ids[7], spec.head_dim, r.n_rot, r.style)?;
                }
                let kc = g.cache_write(ids[3], k, ids[5], 1)?;
                let vc = g.cache_write(ids[4], ids[2], ids[5], 1)?;
                let a = g.attention_cached(q, kc, vc, ids[5], spec.clone())?;
                g.set_outputs(vec![a, kc, vc]);
                written = vec![ins[3].clone(), ins[4].clone()];
            }
            op if !op.written_inputs().is_empty() && !op.kind().is_in_place() => {
                return Err(WgpuError::Node {
                    node: node.label(),
                    msg: format!("no CPU fallback writes {}'s inputs back", op.kind()),
                });
            }
            _ => {
                let id = g.push_node(node.op.clone(), ids, node.shape.clone());
                g.set_outputs(vec![id]);
            }
        }
        let exe = CpuExecutable::new(g).map_err(|e| WgpuError::Node {
            node: node.label(),
            msg: format!("cannot prepare the CPU fallback: {e}"),
        })?;
        Ok(CpuStep {
            exe: Mutex::new(exe),
            names,
            ins,
            out,
            written,
        })
    }
}

/// One lowering for one binding of the dynamic dims.
pub(crate) struct Plan {
    tensors: Vec<WTensor>,
    buffers: Vec<wgpu::Buffer>,
    /// Input node id -> its buffer's index in `buffers`.
    inputs: HashMap<usize, usize>,
    segments: Vec<Segment>,
    dispatch: Vec<(NodeId, rlx_ir::OpKind, Option<String>)>,
    arena_bytes: usize,
}

pub struct WgpuExecutable {
    gpu: Arc<Gpu>,
    graph: Graph,
    opts: WgpuOptions,
    /// Params and constants, by node id (each in a buffer of its own, resident).
    leaves: HashMap<usize, wgpu::Buffer>,
    param_set: Vec<bool>,
    plan: Option<Plan>,
    bindings: DimBindings,
    spare: Vec<(DimBindings, Plan)>,
    io: IoBindings,
    reference: Option<CpuExecutable>,
    profile: Option<Mutex<crate::Profile>>,
}

fn node_err(n: &Node, msg: impl Into<String>) -> WgpuError {
    WgpuError::Node {
        node: n.label(),
        msg: msg.into(),
    }
}

impl WgpuExecutable {
    /// Prepare `graph` for adapter `ordinal`: params get resident buffers now (their shapes
    /// must be static), constants are uploaded once.
    pub fn new(
        graph: Graph,
        ordinal: usize,
        opts: WgpuOptions,
    ) -> Result<WgpuExecutable, WgpuError> {
        graph.verify()?;
        let io = IoBindings::new(&graph)?;
        let gpu = Gpu::get(ordinal)?;
        let mut leaves = HashMap::new();
        for n in &graph.nodes {
            if let Op::Param { .. } | Op::Constant { .. } = &n.op {
                let dims = n.shape.static_dims().ok_or_else(|| {
                    node_err(
                        n,
                        format!("params and constants need static shapes, got {}", n.shape),
                    )
                })?;
                let bytes = dims.iter().product::<usize>() * n.shape.dtype.size_bytes();
                let b = gpu.buffer("rlx leaf", bytes as u64)?;
                if let Op::Constant { data } = &n.op {
                    gpu.write(&b, 0, data);
                }
                leaves.insert(n.id.0, b);
            }
        }
        let mut exe = WgpuExecutable {
            param_set: vec![false; graph.nodes.len()],
            gpu,
            graph,
            opts,
            leaves,
            plan: None,
            bindings: DimBindings::default(),
            spare: Vec::new(),
            io,
            reference: None,
            profile: None,
        };
        // A graph without dynamic dims is lowered now, so the dispatch report is complete at
        // compile time and the first run pays no shader compilation.
        if exe.graph.inputs().all(|(_, s)| s.is_static()) {
            exe.plan = Some(exe.build_plan(&HashMap::new())?);
        }
        Ok(exe)
    }

    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The adapter's name and backend (`llvmpipe (Vulkan)`).
    pub fn adapter(&self) -> String {
        format!("{} ({})", self.gpu.name, self.gpu.backend)
    }

    fn param_node(&self, name: &str) -> Result<&Node, WgpuError> {
        Ok(&self.graph.nodes[self.io.param(name)?.node.0])
    }

    /// Upload a param (checked against its declaration by the binding table).
    pub fn set_param(&mut self, name: &str, value: &HostTensor) -> Result<(), WgpuError> {
        let node = self.io.check_param(name, value)?.node.0;
        self.gpu.write(&self.leaves[&node], 0, &value.data);
        self.param_set[node] = true;
        if let Some(r) = &mut self.reference {
            r.set_param(name, value)?;
        }
        Ok(())
    }

    /// The current device value of a param.
    pub fn param_value(&self, name: &str) -> Result<HostTensor, WgpuError> {
        let n = self.param_node(name)?;
        let dims = n.shape.static_dims().unwrap_or_default();
        let bytes = dims.iter().product::<usize>() * n.shape.dtype.size_bytes();
        let data = self
            .gpu
            .read(self.gpu.encoder(), &[(&self.leaves[&n.id.0], 0, bytes)])?
            .remove(0);
        Ok(HostTensor {
            shape: dims,
            dtype: n.shape.dtype,
            data,
        })
    }

    /// What the device holds for input `name` in the current plan (what the last run read).
    pub fn input_value(&self, name: &str) -> Result<HostTensor, WgpuError> {
        let id = self.io.input(name)?.node.0;
        let plan = self.plan.as_ref().ok_or_else(|| WgpuError::Node {
            node: name.into(),
            msg: "no plan yet: run first".into(),
        })?;
        Ok(self.download(plan, &[&plan.tensors[id]])?.remove(0))
    }

    fn download(&self, plan: &Plan, ts: &[&WTensor]) -> Result<Vec<HostTensor>, WgpuError> {
        self.download_after(plan, ts, self.gpu.encoder())
    }

    /// Download `ts` after the commands in `enc`. A tensor at a byte offset that is not
    /// word-aligned (a narrowed f16 view) is read from the word before it.
    fn download_after(
        &self,
        plan: &Plan,
        ts: &[&WTensor],
        enc: wgpu::CommandEncoder,
    ) -> Result<Vec<HostTensor>, WgpuError> {
        let ranges: Vec<(&wgpu::Buffer, u64, usize)> = (ts.iter())
            .map(|t| {
                let skew = (t.off % 4) as usize;
                (&plan.buffers[t.slab], t.off - skew as u64, t.bytes() + skew)
            })
            .collect();
        let raw = self.gpu.read(enc, &ranges)?;
        Ok(ts
            .iter()
            .zip(raw)
            .map(|(t, d)| HostTensor {
                shape: t.dims.clone(),
                dtype: t.dtype,
                data: d[(t.off % 4) as usize..].to_vec(),
            })
            .collect())
    }

    /// Per compute node of the current plan: id, kind, `Some(reason)` where it runs on the CPU.
    pub fn dispatch(&self) -> Vec<(NodeId, rlx_ir::OpKind, Option<String>)> {
        self.plan
            .as_ref()
            .map(|p| p.dispatch.clone())
            .unwrap_or_default()
    }

    /// Run `iters` times with every dispatch timed on the GPU (a pass each): the kernels'
    /// device time, or `None` where the adapter has no timestamp queries.
    pub fn profile_runs(
        &mut self,
        inputs: &CheckedInputs,
        iters: usize,
    ) -> Result<Option<crate::Profile>, WgpuError> {
        if !self.gpu.timestamps {
            return Ok(None);
        }
        self.profile = Some(Mutex::default());
        let ran = (0..iters.max(1)).try_for_each(|_| self.run_bound(inputs, &[], false).map(drop));
        let p = self
            .profile
            .take()
            .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()));
        ran?;
        Ok(p)
    }

    pub fn arena_bytes(&self) -> usize {
        self.plan.as_ref().map_or(0, |p| p.arena_bytes)
    }

    /// Check plain `(name, tensor)` inputs against the binding table (and that every param
    /// is set).
    pub fn check<'a>(
        &self,
        inputs: &'a [(&'a str, HostTensor)],
    ) -> Result<CheckedInputs<'a>, WgpuError> {
        let checked = self.io.check_inputs(inputs.iter().map(|(n, t)| (*n, t)))?;
        if let Some(p) = self.io.params().iter().find(|p| !self.param_set[p.node.0]) {
            let n = &self.graph.nodes[p.node.0];
            return Err(node_err(n, "param not set: call set_param first"));
        }
        Ok(checked)
    }

    /// Run with named inputs; returns the graph's outputs.
    pub fn run(&mut self, inputs: &[(&str, HostTensor)]) -> Result<Vec<HostTensor>, WgpuError> {
        let checked = self.check(inputs)?;
        Ok(self
            .run_bound(&checked, &[], true)?
            .into_iter()
            .flatten()
            .collect())
    }

    /// Run on checked inputs, then copy output `k` over param `p` for each `(k, p)` in
    /// `writes` (on the device). Outputs bound to a param are returned only when
    /// `return_updated` (`None` in place of a skipped one).
    pub fn run_bound(
        &mut self,
        inputs: &CheckedInputs,
        writes: &[(usize, &str)],
        return_updated: bool,
    ) -> Result<Vec<Option<HostTensor>>, WgpuError> {
        self.ensure_plan(inputs)?;
        let reference = if self.opts.verify {
            Some(self.reference_values(inputs)?)
        } else {
            None
        };
        let plan = self.plan.as_ref().expect("plan");
        self.upload_inputs(plan, inputs)?;
        let mut enc = self.replay(plan)?;
        if let Some(p) = &self.profile {
            p.lock().unwrap_or_else(|e| e.into_inner()).count_run();
        }
        if let Some(want) = &reference {
            self.gpu.submit_wait(enc)?;
            self.compare_reference(plan, want)?;
            enc = self.gpu.encoder();
        }
        let outs = self.graph.outputs.clone();
        self.encode_writes(plan, &mut enc, writes)?;
        let wanted: Vec<usize> = (0..outs.len())
            .filter(|k| return_updated || !writes.iter().any(|(o, _)| o == k))
            .collect();
        let ts: Vec<&WTensor> = wanted.iter().map(|&k| &plan.tensors[outs[k].0]).collect();
        let mut got = self.download_after(plan, &ts, enc)?.into_iter();
        Ok((0..outs.len())
            .map(|k| {
                if wanted.contains(&k) {
                    got.next()
                } else {
                    None
                }
            })
            .collect())
    }

    /// The plan for `inputs`' binding of the dynamic dims, switched to (or built) if needed.
    fn ensure_plan(&mut self, inputs: &CheckedInputs) -> Result<(), WgpuError> {
        if self.plan.is_none() || *inputs.dims() != self.bindings {
            self.switch_plan(inputs.dims())?;
        }
        Ok(())
    }

    /// Queue the inputs' bytes into their plan buffers.
    fn upload_inputs(&self, plan: &Plan, inputs: &CheckedInputs) -> Result<(), WgpuError> {
        for &(name, t) in inputs.tensors() {
            let id = self.io.input(name)?.node.0;
            self.gpu.write(&plan.buffers[plan.inputs[&id]], 0, &t.data);
        }
        Ok(())
    }

    /// Copy output `k` over param `p` for each `(k, p)` in `writes`, on the device.
    fn encode_writes(
        &self,
        plan: &Plan,
        enc: &mut wgpu::CommandEncoder,
        writes: &[(usize, &str)],
    ) -> Result<(), WgpuError> {
        let outs = &self.graph.outputs;
        for (k, pname) in writes {
            let id = outs.get(*k).ok_or_else(|| WgpuError::Node {
                node: format!("output {k}"),
                msg: "no such output".into(),
            })?;
            let src = &plan.tensors[id.0];
            let pid = self.param_node(pname)?.id.0;
            let dst = &self.leaves[&pid];
            let bytes = (src.bytes() as u64).div_ceil(4) * 4;
            if bytes > 0 && src.off.is_multiple_of(4) {
                enc.copy_buffer_to_buffer(&plan.buffers[src.slab], src.off, dst, 0, bytes);
            } else if bytes > 0 {
                return Err(WgpuError::Node {
                    node: format!("output {k}"),
                    msg: "an update from an unaligned view".into(),
                });
            }
        }
        Ok(())
    }

    /// Median milliseconds of one replay after `warmup` of them, with the inputs uploaded
    /// once beforehand and the outputs left on the device (bound updates applied each
    /// time): the wall time of recording, submitting and waiting for the plan, CPU fallback
    /// segments included, as CUDA's figure is the device time of a graph replay.
    pub fn time_replays(
        &mut self,
        inputs: &CheckedInputs,
        writes: &[(usize, &str)],
        warmup: usize,
        iters: usize,
    ) -> Result<f64, WgpuError> {
        self.ensure_plan(inputs)?;
        let plan = self.plan.as_ref().expect("plan");
        self.upload_inputs(plan, inputs)?;
        self.gpu.submit_wait(self.gpu.encoder())?;
        let mut ts = Vec::with_capacity(iters.max(1));
        for i in 0..warmup + iters.max(1) {
            let t0 = std::time::Instant::now();
            let mut enc = self.replay(plan)?;
            self.encode_writes(plan, &mut enc, writes)?;
            self.gpu.submit_wait(enc)?;
            if i >= warmup {
                ts.push(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
        ts.sort_by(|a, b| a.total_cmp(b));
        Ok(ts[ts.len() / 2])
    }

    /// Record every segment of `plan`: GPU segments into compute passes, CPU segments between
    /// submissions. Returns the encoder holding the last GPU commands (not yet submitted).
    fn replay(&self, plan: &Plan) -> Result<wgpu::CommandEncoder, WgpuError> {
        let mut enc = self.gpu.encoder();
        for seg in &plan.segments {
            match seg {
                Segment::Gpu(steps) => match &self.profile {
                    Some(p) => {
                        let mut p = p.lock().unwrap_or_else(|e| e.into_inner());
                        enc = crate::profile::record_timed(
                            &self.gpu,
                            enc,
                            steps,
                            &plan.buffers,
                            &mut p,
                        )?;
                    }
                    None => record(&mut enc, steps, &plan.buffers),
                },
                Segment::Cpu(c) => {
                    let ins: Vec<&WTensor> = c.ins.iter().collect();
                    let vals = self.download_after(plan, &ins, enc)?;
                    let feeds: Vec<(&str, HostTensor)> =
                        c.names.iter().map(|s| s.as_str()).zip(vals).collect();
                    let outs = c
                        .exe
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .run(&feeds)?;
                    for (t, v) in std::iter::once(&c.out).chain(&c.written).zip(&outs) {
                        self.upload_into(plan, t, &v.data)?;
                    }
                    enc = self.gpu.encoder();
                }
            }
        }
        Ok(enc)
    }

    /// Write host bytes into a plan tensor (an unaligned one through its surrounding words).
    fn upload_into(&self, plan: &Plan, t: &WTensor, data: &[u8]) -> Result<(), WgpuError> {
        let buf = &plan.buffers[t.slab];
        let skew = (t.off % 4) as usize;
        let end = skew + data.len();
        if skew == 0 && data.len().is_multiple_of(4) {
            self.gpu.write(buf, t.off, data);
            return Ok(());
        }
        // Read the words the tensor touches, patch, write back.
        let start = t.off - skew as u64;
        let mut words = self
            .gpu
            .read(self.gpu.encoder(), &[(buf, start, end.div_ceil(4) * 4)])?
            .remove(0);
        words[skew..end].copy_from_slice(data);
        self.gpu.write(buf, start, &words);
        Ok(())
    }

    fn switch_plan(&mut self, dims: &DimBindings) -> Result<(), WgpuError> {
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

    /// Verify mode: every node's value on the CPU reference, params as on the device now.
    fn reference_values(&mut self, inputs: &CheckedInputs) -> Result<Vec<HostTensor>, WgpuError> {
        if self.reference.is_none() {
            self.reference = Some(CpuExecutable::new(self.graph.clone())?);
        }
        let names: Vec<String> = self.graph.params().map(|(n, _)| n.to_string()).collect();
        let params: Vec<(String, HostTensor)> = names
            .into_iter()
            .map(|n| self.param_value(&n).map(|v| (n, v)))
            .collect::<Result<_, _>>()?;
        let r = self.reference.as_mut().expect("reference");
        for (n, v) in &params {
            r.set_param(n, v)?;
        }
        Ok(r.run_all(&inputs.to_owned_pairs())?)
    }

    fn compare_reference(&self, plan: &Plan, want: &[HostTensor]) -> Result<(), WgpuError> {
        for n in &self.graph.nodes {
            if n.op.is_leaf() {
                continue;
            }
            let got = self.download(plan, &[&plan.tensors[n.id.0]])?.remove(0);
            crate::verify::check_node(n, &got, &want[n.id.0])?;
        }
        Ok(())
    }
}

/// Record prepared steps: dispatches into compute passes, copies between them.
fn record(enc: &mut wgpu::CommandEncoder, steps: &[Prepared], buffers: &[wgpu::Buffer]) {
    let mut k = 0;
    while k < steps.len() {
        if let Prepared::Copy { src, dst, bytes } = &steps[k] {
            enc.copy_buffer_to_buffer(&buffers[src.0], src.1, &buffers[dst.0], dst.1, *bytes);
            k += 1;
            continue;
        }
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
        while let Some(Prepared::Dispatch {
            pipeline,
            bind,
            groups,
            ..
        }) = steps.get(k)
        {
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, bind, &[]);
            pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
            k += 1;
        }
    }
}
