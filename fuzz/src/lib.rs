//! The body of the `compile_and_run` fuzz target, as plain functions so a normal test
//! (`tests/compile_and_run.rs`) runs it on fixed seeds and seeded mutations.
//!
//! A graph that decodes and verifies must compile and run on the CPU, or fail with an
//! error: any panic is a bug. So that the fuzzer cannot ask for more memory than a run
//! may take, a graph runs only when every node's shape, with each symbol bound to
//! [`SYMBOL_SIZE`], is known and all of them together hold at most [`MEMORY_CAP`] bytes
//! (summed with checked arithmetic: a sum that wraps is over the cap).
//!
//! `gguf` holds the `gguf_from_bytes` target's body, `onnx` the `onnx_from_bytes` one's.
pub mod gguf;
pub mod onnx;
pub mod safetensors;

use rlx_cpu::{native_fused_ops, CpuConstEvaluator, CpuExecutable};
use rlx_ir::{
    crc32, ops, DType, Dim, Graph, HostTensor, Op, Shape, GRAPH_FORMAT_VERSION, GRAPH_MAGIC,
};
use rlx_opt::{ConstFold, Expand, Pipeline};
use std::collections::HashMap;

/// The most bytes all node values of one graph may hold together.
pub const MEMORY_CAP: usize = 64 << 20;

/// The size every dynamic dim is bound to for a run.
pub const SYMBOL_SIZE: usize = 2;

/// What became of one graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// `verify` refused it.
    Unverified,
    /// Its shapes could not be bound or exceed the memory cap: not run.
    Skipped,
    /// Compiling or running returned an error (allowed: it is not a panic).
    Failed,
    /// It ran, unoptimised and optimised.
    Ran,
}

/// Every way the target reads the bytes: as a whole file, as a body inside a valid frame
/// (libFuzzer cannot forge the CRC), and as JSON. Returns what became of each graph that
/// decoded.
pub fn compile_and_run_bytes(data: &[u8]) -> Vec<Outcome> {
    let mut graphs = vec![];
    graphs.extend(Graph::from_bytes_unverified(data).ok());
    graphs.extend(Graph::from_bytes_unverified(&frame(data)).ok());
    if let Ok(text) = std::str::from_utf8(data) {
        graphs.extend(Graph::from_json_unverified(text).ok());
    }
    graphs.iter().map(compile_and_run).collect()
}

/// `body` inside a file header and CRC, as `Graph::to_bytes` writes them.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut framed = GRAPH_MAGIC.to_vec();
    framed.extend_from_slice(&GRAPH_FORMAT_VERSION.to_le_bytes());
    framed.extend_from_slice(&(body.len() as u64).to_le_bytes());
    framed.extend_from_slice(body);
    let crc = crc32(&framed);
    framed.extend_from_slice(&crc.to_le_bytes());
    framed
}

/// Verify `g`; if it verifies and fits the memory cap, run it on the CPU as given and
/// after the CPU's optimisation pipeline, on deterministic inputs and params.
pub fn compile_and_run(g: &Graph) -> Outcome {
    if g.verify().is_err() {
        return Outcome::Unverified;
    }
    let Some(bound) = bound_shapes(g) else {
        return Outcome::Skipped;
    };
    if !within_cap(&bound) {
        return Outcome::Skipped;
    }
    let leaves = leaf_values(g, &bound);
    let plain = run_cpu(g.clone(), &leaves);
    let optimized = match Pipeline::full(Some(ConstFold::new(CpuConstEvaluator)))
        .expand_for(Expand::keeping(native_fused_ops()))
        .run(g)
    {
        Ok((opt, _)) => {
            // The optimised graph must verify (passes verify after themselves) and stay
            // within the cap; anything larger is a pass bug worth a look, not a run.
            opt.verify().expect("the optimised graph verifies");
            match bound_shapes(&opt) {
                Some(b) if within_cap(&b) => run_cpu(opt, &leaves),
                _ => false,
            }
        }
        Err(_) => false,
    };
    if plain && optimized {
        Outcome::Ran
    } else {
        Outcome::Failed
    }
}

/// Every node's shape with each symbol bound to [`SYMBOL_SIZE`], by re-running the shape
/// rules as the executor does; None when a rule refuses the bound shapes or leaves a dim
/// symbolic.
pub fn bound_shapes(g: &Graph) -> Option<Vec<Vec<usize>>> {
    let mut syms = HashMap::new();
    for n in &g.nodes {
        for d in &n.shape.dims {
            if let Dim::Dynamic(s) = d {
                syms.insert(s.clone(), SYMBOL_SIZE);
            }
        }
    }
    let mut shapes: Vec<Shape> = Vec::with_capacity(g.nodes.len());
    for n in &g.nodes {
        let s = if n.op.is_leaf() {
            n.shape.bind(&syms)
        } else {
            let ins: Vec<&Shape> = n.inputs.iter().map(|i| &shapes[i.0]).collect();
            let op = ops::shape_ops::bind_op(&n.op, &syms);
            ops::infer_shape(op.as_ref().unwrap_or(&n.op), &ins).ok()?
        };
        shapes.push(s);
    }
    shapes.iter().map(Shape::static_dims).collect()
}

/// True when all these f64-sized values (the widest dtype) fit [`MEMORY_CAP`].
fn within_cap(shapes: &[Vec<usize>]) -> bool {
    let total = shapes.iter().try_fold(0usize, |acc, d| {
        let bytes = d
            .iter()
            .try_fold(DType::F64.size_bytes(), |n, &x| n.checked_mul(x))?;
        acc.checked_add(bytes)
    });
    total.is_some_and(|t| t <= MEMORY_CAP)
}

/// Deterministic values for every Input and Param: small integers and halves around 0, so
/// that integer inputs (indices, labels) are sometimes valid and sometimes out of range.
fn leaf_values(g: &Graph, bound: &[Vec<usize>]) -> Vec<(Op, HostTensor)> {
    g.nodes
        .iter()
        .filter(|n| matches!(n.op, Op::Input { .. } | Op::Param { .. }))
        .map(|n| {
            let dims = &bound[n.id.0];
            let count: usize = dims.iter().product();
            let vals: Vec<f64> = (0..count)
                .map(|i| ((i * 7 + 3) % 11) as f64 / 2.0 - 2.5)
                .collect();
            (
                n.op.clone(),
                HostTensor::from_f64_as(dims, &vals, n.shape.dtype),
            )
        })
        .collect()
}

/// Set the params and run once; true when it ran, false when it returned an error.
fn run_cpu(g: Graph, leaves: &[(Op, HostTensor)]) -> bool {
    let Ok(mut exe) = CpuExecutable::new(g) else {
        return false;
    };
    let mut inputs = vec![];
    for (op, t) in leaves {
        match op {
            // A param the optimiser removed is an error here, which is fine.
            Op::Param { name } => {
                let _ = exe.set_param(name, t);
            }
            Op::Input { name } => inputs.push((name.as_str(), t.clone())),
            _ => {}
        }
    }
    exe.run(&inputs).is_ok()
}
