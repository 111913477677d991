//! Elementwise fusion, in two rounds:
//!
//! 1. Maximal chains → `ElementwiseRegion { chain, prologue }`. Starting from a root (an
//!    elementwise op: Activation / Binary / Compare / Where / Cast), a producer joins the
//!    region when it is elementwise itself, is not a graph output, and every consumer it
//!    has is already in the region. Steps are the region's nodes in graph order; region
//!    inputs are the external operands, deduplicated. A region needs two steps or more.
//!    Every operand of an elementwise op broadcasts into the op's result, so every region
//!    input broadcasts into the root's shape and the region's shape (the broadcast of its
//!    inputs) is the root's shape; the shape rule re-checks this and a region whose rule
//!    disagrees is not formed. Every step keeps its own dtype (the CPU rounds after each
//!    step as it does after each op), so a region computes exactly what its ops did.
//!    A `ResizeNearest2x` operand consumed only by the region becomes the region's
//!    `RegionPrologue::ResizeNearest2x` on input 0 (then one step is enough).
//! 2. Per-sample preprocessing → `BatchElementwiseRegion`: a `Concat` on axis 0 whose inputs
//!    are regions (or single elementwise ops) with one chain, consumed by the concat alone
//!    and differing in exactly one input (the `[1, ..]` sample), becomes one batched region.
use super::fusion::{at, fuse, is_chainable, Match, Uses};
use crate::{OptError, Pass, Rebuilder};
use rlx_ir::{normalize_axis, ChainOperand, ChainStep, Graph, Node, NodeId, Op, RegionPrologue};
use std::collections::{HashMap, HashSet};

pub struct FuseElementwise;

/// A region input: a plain node, or the source of the resize prologue (always input 0).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ext {
    Plain(NodeId),
    Resized(NodeId),
}

struct Region {
    chain: Vec<ChainStep>,
    prologue: RegionPrologue,
    inputs: Vec<NodeId>,
}

/// The chain step of one elementwise op over the given operands.
fn step(op: &Op, o: &[ChainOperand]) -> Option<ChainStep> {
    Some(match (op, o) {
        (Op::Activation(a), [x]) => ChainStep::Activation(*a, *x),
        (Op::Binary(b), [x, y]) => ChainStep::Binary(*b, *x, *y),
        (Op::Compare(c), [x, y]) => ChainStep::Compare(*c, *x, *y),
        (Op::Cast { to }, [x]) => ChainStep::Cast(*to, *x),
        (Op::Where, [c, a, b]) => ChainStep::Where(*c, *a, *b),
        _ => return None,
    })
}

/// The chain over `members` (ascending ids, the last is the root) with inputs numbered in
/// order of first use, the resized one (if any) moved to the front.
fn build(g: &Graph, members: &[NodeId], resized: Option<NodeId>) -> Option<Region> {
    let mut ext: Vec<Ext> = Vec::new();
    if let Some(r) = resized {
        ext.push(Ext::Resized(*at(g, r)?.inputs.first()?));
    }
    let mut idx: HashMap<NodeId, usize> = HashMap::new();
    let mut chain = Vec::with_capacity(members.len());
    for (k, &m) in members.iter().enumerate() {
        let node = at(g, m)?;
        let mut ops = Vec::with_capacity(node.inputs.len());
        for &i in &node.inputs {
            let o = if let Some(&j) = idx.get(&i) {
                ChainOperand::Step(j)
            } else {
                let e = match (resized, at(g, i)?) {
                    (Some(r), n) if r == i => Ext::Resized(*n.inputs.first()?),
                    _ => Ext::Plain(i),
                };
                let pos = match ext.iter().position(|x| *x == e) {
                    Some(p) => p,
                    None => {
                        ext.push(e);
                        ext.len() - 1
                    }
                };
                ChainOperand::Input(pos)
            };
            ops.push(o);
        }
        chain.push(step(&node.op, &ops)?);
        idx.insert(m, k);
    }
    let inputs = ext
        .iter()
        .map(|e| match *e {
            Ext::Plain(i) | Ext::Resized(i) => i,
        })
        .collect();
    let prologue = if resized.is_some() {
        RegionPrologue::ResizeNearest2x
    } else {
        RegionPrologue::None
    };
    Some(Region {
        chain,
        prologue,
        inputs,
    })
}

fn find_chain(g: &Graph, uses: &Uses, n: &Node, claimed: &[bool]) -> Option<Match<Region>> {
    if !is_chainable(&n.op) {
        return None;
    }
    let mut members = vec![n.id];
    let mut set: HashSet<NodeId> = HashSet::from([n.id]);
    // Repeat until nothing joins: a producer read by two members joins only once both are in.
    loop {
        let mut grew = false;
        let mut k = 0;
        while k < members.len() {
            let node = at(g, members[k])?;
            for &p in &node.inputs {
                let eligible = !set.contains(&p)
                    && !claimed.get(p.0).copied().unwrap_or(true)
                    && at(g, p).is_some_and(|m| is_chainable(&m.op))
                    && uses.confined(p, |c| set.contains(&c));
                if eligible {
                    set.insert(p);
                    members.push(p);
                    grew = true;
                }
            }
            k += 1;
        }
        if !grew {
            break;
        }
    }
    members.sort_unstable();
    let resized = members.iter().find_map(|&m| {
        at(g, m)?.inputs.iter().copied().find(|&i| {
            !set.contains(&i)
                && !claimed.get(i.0).copied().unwrap_or(true)
                && at(g, i).is_some_and(|r| r.op == Op::ResizeNearest2x && r.inputs.len() == 1)
                && uses.confined(i, |c| set.contains(&c))
        })
    });
    if members.len() < 2 && resized.is_none() {
        return None;
    }
    let region = build(g, &members, resized)?;
    let mut interior: Vec<NodeId> = members.iter().copied().filter(|&m| m != n.id).collect();
    interior.extend(resized);
    Some(Match {
        interior,
        data: region,
    })
}

fn emit_region(rb: &mut Rebuilder, n: &Node, r: &Region) -> Result<bool, OptError> {
    let ins = r
        .inputs
        .iter()
        .map(|&i| rb.map(i))
        .collect::<Result<Vec<_>, _>>()?;
    let op = Op::ElementwiseRegion {
        chain: r.chain.clone(),
        prologue: r.prologue,
    };
    Ok(rb.try_emit(n.id, op, ins)?.is_some())
}

/// A region's chain, prologue and inputs, or a single elementwise op read as a region.
fn as_region(g: &Graph, n: &Node) -> Option<Region> {
    match &n.op {
        Op::ElementwiseRegion { chain, prologue } => Some(Region {
            chain: chain.clone(),
            prologue: *prologue,
            inputs: n.inputs.clone(),
        }),
        op if is_chainable(op) => build(g, &[n.id], None),
        _ => None,
    }
}

struct Batch {
    chain: Vec<ChainStep>,
    prologue: RegionPrologue,
    samples: Vec<NodeId>,
    shared: Vec<NodeId>,
}

fn find_batch(g: &Graph, uses: &Uses, n: &Node, _claimed: &[bool]) -> Option<Match<Batch>> {
    let Op::Concat { axis } = n.op else {
        return None;
    };
    if n.inputs.len() < 2 || normalize_axis(axis, n.shape.rank()).ok()? != 0 {
        return None;
    }
    let mut regions = Vec::with_capacity(n.inputs.len());
    for &i in &n.inputs {
        if !uses.confined(i, |c| c == n.id) {
            return None;
        }
        regions.push(as_region(g, at(g, i)?)?);
    }
    let first = &regions[0];
    let same = regions.iter().all(|r| {
        r.chain == first.chain
            && r.prologue == first.prologue
            && r.inputs.len() == first.inputs.len()
    });
    if !same {
        return None;
    }
    let differ: Vec<usize> = (0..first.inputs.len())
        .filter(|&k| regions.iter().any(|r| r.inputs[k] != first.inputs[k]))
        .collect();
    let [p] = differ[..] else {
        return None;
    };
    if first.prologue != RegionPrologue::None && p != 0 {
        return None;
    }
    // The sample becomes Input(0); the shared inputs keep their order after it.
    let renum = |o: ChainOperand| match o {
        ChainOperand::Input(k) if k == p => ChainOperand::Input(0),
        ChainOperand::Input(k) if k < p => ChainOperand::Input(k + 1),
        o => o,
    };
    let chain = first
        .chain
        .iter()
        .map(|s| match *s {
            ChainStep::Activation(a, x) => ChainStep::Activation(a, renum(x)),
            ChainStep::Binary(b, x, y) => ChainStep::Binary(b, renum(x), renum(y)),
            ChainStep::Compare(c, x, y) => ChainStep::Compare(c, renum(x), renum(y)),
            ChainStep::Cast(t, x) => ChainStep::Cast(t, renum(x)),
            ChainStep::Where(c, x, y) => ChainStep::Where(renum(c), renum(x), renum(y)),
        })
        .collect();
    let mut interior: Vec<NodeId> = n.inputs.clone();
    interior.sort_unstable();
    interior.dedup();
    Some(Match {
        interior,
        data: Batch {
            chain,
            prologue: first.prologue,
            samples: regions.iter().map(|r| r.inputs[p]).collect(),
            shared: first
                .inputs
                .iter()
                .enumerate()
                .filter(|&(k, _)| k != p)
                .map(|(_, &i)| i)
                .collect(),
        },
    })
}

fn emit_batch(rb: &mut Rebuilder, n: &Node, b: &Batch) -> Result<bool, OptError> {
    let ins = b
        .samples
        .iter()
        .chain(&b.shared)
        .map(|&i| rb.map(i))
        .collect::<Result<Vec<_>, _>>()?;
    let op = Op::BatchElementwiseRegion {
        chain: b.chain.clone(),
        num_batch_inputs: b.samples.len(),
        prologue: b.prologue,
    };
    Ok(rb.try_emit(n.id, op, ins)?.is_some())
}

impl Pass for FuseElementwise {
    fn name(&self) -> &'static str {
        "fuse_elementwise"
    }

    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        let chained = fuse(self.name(), g, find_chain, emit_region)?;
        fuse(self.name(), &chained, find_batch, emit_batch)
    }
}
