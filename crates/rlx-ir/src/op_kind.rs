//! `OpKind`: the fieldless twin of [`Op`], generated from `Op`'s variant list by one derive
//! (`strum::EnumDiscriminants`), so a kind can never be misspelled or forgotten. Op groups
//! are declared here once, as sets over `OpKind`; passes and backends test membership,
//! never names.
//!
//! ## Adding an op
//!
//! The compiler walks you through it; every step below is a `match` that fails to build
//! until the new variant has an arm:
//! 1. `op.rs`: the variant (its parameters beside it) — `OpKind` follows by itself;
//!    put it in its group in [`OpKind::group`] here.
//! 2. `rlx-ir/src/ops/<group>.rs`: the builder and the shape rule, a typed function of the
//!    variant's fields and the input shapes; add its arm to `ops::infer_shape`, the one
//!    router, which destructures the variant and calls it. Size arithmetic uses
//!    `ops::{add, mul}` (checked); `infer_shape` checks the result's size.
//! 3. `rlx-ir/src/serialize.rs` needs nothing (serde); add a corpus case in
//!    `rlx-ir/tests/corpus/mod.rs` (its exhaustive `match` does not build without one).
//! 4. `rlx-cpu/src/ops/<group>.rs`: the thunk (routed by `rlx_cpu::ops::eval`).
//! 5. `rlx-autodiff/src/rules/<group>.rs`: the VJP (routed by `rules::vjp`), or list the
//!    kind under "no rule" there when it is fused or a backward op.
//! 6. `rlx-cuda/src/lower/<group>.rs` + `kernels/<group>.cu`: the lowering (routed by
//!    `lower::lower_node`), or answer `Unsupported` there to fall back to the CPU.
//! 7. Cases in the op group's case table (`rlx-testutil/src/cases/<group>.rs`): they run
//!    against the f64 oracle on the CPU, as GPU parity on every device, and as gradchecks.
use crate::{Op, OpKind};
use strum::{EnumCount, VariantArray};

/// The group an op belongs to; each crate keeps one file per group (`ops/<group>.rs`,
/// `lower/<group>.rs`, `rules/<group>.rs`), and an op sits in the same group everywhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpGroup {
    Leaf,
    Elementwise,
    Linalg,
    Norm,
    Reduce,
    Shape,
    Transformer,
    Vision,
    Region,
    Audio,
    Index,
    Collective,
}

impl OpKind {
    /// Every kind, in declaration order.
    pub const ALL: &'static [OpKind] = OpKind::VARIANTS;
    /// How many kinds there are.
    pub const COUNT: usize = <OpKind as EnumCount>::COUNT;

    /// The kind's name, as written in dumps, errors and dispatch reports.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The kind whose [`name`](Self::name) is `s`.
    pub fn from_name(s: &str) -> Option<OpKind> {
        OpKind::ALL.iter().copied().find(|k| k.name() == s)
    }

    pub fn group(self) -> OpGroup {
        use OpKind::*;
        match self {
            Input | Param | Constant => OpGroup::Leaf,
            Activation | Binary | Compare | Where | Cast | FloatRound | StopGradient => {
                OpGroup::Elementwise
            }
            MatMul | FusedMatMulBiasAct | DequantMatMul | FusedDequantMatMul | Dequantize => {
                OpGroup::Linalg
            }
            LayerNorm | RmsNorm | FusedResidualLN | FusedResidualRmsNorm => OpGroup::Norm,
            Reduce
            | Softmax
            | ArgMax
            | CumSum
            | TopK
            | SoftmaxCrossEntropy
            | SoftmaxCrossEntropyWithLogits
            | SoftmaxCrossEntropyBackward => OpGroup::Reduce,
            Reshape | Expand | Transpose | Narrow | Concat | Gather | Tile | Pad | Slice => {
                OpGroup::Shape
            }
            GatherElements | GatherND | ScatterElements | ScatterND | OneHot | Range => {
                OpGroup::Index
            }
            Attention | Rope | FusedSwiGLU | CacheWrite | RopeCacheWrite | CachedAttention => {
                OpGroup::Transformer
            }
            Conv | Pool | ResizeNearest2x | Conv2dBackwardInput | Conv2dBackwardWeight
            | MaxPool2dBackward => OpGroup::Vision,
            ElementwiseRegion | BatchElementwiseRegion | TransformRegion => OpGroup::Region,
            Fft | LogMel | LogMelBackward => OpGroup::Audio,
            AllReduce | AllGather | ReduceScatter => OpGroup::Collective,
        }
    }

    /// Ops that exchange data with the other ranks of a group (see `Op::AllReduce`): their
    /// value depends on what the other ranks hold, so no pass may evaluate one at compile
    /// time, and every rank must run them in the same order.
    pub fn is_collective(self) -> bool {
        self.group() == OpGroup::Collective
    }

    /// Leaves: fed per run (`Input`), set once (`Param`) or baked in (`Constant`).
    pub fn is_leaf(self) -> bool {
        self.group() == OpGroup::Leaf
    }

    /// Ops made by fusion, which `rlx_opt::passes::Expand` can turn back into primitives.
    pub fn is_fused(self) -> bool {
        use OpKind::*;
        matches!(
            self,
            FusedMatMulBiasAct
                | FusedDequantMatMul
                | FusedResidualLN
                | FusedResidualRmsNorm
                | FusedSwiGLU
                | RopeCacheWrite
                | CachedAttention
                | ElementwiseRegion
                | BatchElementwiseRegion
                | TransformRegion
        )
    }

    /// Elementwise ops a fused region's chain can hold (`ChainStep`'s variants).
    pub fn is_chainable(self) -> bool {
        use OpKind::*;
        matches!(self, Activation | Binary | Compare | Where | Cast)
    }

    /// Ops whose output is input 0's storage, written in place (a KV-cache write): the memory
    /// planner aliases them to input 0 like a view, but the backend runs them, and passes
    /// never remove them while the graph keeps their cache (see `Op::CacheWrite`).
    pub fn is_in_place(self) -> bool {
        matches!(self, OpKind::CacheWrite | OpKind::RopeCacheWrite)
    }

    /// Ops that only move or relabel data; the memory planner may alias some of them to
    /// their input (see `rlx_opt::memory`).
    pub fn is_view_like(self) -> bool {
        use OpKind::*;
        matches!(
            self,
            Reshape | Expand | Transpose | Narrow | StopGradient | TransformRegion
        )
    }

    /// Gradient ops that autodiff emits; they have no VJP of their own.
    pub fn is_backward(self) -> bool {
        use OpKind::*;
        matches!(
            self,
            SoftmaxCrossEntropyBackward
                | Conv2dBackwardInput
                | Conv2dBackwardWeight
                | MaxPool2dBackward
                | LogMelBackward
        )
    }

    /// The kinds of `group`, in declaration order.
    pub fn of_group(group: OpGroup) -> impl Iterator<Item = OpKind> {
        OpKind::ALL
            .iter()
            .copied()
            .filter(move |k| k.group() == group)
    }
}

impl std::fmt::Display for OpKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad` so that width and alignment (`{k:<32}`) apply as they do to a `&str`.
        f.pad(self.name())
    }
}

impl Op {
    /// The op's kind (for dumps, errors, dispatch reports and group tests).
    pub fn kind(&self) -> OpKind {
        OpKind::from(self)
    }

    pub fn is_leaf(&self) -> bool {
        self.kind().is_leaf()
    }

    /// The inputs whose storage this op writes in place (each must be a param or an input
    /// read by nothing else; see `Graph::verify`): a cache write's cache (input 0, which is
    /// also its output) and `CachedAttention`'s two caches (its output is the attention's).
    pub fn written_inputs(&self) -> &'static [usize] {
        match self {
            Op::CacheWrite { .. } | Op::RopeCacheWrite { .. } => &[0],
            Op::CachedAttention { .. } => &[3, 4],
            _ => &[],
        }
    }
}

/// A set of op kinds (a backend's native list, a test's allowed fallbacks), as a bit set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OpKindSet(u128);

const _: () = assert!(OpKind::COUNT <= 128, "OpKindSet holds at most 128 kinds");

impl OpKindSet {
    pub const fn empty() -> OpKindSet {
        OpKindSet(0)
    }
    pub fn all() -> OpKindSet {
        OpKind::ALL.iter().copied().collect()
    }
    pub fn of(kinds: &[OpKind]) -> OpKindSet {
        kinds.iter().copied().collect()
    }
    /// The kinds `pred` accepts.
    pub fn filter(pred: impl Fn(OpKind) -> bool) -> OpKindSet {
        OpKind::ALL.iter().copied().filter(|&k| pred(k)).collect()
    }
    pub fn contains(self, k: OpKind) -> bool {
        self.0 & (1u128 << k as u32) != 0
    }
    pub fn insert(&mut self, k: OpKind) {
        self.0 |= 1u128 << k as u32;
    }
    pub fn with(mut self, k: OpKind) -> OpKindSet {
        self.insert(k);
        self
    }
    pub fn union(self, other: OpKindSet) -> OpKindSet {
        OpKindSet(self.0 | other.0)
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    pub fn iter(self) -> impl Iterator<Item = OpKind> {
        OpKind::ALL
            .iter()
            .copied()
            .filter(move |&k| self.contains(k))
    }
}

impl FromIterator<OpKind> for OpKindSet {
    fn from_iter<I: IntoIterator<Item = OpKind>>(iter: I) -> OpKindSet {
        let mut s = OpKindSet::empty();
        for k in iter {
            s.insert(k);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for &k in OpKind::ALL {
            assert!(seen.insert(k.name()), "{k} twice");
            assert_eq!(OpKind::from_name(k.name()), Some(k));
        }
        assert_eq!(seen.len(), OpKind::COUNT);
        assert_eq!(OpKind::from_name("Matmul"), None);
    }

    #[test]
    fn sets_hold_what_was_put_in() {
        let s = OpKindSet::of(&[OpKind::MatMul, OpKind::LogMelBackward]);
        assert!(s.contains(OpKind::MatMul) && s.contains(OpKind::LogMelBackward));
        assert!(!s.contains(OpKind::Input));
        assert_eq!(s.iter().count(), 2);
        assert_eq!(OpKindSet::all().iter().count(), OpKind::COUNT);
        let fused = OpKindSet::filter(OpKind::is_fused);
        assert_eq!(fused.iter().count(), 10);
        assert!(fused.iter().all(|k| !k.is_chainable() && !k.is_leaf()));
    }
}
