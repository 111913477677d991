//! The graph: append-only nodes in topological order.
use crate::{ops, HostTensor, IrError, Op, Shape};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Index of a node in its graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeId(pub usize);

impl NodeId {
    pub fn index(self) -> usize {
        self.0
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub id: NodeId,
    pub op: Op,
    pub inputs: Vec<NodeId>,
    pub shape: Shape,
    pub name: Option<String>,
}

impl Node {
    /// `%3 "name"` or `%3`, for messages.
    pub fn label(&self) -> String {
        match &self.name {
            Some(n) => format!("{} \"{}\"", self.id, n),
            None => self.id.to_string(),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Graph {
    pub name: String,
    pub nodes: Vec<Node>,
    pub outputs: Vec<NodeId>,
}

impl Graph {
    pub fn new(name: impl Into<String>) -> Graph {
        Graph {
            name: name.into(),
            nodes: Vec::new(),
            outputs: Vec::new(),
        }
    }

    pub fn node(&self, id: NodeId) -> Result<&Node, IrError> {
        self.nodes.get(id.0).ok_or(IrError::UnknownNode(id))
    }

    pub fn shape(&self, id: NodeId) -> Result<&Shape, IrError> {
        Ok(&self.node(id)?.shape)
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Append a node whose shape the op's rule infers from its inputs.
    pub fn add_node(&mut self, op: Op, inputs: &[NodeId]) -> Result<NodeId, IrError> {
        let id = NodeId(self.nodes.len());
        let mut shapes = Vec::with_capacity(inputs.len());
        for &i in inputs {
            shapes.push(self.shape(i).map_err(|_| IrError::Build {
                op: op.kind(),
                node: id,
                inputs: format!("{inputs:?}"),
                msg: format!("input {i} does not exist"),
            })?);
        }
        let shape = ops::infer_shape(&op, &shapes).map_err(|msg| IrError::Build {
            op: op.kind(),
            node: id,
            inputs: shapes
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            msg,
        })?;
        self.nodes.push(Node {
            id,
            op,
            inputs: inputs.to_vec(),
            shape,
            name: None,
        });
        Ok(id)
    }

    /// Append a node with an explicit shape (leaves; deserialised or rewritten graphs).
    pub fn push_node(&mut self, op: Op, inputs: Vec<NodeId>, shape: Shape) -> NodeId {
        let id = NodeId(self.nodes.len());
        self.nodes.push(Node {
            id,
            op,
            inputs,
            shape,
            name: None,
        });
        id
    }

    /// Give a node a readable name (shown in dumps and errors).
    pub fn set_name(&mut self, id: NodeId, name: impl Into<String>) -> Result<(), IrError> {
        let n = self.nodes.get_mut(id.0).ok_or(IrError::UnknownNode(id))?;
        n.name = Some(name.into());
        Ok(())
    }

    /// A per-run input; its name must be new among the graph's inputs.
    pub fn input(&mut self, name: impl Into<String>, shape: Shape) -> Result<NodeId, IrError> {
        let name = name.into();
        self.leaf(Op::Input { name: name.clone() }, name, shape)
    }

    /// A weight, set once per compiled graph; its name must be new among the graph's params.
    pub fn param(&mut self, name: impl Into<String>, shape: Shape) -> Result<NodeId, IrError> {
        let name = name.into();
        self.leaf(Op::Param { name: name.clone() }, name, shape)
    }

    /// A named Input or Param leaf, after the checks `verify` makes on it.
    fn leaf(&mut self, op: Op, name: String, shape: Shape) -> Result<NodeId, IrError> {
        let id = NodeId(self.nodes.len());
        let kind = op.kind();
        if let Some(first) = self.leaf_named(kind, &name) {
            return Err(IrError::DuplicateName {
                kind,
                name,
                first,
                second: id,
            });
        }
        shape.check_size().map_err(|msg| IrError::Build {
            op: kind,
            node: id,
            inputs: String::new(),
            msg,
        })?;
        self.push_node(op, vec![], shape);
        self.nodes[id.0].name = Some(name);
        Ok(id)
    }

    /// The first Input or Param (as `kind` says) called `name`.
    fn leaf_named(&self, kind: crate::OpKind, name: &str) -> Option<NodeId> {
        self.nodes.iter().find_map(|n| match &n.op {
            Op::Input { name: m } | Op::Param { name: m } if n.op.kind() == kind && m == name => {
                Some(n.id)
            }
            _ => None,
        })
    }

    /// A constant baked into the graph.
    pub fn constant(&mut self, value: HostTensor) -> Result<NodeId, IrError> {
        let shape = Shape::new(&value.shape, value.dtype);
        shape.check_size().map_err(IrError::Tensor)?;
        let want = shape.byte_size();
        if want != Some(value.data.len()) {
            return Err(IrError::Tensor(format!(
                "constant {shape} needs {} bytes, got {}",
                want.map_or("more than usize::MAX".into(), |w| w.to_string()),
                value.data.len()
            )));
        }
        Ok(self.push_node(Op::Constant { data: value.data }, vec![], shape))
    }

    /// An f32 constant.
    pub fn constant_f32(&mut self, dims: &[usize], data: &[f32]) -> Result<NodeId, IrError> {
        let want = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        if want != Some(data.len()) {
            return Err(IrError::Tensor(format!(
                "constant of shape {dims:?} needs {} values, got {}",
                want.map_or("more than usize::MAX".into(), |w| w.to_string()),
                data.len()
            )));
        }
        self.constant(HostTensor::from_f32(dims, data))
    }

    /// A 0-d constant of `dtype`.
    pub fn scalar(&mut self, value: f64, dtype: crate::DType) -> Result<NodeId, IrError> {
        self.constant(HostTensor::from_f64_as(&[], &[value], dtype))
    }

    pub fn set_outputs(&mut self, outputs: Vec<NodeId>) {
        self.outputs = outputs;
    }

    /// Names and shapes of the graph's inputs, in node order.
    pub fn inputs(&self) -> impl Iterator<Item = (&str, &Shape)> {
        self.nodes.iter().filter_map(|n| match &n.op {
            Op::Input { name } => Some((name.as_str(), &n.shape)),
            _ => None,
        })
    }

    /// Names and shapes of the graph's params, in node order.
    pub fn params(&self) -> impl Iterator<Item = (&str, &Shape)> {
        self.nodes.iter().filter_map(|n| match &n.op {
            Op::Param { name } => Some((name.as_str(), &n.shape)),
            _ => None,
        })
    }
}

/// Anything usable as an axis argument (`1`, `-1`, a `usize` variable …).
pub trait AxisArg: Copy {
    fn to_axis(self) -> i64;
}

macro_rules! axis_arg {
    ($($t:ty),*) => {$(
        impl AxisArg for $t {
            fn to_axis(self) -> i64 {
                self as i64
            }
        }
    )*};
}
axis_arg!(i32, i64, isize, usize, u32);

impl From<&Graph> for Graph {
    fn from(g: &Graph) -> Graph {
        g.clone()
    }
}
