//! Common-subexpression elimination: nodes with the same op, the same (already merged)
//! inputs and the same shape become one node. Inputs and params are never merged (each is
//! fed separately); constants merge when shape, dtype and bytes are equal. `Add` and `Mul`
//! are commutative in IEEE arithmetic, so `a+b` and `b+a` merge too (their broadcast shape
//! is the same either way).
use crate::{OptError, Pass, Rebuilder};
use rlx_ir::{BinaryOp, Graph, Node, NodeId, Op};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

pub struct Cse;

/// A hash of what makes two nodes interchangeable. `Op` holds floats so it is not `Hash`;
/// its Debug text stands in (constants hash their bytes instead, which is cheaper). Equal
/// hashes are confirmed with `==` before merging, so a collision never merges anything.
fn key(op: &Op, inputs: &[NodeId], node: &Node) -> u64 {
    let mut h = DefaultHasher::new();
    match op {
        Op::Constant { data } => {
            0u8.hash(&mut h);
            data.hash(&mut h);
        }
        op => {
            1u8.hash(&mut h);
            format!("{op:?}").hash(&mut h);
        }
    }
    inputs.hash(&mut h);
    node.shape.hash(&mut h);
    h.finish()
}

impl Pass for Cse {
    fn name(&self) -> &'static str {
        "cse"
    }

    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        let mut rb = Rebuilder::new(self.name(), g);
        let mut seen: HashMap<u64, Vec<NodeId>> = HashMap::new();
        for n in &g.nodes {
            if matches!(n.op, Op::Input { .. } | Op::Param { .. }) {
                rb.copy(n.id)?;
                continue;
            }
            let mut inputs = rb.inputs(n)?;
            if matches!(n.op, Op::Binary(BinaryOp::Add | BinaryOp::Mul)) && inputs.len() == 2 {
                inputs.sort_unstable();
            }
            let k = key(&n.op, &inputs, n);
            let mut hit = None;
            if let Some(cands) = seen.get(&k) {
                for &c in cands {
                    let m = rb.new_node(c)?;
                    let mut m_inputs = m.inputs.clone();
                    if matches!(m.op, Op::Binary(BinaryOp::Add | BinaryOp::Mul)) {
                        m_inputs.sort_unstable();
                    }
                    if m.op == n.op && m_inputs == inputs && m.shape == n.shape {
                        hit = Some(c);
                        break;
                    }
                }
            }
            match hit {
                Some(c) => rb.replace(n.id, c)?,
                None => {
                    let id = rb.copy(n.id)?;
                    seen.entry(k).or_default().push(id);
                }
            }
        }
        rb.finish()
    }
}
