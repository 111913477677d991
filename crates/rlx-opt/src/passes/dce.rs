//! Dead-code elimination: keep what the outputs (and in-place writes) reach.
//!
//! Every `Input` and `Param` is kept even when nothing uses it any more: they are the
//! graph's user-facing signature (callers feed inputs by name and set params by name), and
//! an optimisation must not make a previously valid `run`/`set_param` call fail. Unused
//! constants and computations are dropped.
use crate::{OptError, Pass, Rebuilder};
use rlx_ir::{Graph, NodeId, Op};

pub struct Dce;

/// Which nodes the outputs reach (through inputs), indexed by node id.
pub(crate) fn reachable(g: &Graph) -> Result<Vec<bool>, OptError> {
    let mut live = vec![false; g.nodes.len()];
    let mut stack: Vec<NodeId> = Vec::new();
    for &o in &g.outputs {
        if o.0 >= g.nodes.len() {
            return Err(OptError::Node {
                pass: "dce",
                node: o,
                op: "?",
                msg: "graph output does not exist".into(),
            });
        }
        stack.push(o);
    }
    // An in-place write changes a param that later runs read: it is an effect, kept even
    // when nothing in this graph reads its result.
    stack.extend(
        (g.nodes.iter())
            .filter(|n| !n.op.written_inputs().is_empty())
            .map(|n| n.id),
    );
    while let Some(id) = stack.pop() {
        if std::mem::replace(&mut live[id.0], true) {
            continue;
        }
        for &i in &g.nodes[id.0].inputs {
            if i.0 >= g.nodes.len() {
                return Err(OptError::Node {
                    pass: "dce",
                    node: id,
                    op: g.nodes[id.0].op.kind().name(),
                    msg: format!("input {i} does not exist"),
                });
            }
            if !live[i.0] {
                stack.push(i);
            }
        }
    }
    Ok(live)
}

impl Pass for Dce {
    fn name(&self) -> &'static str {
        "dce"
    }

    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        let live = reachable(g)?;
        let mut rb = Rebuilder::new(self.name(), g);
        for n in &g.nodes {
            let signature = matches!(n.op, Op::Input { .. } | Op::Param { .. });
            if live[n.id.0] || signature {
                rb.copy(n.id)?;
            }
        }
        rb.finish()
    }
}
