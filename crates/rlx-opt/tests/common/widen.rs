//! The graph with its f32 values computed in f64: an oracle for how much of a graph's f32
//! result is rounding, so comparisons of two f32 graphs can allow for their conditioning.
use super::Val;
use rlx_ir::{ChainStep, DType, Graph, Op};
use std::collections::HashMap;

/// The feeds with f32 values retyped to f64 (same values), for a `widened` graph.
pub fn widened_feeds(feeds: &HashMap<String, Val>) -> HashMap<String, Val> {
    feeds
        .iter()
        .map(|(k, v)| {
            let dt = if v.dtype == DType::F32 {
                DType::F64
            } else {
                v.dtype
            };
            (k.clone(), Val::new(&v.dims, dt, v.data.clone()))
        })
        .collect()
}

/// `g` with every f32 value computed in f64 (inputs, params, casts, fused casts); other
/// dtypes keep their rounding. None when an op does not take the wider type.
pub fn widened(g: &Graph) -> Option<Graph> {
    let w = |d: DType| if d == DType::F32 { DType::F64 } else { d };
    let chain = |c: &[ChainStep]| -> Vec<ChainStep> {
        c.iter()
            .map(|s| match s {
                ChainStep::Cast(d, a) => ChainStep::Cast(w(*d), *a),
                s => s.clone(),
            })
            .collect()
    };
    let mut out = Graph::new(g.name.clone());
    for n in &g.nodes {
        let op = match &n.op {
            Op::Input { name } => {
                out.input(name.clone(), n.shape.with_dtype(w(n.shape.dtype)))
                    .ok()?;
                continue;
            }
            Op::Param { name } => {
                out.param(name.clone(), n.shape.with_dtype(w(n.shape.dtype)))
                    .ok()?;
                continue;
            }
            Op::Constant { .. } => return None,
            Op::Cast { to } => Op::Cast { to: w(*to) },
            Op::FusedSwiGLU {
                cast_to,
                gate_first,
            } => Op::FusedSwiGLU {
                cast_to: cast_to.map(w),
                gate_first: *gate_first,
            },
            Op::ElementwiseRegion { chain: c, prologue } => Op::ElementwiseRegion {
                chain: chain(c),
                prologue: *prologue,
            },
            Op::BatchElementwiseRegion {
                chain: c,
                num_batch_inputs,
                prologue,
            } => Op::BatchElementwiseRegion {
                chain: chain(c),
                num_batch_inputs: *num_batch_inputs,
                prologue: *prologue,
            },
            op => op.clone(),
        };
        out.add_node(op, &n.inputs).ok()?;
    }
    out.set_outputs(g.outputs.clone());
    Some(out)
}
