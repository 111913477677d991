//! Devices, sessions and compiled graphs. Inputs and params are checked here, once,
//! through the graph's binding table (`rlx_ir::IoBindings`), so every backend reports user
//! mistakes the same way and trusts what it is handed.
use crate::backend::{CpuBackend, CudaBackend, Executable, WgpuBackend};
use crate::mesh::RankComm;
use crate::Error;
use rlx_cpu::{CpuConstEvaluator, CpuExecutable, QuantAct};
use rlx_cuda::{CudaExecutable, CudaOptions, Precision};
use rlx_ir::env::{self, Switch};
use rlx_ir::{CheckedInputs, DType, Graph, HostTensor, IoBindings, SharedBytes};
use rlx_opt::{Autocast, ConstFold, Expand, Pipeline};
use rlx_wgpu::{WgpuExecutable, WgpuOptions};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Where a graph runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Device {
    Cpu,
    /// A CUDA GPU by ordinal.
    Cuda(usize),
    /// A wgpu adapter (Metal, Vulkan or DX12) by its index in `rlx_wgpu::adapters()`.
    Wgpu(usize),
}

impl Device {
    /// The fastest device usable here: the first CUDA GPU when a driver and a GPU are
    /// present, else the first hardware wgpu adapter (Metal, Vulkan, DX12), else the CPU (a
    /// software adapter such as lavapipe is slower than the CPU backend).
    pub fn best() -> Device {
        if rlx_cuda::check_available(0).is_ok() {
            Device::Cuda(0)
        } else if rlx_wgpu::has_hardware_adapter() && rlx_wgpu::check_available(0).is_ok() {
            Device::Wgpu(0)
        } else {
            Device::Cpu
        }
    }

    /// Parse `cpu`, `cuda`, `cuda:N`, `gpu`, `wgpu` or `wgpu:N`.
    pub fn parse(s: &str) -> Option<Device> {
        match s {
            "cpu" => Some(Device::Cpu),
            "cuda" | "gpu" => Some(Device::Cuda(0)),
            "wgpu" => Some(Device::Wgpu(0)),
            _ => match s.split_once(':')? {
                ("cuda", n) => n.parse().ok().map(Device::Cuda),
                ("wgpu", n) => n.parse().ok().map(Device::Wgpu),
                _ => None,
            },
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
            Device::Wgpu(n) => write!(f, "wgpu:{n}"),
        }
    }
}

/// Per-compile settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileOptions {
    /// Run the optimisation pipeline (`RLX_OPT=0` turns it off by default).
    pub optimize: bool,
    /// How matmul-class ops compute on the GPU (`RLX_PRECISION=f32|tf32|bf16|f16`).
    /// The CPU always computes f32 graphs in f32.
    pub precision: Precision,
    /// Check every node of every GPU run against the CPU reference (`RLX_VERIFY=1`).
    pub verify: bool,
    /// Replay GPU runs as one captured CUDA graph (`RLX_CUDA_GRAPH=0` turns it off).
    pub cuda_graph: bool,
    /// How the CPU multiplies activations by a quantised weight (`RLX_QUANT_ACT=q8`:
    /// llama.cpp's 8-bit activations and integer block dots; default f32). GPUs ignore it.
    pub quant_act: QuantAct,
}

impl Default for CompileOptions {
    fn default() -> Self {
        let cuda = CudaOptions::default();
        CompileOptions {
            optimize: env::flag(Switch::Opt),
            precision: env::text(Switch::Precision)
                .and_then(|v| Precision::parse(&v))
                .unwrap_or_default(),
            verify: cuda.verify,
            cuda_graph: cuda.cuda_graph,
            quant_act: QuantAct::from_env(),
        }
    }
}

impl CompileOptions {
    pub fn precision(mut self, p: Precision) -> Self {
        self.precision = p;
        self
    }
    pub fn verify(mut self, on: bool) -> Self {
        self.verify = on;
        self
    }
    pub fn cuda_graph(mut self, on: bool) -> Self {
        self.cuda_graph = on;
        self
    }
    pub fn quant_act(mut self, q: QuantAct) -> Self {
        self.quant_act = q;
        self
    }
}

/// The pipeline for the CUDA backend: the CPU's (every fused op is lowered natively or
/// runs on the CPU thunks), with autocast first under the half policies.
pub fn cuda_pipeline(precision: Precision) -> Pipeline {
    match precision {
        Precision::F16 => cpu_pipeline().first(Autocast::new(rlx_ir::DType::F16)),
        Precision::Bf16 => cpu_pipeline().first(Autocast::new(rlx_ir::DType::BF16)),
        _ => cpu_pipeline(),
    }
}

/// The optimisation pipeline the CPU compiles with: clean-up, constant folding, fusion,
/// then expansion of any fused op the CPU does not run natively (today it runs them all).
pub fn cpu_pipeline() -> Pipeline {
    Pipeline::full(Some(ConstFold::new(CpuConstEvaluator)))
        .expand_for(Expand::keeping(rlx_cpu::native_fused_ops()))
}

/// Compiles graphs for one device (as one rank of a [`crate::Mesh`] when it has a
/// communicator).
#[derive(Clone, Debug)]
pub struct Session {
    device: Device,
    comm: Option<RankComm>,
}

impl Session {
    pub fn new(device: Device) -> Session {
        Session { device, comm: None }
    }

    /// This session's graphs become one rank of `comm`'s group.
    pub fn with_comm(mut self, comm: RankComm) -> Session {
        self.comm = Some(comm);
        self
    }

    pub fn device(&self) -> Device {
        self.device
    }

    /// The group this session's graphs are a rank of, if any.
    pub fn comm(&self) -> Option<&RankComm> {
        self.comm.as_ref()
    }

    /// This session's rank and the group's size (`(0, 1)` without a group).
    pub fn rank(&self) -> (usize, usize) {
        self.comm.as_ref().map_or((0, 1), |c| (c.rank(), c.ranks()))
    }

    /// Verify the graph, optimise it and prepare it to run on this session's device.
    pub fn compile(&self, graph: impl Into<Graph>) -> Result<CompiledGraph, Error> {
        self.compile_with(graph, &CompileOptions::default())
    }

    /// `compile` with explicit options.
    pub fn compile_with(
        &self,
        graph: impl Into<Graph>,
        opts: &CompileOptions,
    ) -> Result<CompiledGraph, Error> {
        let graph = graph.into();
        graph.verify()?;
        let io = IoBindings::new(&graph)?;
        let optimize = |p: Pipeline| -> Result<Graph, Error> {
            Ok(if opts.optimize {
                p.run(&graph)?.0
            } else {
                graph.clone()
            })
        };
        let unavailable = |reason: String| Error::DeviceUnavailable {
            device: self.device.to_string(),
            reason,
        };
        match (&self.comm, self.device) {
            (Some(RankComm::Host(_)), Device::Cuda(_) | Device::Wgpu(_)) => {
                return Err(Error::Mesh(format!(
                    "{} cannot be a rank of a group of simulated CPU ranks",
                    self.device
                )))
            }
            (Some(RankComm::Nccl(_)), Device::Cpu | Device::Wgpu(_)) => {
                return Err(Error::Mesh(format!(
                    "{} cannot be a rank of a NCCL group (CUDA GPUs only)",
                    self.device
                )))
            }
            _ => {}
        }
        let exe: Box<dyn Executable> = match self.device {
            Device::Cpu => {
                let mut cpu = CpuExecutable::new(optimize(cpu_pipeline())?)?;
                cpu.set_quant_act(opts.quant_act);
                if let Some(RankComm::Host(c)) = &self.comm {
                    cpu.set_communicator(c.clone());
                }
                Box::new(CpuBackend(cpu))
            }
            Device::Cuda(n) => {
                rlx_cuda::check_available(n).map_err(|e| unavailable(e.to_string()))?;
                let cuda = CudaOptions {
                    precision: opts.precision,
                    cuda_graph: opts.cuda_graph,
                    verify: opts.verify,
                    ..CudaOptions::default()
                };
                let g = optimize(cuda_pipeline(opts.precision))?;
                let comm = match &self.comm {
                    Some(RankComm::Nccl(c)) => Some(c.clone()),
                    _ => None,
                };
                Box::new(CudaBackend::new(CudaExecutable::new_rank(
                    g, n, cuda, comm,
                )?))
            }
            Device::Wgpu(n) => {
                rlx_wgpu::check_available(n).map_err(|e| unavailable(e.to_string()))?;
                // The CUDA pipeline: the same fused ops, autocast under the half policies
                // (kernels compute in f32 over half storage).
                let g = optimize(cuda_pipeline(opts.precision))?;
                let w = WgpuOptions {
                    verify: opts.verify,
                    portable: false,
                };
                Box::new(WgpuBackend::new(WgpuExecutable::new(g, n, w)?))
            }
        };
        if env::flag(Switch::DispatchReport) {
            eprint!("{}", dispatch_report(exe.as_ref(), self.device));
        }
        Ok(CompiledGraph {
            device: self.device,
            params_set: io.params().iter().map(|_| AtomicBool::new(false)).collect(),
            graph,
            io,
            exe,
            updates: Mutex::new(Vec::new()),
        })
    }
}

/// Per op kind: how many nodes run natively on the device and how many fall back to the
/// CPU (with the first reason). A graph with dynamic dims is lowered at its first run; its
/// report then lists what is known at compile time.
fn dispatch_report(exe: &dyn Executable, device: Device) -> String {
    let mut counts: BTreeMap<&str, (usize, usize, Option<String>)> = BTreeMap::new();
    for (_, kind, reason) in exe.dispatch() {
        let e = counts.entry(kind.name()).or_default();
        match reason {
            None => e.0 += 1,
            Some(r) => {
                e.1 += 1;
                e.2.get_or_insert(r);
            }
        }
    }
    let mut s = format!(
        "rlx dispatch report for \"{}\" on {device}:\n",
        exe.graph().name
    );
    for (k, (native, fallback, why)) in counts {
        if native > 0 {
            s += &format!("  {k:<32} {native:>5}  native ({device})\n");
        }
        if fallback > 0 {
            s += &format!(
                "  {k:<32} {fallback:>5}  fallback (cpu): {}\n",
                why.unwrap_or_default()
            );
        }
    }
    s
}

/// A graph prepared for one device: set params once, run many times — from several
/// threads at once if need be (on the CPU such runs proceed in parallel).
pub struct CompiledGraph {
    device: Device,
    graph: Graph,
    /// The graph's inputs and params: every run and param is checked against it.
    io: IoBindings,
    exe: Box<dyn Executable>,
    /// Per param (in `io.params()` order): set at least once.
    params_set: Vec<AtomicBool>,
    /// `(output index, param name)`: after each run the output replaces the param.
    updates: Mutex<Vec<(usize, String)>>,
}

impl CompiledGraph {
    pub fn device(&self) -> Device {
        self.device
    }

    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Set a param from f32 values (converted to the param's dtype).
    pub fn set_param(&self, name: &str, data: &[f32]) -> Result<(), Error> {
        let b = self.io.param(name)?;
        let dims = b.flat_dims(data.len())?;
        self.set_param_typed(name, HostTensor::from_f32_as(&dims, data, b.shape.dtype))
    }

    /// Set a param from a typed tensor (shape and dtype must match the graph's).
    pub fn set_param_typed(&self, name: &str, value: HostTensor) -> Result<(), Error> {
        let b = self.io.check_param(name, &value)?;
        self.exe.set_param_owned(name, value)?;
        self.params_set[b.index].store(true, Ordering::Release);
        Ok(())
    }

    /// Set a U8 param (packed weights) from bytes shared with their owner — a tensor's range
    /// of a mapped model file — which the CPU keeps without a copy (dims and length must
    /// match the graph's param).
    pub fn set_param_shared(
        &self,
        name: &str,
        shape: &[usize],
        bytes: SharedBytes,
    ) -> Result<(), Error> {
        let b = self.io.param(name)?;
        b.check_parts(shape, DType::U8, bytes.len())?;
        let index = b.index;
        self.exe.set_param_shared(name, shape, bytes)?;
        self.params_set[index].store(true, Ordering::Release);
        Ok(())
    }

    /// Run with f32 inputs (converted to each input's dtype); one f32 vector per output.
    pub fn run<N: AsRef<str>, S: AsRef<[f32]>>(
        &self,
        inputs: &[(N, S)],
    ) -> Result<Vec<Vec<f32>>, Error> {
        let mut typed = Vec::with_capacity(inputs.len());
        for (name, data) in inputs {
            let name = name.as_ref();
            let data = data.as_ref();
            let b = self.io.input(name)?;
            let dims = b.flat_dims(data.len())?;
            typed.push((name, HostTensor::from_f32_as(&dims, data, b.shape.dtype)));
        }
        Ok(self
            .run_typed(&typed)?
            .into_iter()
            .map(|t| t.to_f32_vec())
            .collect())
    }

    /// Run with typed inputs; returns typed outputs (all of them). Bound updates
    /// ([`CompiledGraph::bind_update`]) are applied after the run.
    pub fn run_typed<N: AsRef<str>>(
        &self,
        inputs: &[(N, HostTensor)],
    ) -> Result<Vec<HostTensor>, Error> {
        self.run_named(inputs, true)
    }

    /// Run with typed inputs and write output `output`'s values as f32 into `out` (cleared,
    /// its capacity reused): for a loop that reads one output per run, as a decoder reads
    /// its logits every token, without a fresh allocation and copy each time. A graph with
    /// bound updates runs as [`CompiledGraph::run_typed`] does (its updates applied).
    pub fn run_f32_into<N: AsRef<str>>(
        &self,
        inputs: &[(N, HostTensor)],
        output: usize,
        out: &mut Vec<f32>,
    ) -> Result<(), Error> {
        let bound = !(self.updates.lock())
            .unwrap_or_else(|p| p.into_inner())
            .is_empty();
        if bound {
            return crate::backend::output_f32_into(&self.run_typed(inputs)?, output, out);
        }
        let checked = self.check_inputs(inputs)?;
        self.exe.run_output_f32(&checked, output, out)
    }

    /// Check `inputs`, then run; `all_outputs` false leaves out the outputs bound to params.
    fn run_named<N: AsRef<str>>(
        &self,
        inputs: &[(N, HostTensor)],
        all_outputs: bool,
    ) -> Result<Vec<HostTensor>, Error> {
        let checked = self.check_inputs(inputs)?;
        let updates = self.updates();
        let writes: Vec<(usize, &str)> = updates.iter().map(|(k, n)| (*k, n.as_str())).collect();
        self.exe.run(&checked, &writes, all_outputs)
    }

    /// The one check of a run: the inputs against the binding table, then that every param
    /// has been set.
    fn check_inputs<'a, N: AsRef<str>>(
        &self,
        inputs: &'a [(N, HostTensor)],
    ) -> Result<CheckedInputs<'a>, Error> {
        let checked = (self.io).check_inputs(inputs.iter().map(|(n, t)| (n.as_ref(), t)))?;
        if let Some(p) =
            (self.io.params().iter()).find(|p| !self.params_set[p.index].load(Ordering::Acquire))
        {
            return Err(Error::ParamNotSet {
                name: p.name.clone(),
            });
        }
        Ok(checked)
    }

    /// Declare that after every run, output `output` overwrites param `param` in place (a
    /// training step's new weights and optimizer state). The output must have exactly the
    /// param's shape and dtype. The param must still be set once before the first run.
    pub fn bind_update(&self, output: usize, param: &str) -> Result<(), Error> {
        let count = self.graph.outputs.len();
        let out = *self.graph.outputs.get(output).ok_or(Error::NoSuchOutput {
            index: output,
            count,
        })?;
        let pshape = &self.io.param(param)?.shape;
        let oshape = self.graph.shape(out)?;
        if oshape != pshape || pshape.static_dims().is_none() {
            return Err(Error::UpdateShapeMismatch {
                output,
                param: param.into(),
                output_shape: oshape.to_string(),
                param_shape: pshape.to_string(),
            });
        }
        let mut updates = self.updates.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((k, _)) = updates.iter().find(|(_, n)| n == param) {
            return Err(Error::DuplicateUpdate {
                param: param.into(),
                existing: *k,
            });
        }
        updates.push((output, param.into()));
        Ok(())
    }

    /// The bound `(output index, param)` updates.
    pub fn updates(&self) -> Vec<(usize, String)> {
        self.updates
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Run once, apply the bound updates, and return only the outputs that are not bound to
    /// a param (for a train step: the loss), skipping the copy of every new weight to host.
    pub fn run_step<N: AsRef<str>>(
        &self,
        inputs: &[(N, HostTensor)],
    ) -> Result<Vec<HostTensor>, Error> {
        self.run_named(inputs, false)
    }

    /// The current value of a param (after bound updates, the updated one).
    pub fn param(&self, name: &str) -> Result<HostTensor, Error> {
        let b = self.io.param(name)?;
        if !self.params_set[b.index].load(Ordering::Acquire) {
            return Err(Error::ParamNotSet { name: name.into() });
        }
        self.exe.param_value(name)
    }

    /// Arena bytes of the last run's memory plan.
    pub fn arena_bytes(&self) -> usize {
        self.exe.arena_bytes()
    }

    /// Arena bytes one buffer per node would take (what the plan saves against).
    pub fn unplanned_bytes(&self) -> usize {
        self.exe.unplanned_bytes()
    }

    /// The graph as it runs: after the optimisation pipeline.
    pub fn optimized_graph(&self) -> Graph {
        self.exe.graph()
    }

    /// Per compute node of the optimised graph: op kind and `Some(reason)` when it runs on
    /// the CPU instead of the compiled device (CUDA graphs with dynamic dims are lowered at
    /// their first run).
    pub fn dispatch(&self) -> Vec<(rlx_ir::NodeId, rlx_ir::OpKind, Option<String>)> {
        self.exe.dispatch()
    }

    /// Median milliseconds of one run (bound updates included) after `warmup` runs: on a
    /// GPU the device time of a replay with inputs already resident, measured with CUDA
    /// events as PyTorch's benchmarks do; on the CPU the wall time.
    pub fn time_device<N: AsRef<str>>(
        &self,
        inputs: &[(N, HostTensor)],
        warmup: usize,
        iters: usize,
    ) -> Result<f64, Error> {
        let checked = self.check_inputs(inputs)?;
        let updates = self.updates();
        let writes: Vec<(usize, &str)> = updates.iter().map(|(k, n)| (*k, n.as_str())).collect();
        self.exe.time_runs(&checked, &writes, warmup, iters)
    }

    /// Where a GPU run's time goes: each kernel and cuBLASLt call of the plan launched on its
    /// own and timed between CUDA events, summed per kernel, mean over `iters`, largest
    /// first. `None` on the CPU.
    pub fn profile_device<N: AsRef<str>>(
        &self,
        inputs: &[(N, HostTensor)],
        iters: usize,
    ) -> Result<Option<Vec<crate::ProfileRow>>, Error> {
        let checked = self.check_inputs(inputs)?;
        self.exe.profile(&checked, iters)
    }

    /// Run `iters` times with the same inputs and return the median wall time of one run.
    pub fn time_runs(
        &self,
        inputs: &[(&str, HostTensor)],
        iters: usize,
    ) -> Result<Duration, Error> {
        let mut ts = Vec::with_capacity(iters.max(1));
        for _ in 0..iters.max(1) {
            let t0 = std::time::Instant::now();
            self.run_typed(inputs)?;
            ts.push(t0.elapsed());
        }
        ts.sort();
        Ok(ts[ts.len() / 2])
    }
}
