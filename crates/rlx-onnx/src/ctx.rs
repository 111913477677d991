//! The import context a node translator works in: the graph being built, the values known
//! by ONNX name, lazily materialised initializers, and folding — a node whose inputs are all
//! constants is run at once on the CPU executor (the reference), so `Shape → Gather → Concat →
//! Reshape` chains become static shapes without a second implementation of any op.
use crate::proto::NodeProto;
use crate::OnnxError;
use rlx_cpu::CpuConstEvaluator;
use rlx_ir::{DType, Graph, HostTensor, NodeId, Op, Shape};
use rlx_opt::ConstEvaluator;
use std::collections::HashMap;

/// Initializers up to this many elements become constants (foldable), larger float ones
/// become params (weights the caller sets once).
const SMALL_INIT: usize = 64;
/// Folding stops above this many output elements (keeps import memory bounded).
const FOLD_LIMIT: usize = 1 << 22;
/// The most elements a translator builds on the host (masks, index tables, ones maps): a
/// file declaring absurd dims gets an error instead of exhausting memory. 64 Mi elements is
/// an 8192² causal mask, which a model exported with static shapes at an 8k context builds.
const HOST_LIMIT: usize = 1 << 26;

/// A value known by name.
#[derive(Clone, Debug)]
enum Value {
    Node(NodeId),
    /// An initializer not yet used: it becomes a constant or a param at first use.
    Init(HostTensor),
}

pub struct ImportCtx {
    pub graph: Graph,
    /// Opset of the default (`ai.onnx`) domain.
    pub opset: i64,
    values: HashMap<String, Value>,
    pub(crate) params: Vec<(String, HostTensor)>,
    /// Values of graph inputs to specialise on where a node needs them at import time
    /// (a Reshape's shape, a Reduce's axes fed as inputs); see `ImportOptions`.
    hints: HashMap<String, HostTensor>,
    /// ONNX element type codes of graph inputs and initializers, by name (rlx widens some
    /// integer types; ops whose result range depends on the exact type read it here).
    pub(crate) onnx_types: HashMap<String, i32>,
    /// The inputs that were read through `hints`.
    pub(crate) specialized: Vec<String>,
    /// Every opset the model imports (domain, version): subgraphs (Scan, If, Loop bodies)
    /// are translated under them.
    pub(crate) opsets: Vec<(String, i64)>,
    /// The node being translated (for messages).
    node_name: String,
    op_type: String,
}

impl ImportCtx {
    pub fn new(name: &str, opset: i64) -> ImportCtx {
        ImportCtx {
            graph: Graph::new(name),
            opset,
            values: HashMap::new(),
            params: Vec::new(),
            hints: HashMap::new(),
            onnx_types: HashMap::new(),
            specialized: Vec::new(),
            opsets: Vec::new(),
            node_name: String::new(),
            op_type: String::new(),
        }
    }

    pub(crate) fn begin(&mut self, node: &NodeProto) {
        self.node_name = node.name.clone().unwrap_or_default();
        if self.node_name.is_empty() {
            self.node_name = node.output.first().cloned().unwrap_or_default();
        }
        self.op_type = node.op_type.clone().unwrap_or_default();
    }

    /// An error about the current node.
    pub fn err(&self, msg: impl Into<String>) -> OnnxError {
        OnnxError::Node {
            node: self.node_name.clone(),
            op_type: self.op_type.clone(),
            opset: self.opset,
            msg: msg.into(),
        }
    }

    /// "rlx cannot do this" about the current node.
    pub fn unsupported(&self, what: impl Into<String>) -> OnnxError {
        OnnxError::Unsupported {
            node: self.node_name.clone(),
            op_type: self.op_type.clone(),
            opset: self.opset,
            what: what.into(),
        }
    }

    pub(crate) fn set_hints(&mut self, hints: HashMap<String, HostTensor>) {
        self.hints = hints;
    }

    pub(crate) fn define(&mut self, name: &str, id: NodeId) {
        self.values.insert(name.to_string(), Value::Node(id));
    }

    pub(crate) fn define_init(&mut self, name: &str, t: HostTensor) {
        self.values.insert(name.to_string(), Value::Init(t));
    }

    pub(crate) fn is_defined(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// The node holding value `name`, materialising an initializer on first use.
    pub fn value(&mut self, name: &str) -> Result<NodeId, OnnxError> {
        match self.values.get(name) {
            Some(Value::Node(id)) => Ok(*id),
            Some(Value::Init(t)) => {
                let t = t.clone();
                let id = if t.numel() <= SMALL_INIT || !t.dtype.is_float() {
                    self.constant(t)?
                } else {
                    let shape = Shape::new(&t.shape, t.dtype);
                    let id = self
                        .graph
                        .param(name, shape)
                        .map_err(|e| self.err(e.to_string()))?;
                    self.params.push((name.to_string(), t));
                    id
                };
                self.define(name, id);
                Ok(id)
            }
            None => Err(self.err(format!("input \"{name}\" is not defined before it is used"))),
        }
    }

    /// Input `i` of `node` (required).
    pub fn input(&mut self, node: &NodeProto, i: usize) -> Result<NodeId, OnnxError> {
        self.opt_input(node, i)?
            .ok_or_else(|| self.err(format!("input {i} is required")))
    }

    /// Input `i` of `node`, or None when absent or given as "".
    pub fn opt_input(&mut self, node: &NodeProto, i: usize) -> Result<Option<NodeId>, OnnxError> {
        match node.input.get(i) {
            Some(n) if !n.is_empty() => self.value(n).map(Some),
            _ => Ok(None),
        }
    }

    /// Every present input of `node`.
    pub fn inputs(&mut self, node: &NodeProto) -> Result<Vec<NodeId>, OnnxError> {
        let mut v = vec![];
        for i in 0..node.input.len() {
            if let Some(id) = self.opt_input(node, i)? {
                v.push(id);
            }
        }
        Ok(v)
    }

    /// The value of input `i` when it is known at import time (an initializer, a constant, a
    /// folded node); None when absent; an "unsupported" error when it is only known at run time.
    pub fn const_input(
        &mut self,
        node: &NodeProto,
        i: usize,
    ) -> Result<Option<HostTensor>, OnnxError> {
        let Some(name) = node.input.get(i).filter(|n| !n.is_empty()) else {
            return Ok(None);
        };
        if let Some(Value::Init(t)) = self.values.get(name) {
            return Ok(Some(t.clone()));
        }
        let id = self.value(name)?;
        if let Some(v) = self.known(id) {
            return Ok(Some(v));
        }
        let input = match &self.graph.nodes[id.0].op {
            Op::Input { name } => Some(name.clone()),
            _ => None,
        };
        if let Some(h) = input.as_ref().and_then(|n| self.hints.get(n)) {
            let h = h.clone();
            let input = input.unwrap_or_default();
            if !self.specialized.contains(&input) {
                self.specialized.push(input);
            }
            return Ok(Some(h));
        }
        // A value computed from hinted inputs (a Range bound cast from a size input): run
        // its cone on the CPU evaluator with the hints as the inputs' values.
        let mut memo = HashMap::new();
        let mut used = vec![];
        if let Some(v) = self.eval_cone(id, &mut memo, &mut used) {
            for u in used {
                if !self.specialized.contains(&u) {
                    self.specialized.push(u);
                }
            }
            return Ok(Some(v));
        }
        None.ok_or_else(|| {
            self.unsupported(format!(
                "input {i} (\"{name}\") must be known at import time (a constant or a static shape)"
            ))
        })
    }

    /// The value of `id` when every input of its cone is a constant or a hinted graph input
    /// (whose names go to `used`); None on a param, an unhinted input, or a large tensor.
    fn eval_cone(
        &self,
        id: NodeId,
        memo: &mut HashMap<NodeId, HostTensor>,
        used: &mut Vec<String>,
    ) -> Option<HostTensor> {
        if let Some(v) = memo.get(&id) {
            return Some(v.clone());
        }
        let node = self.graph.nodes.get(id.0)?;
        if node.shape.numel().is_none_or(|n| n > FOLD_LIMIT) {
            return None;
        }
        let v = match &node.op {
            Op::Constant { .. } => self.known(id)?,
            Op::Input { name } => {
                let h = self.hints.get(name)?.clone();
                used.push(name.clone());
                h
            }
            Op::Param { .. } => return None,
            op => {
                let mut vals = vec![];
                for &i in &node.inputs {
                    vals.push(self.eval_cone(i, memo, used)?);
                }
                CpuConstEvaluator.eval(op, &vals, &node.shape)?
            }
        };
        memo.insert(id, v.clone());
        Some(v)
    }

    /// `const_input` read as integers.
    pub fn const_ints(
        &mut self,
        node: &NodeProto,
        i: usize,
    ) -> Result<Option<Vec<i64>>, OnnxError> {
        Ok(self.const_input(node, i)?.map(|t| t.to_i64_vec()))
    }

    /// The ONNX element type code of input `i` when it is a graph input or initializer.
    pub fn onnx_type(&self, node: &NodeProto, i: usize) -> Option<i32> {
        node.input
            .get(i)
            .and_then(|n| self.onnx_types.get(n))
            .copied()
    }

    /// The value of a node when it is a constant.
    pub fn known(&self, id: NodeId) -> Option<HostTensor> {
        let n = self.graph.nodes.get(id.0)?;
        match &n.op {
            Op::Constant { data } => Some(HostTensor {
                shape: n.shape.static_dims()?,
                dtype: n.shape.dtype,
                data: data.clone(),
            }),
            _ => None,
        }
    }

    /// Refuse to build a host table of `numel` elements above the import limit.
    pub fn limit(&self, what: &str, numel: usize) -> Result<(), OnnxError> {
        if numel > HOST_LIMIT {
            return Err(self.unsupported(format!(
                "{what} of {numel} elements (more than {HOST_LIMIT} built at import)"
            )));
        }
        Ok(())
    }

    pub fn shape(&self, id: NodeId) -> Result<&Shape, OnnxError> {
        self.graph.shape(id).map_err(|e| self.err(e.to_string()))
    }

    /// The static dims of a node, or "unsupported" when a dim is symbolic.
    pub fn static_dims(&self, id: NodeId) -> Result<Vec<usize>, OnnxError> {
        let s = self.shape(id)?;
        s.static_dims()
            .ok_or_else(|| self.unsupported(format!("needs static dims, got {s}")))
    }

    /// `static_dims` of a value that must have rank `rank`; `what` names it in the error
    /// (translators index these dims, so a wrong rank must stop here).
    pub fn dims_of_rank(
        &self,
        id: NodeId,
        rank: usize,
        what: &str,
    ) -> Result<Vec<usize>, OnnxError> {
        let d = self.static_dims(id)?;
        if d.len() != rank {
            return Err(self.err(format!("{what} must have rank {rank}, got dims {d:?}")));
        }
        Ok(d)
    }

    pub fn rank(&self, id: NodeId) -> Result<usize, OnnxError> {
        Ok(self.shape(id)?.rank())
    }

    pub fn dtype(&self, id: NodeId) -> Result<DType, OnnxError> {
        Ok(self.shape(id)?.dtype)
    }

    pub fn constant(&mut self, t: HostTensor) -> Result<NodeId, OnnxError> {
        self.graph.constant(t).map_err(|e| self.err(e.to_string()))
    }

    /// A 0-d constant of `dtype`.
    pub fn scalar(&mut self, v: f64, dtype: DType) -> Result<NodeId, OnnxError> {
        self.constant(HostTensor::from_f64_as(&[], &[v], dtype))
    }

    /// Add an op; when every input is a constant it is evaluated now on the CPU executor and
    /// the result is a constant (folding), so later nodes can read it as a static value.
    pub fn add(&mut self, op: Op, inputs: &[NodeId]) -> Result<NodeId, OnnxError> {
        let id = self
            .graph
            .add_node(op.clone(), inputs)
            .map_err(|e| self.err(e.to_string()))?;
        let vals: Option<Vec<HostTensor>> = inputs.iter().map(|&i| self.known(i)).collect();
        let out = self.graph.nodes[id.0].shape.clone();
        let small = out.numel().is_some_and(|n| n <= FOLD_LIMIT);
        if let (Some(vals), true, false) = (vals, small, inputs.is_empty()) {
            if let Some(t) = CpuConstEvaluator.eval(&op, &vals, &out) {
                // The node was the last one appended and nothing uses it yet: replace it.
                self.graph.nodes.pop();
                return self.constant(t);
            }
        }
        Ok(id)
    }
}
