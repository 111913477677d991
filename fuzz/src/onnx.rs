//! The body of the `onnx_from_bytes` fuzz target, as a plain function so
//! `tests/onnx_from_bytes.rs` runs it over seeds and seeded mutations of node-suite models.
//!
//! Any bytes must import or fail with a typed `OnnxError`: never a panic, an endless loop,
//! or an allocation far beyond what a model of that size needs (constant folding at import
//! is where a tiny file can ask for a huge tensor). A model that imports must hold together:
//! its graph verifies, every output is a node of it, and every param it hands out names a
//! `Param` of the graph with a value of that param's shape.
use rlx_ir::{Dim, Op};
use rlx_onnx::load_bytes;

/// What became of one input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnnxOutcome {
    /// Not a ModelProto, or a model rlx refuses (broken or unsupported).
    Refused,
    /// It imported; the number of nodes of the graph.
    Imported { nodes: usize },
}

pub fn onnx_from_bytes(data: &[u8]) -> OnnxOutcome {
    let m = match load_bytes(data, None, "fuzz.onnx") {
        Ok(m) => m,
        Err(e) => {
            // Formatting walks the error's names (node, tensor, attribute): it must not panic.
            let _ = e.to_string();
            return OnnxOutcome::Refused;
        }
    };
    let g = &m.graph;
    if let Err(e) = g.verify() {
        panic!("an imported graph does not verify: {e}");
    }
    assert_eq!(g.outputs.len(), m.outputs.len());
    assert_eq!(m.output_types.len(), m.outputs.len());
    assert!(g.outputs.iter().all(|o| o.0 < g.nodes.len()));
    for (name, value) in &m.params {
        let node = g
            .nodes
            .iter()
            .find(|n| matches!(&n.op, Op::Param { name: p } if p == name))
            .unwrap_or_else(|| panic!("param \"{name}\" is not in the graph"));
        let dims: Vec<Dim> = value.shape.iter().map(|&d| Dim::Static(d)).collect();
        assert_eq!(node.shape.dims, dims, "param \"{name}\"");
        assert_eq!(node.shape.dtype, value.dtype, "param \"{name}\"");
    }
    OnnxOutcome::Imported {
        nodes: g.nodes.len(),
    }
}
