//! What every fusion pass shares: who consumes each node, and the match-then-rebuild driver.
//!
//! A fusion pass matches patterns on the OLD graph, consumers before producers (reverse
//! node order), so the largest pattern around a node wins (`act(mm + b)` is matched at the
//! activation before `mm + b` is considered at the add). Nodes inside a match (the
//! "interior": everything but the root and its external operands) are claimed and cannot be
//! part of another match. The rebuild then copies every node and emits the fused op in
//! place of each root; the interior nodes it copied are left without consumers and a final
//! DCE sweeps them. Copying first keeps every rewrite safe: when the fused op's shape rule
//! disagrees with the root's shape, the root is copied and the graph stays as it was.
use super::dce::Dce;
use crate::{OptError, Pass, Rebuilder};
use rlx_ir::{Graph, Node, NodeId, Op};
use std::collections::HashMap;

/// Distinct consumers of every node, and which nodes are graph outputs.
pub(crate) struct Uses {
    consumers: Vec<Vec<NodeId>>,
    output: Vec<bool>,
}

impl Uses {
    pub(crate) fn new(g: &Graph) -> Uses {
        let mut consumers: Vec<Vec<NodeId>> = vec![Vec::new(); g.nodes.len()];
        for n in &g.nodes {
            for &i in &n.inputs {
                if let Some(c) = consumers.get_mut(i.0) {
                    // Nodes come in id order, so a repeat read by `n` is the last entry.
                    if c.last() != Some(&n.id) {
                        c.push(n.id);
                    }
                }
            }
        }
        let mut output = vec![false; g.nodes.len()];
        for &o in &g.outputs {
            if let Some(f) = output.get_mut(o.0) {
                *f = true;
            }
        }
        Uses { consumers, output }
    }

    pub(crate) fn consumers(&self, id: NodeId) -> &[NodeId] {
        self.consumers.get(id.0).map_or(&[], |c| c.as_slice())
    }

    /// `id` is not a graph output and every consumer satisfies `inside`: folding it into a
    /// fused op loses nothing anyone else reads.
    pub(crate) fn confined(&self, id: NodeId, inside: impl Fn(NodeId) -> bool) -> bool {
        !self.output.get(id.0).copied().unwrap_or(true)
            && self.consumers(id).iter().all(|&c| inside(c))
    }
}

/// A pattern found at a root: the nodes it absorbs and what the emitter needs.
pub(crate) struct Match<T> {
    pub interior: Vec<NodeId>,
    pub data: T,
}

/// The node with an old id (the matcher only sees ids the graph holds).
pub(crate) fn at(g: &Graph, id: NodeId) -> Option<&Node> {
    g.nodes.get(id.0)
}

/// Run one fusion: `find` looks for a pattern rooted at a node (`claimed` marks nodes
/// already inside another match); `emit` writes the fused op for a root and says whether
/// it did (false: the root is copied unchanged).
pub(crate) fn fuse<T>(
    pass: &'static str,
    g: &Graph,
    find: impl Fn(&Graph, &Uses, &Node, &[bool]) -> Option<Match<T>>,
    emit: impl Fn(&mut Rebuilder, &Node, &T) -> Result<bool, OptError>,
) -> Result<Graph, OptError> {
    let uses = Uses::new(g);
    let mut claimed = vec![false; g.nodes.len()];
    let mut found: HashMap<usize, T> = HashMap::new();
    for n in g.nodes.iter().rev() {
        if claimed[n.id.0] || n.op.is_leaf() {
            continue;
        }
        let Some(m) = find(g, &uses, n, &claimed) else {
            continue;
        };
        if m.interior
            .iter()
            .any(|i| claimed.get(i.0).copied().unwrap_or(true) || *i == n.id)
        {
            continue;
        }
        for i in &m.interior {
            claimed[i.0] = true;
        }
        found.insert(n.id.0, m.data);
    }
    let mut rb = Rebuilder::new(pass, g);
    for n in &g.nodes {
        let done = match found.get(&n.id.0) {
            Some(d) => emit(&mut rb, n, d)?,
            None => false,
        };
        // A node an emit already rebuilt (a bias's reshape, see `Rebuilder::as_vector`)
        // is not built twice.
        if !done && rb.get(n.id).is_none() {
            rb.copy(n.id)?;
        }
    }
    Dce.run(&rb.finish()?)
}

/// Whether an op is one of the elementwise ops a region chain can hold.
pub(crate) fn is_chainable(op: &Op) -> bool {
    op.kind().is_chainable()
}
