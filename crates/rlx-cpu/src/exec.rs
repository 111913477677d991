//! The executor: binds shapes, plans the arena, runs one thunk per node.
use crate::buffer::{Buf, BufMut, OutView, Storage, TensorView};
use crate::error::CpuError;
use half::{bf16, f16};
use rlx_ir::{ops::infer_shape, ComputeClass, DType, Dim, Graph, HostTensor, Node, Op, Shape};
use std::collections::HashMap;

/// Where a node's value lives.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Loc {
    Leaf,
    Arena { off: usize, len: usize },
}

/// The arena layout for one binding of the graph's dynamic dims.
#[derive(Clone, Debug)]
struct Plan {
    shapes: Vec<Vec<usize>>,
    locs: Vec<Loc>,
    sizes: [usize; 3],
    /// Nodes whose own parameters hold bound symbols (Expand targets), rewritten.
    bound: Vec<Option<Node>>,
}

fn class_idx(c: ComputeClass) -> usize {
    match c {
        ComputeClass::F32 => 0,
        ComputeClass::F64 => 1,
        ComputeClass::I64 => 2,
    }
}

/// A graph ready to run on the CPU.
pub struct CpuExecutable {
    graph: Graph,
    leaves: Vec<Option<Storage>>,
    plan: Option<Plan>,
    bindings: HashMap<String, usize>,
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
        self.plan
            .as_ref()
            .map(|p| p.sizes[0] * 4 + p.sizes[1] * 8 + p.sizes[2] * 8)
            .unwrap_or(0)
    }

    /// Set a weight by name; its shape and dtype must match the graph's param.
    pub fn set_param(&mut self, name: &str, value: &HostTensor) -> Result<(), CpuError> {
        let node = self
            .graph
            .nodes
            .iter()
            .find(|n| matches!(&n.op, Op::Param { name: p } if p == name))
            .ok_or_else(|| CpuError::Param {
                name: name.into(),
                msg: "the graph has no such param".into(),
            })?;
        check_tensor(&node.shape, value, &HashMap::new()).map_err(|msg| CpuError::Param {
            name: name.into(),
            msg,
        })?;
        self.leaves[node.id.0] = Some(to_storage(value));
        Ok(())
    }

    /// Run with named inputs; returns the graph's outputs in order.
    pub fn run(&mut self, inputs: &[(&str, HostTensor)]) -> Result<Vec<HostTensor>, CpuError> {
        let values = self.run_nodes(inputs, false)?;
        Ok(values.into_iter().flatten().collect())
    }

    /// Run and return every node's value (leaves included), indexed by node id.
    /// Used by verify mode to find the first diverging node.
    pub fn run_all(&mut self, inputs: &[(&str, HostTensor)]) -> Result<Vec<HostTensor>, CpuError> {
        let values = self.run_nodes(inputs, true)?;
        Ok(values.into_iter().flatten().collect())
    }

    fn run_nodes(
        &mut self,
        inputs: &[(&str, HostTensor)],
        all: bool,
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
            self.plan = Some(self.make_plan(&bindings)?);
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
            self.graph.outputs.iter().map(|o| o.0).collect()
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
        match plan.locs[i] {
            Loc::Leaf => self.leaves[i].as_ref().expect("leaf set").as_buf(),
            Loc::Arena { off, len } => match self.graph.nodes[i].shape.dtype.compute_class() {
                ComputeClass::F32 => Buf::F32(&self.f32a[off..off + len]),
                ComputeClass::F64 => Buf::F64(&self.f64a[off..off + len]),
                ComputeClass::I64 => Buf::I64(&self.i64a[off..off + len]),
            },
        }
    }

    /// Concrete shapes for this binding and a bump layout in node order (so every input of
    /// a node sits below the node's own offset in its class arena).
    fn make_plan(&self, bindings: &HashMap<String, usize>) -> Result<Plan, CpuError> {
        let g = &self.graph;
        let mut shapes: Vec<Shape> = Vec::with_capacity(g.nodes.len());
        let mut locs = Vec::with_capacity(g.nodes.len());
        let mut sizes = [0usize; 3];
        let mut bound = Vec::with_capacity(g.nodes.len());
        for n in &g.nodes {
            let b =
                rlx_ir::ops::shape_ops::bind_op(&n.op, bindings).map(|op| Node { op, ..n.clone() });
            let op = b.as_ref().map_or(&n.op, |b| &b.op);
            let s = if n.op.is_leaf() {
                n.shape.bind(bindings)
            } else {
                let ins: Vec<&Shape> = n.inputs.iter().map(|i| &shapes[i.0]).collect();
                infer_shape(op, &ins).map_err(|msg| CpuError::Op {
                    node: label(n),
                    op: n.op.kind(),
                    msg,
                })?
            };
            bound.push(b);
            if !s.is_static() {
                return Err(CpuError::Op {
                    node: label(n),
                    op: n.op.kind(),
                    msg: format!("shape {s} still has an unbound dynamic dim"),
                });
            }
            if n.op.is_leaf() {
                locs.push(Loc::Leaf);
            } else {
                let len = s.numel().expect("static");
                let c = class_idx(s.dtype.compute_class());
                locs.push(Loc::Arena { off: sizes[c], len });
                sizes[c] += len;
            }
            shapes.push(s);
        }
        Ok(Plan {
            shapes: shapes
                .into_iter()
                .map(|s| s.static_dims().expect("static"))
                .collect(),
            locs,
            sizes,
            bound,
        })
    }

    fn execute(&mut self) -> Result<(), CpuError> {
        let plan = self.plan.take().expect("plan");
        let result = self.execute_plan(&plan);
        self.plan = Some(plan);
        result
    }

    fn execute_plan(&mut self, plan: &Plan) -> Result<(), CpuError> {
        for (i, node) in self.graph.nodes.iter().enumerate() {
            let Loc::Arena { off, len } = plan.locs[i] else {
                continue;
            };
            let class = node.shape.dtype.compute_class();
            // Split the output's class arena at its offset: inputs live below it.
            let (f32lo, f64lo, i64lo, out): (&[f32], &[f64], &[i64], BufMut) = match class {
                ComputeClass::F32 => {
                    let (lo, hi) = self.f32a.split_at_mut(off);
                    (lo, &self.f64a, &self.i64a, BufMut::F32(&mut hi[..len]))
                }
                ComputeClass::F64 => {
                    let (lo, hi) = self.f64a.split_at_mut(off);
                    (&self.f32a, lo, &self.i64a, BufMut::F64(&mut hi[..len]))
                }
                ComputeClass::I64 => {
                    let (lo, hi) = self.i64a.split_at_mut(off);
                    (&self.f32a, &self.f64a, lo, BufMut::I64(&mut hi[..len]))
                }
            };
            let mut ins = Vec::with_capacity(node.inputs.len());
            for &inp in &node.inputs {
                let j = inp.0;
                let dtype = self.graph.nodes[j].shape.dtype;
                let data = match plan.locs[j] {
                    Loc::Leaf => self.leaves[j].as_ref().expect("leaf set").as_buf(),
                    Loc::Arena { off, len } => match dtype.compute_class() {
                        ComputeClass::F32 => Buf::F32(&f32lo[off..off + len]),
                        ComputeClass::F64 => Buf::F64(&f64lo[off..off + len]),
                        ComputeClass::I64 => Buf::I64(&i64lo[off..off + len]),
                    },
                };
                ins.push(TensorView {
                    shape: &plan.shapes[j],
                    dtype,
                    data,
                });
            }
            let dtype = node.shape.dtype;
            let out_view = OutView {
                shape: &plan.shapes[i],
                dtype,
                data: out,
            };
            let node = plan.bound[i].as_ref().unwrap_or(node);
            crate::ops::eval(node, &ins, out_view).map_err(|e| match e {
                CpuError::Op { msg, .. } => CpuError::Op {
                    node: label(node),
                    op: node.op.kind(),
                    msg,
                },
                other => other,
            })?;
            let out = match class {
                ComputeClass::F32 => BufMut::F32(&mut self.f32a[off..off + len]),
                ComputeClass::F64 => BufMut::F64(&mut self.f64a[off..off + len]),
                ComputeClass::I64 => BufMut::I64(&mut self.i64a[off..off + len]),
            };
            normalise(out, dtype);
        }
        Ok(())
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
