//! The executor: binds shapes, plans the arena, runs one thunk per node.
use crate::buffer::{Buf, BufMut, OutView, Storage, TensorView};
use crate::error::CpuError;
use crate::plan::{make_plan, Loc, Plan, PlanMode};
use half::{bf16, f16};
use rlx_ir::{ComputeClass, DType, Dim, Graph, HostTensor, Node, Op, Shape};
use std::collections::HashMap;

mod writeback;

/// A graph ready to run on the CPU.
pub struct CpuExecutable {
    graph: Graph,
    leaves: Vec<Option<Storage>>,
    plan: Option<Plan>,
    bindings: HashMap<String, usize>,
    mode: PlanMode,
    f32a: Vec<f32>,
    f64a: Vec<f64>,
    i64a: Vec<i64>,
}

/// Convert a host tensor into the compute class of `dtype`.
pub fn to_storage(t: &HostTensor) -> Storage {
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
    }
}

/// Make values obey their storage dtype (half rounding, integer wrap, bool 0/1).
fn normalise(data: BufMut, dtype: DType) {
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
        let mut leaves = vec![None; graph.nodes.len()];
        for n in &graph.nodes {
            if let Op::Constant { data } = &n.op {
                let dims = n.shape.static_dims().ok_or_else(|| CpuError::Op {
                    node: label(n),
                    op: "Constant",
                    msg: "constant with a dynamic dim".into(),
                })?;
                let t = HostTensor::new(&dims, n.shape.dtype, data.clone())?;
                leaves[n.id.0] = Some(to_storage(&t));
            }
        }
        Ok(CpuExecutable {
            graph,
            leaves,
            plan: None,
            bindings: HashMap::new(),
            mode: PlanMode::Reuse,
            f32a: vec![],
            f64a: vec![],
            i64a: vec![],
        })
    }

    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Arena bytes of the current plan (0 before the first run).
    pub fn arena_bytes(&self) -> usize {
        self.plan.as_ref().map_or(0, |p| p.planned_bytes)
    }

    /// What the arena would take with one buffer per node (0 before the first run).
    pub fn unplanned_bytes(&self) -> usize {
        self.plan.as_ref().map_or(0, |p| p.unplanned_bytes)
    }

    /// Choose the arena layout (takes effect at the next run).
    pub fn set_plan_mode(&mut self, mode: PlanMode) {
        if mode != self.mode {
            self.mode = mode;
            self.plan = None;
        }
    }

    /// The graph's param node called `name`.
    fn param_node(&self, name: &str) -> Result<&rlx_ir::Node, CpuError> {
        self.graph
            .nodes
            .iter()
            .find(|n| matches!(&n.op, Op::Param { name: p } if p == name))
            .ok_or_else(|| CpuError::Param {
                name: name.into(),
                msg: "the graph has no such param".into(),
            })
    }

    /// Set a weight by name; its shape and dtype must match the graph's param.
    pub fn set_param(&mut self, name: &str, value: &HostTensor) -> Result<(), CpuError> {
        let node = self.param_node(name)?;
        check_tensor(&node.shape, value, &HashMap::new()).map_err(|msg| CpuError::Param {
            name: name.into(),
            msg,
        })?;
        let id = node.id.0;
        self.leaves[id] = Some(to_storage(value));
        Ok(())
    }

    /// Run with named inputs; returns the graph's outputs in order.
    pub fn run(&mut self, inputs: &[(&str, HostTensor)]) -> Result<Vec<HostTensor>, CpuError> {
        let values = self.run_nodes(inputs, false, &[])?;
        Ok(values.into_iter().flatten().collect())
    }

    /// Run and return every node's value (leaves included), indexed by node id.
    /// Used by verify mode to find the first diverging node.
    pub fn run_all(&mut self, inputs: &[(&str, HostTensor)]) -> Result<Vec<HostTensor>, CpuError> {
        self.set_plan_mode(PlanMode::KeepAll);
        let values = self.run_nodes(inputs, true, &[])?;
        Ok(values.into_iter().flatten().collect())
    }

    fn run_nodes(
        &mut self,
        inputs: &[(&str, HostTensor)],
        all: bool,
        skip_outputs: &[usize],
    ) -> Result<Vec<Option<HostTensor>>, CpuError> {
        let mut bindings = HashMap::new();
        let mut seen = vec![false; self.graph.nodes.len()];
        for (name, t) in inputs {
            let node = self
                .graph
                .nodes
                .iter()
                .find(|n| matches!(&n.op, Op::Input { name: p } if p == name))
                .ok_or_else(|| CpuError::Input {
                    name: name.to_string(),
                    msg: "the graph has no such input".into(),
                })?;
            if seen[node.id.0] {
                return Err(CpuError::Input {
                    name: name.to_string(),
                    msg: "given twice".into(),
                });
            }
            seen[node.id.0] = true;
            check_tensor(&node.shape, t, &bindings).map_err(|msg| CpuError::Input {
                name: name.to_string(),
                msg,
            })?;
            for (d, &n) in node.shape.dims.iter().zip(&t.shape) {
                if let Dim::Dynamic(s) = d {
                    bindings.insert(s.clone(), n);
                }
            }
            self.leaves[node.id.0] = Some(to_storage(t));
        }
        for n in &self.graph.nodes {
            match &n.op {
                Op::Input { name } if !seen[n.id.0] => {
                    return Err(CpuError::Input {
                        name: name.clone(),
                        msg: "missing: every graph input must be fed".into(),
                    })
                }
                Op::Param { name } if self.leaves[n.id.0].is_none() => {
                    return Err(CpuError::Param {
                        name: name.clone(),
                        msg: "not set: call set_param first".into(),
                    })
                }
                _ => {}
            }
        }
        if self.plan.is_none() || bindings != self.bindings {
            self.plan = Some(make_plan(&self.graph, &bindings, self.mode)?);
            self.bindings = bindings;
            let p = self.plan.as_ref().expect("plan");
            self.f32a.resize(p.sizes[0], 0.0);
            self.f64a.resize(p.sizes[1], 0.0);
            self.i64a.resize(p.sizes[2], 0);
        }
        self.execute()?;
        let plan = self.plan.as_ref().expect("plan");
        let want: Vec<usize> = if all {
            (0..self.graph.nodes.len()).collect()
        } else {
            (self.graph.outputs.iter().enumerate())
                .filter(|(k, _)| !skip_outputs.contains(k))
                .map(|(_, o)| o.0)
                .collect()
        };
        let mut out = Vec::with_capacity(want.len());
        for i in want {
            let node = &self.graph.nodes[i];
            let buf = self.buf_of(plan, i);
            out.push(Some(from_buf(buf, &plan.shapes[i], node.shape.dtype)));
        }
        Ok(out)
    }

    fn buf_of<'a>(&'a self, plan: &Plan, i: usize) -> Buf<'a> {
        let arenas = Arenas {
            f32: (self.f32a.as_ptr() as *mut f32, self.f32a.len()),
            f64: (self.f64a.as_ptr() as *mut f64, self.f64a.len()),
            i64: (self.i64a.as_ptr() as *mut i64, self.i64a.len()),
        };
        // SAFETY: a shared borrow of self covers the arenas for 'a; nothing writes meanwhile.
        unsafe { read_loc(&arenas, &self.leaves, plan.locs[i]) }
    }

    fn execute(&mut self) -> Result<(), CpuError> {
        let plan = self.plan.take().expect("plan");
        let result = self.execute_plan(&plan);
        self.plan = Some(plan);
        result
    }

    fn execute_plan(&mut self, plan: &Plan) -> Result<(), CpuError> {
        let arenas = Arenas {
            f32: (self.f32a.as_mut_ptr(), self.f32a.len()),
            f64: (self.f64a.as_mut_ptr(), self.f64a.len()),
            i64: (self.i64a.as_mut_ptr(), self.i64a.len()),
        };
        for (i, node) in self.graph.nodes.iter().enumerate() {
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
            let mut ins = Vec::with_capacity(node.inputs.len());
            for &inp in &node.inputs {
                let j = inp.0;
                // SAFETY: bounds are checked in read_loc; the output slice below is disjoint
                // from every input (checked above) and from leaf storage.
                let data = unsafe { read_loc(&arenas, &self.leaves, plan.locs[j]) };
                ins.push(TensorView {
                    shape: &plan.shapes[j],
                    dtype: self.graph.nodes[j].shape.dtype,
                    data,
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
            crate::ops::eval(node, &ins, out_view).map_err(|e| match e {
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

/// # Safety
/// The range must not be mutably borrowed while the returned view lives.
unsafe fn read_loc<'a>(arenas: &Arenas, leaves: &'a [Option<Storage>], loc: Loc) -> Buf<'a> {
    match loc {
        Loc::Leaf { node, off, len } => match leaves[node].as_ref().expect("leaf set").as_buf() {
            Buf::F32(s) => Buf::F32(&s[off..off + len]),
            Buf::F64(s) => Buf::F64(&s[off..off + len]),
            Buf::I64(s) => Buf::I64(&s[off..off + len]),
        },
        Loc::Arena { pool, off, len } => {
            let get = |(p, n): (*mut f32, usize)| {
                assert!(off + len <= n, "arena read out of bounds");
                Buf::F32(std::slice::from_raw_parts(p.add(off), len))
            };
            match pool {
                0 => get(arenas.f32),
                1 => {
                    assert!(off + len <= arenas.f64.1, "arena read out of bounds");
                    Buf::F64(std::slice::from_raw_parts(arenas.f64.0.add(off), len))
                }
                _ => {
                    assert!(off + len <= arenas.i64.1, "arena read out of bounds");
                    Buf::I64(std::slice::from_raw_parts(arenas.i64.0.add(off), len))
                }
            }
        }
    }
}

/// Check a host tensor against a declared shape; dynamic dims must agree with `bindings`.
fn check_tensor(
    want: &Shape,
    t: &HostTensor,
    bindings: &HashMap<String, usize>,
) -> Result<(), String> {
    if t.dtype != want.dtype {
        return Err(format!(
            "dtype {} given, the graph declares {}",
            t.dtype, want.dtype
        ));
    }
    let bytes = t.numel() * t.dtype.size_bytes();
    if t.data.len() != bytes {
        return Err(format!(
            "{} bytes given for shape {:?} of {}, need {bytes}",
            t.data.len(),
            t.shape,
            t.dtype
        ));
    }
    let ok = t.shape.len() == want.rank()
        && want.dims.iter().zip(&t.shape).all(|(d, &n)| match d {
            Dim::Static(m) => *m == n,
            Dim::Dynamic(s) => bindings.get(s).is_none_or(|&b| b == n),
        });
    if !ok {
        return Err(format!(
            "shape {:?} given, the graph declares {want}",
            t.shape
        ));
    }
    Ok(())
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
