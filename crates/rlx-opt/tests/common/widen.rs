//! The graph with its f32 values computed in f64: an oracle for how much of a graph's f32
//! result is rounding, so comparisons of two f32 graphs can allow for their conditioning.
use super::Val;
use rlx_ir::{ChainStep, DType, Graph, HostTensor, Op};
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

/// The widened feeds with every f64 value moved by a relative `delta` (signs alternate),
/// as [`widened_perturbed`] moves the constants.
pub fn perturbed_feeds(feeds: &HashMap<String, Val>, delta: f64) -> HashMap<String, Val> {
    widened_feeds(feeds)
        .into_iter()
        .map(|(k, v)| {
            if v.dtype != DType::F64 {
                return (k, v);
            }
            let data = nudge(&v.data, delta);
            (k, Val::new(&v.dims, v.dtype, data))
        })
        .collect()
}

fn nudge(v: &[f64], delta: f64) -> Vec<f64> {
    v.iter()
        .enumerate()
        .map(|(i, x)| x * (1.0 + if i % 2 == 0 { delta } else { -delta }))
        .collect()
}

/// `g` with every f32 value computed in f64 (inputs, params, constants, casts, fused
/// casts); other dtypes keep their rounding. None when an op does not take the wider type.
pub fn widened(g: &Graph) -> Option<Graph> {
    widened_perturbed(g, 0.0)
}

/// [`widened`], with each f32 constant's values moved by a relative `delta` (a constant
/// folded into f32 carries a rounding error of up to 2^-24 that a widened graph keeps).
pub fn widened_perturbed(g: &Graph, delta: f64) -> Option<Graph> {
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
            Op::Constant { data } if n.shape.dtype == DType::F32 => {
                let dims = n.shape.static_dims()?;
                let t = HostTensor::new(&dims, DType::F32, data.clone()).ok()?;
                let v = nudge(&t.to_f64_vec(), delta);
                out.constant(HostTensor::from_f64_as(&dims, &v, DType::F64))
                    .ok()?;
                continue;
            }
            Op::Constant { data } => {
                let dims = n.shape.static_dims()?;
                out.constant(HostTensor::new(&dims, n.shape.dtype, data.clone()).ok()?)
                    .ok()?;
                continue;
            }
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
