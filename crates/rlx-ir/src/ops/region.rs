//! Shape rules and builders of the region group (ops made by fusion): ElementwiseRegion,
//! BatchElementwiseRegion, TransformRegion.
use super::{arity, mul, shape_ops::transform_step_dims};
use crate::{
    broadcast_dims, ChainOperand, ChainStep, DType, Dim, Graph, IrError, NodeId, Op, OpKind,
    RegionPrologue, Shape, TransformStep,
};

/// The dtype of every step of `chain`, given the dtypes its `Input(i)` operands see.
/// Checks that each operand names a region input or an earlier step and that the dtypes
/// fit each step (the same rules as the standalone ops). Backends call this too, so one
/// definition decides what a chain means.
pub fn chain_dtypes(chain: &[ChainStep], inputs: &[DType]) -> Result<Vec<DType>, String> {
    if chain.is_empty() {
        return Err("the chain is empty".into());
    }
    let mut dts: Vec<DType> = Vec::with_capacity(chain.len());
    for (k, step) in chain.iter().enumerate() {
        let dt = |o: &ChainOperand| -> Result<DType, String> {
            match *o {
                ChainOperand::Input(i) => inputs.get(i).copied().ok_or_else(|| {
                    format!(
                        "step {k} reads Input({i}) but the region has {} inputs",
                        inputs.len()
                    )
                }),
                ChainOperand::Step(j) => dts.get(j).copied().ok_or_else(|| {
                    format!("step {k} reads Step({j}), which is not an earlier step")
                }),
            }
        };
        let out = match step {
            ChainStep::Activation(act, x) => {
                let d = dt(x)?;
                let allowed = d.is_float() || (act.takes_integers() && d.is_int());
                if !allowed {
                    return Err(format!("step {k}: {act:?} needs a float operand, got {d}"));
                }
                d
            }
            ChainStep::Binary(op, a, b) => {
                let (da, db) = (dt(a)?, dt(b)?);
                if da != db {
                    return Err(format!(
                        "step {k}: {op:?} operand dtypes differ: {da} vs {db}"
                    ));
                }
                if op.is_integer_only() && da.is_float() {
                    return Err(format!(
                        "step {k}: {op:?} needs integer or bool operands, got {da}"
                    ));
                }
                da
            }
            ChainStep::Compare(op, a, b) => {
                let (da, db) = (dt(a)?, dt(b)?);
                if da != db {
                    return Err(format!(
                        "step {k}: {op:?} operand dtypes differ: {da} vs {db}"
                    ));
                }
                DType::Bool
            }
            ChainStep::Cast(to, x) => {
                dt(x)?;
                *to
            }
            ChainStep::Where(c, a, b) => {
                dt(c)?;
                let (da, db) = (dt(a)?, dt(b)?);
                if da != db {
                    return Err(format!(
                        "step {k}: Where branch dtypes differ: {da} vs {db}"
                    ));
                }
                da
            }
        };
        dts.push(out);
    }
    Ok(dts)
}

/// Twice a dim; a symbol becomes the symbol `2*sym` (bound again once the input is concrete).
fn double(d: &Dim) -> Result<Dim, String> {
    Ok(match d {
        Dim::Static(n) => Dim::Static(mul("doubled size", *n, 2)?),
        Dim::Dynamic(s) if s.chars().all(|c| c.is_alphanumeric() || c == '_') => {
            Dim::Dynamic(format!("2*{s}"))
        }
        Dim::Dynamic(s) => Dim::Dynamic(format!("2*({s})")),
    })
}

/// Dims the chain sees for input 0 after the prologue.
pub fn prologue_dims(prologue: RegionPrologue, x: &Shape) -> Result<Vec<Dim>, String> {
    match prologue {
        RegionPrologue::None => Ok(x.dims.clone()),
        RegionPrologue::ResizeNearest2x => {
            if x.rank() != 4 {
                return Err(format!(
                    "the ResizeNearest2x prologue needs input 0 as NCHW (rank 4), got {x}"
                ));
            }
            let mut d = x.dims.clone();
            d[2] = double(&d[2])?;
            d[3] = double(&d[3])?;
            Ok(d)
        }
    }
}

/// Broadcast input 0 (after the prologue) with every other shape.
fn broadcast_all(first: Vec<Dim>, rest: &[&Shape]) -> Result<Vec<Dim>, String> {
    rest.iter()
        .try_fold(first, |acc, s| broadcast_dims(&acc, &s.dims))
}

pub(crate) fn elementwise_region(
    chain: &[ChainStep],
    prologue: RegionPrologue,
    inputs: &[&Shape],
) -> Result<Shape, String> {
    let first = inputs
        .first()
        .ok_or("ElementwiseRegion needs at least one input")?;
    let dts: Vec<DType> = inputs.iter().map(|s| s.dtype).collect();
    let steps = chain_dtypes(chain, &dts)?;
    let dims = broadcast_all(prologue_dims(prologue, first)?, &inputs[1..])?;
    Ok(Shape::with_dims(dims, steps[steps.len() - 1]))
}

pub(crate) fn batch_elementwise_region(
    chain: &[ChainStep],
    num_batch_inputs: usize,
    prologue: RegionPrologue,
    inputs: &[&Shape],
) -> Result<Shape, String> {
    let nb = num_batch_inputs;
    if nb == 0 {
        return Err("BatchElementwiseRegion needs num_batch_inputs >= 1".into());
    }
    if inputs.len() < nb {
        return Err(format!(
            "num_batch_inputs is {nb} but only {} inputs are given",
            inputs.len()
        ));
    }
    let sample = inputs[0];
    if sample.dims.first().is_none_or(|d| !d.is_one()) {
        return Err(format!("batch samples must be [1, ..], got {sample}"));
    }
    for (i, s) in inputs[1..nb].iter().enumerate() {
        if *s != sample {
            return Err(format!(
                "batch sample {} is {s} but sample 0 is {sample}",
                i + 1
            ));
        }
    }
    let shared = &inputs[nb..];
    let dts: Vec<DType> = std::iter::once(sample.dtype)
        .chain(shared.iter().map(|s| s.dtype))
        .collect();
    let steps = chain_dtypes(chain, &dts)?;
    let per = broadcast_all(prologue_dims(prologue, sample)?, shared)?;
    if per.first().is_none_or(|d| !d.is_one()) {
        return Err(format!(
            "shared inputs widen axis 0 of a sample's result to {}",
            crate::DimsFmt(&per)
        ));
    }
    let mut dims = per;
    dims[0] = Dim::Static(nb);
    Ok(Shape::with_dims(dims, steps[steps.len() - 1]))
}

/// The shape after every step in turn (each step's own shape rule).
pub(crate) fn transform_region(
    steps: &[TransformStep],
    inputs: &[&Shape],
) -> Result<Shape, String> {
    arity(OpKind::TransformRegion, inputs, 1, 1)?;
    let x = inputs[0];
    let dims = steps
        .iter()
        .enumerate()
        .try_fold(x.dims.clone(), |cur, (i, s)| {
            transform_step_dims(&cur, s).map_err(|e| format!("step {i} ({s:?}): {e}"))
        })?;
    Ok(Shape::with_dims(dims, x.dtype))
}

impl Graph {
    /// A fused elementwise chain over `inputs` (broadcast to one output shape).
    pub fn elementwise_region(
        &mut self,
        inputs: &[NodeId],
        chain: Vec<ChainStep>,
        prologue: RegionPrologue,
    ) -> Result<NodeId, IrError> {
        self.add_node(Op::ElementwiseRegion { chain, prologue }, inputs)
    }

    /// The chain applied to each of the first `num_batch_inputs` inputs (`[1, ..]` samples)
    /// with the remaining inputs shared; results concatenated on axis 0.
    pub fn batch_elementwise_region(
        &mut self,
        inputs: &[NodeId],
        chain: Vec<ChainStep>,
        num_batch_inputs: usize,
        prologue: RegionPrologue,
    ) -> Result<NodeId, IrError> {
        self.add_node(
            Op::BatchElementwiseRegion {
                chain,
                num_batch_inputs,
                prologue,
            },
            inputs,
        )
    }

    /// The view steps applied in turn, as one node.
    pub fn transform_region(
        &mut self,
        x: NodeId,
        steps: Vec<TransformStep>,
    ) -> Result<NodeId, IrError> {
        self.add_node(Op::TransformRegion { steps }, &[x])
    }
}
