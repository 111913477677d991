//! The pass trait and the pipeline that runs passes in order with verification and reports.
use crate::OptError;
use rlx_ir::{Graph, OpKind};
use std::collections::BTreeMap;
use std::fmt;

/// A graph-to-graph rewrite. `run` builds a new graph and leaves its argument untouched.
pub trait Pass {
    fn name(&self) -> &'static str;
    fn run(&self, g: &Graph) -> Result<Graph, OptError>;
}

/// Node count per op kind (`Op::kind`), sorted by kind name.
pub fn kind_counts(g: &Graph) -> BTreeMap<OpKind, usize> {
    let mut m = BTreeMap::new();
    for n in &g.nodes {
        *m.entry(n.op.kind()).or_insert(0) += 1;
    }
    m
}

/// What one pass did: node counts before and after, overall and per op kind.
#[derive(Clone, Debug, PartialEq)]
pub struct PassReport {
    pub name: &'static str,
    pub nodes_before: usize,
    pub nodes_after: usize,
    pub kinds_before: BTreeMap<OpKind, usize>,
    pub kinds_after: BTreeMap<OpKind, usize>,
}

impl PassReport {
    /// Op kinds whose count changed: (kind, before, after).
    pub fn changed_kinds(&self) -> Vec<(OpKind, usize, usize)> {
        let mut keys: Vec<OpKind> = self.kinds_before.keys().copied().collect();
        keys.extend(self.kinds_after.keys().copied());
        keys.sort_unstable();
        keys.dedup();
        keys.into_iter()
            .filter_map(|k| {
                let b = self.kinds_before.get(&k).copied().unwrap_or(0);
                let a = self.kinds_after.get(&k).copied().unwrap_or(0);
                (a != b).then_some((k, b, a))
            })
            .collect()
    }
}

impl fmt::Display for PassReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<20} {:>6} -> {:<6}",
            self.name, self.nodes_before, self.nodes_after
        )?;
        let changed = self.changed_kinds();
        for (i, (k, b, a)) in changed.iter().enumerate() {
            write!(f, "{}{k} {b}->{a}", if i == 0 { " " } else { ", " })?;
        }
        Ok(())
    }
}

/// Passes run in order. With verification on (the default in debug builds) the input graph
/// and the graph after every pass go through `Graph::verify`, and a failure names the pass.
pub struct Pipeline {
    passes: Vec<Box<dyn Pass>>,
    verify: bool,
}

impl Default for Pipeline {
    fn default() -> Self {
        Pipeline::new()
    }
}

impl Pipeline {
    /// An empty pipeline; verification follows `cfg!(debug_assertions)`.
    pub fn new() -> Pipeline {
        Pipeline {
            passes: Vec::new(),
            verify: cfg!(debug_assertions),
        }
    }

    /// simplify → [constant folding] → cse → simplify → dce: simplification first so folding
    /// and CSE see canonical nodes, simplification again for what CSE exposed, DCE last to
    /// sweep everything the others orphaned.
    pub fn standard(fold: Option<crate::ConstFold>) -> Pipeline {
        let mut p = Pipeline::new().with(crate::Simplify);
        if let Some(f) = fold {
            p = p.with(f);
        }
        p.with(crate::Cse).with(crate::Simplify).with(crate::Dce)
    }

    /// The standard pipeline, then fusion: matmul + bias + activation, residual + norm and
    /// SwiGLU first (each consumes adds, multiplies and activations that elementwise
    /// fusion would otherwise swallow into regions), elementwise regions last, and a final
    /// DCE. The fused ops are the CPU's native ones; a backend lacking some appends
    /// [`Pipeline::expand_for`].
    pub fn full(fold: Option<crate::ConstFold>) -> Pipeline {
        Pipeline::standard(fold)
            .with(crate::FuseMatMulBiasAct)
            .with(crate::FuseResidualNorm::new())
            .with(crate::FuseDequantMatMul)
            .with(crate::FuseSwiGLU)
            .with(crate::FuseSwiGLUDequantMatMul)
            .with(crate::FuseRopeCacheWrite)
            .with(crate::FuseCachedAttention)
            .with(crate::FuseElementwise)
            .with(crate::Dce)
    }

    /// Append the expansion of the fused ops a backend does not run natively.
    pub fn expand_for(self, expand: crate::Expand) -> Pipeline {
        self.with(expand)
    }

    pub fn with(mut self, pass: impl Pass + 'static) -> Pipeline {
        self.passes.push(Box::new(pass));
        self
    }

    /// Run `pass` before every other pass.
    pub fn first(mut self, pass: impl Pass + 'static) -> Pipeline {
        self.passes.insert(0, Box::new(pass));
        self
    }

    pub fn push(&mut self, pass: Box<dyn Pass>) {
        self.passes.push(pass);
    }

    /// Force verification on or off (tests and `rlx inspect` turn it on in release).
    pub fn verify(mut self, on: bool) -> Pipeline {
        self.verify = on;
        self
    }

    pub fn pass_names(&self) -> Vec<&'static str> {
        self.passes.iter().map(|p| p.name()).collect()
    }

    /// Run every pass once; the final graph and one report per pass.
    pub fn run(&self, g: &Graph) -> Result<(Graph, Vec<PassReport>), OptError> {
        self.run_observed(g, |_, _| {})
    }

    /// As `run`, also handing each pass's report and resulting graph to `observe` (what
    /// `rlx inspect --optimized` prints).
    pub fn run_observed(
        &self,
        g: &Graph,
        mut observe: impl FnMut(&PassReport, &Graph),
    ) -> Result<(Graph, Vec<PassReport>), OptError> {
        if self.verify {
            g.verify().map_err(|source| OptError::Verify {
                pass: "input",
                source,
            })?;
        }
        let mut cur = g.clone();
        let mut reports = Vec::with_capacity(self.passes.len());
        for p in &self.passes {
            let next = p.run(&cur)?;
            if self.verify {
                next.verify().map_err(|source| OptError::Verify {
                    pass: p.name(),
                    source,
                })?;
            }
            let report = PassReport {
                name: p.name(),
                nodes_before: cur.nodes.len(),
                nodes_after: next.nodes.len(),
                kinds_before: kind_counts(&cur),
                kinds_after: kind_counts(&next),
            };
            observe(&report, &next);
            reports.push(report);
            cur = next;
        }
        Ok((cur, reports))
    }

    /// Repeat the whole pipeline until a round leaves the graph unchanged (at most
    /// `max_rounds` rounds); reports of every round, in order.
    pub fn run_to_fixpoint(
        &self,
        g: &Graph,
        max_rounds: usize,
    ) -> Result<(Graph, Vec<PassReport>), OptError> {
        let mut cur = g.clone();
        let mut all = Vec::new();
        for _ in 0..max_rounds.max(1) {
            let (next, reports) = self.run(&cur)?;
            all.extend(reports);
            let done = next == cur;
            cur = next;
            if done {
                break;
            }
        }
        Ok((cur, all))
    }
}
