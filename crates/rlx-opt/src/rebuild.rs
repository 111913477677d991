//! The rebuild helper every pass uses: walk the old graph in order, decide per node whether
//! to copy it, replace it by an existing new node, or emit something else, and let this
//! keep the old → new id map, names and outputs.
use crate::OptError;
use rlx_ir::{ops::infer_shape, Graph, Node, NodeId, Op, Shape};

pub struct Rebuilder<'a> {
    pass: &'static str,
    old: &'a Graph,
    new: Graph,
    map: Vec<Option<NodeId>>,
}

impl<'a> Rebuilder<'a> {
    pub fn new(pass: &'static str, old: &'a Graph) -> Rebuilder<'a> {
        Rebuilder {
            pass,
            old,
            new: Graph::new(old.name.clone()),
            map: vec![None; old.nodes.len()],
        }
    }

    /// The graph being rewritten.
    pub fn old(&self) -> &'a Graph {
        self.old
    }

    /// The graph built so far.
    pub fn graph(&self) -> &Graph {
        &self.new
    }

    /// An error naming this pass and `node`.
    pub fn error(&self, node: &Node, msg: impl Into<String>) -> OptError {
        OptError::Node {
            pass: self.pass,
            node: node.id,
            op: node.op.kind().name(),
            msg: msg.into(),
        }
    }

    /// The new id of an old node, if it has been given one.
    pub fn get(&self, old: NodeId) -> Option<NodeId> {
        self.map.get(old.0).copied().flatten()
    }

    /// The new id of an old node; an error if it was dropped or not reached yet (a graph out
    /// of topological order, or a pass dropping a node that is still used).
    pub fn map(&self, old: NodeId) -> Result<NodeId, OptError> {
        self.get(old).ok_or_else(|| OptError::Node {
            pass: self.pass,
            node: old,
            op: self
                .old
                .nodes
                .get(old.0)
                .map_or("?", |n| n.op.kind().name()),
            msg: "used before it was rebuilt (or after it was dropped)".into(),
        })
    }

    /// The new ids of `node`'s inputs.
    pub fn inputs(&self, node: &Node) -> Result<Vec<NodeId>, OptError> {
        node.inputs
            .iter()
            .map(|&i| {
                self.get(i)
                    .ok_or_else(|| self.error(node, format!("input {i} has no rebuilt node")))
            })
            .collect()
    }

    /// The node the new graph holds for an old id (for looking through rewritten inputs).
    pub fn new_node(&self, new: NodeId) -> Result<&Node, OptError> {
        self.new.node(new).map_err(|source| OptError::Ir {
            pass: self.pass,
            source,
        })
    }

    /// Copy an old node unchanged (inputs remapped, shape and name kept).
    pub fn copy(&mut self, old: NodeId) -> Result<NodeId, OptError> {
        let node = self.old_node(old)?;
        let inputs = self.inputs(node)?;
        let id = self
            .new
            .push_node(node.op.clone(), inputs, node.shape.clone());
        self.new.nodes[id.0].name = node.name.clone();
        self.map[old.0] = Some(id);
        Ok(id)
    }

    /// From now on `old` means the existing new node `new`. Their shapes must be equal, so a
    /// rewrite can never change what a consumer sees; the old name moves over when `new` has
    /// none.
    pub fn replace(&mut self, old: NodeId, new: NodeId) -> Result<(), OptError> {
        let node = self.old_node(old)?;
        let target = self.new_node(new)?;
        if target.shape != node.shape {
            return Err(self.error(
                node,
                format!(
                    "replacement {new} has shape {}, the node has {}",
                    target.shape, node.shape
                ),
            ));
        }
        if target.name.is_none() && !target.op.is_leaf() {
            self.new.nodes[new.0].name = node.name.clone();
        }
        self.map[old.0] = Some(new);
        Ok(())
    }

    /// Emit `op` over new-graph `inputs` in place of `old`, if the op's shape rule gives
    /// exactly `old`'s shape; `None` (nothing emitted) otherwise, so the caller falls back
    /// to copying. This keeps symbolic dims from changing under a rewrite.
    pub fn try_emit(
        &mut self,
        old: NodeId,
        op: Op,
        inputs: Vec<NodeId>,
    ) -> Result<Option<NodeId>, OptError> {
        let node = self.old_node(old)?;
        let shapes: Vec<&Shape> = inputs
            .iter()
            .map(|&i| self.new_node(i).map(|n| &n.shape))
            .collect::<Result<_, _>>()?;
        match infer_shape(&op, &shapes) {
            Ok(s) if s == node.shape => {
                let name = node.name.clone();
                let id = self.new.push_node(op, inputs, s);
                self.new.nodes[id.0].name = name;
                self.map[old.0] = Some(id);
                Ok(Some(id))
            }
            _ => Ok(None),
        }
    }

    /// Emit a leaf or any node with a shape the caller vouches for, in place of `old`.
    pub fn emit_with_shape(
        &mut self,
        old: NodeId,
        op: Op,
        inputs: Vec<NodeId>,
        shape: Shape,
    ) -> Result<NodeId, OptError> {
        let node = self.old_node(old)?;
        let name = node.name.clone();
        let id = self.new.push_node(op, inputs, shape);
        self.new.nodes[id.0].name = name;
        self.map[old.0] = Some(id);
        Ok(id)
    }

    /// Add a helper node over new-graph `inputs` that stands for no old node (the pieces of
    /// an expansion); its shape comes from the op's shape rule.
    pub fn add(&mut self, op: Op, inputs: &[NodeId]) -> Result<NodeId, OptError> {
        self.new
            .add_node(op, inputs)
            .map_err(|source| OptError::Ir {
                pass: self.pass,
                source,
            })
    }

    /// `x` (a new-graph node) as a rank-1 vector for a fused op's bias: itself when rank 1,
    /// the vector behind it when it is a (chain of) reshape(s) of one, else a reshape of the
    /// first non-reshape source, spelled as `Simplify` would fold a reshape of a reshape
    /// (static dims when known) and shared with an identical node already built. Anything
    /// else (a reshape on a reshape, a duplicate for CSE) would leave the next pipeline run
    /// something to do, and the pipeline must be idempotent.
    pub fn as_vector(&mut self, x: NodeId) -> Result<NodeId, OptError> {
        let node = self.new_node(x)?;
        if node.shape.rank() == 1 {
            return Ok(x);
        }
        let numel = node
            .shape
            .static_dims()
            .map(|d| d.iter().product::<usize>());
        let mut src = x;
        loop {
            let n = self.new_node(src)?;
            match (&n.op, n.inputs.as_slice()) {
                (Op::Reshape { .. }, [inner]) => src = *inner,
                _ => break,
            }
        }
        if src != x && self.new_node(src)?.shape.rank() == 1 {
            return Ok(src);
        }
        let spec = match numel {
            Some(n) if src != x => vec![n as i64],
            _ => vec![-1],
        };
        let op = Op::Reshape { shape: spec };
        let built = self
            .new
            .nodes
            .iter()
            .find(|m| m.op == op && m.inputs == [src])
            .map(|m| m.id);
        if let Some(id) = built {
            return Ok(id);
        }
        // An identical old node not rebuilt yet is rebuilt now and serves as the bias; the
        // fusion driver skips old nodes already rebuilt when it reaches them.
        let twin = self.old.nodes.iter().find(|o| {
            o.op == op
                && o.inputs.len() == 1
                && self.get(o.inputs[0]) == Some(src)
                && self.get(o.id).is_none()
        });
        match twin.map(|o| o.id) {
            Some(o) => self.copy(o),
            None => self.add(op, &[src]),
        }
    }

    /// Drop `old`: nothing in the new graph stands for it.
    pub fn drop_node(&mut self, old: NodeId) {
        if let Some(m) = self.map.get_mut(old.0) {
            *m = None;
        }
    }

    /// The finished graph, outputs remapped.
    pub fn finish(self) -> Result<Graph, OptError> {
        let mut g = self.new;
        let mut outputs = Vec::with_capacity(self.old.outputs.len());
        for &o in &self.old.outputs {
            let id = self.map.get(o.0).copied().flatten().ok_or(OptError::Node {
                pass: self.pass,
                node: o,
                op: self.old.nodes.get(o.0).map_or("?", |n| n.op.kind().name()),
                msg: "a graph output has no rebuilt node".into(),
            })?;
            outputs.push(id);
        }
        g.outputs = outputs;
        Ok(g)
    }

    fn old_node(&self, id: NodeId) -> Result<&'a Node, OptError> {
        self.old.node(id).map_err(|source| OptError::Ir {
            pass: self.pass,
            source,
        })
    }
}
