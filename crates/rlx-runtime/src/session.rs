//! Devices, sessions and compiled graphs. Inputs and params are checked here, against the
//! graph's declarations, so every backend reports user mistakes the same way.
use crate::backend::Backend;
use crate::Error;
use rlx_cpu::{CpuConstEvaluator, CpuExecutable};
use rlx_cuda::{CudaExecutable, CudaOptions, Precision};
use rlx_ir::{Dim, Graph, HostTensor, Op, Shape};
use rlx_opt::{Autocast, ConstFold, Expand, Pipeline};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

/// Where a graph runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Device {
    Cpu,
    /// A CUDA GPU by ordinal.
    Cuda(usize),
}

impl Device {
    /// The fastest device usable here: the first CUDA GPU when a driver and a GPU are
    /// present, else the CPU.
    pub fn best() -> Device {
        if rlx_cuda::check_available(0).is_ok() {
            Device::Cuda(0)
        } else {
            Device::Cpu
        }
    }

    /// Parse `cpu`, `cuda`, `cuda:N` or `gpu`.
    pub fn parse(s: &str) -> Option<Device> {
        match s {
            "cpu" => Some(Device::Cpu),
            "cuda" | "gpu" => Some(Device::Cuda(0)),
            _ => s.strip_prefix("cuda:")?.parse().ok().map(Device::Cuda),
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
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
}

impl Default for CompileOptions {
    fn default() -> Self {
        let cuda = CudaOptions::default();
        CompileOptions {
            optimize: std::env::var("RLX_OPT").map_or(true, |v| v != "0"),
            precision: std::env::var("RLX_PRECISION")
                .ok()
                .and_then(|v| Precision::parse(&v))
                .unwrap_or_default(),
            verify: cuda.verify,
            cuda_graph: cuda.cuda_graph,
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

/// Compiles graphs for one device.
#[derive(Clone, Debug)]
pub struct Session {
    device: Device,
}

impl Session {
    pub fn new(device: Device) -> Session {
        Session { device }
    }

    pub fn device(&self) -> Device {
        self.device
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
        let exe = match self.device {
            Device::Cpu => {
                let optimized = if opts.optimize {
                    cpu_pipeline().run(&graph)?.0
                } else {
                    graph.clone()
                };
                Backend::Cpu(Box::new(CpuExecutable::new(optimized)?))
            }
            Device::Cuda(n) => {
                rlx_cuda::check_available(n).map_err(|e| Error::DeviceUnavailable {
                    device: self.device.to_string(),
                    reason: e.to_string(),
                })?;
                let optimized = if opts.optimize {
                    cuda_pipeline(opts.precision).run(&graph)?.0
                } else {
                    graph.clone()
                };
                let cuda = CudaOptions {
                    precision: opts.precision,
                    cuda_graph: opts.cuda_graph,
                    verify: opts.verify,
                    force_variant: None,
                };
                Backend::Cuda(Box::new(CudaExecutable::new(optimized, n, cuda)?))
            }
        };
        if std::env::var("RLX_DISPATCH_REPORT").is_ok_and(|v| v == "1") {
            eprint!("{}", dispatch_report(&exe, self.device));
        }
        Ok(CompiledGraph {
            device: self.device,
            graph,
            exe: Mutex::new(exe),
            params_set: Mutex::new(HashMap::new()),
            updates: Mutex::new(Vec::new()),
        })
    }
}

/// Per op kind: how many nodes run natively on the device and how many fall back to the
/// CPU (with the first reason). A graph with dynamic dims is lowered at its first run; its
/// report then lists what is known at compile time.
fn dispatch_report(exe: &Backend, device: Device) -> String {
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

/// A graph prepared for one device: set params once, run many times.
pub struct CompiledGraph {
    device: Device,
    graph: Graph,
    exe: Mutex<Backend>,
    params_set: Mutex<HashMap<String, bool>>,
    /// `(output index, param name)`: after each run the output replaces the param.
    updates: Mutex<Vec<(usize, String)>>,
}

fn names<'a>(it: impl Iterator<Item = (&'a str, &'a Shape)>) -> String {
    it.map(|(n, s)| format!("{n}: {s}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl CompiledGraph {
    pub fn device(&self) -> Device {
        self.device
    }

    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Backend> {
        // A panic inside a thunk would poison the lock; the executor holds no invariant a
        // later run could trip on (it re-plans and overwrites every value), so carry on.
        self.exe.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn param_shape(&self, name: &str) -> Result<&Shape, Error> {
        self.graph
            .params()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| s)
            .ok_or_else(|| Error::UnknownParam {
                name: name.into(),
                known: names(self.graph.params()),
            })
    }

    /// Set a param from f32 values (converted to the param's dtype).
    pub fn set_param(&self, name: &str, data: &[f32]) -> Result<(), Error> {
        let shape = self.param_shape(name)?.clone();
        let dims = shape.static_dims().ok_or_else(|| Error::Unbindable {
            name: name.into(),
            shape: shape.to_string(),
        })?;
        let n: usize = dims.iter().product();
        if data.len() != n {
            return Err(Error::WrongLength {
                kind: "param",
                name: name.into(),
                shape: shape.to_string(),
                expected: n,
                got: data.len(),
            });
        }
        self.set_param_typed(name, HostTensor::from_f32_as(&dims, data, shape.dtype))
    }

    /// Set a param from a typed tensor (shape and dtype must match the graph's).
    pub fn set_param_typed(&self, name: &str, value: HostTensor) -> Result<(), Error> {
        let shape = self.param_shape(name)?.clone();
        check_tensor("param", name, &shape, &value)?;
        self.lock().set_param(name, &value)?;
        self.params_set
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.into(), true);
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
            let shape = self.input_shape(name)?;
            let dims = bind_flat(name, shape, data.len())?;
            typed.push((name, HostTensor::from_f32_as(&dims, data, shape.dtype)));
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

    /// Check `inputs`, then run; `all_outputs` false leaves out the outputs bound to params.
    fn run_named<N: AsRef<str>>(
        &self,
        inputs: &[(N, HostTensor)],
        all_outputs: bool,
    ) -> Result<Vec<HostTensor>, Error> {
        self.check_inputs(inputs)?;
        let refs: Vec<(&str, HostTensor)> = inputs
            .iter()
            .map(|(n, t)| (n.as_ref(), t.clone()))
            .collect();
        self.run_checked(&refs, all_outputs)
    }

    fn check_inputs<N: AsRef<str>>(&self, inputs: &[(N, HostTensor)]) -> Result<(), Error> {
        let mut seen: HashMap<&str, ()> = HashMap::new();
        for (name, t) in inputs {
            let name = name.as_ref();
            let shape = self.input_shape(name)?;
            if seen.insert(name, ()).is_some() {
                return Err(Error::DuplicateInput { name: name.into() });
            }
            check_tensor("input", name, shape, t)?;
        }
        for (name, shape) in self.graph.inputs() {
            if !seen.contains_key(name) {
                return Err(Error::MissingInput {
                    name: name.into(),
                    shape: shape.to_string(),
                });
            }
        }
        let set = self.params_set.lock().unwrap_or_else(|p| p.into_inner());
        for (name, _) in self.graph.params() {
            if !set.contains_key(name) {
                return Err(Error::ParamNotSet { name: name.into() });
            }
        }
        Ok(())
    }

    fn run_checked(
        &self,
        inputs: &[(&str, HostTensor)],
        return_updated: bool,
    ) -> Result<Vec<HostTensor>, Error> {
        let updates = self
            .updates
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut exe = self.lock();
        if updates.is_empty() {
            return exe.run(inputs);
        }
        let writes: Vec<(usize, &str)> = updates.iter().map(|(k, n)| (*k, n.as_str())).collect();
        exe.run_writeback(inputs, &writes, return_updated)
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
        let pshape = self.param_shape(param)?;
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
        self.param_shape(name)?;
        if !self
            .params_set
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(name)
        {
            return Err(Error::ParamNotSet { name: name.into() });
        }
        self.lock().param_value(name)
    }

    fn input_shape(&self, name: &str) -> Result<&Shape, Error> {
        self.graph
            .nodes
            .iter()
            .find(|n| matches!(&n.op, Op::Input { name: p } if p == name))
            .map(|n| &n.shape)
            .ok_or_else(|| Error::UnknownInput {
                name: name.into(),
                known: names(self.graph.inputs()),
            })
    }

    /// Arena bytes of the last run's memory plan.
    pub fn arena_bytes(&self) -> usize {
        self.lock().arena_bytes()
    }

    /// Arena bytes one buffer per node would take (what the plan saves against).
    pub fn unplanned_bytes(&self) -> usize {
        self.lock().unplanned_bytes()
    }

    /// The graph as it runs: after the optimisation pipeline.
    pub fn optimized_graph(&self) -> Graph {
        self.lock().graph().clone()
    }

    /// Per compute node of the optimised graph: op kind and `Some(reason)` when it runs on
    /// the CPU instead of the compiled device (CUDA graphs with dynamic dims are lowered at
    /// their first run).
    pub fn dispatch(&self) -> Vec<(rlx_ir::NodeId, rlx_ir::OpKind, Option<String>)> {
        self.lock().dispatch()
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
        self.check_inputs(inputs)?;
        let refs: Vec<(&str, HostTensor)> = inputs
            .iter()
            .map(|(n, t)| (n.as_ref(), t.clone()))
            .collect();
        let updates = self.updates();
        let writes: Vec<(usize, &str)> = updates.iter().map(|(k, n)| (*k, n.as_str())).collect();
        self.lock().time_runs(&refs, &writes, warmup, iters)
    }

    /// Where a GPU run's time goes: each kernel and cuBLASLt call of the plan launched on its
    /// own and timed between CUDA events, summed per kernel, mean over `iters`, largest
    /// first. `None` on the CPU.
    pub fn profile_device<N: AsRef<str>>(
        &self,
        inputs: &[(N, HostTensor)],
        iters: usize,
    ) -> Result<Option<Vec<crate::ProfileRow>>, Error> {
        self.check_inputs(inputs)?;
        let refs: Vec<(&str, HostTensor)> = inputs
            .iter()
            .map(|(n, t)| (n.as_ref(), t.clone()))
            .collect();
        self.lock().profile(&refs, iters)
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

/// Dims of an input fed as a flat slice: static dims as declared; one dynamic dim can be
/// solved from the length.
fn bind_flat(name: &str, shape: &Shape, len: usize) -> Result<Vec<usize>, Error> {
    let known: usize = shape.dims.iter().filter_map(Dim::as_static).product();
    let unknown = shape
        .dims
        .iter()
        .filter(|d| d.as_static().is_none())
        .count();
    match unknown {
        0 => {
            if len != known {
                return Err(Error::WrongLength {
                    kind: "input",
                    name: name.into(),
                    shape: shape.to_string(),
                    expected: known,
                    got: len,
                });
            }
            Ok(shape.static_dims().expect("static"))
        }
        1 if known > 0 && len.is_multiple_of(known) => Ok(shape
            .dims
            .iter()
            .map(|d| d.as_static().unwrap_or(len / known))
            .collect()),
        _ => Err(Error::Unbindable {
            name: name.into(),
            shape: shape.to_string(),
        }),
    }
}

fn check_tensor(kind: &'static str, name: &str, want: &Shape, t: &HostTensor) -> Result<(), Error> {
    if t.dtype != want.dtype {
        return Err(Error::WrongDtype {
            kind,
            name: name.into(),
            expected: want.dtype,
            got: t.dtype,
        });
    }
    let rank_ok = t.shape.len() == want.rank();
    let dims_ok = rank_ok
        && want
            .dims
            .iter()
            .zip(&t.shape)
            .all(|(d, &n)| d.as_static().is_none_or(|m| m == n));
    if !dims_ok {
        return Err(Error::WrongShape {
            kind,
            name: name.into(),
            expected: want.to_string(),
            got: t.shape.clone(),
        });
    }
    let bytes = t.numel() * t.dtype.size_bytes();
    if t.data.len() != bytes {
        return Err(Error::WrongLength {
            kind,
            name: name.into(),
            shape: want.to_string(),
            expected: bytes / t.dtype.size_bytes().max(1),
            got: t.data.len() / t.dtype.size_bytes().max(1),
        });
    }
    Ok(())
}
