//! rlx-opt: graph passes and memory planning.
//!
//! Every pass maps a `Graph` to a NEW `Graph` (nodes are append-only; passes rebuild, see
//! DESIGN.md). [`Rebuilder`] carries the old → new node-id remap so a pass only has to say
//! what changes. [`Pipeline`] runs passes in order, verifies after each one (always in debug
//! builds, on request in release) and reports node counts per pass.
//! [`Pipeline::full`] adds the fusion passes; [`Expand`] undoes the fused ops a backend lacks.
//! [`memory::plan_memory`] turns a graph with concrete shapes into arena offsets.
//!
//! ```
//! use rlx_ir::{Activation, DType, Graph, HostTensor, Shape};
//! use rlx_opt::{plan_memory, static_shapes, PlanOptions, Pipeline};
//!
//! let mut g = Graph::new("demo");
//! let x = g.input("x", Shape::new(&[4, 8], DType::F32))?;
//! let one = g.constant(HostTensor::from_f32(&[8], &[1.0; 8]))?;
//! let a = g.mul(x, one)?; // x·1: simplified away
//! let b = g.activation(Activation::Relu, a)?;
//! let c = g.activation(Activation::Relu, x)?; // same as b once a is x: merged
//! let y = g.add(b, c)?;
//! g.set_outputs(vec![y]);
//!
//! let (opt, reports) = Pipeline::standard(None).verify(true).run(&g)?;
//! for r in &reports {
//!     println!("{r}");
//! }
//! assert_eq!(opt.nodes.len(), 3); // x, relu(x), relu + relu
//!
//! let shapes = static_shapes(&opt)?;
//! let plan = plan_memory(&opt, &shapes, |_| 0, |n| n.shape.dtype.size_bytes(), &PlanOptions::default())?;
//! assert!(plan.planned_bytes <= plan.unplanned_bytes);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
mod arena;
mod error;
pub mod memory;
mod pass;
pub mod passes;
mod rebuild;

pub use arena::{arena_layout, ArenaLayout};
pub use error::OptError;
pub use memory::{
    class_elem_bytes, class_pool, plan_memory, static_shapes, MemoryPlan, PlanOptions, Slot, ViewOf,
};
pub use pass::{kind_counts, Pass, PassReport, Pipeline};
pub use passes::{
    Autocast, ConstEvaluator, ConstFold, Cse, Dce, Expand, FuseCachedAttention, FuseDequantMatMul,
    FuseElementwise, FuseMatMulBiasAct, FuseResidualNorm, FuseRopeCacheWrite, FuseSwiGLU,
    FuseSwiGLUDequantMatMul, Simplify, DEFAULT_FOLD_LIMIT,
};

/// The full pipeline ([`Pipeline::full`], no constant folding) run once; the optimised graph.
pub fn optimize(g: &rlx_ir::Graph) -> Result<rlx_ir::Graph, OptError> {
    Pipeline::full(None).run(g).map(|(g, _)| g)
}
pub use rebuild::Rebuilder;
