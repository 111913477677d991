//! The verifier: every node well-formed, in topological order, with the shape its op's
//! rule gives and a size that can exist; input and param names unique; outputs exist.
use crate::{ops::infer_shape, Graph, IrError, Node, NodeId, Op, OpKind};
use std::collections::HashMap;

fn fail(node: &Node, msg: String) -> IrError {
    IrError::Verify {
        node: node.id,
        op: node.op.kind(),
        name: node
            .name
            .as_ref()
            .map(|n| format!(" \"{n}\""))
            .unwrap_or_default(),
        msg,
    }
}

impl Graph {
    /// Check arity, shapes, dtypes, topological order and outputs. Errors name the node.
    pub fn verify(&self) -> Result<(), IrError> {
        let mut names: HashMap<(OpKind, &str), NodeId> = HashMap::new();
        for (i, node) in self.nodes.iter().enumerate() {
            if node.id.0 != i {
                return Err(fail(
                    node,
                    format!("stored at index {i} but numbered {}", node.id),
                ));
            }
            for inp in &node.inputs {
                if inp.0 >= i {
                    return Err(fail(
                        node,
                        format!(
                            "input {inp} is not an earlier node (graph not in topological order)"
                        ),
                    ));
                }
            }
            // Before the op's own checks, so that no rule meets a shape whose size wraps.
            node.shape.check_size().map_err(|m| fail(node, m))?;
            match &node.op {
                Op::Input { name } | Op::Param { name } => {
                    if !node.inputs.is_empty() {
                        return Err(fail(node, "a leaf takes no inputs".into()));
                    }
                    if let Some(&first) = names.get(&(node.op.kind(), name.as_str())) {
                        return Err(IrError::DuplicateName {
                            kind: node.op.kind(),
                            name: name.clone(),
                            first,
                            second: node.id,
                        });
                    }
                    names.insert((node.op.kind(), name.as_str()), node.id);
                }
                Op::Constant { data } => {
                    if !node.inputs.is_empty() {
                        return Err(fail(node, "a leaf takes no inputs".into()));
                    }
                    let dims = node
                        .shape
                        .static_dims()
                        .ok_or_else(|| fail(node, "constant with a dynamic dim".into()))?;
                    // Checked: a decoded file may declare absurd dims.
                    let want = dims
                        .iter()
                        .try_fold(node.shape.dtype.size_bytes(), |a, &d| a.checked_mul(d))
                        .ok_or_else(|| {
                            fail(node, format!("constant {} overflows usize", node.shape))
                        })?;
                    if data.len() != want {
                        return Err(fail(
                            node,
                            format!(
                                "constant {} needs {want} bytes, holds {}",
                                node.shape,
                                data.len()
                            ),
                        ));
                    }
                }
                op => {
                    let shapes: Vec<_> =
                        node.inputs.iter().map(|j| &self.nodes[j.0].shape).collect();
                    let want = infer_shape(op, &shapes).map_err(|m| fail(node, m))?;
                    if want != node.shape {
                        return Err(fail(
                            node,
                            format!("declared shape {} but its inputs give {want}", node.shape),
                        ));
                    }
                }
            }
        }
        for &o in &self.outputs {
            if o.0 >= self.nodes.len() {
                return Err(IrError::BadOutput(o));
            }
        }
        self.verify_in_place()
    }

    /// An in-place op (`CacheWrite`, `CachedAttention`) writes the storage of its
    /// `Op::written_inputs`: each must be a param or an input, and nothing else may read it
    /// (nor be it: a graph output), or another reader would see the write in the wrong order.
    fn verify_in_place(&self) -> Result<(), IrError> {
        let mut users = vec![0usize; self.nodes.len()];
        for n in &self.nodes {
            for i in &n.inputs {
                users[i.0] += 1;
            }
        }
        for n in &self.nodes {
            for &k in n.op.written_inputs() {
                let Some(t) = n.inputs.get(k) else {
                    return Err(fail(
                        n,
                        format!("writes its input {k} in place, which it lacks"),
                    ));
                };
                let target = &self.nodes[t.0];
                if !matches!(target.op, Op::Param { .. } | Op::Input { .. }) {
                    return Err(fail(
                        n,
                        format!(
                            "writes in place, so its input {k} must be a param or input, got {}",
                            target.label()
                        ),
                    ));
                }
                if users[target.id.0] != 1 || self.outputs.contains(&target.id) {
                    return Err(fail(
                        n,
                        format!(
                            "writes {} in place, so nothing else may read it ({} readers)",
                            target.label(),
                            users[target.id.0]
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}
