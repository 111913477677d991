//! rlx-opt: graph passes and memory planning.
//!
//! Every pass maps a `Graph` to a NEW `Graph` (nodes are append-only; passes rebuild, see
//! DESIGN.md). [`Rebuilder`] carries the old → new node-id remap so a pass only has to say
//! what changes. [`Pipeline`] runs passes in order, verifies after each one (always in debug
//! builds, on request in release) and reports node counts per pass.
//! [`memory::plan_memory`] turns a graph with concrete shapes into arena offsets.
mod error;
pub mod memory;
mod pass;
pub mod passes;
mod rebuild;

pub use error::OptError;
pub use memory::{plan_memory, static_shapes, MemoryPlan, PlanOptions, Slot, ViewOf};
pub use pass::{kind_counts, Pass, PassReport, Pipeline};
pub use passes::{ConstEvaluator, ConstFold, Cse, Dce, Simplify, DEFAULT_FOLD_LIMIT};
pub use rebuild::Rebuilder;
